"""Each shared figure's JSON made once, not on every rerun.

``st.plotly_chart(fig)`` calls ``fig.to_dict()`` (a deep copy of every array, then base64) and
``plotly.io.to_json`` on the result every time a script run reaches it, even when the figure is the
same object as last run (figures live in ``ui.store``, shared and read-only). For a head change whose
figures were prefetched that copying and encoding was most of the server's time (cProfile: about 0.2 s
of a 64-token derivation rerun). ``shown(fig)`` hands ``st.plotly_chart`` a stand-in figure whose
``to_dict()`` is a small ``SpecDict`` (the layout's width and height, which Streamlit reads) carrying the
JSON that ``plotly.io.to_json(fig.to_dict(), validate=False)`` gives, made on first use and kept on the
figure; ``plotly.io.to_json`` (wrapped when this module is imported) returns that JSON for a SpecDict.
The bytes sent are exactly plotly's own for the figure (tests/test_plotly_spec.py).

Streamlit glue only: no tensors, no figure building.
"""

from __future__ import annotations

import plotly.graph_objects as go
import plotly.io as pio

_ATTRIBUTE = "_attention_lens_shown"  # where a figure keeps its stand-in (underscore: plotly allows it)
_ORIGINAL_TO_JSON = pio.to_json


class SpecDict(dict):
    """What ``Shown.to_dict()`` gives Streamlit: the layout size it reads, and the figure's JSON."""

    __slots__ = ("json",)


class Shown(go.Figure):
    """A stand-in for one shared figure: ``to_dict()`` is its SpecDict (no copy, no re-encoding)."""

    def __init__(self, spec: SpecDict) -> None:
        super().__init__()
        self._spec = spec

    def to_dict(self) -> SpecDict:
        return self._spec


def spec_json(fig: go.Figure) -> str:
    """The JSON ``st.plotly_chart`` sends for ``fig``: ``plotly.io.to_json(fig.to_dict(), validate=False)``."""
    return _ORIGINAL_TO_JSON(fig.to_dict(), validate=False)


def _make(fig: go.Figure) -> Shown:
    layout = fig.layout
    size = {name: getattr(layout, name) for name in ("width", "height") if getattr(layout, name) is not None}
    spec = SpecDict(layout=size)
    spec.json = spec_json(fig)
    return Shown(spec)


def shown(fig: go.Figure) -> go.Figure:
    """What to pass to ``st.plotly_chart`` for a figure that nobody changes after it is built (every figure
    of ``ui.compute.figures``): its stand-in, made on the first call and kept on the figure. Anything that
    is not a plain plotly Figure, or a plotly without the hook, goes through unchanged."""
    if not INSTALLED or type(fig) is not go.Figure:
        return fig
    stand_in = getattr(fig, _ATTRIBUTE, None)
    if stand_in is None:
        stand_in = _make(fig)
        setattr(fig, _ATTRIBUTE, stand_in)
    return stand_in


def prepare(figs: dict) -> dict:
    """Make each figure's JSON now (the prefetch builds figures off the click's path: their JSON too)."""
    for fig in figs.values():
        shown(fig)
    return figs


def json_bytes(fig) -> int:
    """Bytes of the JSON kept on ``fig`` (0 before it was shown or prepared)."""
    stand_in = getattr(fig, _ATTRIBUTE, None)
    return 0 if stand_in is None else len(stand_in.to_dict().json)


def to_json(fig, *args, **kwargs):
    """``plotly.io.to_json``, returning a SpecDict's kept JSON (made by plotly itself, validate=False)."""
    if type(fig) is SpecDict and not args and kwargs == {"validate": False}:
        return fig.json
    return _ORIGINAL_TO_JSON(fig, *args, **kwargs)


def install() -> bool:
    """Wrap ``plotly.io.to_json`` (Streamlit calls it as ``plotly.io.to_json``); True when in place."""
    if getattr(pio, "to_json", None) is not _ORIGINAL_TO_JSON:
        return getattr(pio, "to_json", None) is to_json
    pio.to_json = to_json
    return True


INSTALLED = install()
