"""The step-through of a new query, filled into the figure of the last one (``viz.query.query_step_figure``).

Every query of one head shares its figure's frame: the four panels, their axes, titles, hover texts and theme
depend on the keys (their labels), the value width, the theme and whether bar values are written; only the
numbers of the query row change. Built by plotly's figure API, one step-through took about 110 ms at 64 MiniLM
tokens (``make_subplots``, ``update_layout``, ``add_hline``, the theme: 88% of a query change's server time when
the figure was not built ahead; report section 7, "twenty-ninth"); filled into a kept frame, about 10 ms.

``fill`` replaces exactly what the query row decides, nothing else; tests/test_viz_figures.py checks the filled
figure against the one built from scratch, JSON for JSON, for rows with and without blocked keys, values written
or not, both themes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from .matrix_traces import compact
from .theme import LINE_COLOURS, MASK_COLOUR

ALLOWED_COLOUR = LINE_COLOURS[0]  # a key's bar; MASK_COLOUR: a blocked key's
# The step-through's traces by what they show (their names in the figure; the browser finds them by these too:
# viz/query_flip.py sends this table with the rows)
TRACES = {
    "scores": "q·k",
    "scaled": "scaled",
    "weights": "weight",
    "masked": "masked",
    "contributions": "contributions",
    "output": "output",
}
KEPT = 8  # frames kept (a few heads and themes of the texts being looked at)


@dataclass(frozen=True)
class RowParts:
    """What one query row puts into the step-through: the bars' heights and written values (their colours follow
    the blocked keys), the blocked keys' markers, the contribution and output heatmaps and the title."""

    scores: np.ndarray  # (S,) q·k, NaN where not finite
    scaled: np.ndarray  # (S,) scaled scores, NaN where not finite
    weights: np.ndarray  # (S,) softmax weights, NaN where blocked
    blocked: np.ndarray  # (S,) bool
    contributions: np.ndarray  # (S, Ev) α_j v_j
    title: str
    show: bool  # values written on the bars

    def frame_key(self, key_tokens: list[str], theme: str) -> Hashable:
        """What the frame depends on: the keys, the value width, the theme, values written, any key blocked."""
        return (tuple(key_tokens), self.contributions.shape[1], theme, self.show, bool(self.blocked.any()))


def key_colours(blocked: np.ndarray) -> list[str]:
    """The score bars' colour of each key: grey where it is blocked."""
    return [MASK_COLOUR if b else ALLOWED_COLOUR for b in blocked]


def bar_text(values: np.ndarray, *, blank_missing: bool = False) -> list[str]:
    """The values written on bars: two decimals (``blank_missing``: nothing where a value is not finite)."""
    return [f"{v:.2f}" if not blank_missing or np.isfinite(v) else "" for v in values]


def fill(frame: dict, row: RowParts) -> go.Figure:
    """The frame (a step-through's ``to_dict()``) with ``row``'s numbers. The frame itself is left as it is."""
    positions = np.arange(len(row.blocked))
    output = row.contributions.sum(axis=0)  # (Ev,) Σ_j α_j v_j
    colours = key_colours(row.blocked)
    changed = {
        TRACES["scores"]: dict(y=row.scores, marker_color=colours, text=bar_text(row.scores)),
        TRACES["scaled"]: dict(y=row.scaled, marker_color=colours, text=bar_text(row.scaled)),
        TRACES["weights"]: dict(y=row.weights, text=bar_text(row.weights, blank_missing=True)),
        TRACES["masked"]: dict(x=positions[row.blocked], y=np.zeros(int(row.blocked.sum()))),
        TRACES["contributions"]: dict(z=compact(row.contributions.T)),  # (Ev, S)
        TRACES["output"]: dict(z=output[:, None]),  # (Ev, 1)
    }
    data = []
    for trace in frame["data"]:
        new = dict(trace)
        for name, value in changed.get(trace.get("name"), {}).items():
            if name == "marker_color":
                new["marker"] = dict(trace["marker"], color=value)
            elif name != "text" or "text" in trace:  # values are written only where the frame writes them
                new[name] = value
        data.append(new)
    layout = dict(frame["layout"], title=dict(frame["layout"]["title"], text=row.title))
    return go.Figure(dict(data=data, layout=layout), _validate=False)


class Frames:
    """The last ``KEPT`` frames, by ``RowParts.frame_key``; shared by every session and the background builder."""

    def __init__(self, kept: int = KEPT) -> None:
        self._kept, self._frames, self._lock = kept, OrderedDict(), threading.Lock()

    def get(self, key: Hashable) -> dict | None:
        with self._lock:
            frame = self._frames.get(key)
            if frame is not None:
                self._frames.move_to_end(key)
            return frame

    def keep(self, key: Hashable, fig: go.Figure) -> None:
        frame = fig.to_dict()
        with self._lock:
            self._frames[key] = frame
            self._frames.move_to_end(key)
            while len(self._frames) > self._kept:
                self._frames.popitem(last=False)

    def __len__(self) -> int:
        return len(self._frames)
