"""Each shared figure's JSON made once, not on every rerun.

The figures of ``ui.compute.figures`` live in ``ui.store``, shared and read-only, and a rerun shows the
same figure objects again (a head change whose figures were prefetched, a rerun that changed nothing
they show). Encoding a figure is ``fig.to_dict()`` (a deep copy of every array, then base64) and
``plotly.io.to_json`` on the result: about 0.2 s of a 64-token derivation rerun when it was done on every
run. ``spec_bytes(fig)`` makes it once, on first use, and keeps it on the figure: the UTF-8 bytes of
``plotly.io.to_json(fig.to_dict(), validate=False)`` (made without ``to_dict``'s deep copy, ``spec_json``),
which is what ``ui.chart`` sends to the browser.
The bytes are exactly plotly's own for the figure (tests/test_plotly_spec.py).

No Streamlit, no tensors, no figure building.
"""

from __future__ import annotations

import plotly.graph_objects as go
import plotly.io as pio
from plotly.basedatatypes import convert_to_base64  # plotly.py's own step of to_dict (from _plotly_utils)

_ATTRIBUTE = "_attention_lens_json"  # where a figure keeps its JSON (underscore: plotly allows it)


def spec_json(fig: go.Figure) -> str:
    """plotly's own JSON for ``fig``: the text of ``plotly.io.to_json(fig.to_dict(), validate=False)``.

    ``to_dict`` deep-copies every property (each array, each string of an object array of hover labels) so
    that plotly's base64 step (``convert_to_base64``, which replaces a dict's array values by typed-array
    specs) cannot touch the figure. That step only ever replaces values held by dicts, so copying the dicts
    and lists and sharing everything else is enough: the same bytes for a fraction of the work (a 64-token
    heatmap: 3.2 ms to copy before, a tenth of that now). It reads plotly's own ``_data`` / ``_layout``
    (plotly is pinned; tests/test_plotly_spec.py compares the bytes with ``to_dict``'s for every view)."""
    spec = {"data": _containers(fig._data), "layout": _containers(fig._layout)}
    frames = [_containers(frame._props) for frame in fig._frame_objs]
    if frames:
        spec["frames"] = frames
    convert_to_base64(spec)
    return pio.to_json(spec, validate=False)


def _containers(value):
    """``value`` with every dict, list and tuple copied and every other object shared."""
    if isinstance(value, dict):
        return {key: _containers(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_containers(item) for item in value)
    return value


def spec_bytes(fig: go.Figure) -> bytes:
    """``spec_json(fig)`` as UTF-8, made on the first call and kept on the figure. Only for figures that
    nobody changes after they are built (every figure of ``ui.compute.figures``)."""
    kept = getattr(fig, _ATTRIBUTE, None)
    if kept is None:
        kept = spec_json(fig).encode("utf-8")
        setattr(fig, _ATTRIBUTE, kept)
    return kept


def prepare(figs: dict) -> dict:
    """Make each figure's JSON now (the prefetch builds figures off the click's path: their JSON too)."""
    for fig in figs.values():
        spec_bytes(fig)
    return figs


def json_bytes(fig) -> int:
    """Bytes of the JSON kept on ``fig`` (0 before it was shown or prepared)."""
    kept = getattr(fig, _ATTRIBUTE, None)
    return 0 if kept is None else len(kept)
