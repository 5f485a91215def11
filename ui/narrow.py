"""Float64 arrays whose every value is a float32, sent as float32: half the bytes, exactly the same numbers.

The model's attentions and the core's own steps are float32; the figures hold them as float64 (plotly's typed
arrays are ``f8``), so most of a heatmap's bytes on the wire are zeros at the end of each mantissa. A float32
widens to exactly the float64 it was narrowed from, and JavaScript reads a ``Float32Array`` as those doubles, so
what plotly.js draws, hovers and exports is the same number for number. An array with any value a float32 cannot
hold exactly (a float64 sum or mean, a sub-float32 tiny value) is sent as it is. Used by ``ui.plotly_spec.pack``
(figures and the step-through's rows); ``widened`` turns a narrowed buffer back into plotly's own ``f8`` bytes
(``ui.plotly_spec.unpack``: the tests and the server's own downloads read the figure as plotly made it).
"""

from __future__ import annotations

import numpy as np

WIDE, NARROW = "f8", "f4"  # plotly's names of the typed arrays (little-endian)


def narrowed(dtype: str, raw: bytes) -> bytes | None:
    """``raw`` (a typed array's bytes of plotly ``dtype``) as float32 bytes when it is ``f8`` and every value is a
    float32 (NaN and infinities included); else None (send it as it is)."""
    if dtype != WIDE or not raw:
        return None
    values = np.frombuffer(raw, dtype="<f8")  # (n,)
    with np.errstate(over="ignore"):  # a value beyond float32's range becomes inf: then it differs, and stays f8
        narrow = values.astype("<f4")  # (n,)
    if not np.array_equal(narrow.astype("<f8"), values, equal_nan=True):
        return None
    return narrow.tobytes()


def widened(raw: bytes) -> bytes:
    """A narrowed buffer's float32 bytes as the float64 bytes it came from."""
    return np.frombuffer(raw, dtype="<f4").astype("<f8").tobytes()
