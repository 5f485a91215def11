"""The step-through's rows for the browser (viz/query_flip.py): every row, filled the way the page fills it, is the
figure the server builds for that query; the rows travel exactly (packed bytes); the slider and its limits.
What the page's script does with them is checked in Chromium (tests/test_browser.py, the query slider)."""

from __future__ import annotations

import base64
import json

import numpy as np
import plotly.io as pio
import pytest

import viz.query as query
import viz.query_flip as query_flip
from tests.test_query_frames import EV, TOKENS, N, _figure, _head
from ui import plotly_spec
from viz.matrix_traces import FLOAT64_MAX_CELLS
from viz.query import row_title
from viz.query_flip import fits, flip_frame, flip_rows, query_rows, rows_spec, with_flip
from viz.query_frames import TRACES, Frames, fill
from viz.theme import THEMES


def spec(fig) -> dict:
    return json.loads(pio.to_json(fig))


def _rows(head: dict, show: bool = False):
    titles = [row_title(token, i) for i, token in enumerate(TOKENS)]
    return query_rows(head["scores"], head["scaled"], head["weights"], head["v"], head["mask"], titles, show)


@pytest.mark.parametrize("show_values", [True, False])
def test_every_row_filled_into_one_frame_is_the_figure_built_for_that_query(monkeypatch, show_values):
    monkeypatch.setattr(query, "FRAMES", Frames(kept=0))  # every figure built from scratch
    head = _head()
    rows = _rows(head, show_values)
    frame = _figure(head, 0, show_values=show_values).to_dict()  # query 0 blocks keys 1..N-1: a "masked" trace
    for i in range(N):
        filled = spec(fill(frame, rows.row(i, show_values)))
        built = spec(_figure(head, i, show_values=show_values))
        if i < N - 1:
            assert filled == built, i
        else:  # the last query blocks nothing: its frame has no "×" trace, the shared one has it empty
            masked = [t for t in filled["data"] if t["name"] == TRACES["masked"]]
            assert len(masked) == 1 and masked[0]["x"] == [] and masked[0]["y"] == []
            filled["data"] = [t for t in filled["data"] if t["name"] != TRACES["masked"]]
            assert filled == built


def test_the_rows_hold_each_query_s_numbers_and_the_traces_named_are_the_figure_s():
    head = _head()
    rows = _rows(head, show=True)
    i = 4
    assert np.array_equal(rows.blocked[i], ~head["mask"][i])
    assert np.array_equal(rows.weights[i][rows.blocked[i]], np.zeros(N - i - 1))  # masked keys: weight 0
    assert np.allclose(rows.output[i], head["weights"][i] @ head["v"])  # o_i = Σ_j α_ij v_j
    assert rows.texts[i][2][i + 1] == "" and rows.texts[i][0][0] == f"{head['scores'][i][0]:.2f}"
    names = {t.name for t in _figure(head, i).data}
    assert set(TRACES.values()) <= names
    sent = rows_spec(rows)
    assert sent["float32"] is (N * EV > FLOAT64_MAX_CELLS)
    assert sent["blocked"].dtype == np.uint8 and sent["titles"][i] == rows.titles[i]
    assert _rows(head).texts is None  # no values written: none sent


def test_the_figure_carries_a_slider_of_queries_and_the_page_is_sent_the_rows_exactly():
    head = _head()
    rows = _rows(head)
    fig = with_flip(_figure(head, 3), rows, 3)
    slider = fig.layout.sliders[0]
    assert slider.active == 3 and len(slider.steps) == N
    assert slider.transition.duration == 0  # the handle jumps to the query clicked, as the chart does
    assert {step.method for step in slider.steps} == {"skip"}  # the page fills the row, plotly does nothing
    assert [step.value for step in slider.steps] == [str(i) for i in range(N)]
    sent = plotly_spec.unpack(plotly_spec.spec_bytes(fig))
    arrived = sent.pop(plotly_spec.ROWS_KEY)
    assert sent == spec(fig)  # the figure itself as plotly's JSON has it
    for name in ("scores", "scaled", "weights", "values", "output"):
        typed = arrived[name]
        array = np.frombuffer(base64.b64decode(typed["bdata"]), dtype=np.float64).reshape(getattr(rows, name).shape)
        assert np.array_equal(array, getattr(rows, name), equal_nan=True), name
    assert arrived["titles"] == list(rows.titles) and arrived["traces"] == TRACES
    kept = plotly_spec.Sent(fig)
    assert plotly_spec.ROWS_KEY not in kept.figure().to_dict()  # a download: the figure alone
    assert flip_rows(kept.figure()) is None


def test_long_rows_or_values_that_are_not_finite_are_not_sent(monkeypatch):
    head = _head()
    rows = _rows(head)
    assert fits(rows)
    monkeypatch.setattr(query_flip, "FLIP_BYTES", rows.nbytes - 1)
    assert not fits(rows)
    monkeypatch.setattr(query_flip, "FLIP_BYTES", 10**9)
    broken = dict(head, v=np.where(np.arange(N)[:, None] == 2, np.inf, head["v"]))
    assert not fits(_rows(broken))


def test_a_long_slider_has_no_step_labels_and_its_current_value_names_the_query_drawn():
    head = _head()
    rows = _rows(head)
    short = with_flip(_figure(head, 0), rows, 0).layout.sliders[0]
    assert short.font.size == 11 and short.tickcolor is None
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(query_flip, "SLIDER_LABELS_MAX", N - 1)
        long = with_flip(_figure(head, 0), rows, 0).layout.sliders[0]
    assert long.font.color == query_flip.CLEAR and long.tickcolor == query_flip.CLEAR
    assert long.currentvalue.font.color not in (None, query_flip.CLEAR) and long.currentvalue.font.size > 10
    # no label to measure per step: the current value is one text, "query " and the query drawn (its suffix)
    assert [step.label for step in long.steps] == [""] * N
    assert [step.value for step in long.steps] == [str(i) for i in range(N)]
    assert long.currentvalue.prefix == query_flip.SLIDER_PREFIX and long.currentvalue.suffix == "0"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(query_flip, "SLIDER_LABELS_MAX", N - 1)
        assert with_flip(_figure(head, 3), rows, 3).layout.sliders[0].currentvalue.suffix == "3"
    assert [step.label for step in short.steps] == [str(i) for i in range(N)] and short.currentvalue.suffix is None


def test_the_view_s_figure_flips_and_a_query_that_blocks_nothing_gets_the_frame_with_the_cross(monkeypatch):
    from attention_core.pipeline import run_trace
    from attention_core.request import TraceRequest
    from viz.views import figures_for_trace

    trace = run_trace(TraceRequest(text="The cat sat on the mat.", mask="causal"))  # the bundled MiniLM
    n = len(trace.tokens)
    last = figures_for_trace(trace, "query", query=n - 1)["query"]
    assert len(last.layout.sliders[0].steps) == n and flip_rows(last)["queries"] == n
    assert [len(t.x) for t in last.data if t.name == TRACES["masked"]] == [0]  # there, empty: other rows fill it
    exported = figures_for_trace(trace, "query", query=n - 1, flip_queries=False)[
        "query"
    ]  # viz/export.py: no app to fill
    assert not exported.layout.sliders and flip_rows(exported) is None
    monkeypatch.setattr(query_flip, "HEAD_ROWS", query_flip.HeadRows())
    monkeypatch.setattr(query_flip, "FLIP_BYTES", 1)
    alone = figures_for_trace(trace, "query", query=n - 1)["query"]
    assert not alone.layout.sliders and flip_rows(alone) is None
    assert TRACES["masked"] not in [t.name for t in alone.data]


def test_every_query_of_a_head_shares_one_rows_dict_packed_once(monkeypatch):
    from attention_core.pipeline import run_trace
    from attention_core.request import TraceRequest
    from viz.views import figures_for_trace

    monkeypatch.setattr(query_flip, "HEAD_ROWS", query_flip.HeadRows())
    trace = run_trace(TraceRequest(text="The cat sat on the mat.", mask="causal"))  # the bundled MiniLM
    first = figures_for_trace(trace, "query", query=1)["query"]
    second = figures_for_trace(trace, "query", query=4)["query"]
    assert flip_rows(first) is flip_rows(second)  # built once for the head
    sent = plotly_spec.Sent(first), plotly_spec.Sent(second)
    assert sent[0].rows is sent[1].rows  # packed once
    other_head = figures_for_trace(trace, "query", head=1, query=1)["query"]
    written = figures_for_trace(trace, "query", query=1, show_values=True)["query"]
    assert flip_rows(other_head) is not flip_rows(first) and flip_rows(written)["texts"] is not None
    again = run_trace(TraceRequest(text="The cat sat on the mat.", mask="none"))  # new numbers, same shapes
    unmasked = flip_rows(figures_for_trace(again, "query", query=1)["query"])
    assert unmasked is not flip_rows(first) and not unmasked["blocked"].any()


def test_a_figure_names_its_frame_the_same_for_every_query_of_a_head_and_anew_when_the_frame_changes():
    """The page draws nothing for a figure whose frame, rows and query it shows already (a query picked in the box
    and flipped to at once, ui/follow.py): the frame's digest must be the same for every query of a head (also
    the last, which blocks nothing but is drawn in the frame with the "×" trace) and change with the frame."""
    from attention_core.pipeline import run_trace
    from attention_core.request import TraceRequest
    from viz.views import figures_for_trace

    trace = run_trace(TraceRequest(text="The cat sat on the mat.", mask="causal"))  # the bundled MiniLM
    n = len(trace.tokens)
    frames = {flip_frame(figures_for_trace(trace, "query", query=q)["query"]) for q in (0, 2, n - 1)}
    assert len(frames) == 1 and None not in frames
    (frame,) = frames
    assert flip_frame(figures_for_trace(trace, "query", query=2, theme=THEMES[1])["query"]) != frame
    assert flip_frame(figures_for_trace(trace, "query", query=2, show_values=False)["query"]) != frame  # written: no
    unmasked = run_trace(TraceRequest(text="The cat sat on the mat.", mask="none"))
    assert flip_frame(figures_for_trace(unmasked, "query", query=2)["query"]) != frame  # no "×" trace
    fig = figures_for_trace(trace, "query", query=2)["query"]
    named, packed = plotly_spec._sendable(fig)
    assert named["lens_rows"] == {"digest": plotly_spec.rows_digest(packed), "frame": frame}
    assert flip_frame(figures_for_trace(trace, "query", query=2, flip_queries=False)["query"]) is None


def test_the_kept_rows_are_the_last_few_and_keep_no_array_alive():
    import gc
    import weakref

    kept = query_flip.HeadRows(kept=2)
    arrays = [np.zeros((2, 3)), np.ones((2, 3))]
    made = [kept.get((a[0],), ["t"], False, lambda a=a: {"of": 1}) for a in arrays]  # views, as a HeadTrace holds
    assert kept.get((arrays[0][0],), ["t"], False, lambda: {"new": 1}) is made[0]  # a new view of the same numbers
    assert kept.get((arrays[0][0],), ["t"], True, lambda: {"new": 2}) == {"new": 2}  # values written: their own
    assert kept.get((arrays[1][0],), ["t"], False, lambda: {"new": 3}) == {"new": 3}  # the oldest went
    owner = weakref.ref(arrays[0])
    del arrays[0]
    gc.collect()
    assert owner() is None  # the kept rows held it weakly
    again = np.zeros((2, 3))
    assert kept.get((again[0],), ["t"], True, lambda: {"new": 4}) == {"new": 4}  # (its address may be the old one)


def test_a_head_too_long_to_send_builds_and_keeps_nothing(monkeypatch):
    from types import SimpleNamespace

    monkeypatch.setattr(query_flip, "HEAD_ROWS", query_flip.HeadRows())
    n = 400  # 3 x 400 x 400 float64 tables: 3.8 MB
    head = SimpleNamespace(scores=np.zeros((n, n)), scaled=np.zeros((n, n)), weights=np.zeros((n, n)))
    titles = lambda: pytest.fail("built")  # noqa: E731 - a title list asked for means the rows were built
    assert query_flip.head_rows(head, ["t"] * n, titles, False) is None and len(query_flip.HEAD_ROWS) == 0
