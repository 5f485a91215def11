"""plotly.py parses a property path ("xaxis.title.text", "title_font", "coloraxis3.showscale") every time a
figure is built or updated through it, and the parse (``plotly.basedatatypes._str_to_dict_path_full``) is
a pure function of the string that costs about 0.5 ms: a third of the server's time building the
derivation view's figures (cProfile). Importing this module (``viz`` does) puts a memoised copy in its place;
every result is the original's (tests/test_plotly_paths.py). Nothing changes when plotly no longer has
the function.
"""

from __future__ import annotations

import functools

import plotly.basedatatypes as _plotly_base

_ORIGINAL = getattr(_plotly_base, "_str_to_dict_path_full", None)


@functools.lru_cache(maxsize=8192)
def _parsed(path: str) -> tuple[tuple, tuple]:
    keys, starts = _ORIGINAL(path)
    return keys, tuple(starts)


def str_to_dict_path_full(path):
    """``_str_to_dict_path_full(path)``: (keys tuple, start indices list), memoised for strings."""
    if not isinstance(path, str):
        return _ORIGINAL(path)
    keys, starts = _parsed(path)
    return keys, list(starts)  # a fresh list each call, as the original returns


def install() -> bool:
    """Replace plotly's path parser with the memoised one; True when it is in place."""
    if _ORIGINAL is None:
        return False
    _plotly_base._str_to_dict_path_full = str_to_dict_path_full
    return True


install()  # on import: ``viz/__init__.py`` imports this module, so every figure built through viz uses it
