"""Every query of one head in the step-through's own chart: a slider under it flips queries in the browser.

The step-through (``viz.query.query_step_figure``) shows one query row. This module adds what the page needs
to show any other row of the same head without asking the server: the rows of every query (``QueryRows``),
sent once with the figure as typed arrays, and a plotly slider (one step per query) whose steps do nothing by
themselves (``method="skip"``). The chart's script (``ui/components/lens_chart/query_rows.js``) fills the
chosen row into the traces the same way ``viz.query_frames.fill`` does on the server:

    e_ij      = scores[i, j]                        # (S,) bars "q·k"
    ẽ_ij      = scaled[i, j]                        # (S,) bars "scaled"
    α_ij      = weights[i, j], blank where blocked   # (S,) bars "weight"; "×" markers at the blocked keys
    α_ij v_j  = weights[i, j] * values[j, :]        # (S, Ev) heatmap "contributions" (the product in the browser)
    o_i       = output[i, :]                        # (Ev,)  column "output" (summed here, as the server sums it)

All float64, as the server's figure has them, so a row flipped to in the page shows the numbers, hover and
written values the same query picked in the box shows (tests/test_browser.py compares the two in Chromium).
Sent while the rows fit ``FLIP_BYTES`` (about 180 MiniLM tokens); longer texts pick the query in the box.
"""

from __future__ import annotations

import hashlib
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import plotly.graph_objects as go

from .flip import SLIDER_TRANSITION
from .matrix_traces import FLOAT64_MAX_CELLS
from .query_frames import ALLOWED_COLOUR, TRACES, RowParts, bar_text
from .theme import MASK_COLOUR

FLIP_BYTES = 1_000_000  # the rows sent with one step-through at most (a query change today sends about 20 kB)
SLIDER_PREFIX = "query "
CLEAR = "rgba(0,0,0,0)"  # the step labels and ticks of a long slider (one tick per query would be a grey band)
SLIDER_LABELS_MAX = 32  # step labels written under the rail up to this many queries (more: none, ``with_flip``)


@dataclass(frozen=True)
class QueryRows:
    """Every query row of one head as the step-through draws it (L queries, S keys, Ev value dims)."""

    scores: np.ndarray  # (L, S) q·k, NaN where not finite
    scaled: np.ndarray  # (L, S) scaled scores, NaN where not finite
    weights: np.ndarray  # (L, S) softmax weights, 0 where not finite: what α_j v_j multiplies
    blocked: np.ndarray  # (L, S) bool: masked or not finite (its bar grey, its weight blank, a "×")
    values: np.ndarray  # (S, Ev) V
    output: np.ndarray  # (L, Ev) o_i = Σ_j α_ij v_j
    titles: tuple[str, ...]  # (L,) each row's chart title
    texts: tuple | None  # (L, 3, S) the values written on the three bar panels; None when none are written

    @property
    def nbytes(self) -> int:
        """About what the page is sent for these rows."""
        arrays = self.scores.nbytes + self.scaled.nbytes + self.weights.nbytes + self.blocked.size
        arrays += self.values.nbytes + self.output.nbytes + sum(len(t.encode("utf-8")) + 3 for t in self.titles)
        if self.texts is not None:
            arrays += sum(len(t) + 3 for row in self.texts for panel in row for t in panel)
        return arrays

    def row(self, i: int, show: bool) -> RowParts:
        """Query ``i``'s ``RowParts``: what the server fills into the frame for it (``viz.query_frames.fill``)."""
        weights = self.weights[i]
        return RowParts(
            scores=self.scores[i],
            scaled=self.scaled[i],
            weights=np.where(self.blocked[i], np.nan, weights),
            blocked=self.blocked[i],
            contributions=weights[:, None] * self.values,  # (S, Ev) α_j v_j
            title=self.titles[i],
            show=show,
        )


def query_rows(scores, scaled, weights, values, mask, titles: Sequence[str], show: bool) -> QueryRows:
    """The rows of one head: scores, scaled, weights (L, S), V (S, Ev), mask (L, S) (True = may attend, or None),
    a title per query; ``show``: values written on the bars. The same steps as ``query_step_figure`` per row."""
    scores, scaled, weights, values = (np.asarray(a, dtype=np.float64) for a in (scores, scaled, weights, values))
    blocked = ~np.isfinite(weights) if mask is None else (~np.asarray(mask, dtype=bool) | ~np.isfinite(weights))
    finite = np.where(np.isfinite(weights), weights, 0.0)  # (L, S) as viz.query.query_contributions has it
    scores_shown = np.where(np.isfinite(scores), scores, np.nan)
    scaled_shown = np.where(np.isfinite(scaled), scaled, np.nan)
    output = np.stack([(finite[i][:, None] * values).sum(axis=0) for i in range(len(finite))])  # (L, Ev), row by row
    texts = None
    if show:
        weights_shown = np.where(blocked, np.nan, finite)
        texts = tuple(
            (bar_text(scores_shown[i]), bar_text(scaled_shown[i]), bar_text(weights_shown[i], blank_missing=True))
            for i in range(len(finite))
        )
    return QueryRows(scores_shown, scaled_shown, finite, blocked, values, output, tuple(titles), texts)


def fits(rows: QueryRows) -> bool:
    """Whether the rows are sent with the figure (flipped in the browser) or the box alone picks the query."""
    return rows.nbytes <= FLIP_BYTES and bool(np.isfinite(rows.values).all())


def rows_spec(rows: QueryRows) -> dict:
    """What the browser is sent (``ui.plotly_spec`` packs the arrays as raw bytes): the arrays, the traces' names,
    the bars' two colours and whether the contributions heatmap holds float32 (``matrix_traces.compact``)."""
    queries, keys = rows.weights.shape
    return {
        "queries": queries,
        "keys": keys,
        "dims": rows.values.shape[1],
        "scores": rows.scores,
        "scaled": rows.scaled,
        "weights": rows.weights,
        "blocked": rows.blocked.astype(np.uint8),
        "values": rows.values,
        "output": rows.output,
        "titles": list(rows.titles),
        "texts": None if rows.texts is None else [list(map(list, row)) for row in rows.texts],
        "traces": dict(TRACES),
        "colours": [ALLOWED_COLOUR, MASK_COLOUR],
        "float32": rows.values.size > FLOAT64_MAX_CELLS,
    }


ROWS_ATTRIBUTE = "_attention_lens_rows"  # where a figure carries its rows (``ui.plotly_spec`` sends them)
FRAME_ATTRIBUTE = "_attention_lens_frame"  # and the digest of its frame


def with_flip(
    fig: go.Figure, rows: QueryRows, start: int, sent: dict | None = None, frame: Hashable = None
) -> go.Figure:
    """``fig`` (query ``start``'s step-through, a frame with a "masked" trace when any row has blocked keys) with
    the query slider under it and ``rows`` attached for the browser (``sent``: their ``rows_spec``, when kept).
    ``frame``: what its frame depends on (``RowParts.frame_key``), named to the browser by a digest (``flip_frame``):
    a figure of the same frame, rows and query as the page shows already is not drawn again there."""
    queries = len(rows.titles)
    labels = queries <= SLIDER_LABELS_MAX
    fig.layout.sliders = [
        dict(
            active=start,
            # A long slider's steps have no label. plotly.js measures the text of every step's label and of the
            # current value each step would show ("query 0" ... "query 63"), a layout of the page for each text it
            # has not met before: at 64 MiniLM tokens that was a third of the step-through's first draw in the page.
            # With no label, the current value is "query " and the query started on (its suffix) for every step:
            # one text. The chart's script writes the query flipped to into it (ui/components/lens_chart/
            # query_rows.js ``readout``); a figure drawn or exported for a query says that query.
            steps=[dict(method="skip", label=str(i) if labels else "", value=str(i)) for i in range(queries)],
            # its own font: the step labels' may be hidden, and the current value follows them otherwise
            currentvalue=dict(
                prefix=SLIDER_PREFIX,
                visible=True,
                font=dict(size=13, color=fig.layout.font.color or "#222"),
                **({} if labels else dict(suffix=str(start))),
            ),
            transition=dict(SLIDER_TRANSITION),  # a copy: each figure owns its layout
            pad=dict(t=40, b=10),
            len=1.0,
            **(dict(font=dict(size=11)) if labels else dict(font=dict(size=1, color=CLEAR), tickcolor=CLEAR)),
        )
    ]
    fig.layout.margin.b = 150 if labels else 120  # room for the slider (and its step labels) under the key labels
    setattr(fig, ROWS_ATTRIBUTE, rows_spec(rows) if sent is None else sent)
    setattr(fig, FRAME_ATTRIBUTE, hashlib.blake2b(repr(frame).encode("utf-8"), digest_size=8).hexdigest())
    return fig


def flip_rows(fig) -> dict | None:
    """The rows a figure carries for the browser (``with_flip``), or None."""
    return getattr(fig, ROWS_ATTRIBUTE, None)


def flip_frame(fig) -> str | None:
    """The digest of the frame a figure with rows is drawn in (``with_flip``), or None."""
    return getattr(fig, FRAME_ATTRIBUTE, None)


class HeadRows:
    """The last ``kept`` heads' rows (``QueryRows`` and its ``rows_spec``), so that every query of a head shares them:
    built once, and packed once (``ui.plotly_spec`` packs a dict it has seen by its identity), however many queries
    are shown or built ahead. Keyed by where the arrays' numbers are (address, shape, strides, dtype), the tokens and
    whether values are written. An entry holds weak references to the arrays' owners, not the arrays: it keeps no
    trace alive, and one whose owner is gone (its address free for another array) is never taken. Arrays whose
    owner takes no weak reference are not kept. Shared by every session; locked."""

    def __init__(self, kept: int = 4) -> None:
        self._kept, self._entries, self._lock = kept, OrderedDict(), threading.Lock()

    def get(self, arrays: Sequence, tokens: Sequence[str], show: bool, build: Callable[[], Any]) -> Any:
        key = (*(_address(a) for a in arrays), tuple(tokens), show)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and all(ref() is not None for ref in entry[0]):
                self._entries.move_to_end(key)
                return entry[1]
        made = build()
        refs = _owners(arrays)
        if refs is None:
            return made
        with self._lock:
            self._entries[key] = (refs, made)
            self._entries.move_to_end(key)
            while len(self._entries) > self._kept:
                self._entries.popitem(last=False)
        return made

    def __len__(self) -> int:
        return len(self._entries)


def _address(array) -> tuple | None:
    """Where an array's numbers are, its shape, strides and dtype (None for None)."""
    if array is None:
        return None
    array = np.asarray(array)
    return (array.__array_interface__["data"][0], array.shape, array.strides, array.dtype.str)


def _owners(arrays: Sequence) -> tuple | None:
    """Weak references to the objects that own the arrays' numbers (a view's base, all the way down); None when
    one cannot be referenced weakly."""
    refs = []
    for array in arrays:
        if array is None:
            continue
        owner = array
        while isinstance(owner, np.ndarray) and owner.base is not None:
            owner = owner.base
        try:
            refs.append(weakref.ref(owner))
        except TypeError:
            return None
    return tuple(refs)


HEAD_ROWS = HeadRows()


def head_rows(head, tokens: Sequence[str], titles: Callable[[], Sequence[str]], show: bool) -> tuple | None:
    """(``QueryRows``, its ``rows_spec``) of one head (a ``HeadTrace``: scores, scaled, weights, v, mask), kept for its
    other queries (``HEAD_ROWS``); None when they do not ``fit`` (the box alone picks the query)."""

    def build():
        rows = query_rows(head.scores, head.scaled, head.weights, head.v, head.mask, titles(), show)
        return (rows, rows_spec(rows)) if fits(rows) else None

    queries, keys = np.shape(head.weights)
    if 3 * queries * keys * 8 > FLIP_BYTES:  # the three score tables alone: too long, nothing built or kept
        return None
    arrays = (head.scores, head.scaled, head.weights, head.v, head.mask)
    return HEAD_ROWS.get(arrays, tokens, show, build)
