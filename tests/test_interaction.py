"""What a click costs: view-only controls recompute nothing; numbers are kept once, float32, zero-copy.

Counts calls into the pipeline while AppTest drives the app (AppTest runs app.py in this process),
and checks the trace the app holds shares the capture's buffers instead of copying them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attention_core import pipeline
from attention_core.request import TraceRequest
from ui import all_layers, compute
from ui.settings import VIEW_ONLY, VIEWS

APP = str(Path(__file__).resolve().parents[1] / "app.py")
TEXT = "Every click should feel instant, and the numbers must not be computed twice."


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


@pytest.fixture
def counted(monkeypatch):
    compute.store().clear()
    calls = {"build_trace": 0, "capture_text": 0}
    for name in calls:
        real = getattr(pipeline, name)

        def counting(*args, _real=real, _name=name, **kwargs):
            calls[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(pipeline, name, counting)
    at = AppTest.from_file(APP, default_timeout=180)
    at.session_state["text"] = TEXT
    ok(at.run())
    assert calls == {"build_trace": 1, "capture_text": 1}
    return at, calls


def test_view_only_controls_never_recompute(counted):
    at, calls = counted
    at.slider(key="head").set_value(5)
    ok(at.run())
    for view in VIEWS[:4]:  # derivation, compare, heads, query: the views that draw the trace
        at.segmented_control(key="view").set_value(view)
        ok(at.run())
    at.selectbox(key="query").set_value(3)
    ok(at.run())
    at.segmented_control(key="view").set_value("heads")
    ok(at.run())
    at.session_state["statistic"] = "distance"  # a link's statistic: the overview chart starts there
    ok(at.run())
    assert calls == {"build_trace": 1, "capture_text": 1}
    assert {"head", "view", "query", "statistic", "pair_text", "contribution_mode", "ablation"} <= set(VIEW_ONLY)


def test_a_numbers_control_builds_once_and_comes_back_from_the_store(counted):
    at, calls = counted
    at.radio(key="scaling").set_value("none")
    ok(at.run())
    assert calls == {"build_trace": 2, "capture_text": 1}  # the model is not run again for scaling
    at.radio(key="scaling").set_value("sqrt_dk")
    ok(at.run())
    at.radio(key="scaling").set_value("none")
    ok(at.run())
    assert calls == {"build_trace": 2, "capture_text": 1}


def test_head_is_not_part_of_the_numbers_key():
    a, b = TraceRequest(head=0), TraceRequest(head=7)
    assert compute.numbers_key(a) == compute.numbers_key(b)
    assert compute.numbers_key(a) != compute.numbers_key(TraceRequest(scaling="none"))


def test_trace_is_float32_and_shares_the_capture_buffers():
    compute.store().clear()
    request = TraceRequest(text=TEXT, head=2)
    trace = compute.trace_for(request)
    again = compute.trace_for(TraceRequest(text=TEXT, head=9))
    assert again.head == 9 and again.core is trace.core  # another head: the same arrays, not a copy
    cap = compute.capture(request.model, request.text, request.max_tokens, request.pad_to)
    stacked = cap.attentions.numpy()
    assert np.shares_memory(trace.model_attentions, stacked)
    assert np.shares_memory(trace.model.weights, stacked)
    for layer, layer_cap in enumerate(cap.layers):
        assert np.shares_memory(layer_cap.attentions.numpy(), stacked[layer])
    for array in (trace.core.scores, trace.core.weights, trace.model.q, trace.model_attentions):
        assert array.dtype == np.float32


def test_default_budget_computes_the_full_context():
    assert compute.token_budget_for(6, 12) >= 512  # MiniLM: every position it has
    assert compute.token_budget_for(30, 9) >= 1024  # SmolLM2
    for layers, heads in ((6, 12), (30, 9), (2, 4), (96, 96)):
        tokens = compute.token_budget_for(layers, heads)
        assert compute.request_bytes(layers, heads, tokens) <= compute.MAX_TRACE_MB * 2**20 or tokens == 16
        assert compute.request_bytes(layers, heads, tokens + 1) > compute.MAX_TRACE_MB * 2**20 or tokens == 16


def test_compare_view_with_more_scratch_heads_than_the_model_says_so():
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params.update(
        {
            "text": "A short text.",
            "source": "scratch",
            "heads": "32",
            "head": "31",
            "view": "compare",
            "max_tokens": "16",
        }
    )
    ok(at.run())
    assert any("no counterpart in the model" in info.value for info in at.info)


def test_pitfalls_with_every_key_blocked_explains_instead_of_failing():
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params.update(
        {"text": "one two three", "mask": "blocked_keys", "blocked": ",".join(map(str, range(8))), "view": "pitfalls"}
    )
    ok(at.run())
    assert any("Every key is blocked" in info.value for info in at.info)


def test_figures_are_built_once_per_numbers_head_and_view(monkeypatch):
    import viz.views

    compute.store().clear()
    built = []
    real = viz.views.figures_for_trace

    def counting(*args, **kwargs):
        built.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(viz.views, "figures_for_trace", counting)
    request = TraceRequest(text=TEXT)
    trace = compute.trace_for(request)
    first = compute.figures(trace, request, "query", head=0, query=2, theme="screen")
    again = compute.figures(compute.trace_for(request), request, "query", head=0, query=2, theme="screen")
    other = compute.figures(compute.with_head(trace, 1), request, "query", head=1, query=2, theme="screen")
    assert built == ["query", "query"] and first is again and other is not first


def test_a_long_replay_check_runs_in_the_background_and_then_is_kept(monkeypatch):
    import time

    compute.store().clear()
    monkeypatch.setattr(compute, "SYNC_REPLAY_CELLS", 0)  # treat this text as long
    request = TraceRequest(text=TEXT + " And once more, in the background.")
    assert all_layers.replay_if_ready(request) is None  # started, not waited for
    deadline = time.time() + 60
    while (summary := all_layers.replay_if_ready(request)) is None and time.time() < deadline:
        time.sleep(0.05)
    captured, hidden = summary
    assert len(captured) == 6 and len(hidden) == 6
    assert all(r.weights < 1e-5 and r.output < 1e-5 for r in (*captured, *hidden))
    cap = compute.capture(request.model, request.text, request.max_tokens, request.pad_to)
    assert all_layers.replay_if_ready(request) is cap.memo["replay_summary"]  # computed once, then kept


def test_a_long_text_opens_on_a_first_look_and_the_check_captures_the_rest(monkeypatch):
    """The derivation of a long input is drawn from the model run up to the chosen layer only; its numbers are the
    whole capture's; the all-layers check's job captures the other layers, and then the first look is let go."""
    import time

    compute.store().clear()
    monkeypatch.setattr(compute, "SYNC_REPLAY_CELLS", 0)  # treat this text as long
    request = TraceRequest(text=TEXT + " A first look, then the rest.", layer=2, head=3)
    ident = (request.model, request.text, request.max_tokens, request.pad_to)
    first = compute.trace_for(request, view="derivation")
    assert (first.complete, first.model_attentions, first.layer, first.head) == (False, None, 2, 3)
    assert compute.store().peek(("capture", *ident)) is None  # the other layers were not computed
    assert compute.first_look(*ident, 2).num_layers == 3
    assert compute.trace_for(request, view="derivation").core is first.core  # kept: no second pass
    assert all_layers.replay_if_ready(request) is None  # the job captures the rest, then checks
    deadline = time.time() + 60
    while (summary := all_layers.replay_if_ready(request)) is None and time.time() < deadline:
        time.sleep(0.05)
    assert summary is not None and len(summary[0]) == 6
    whole = compute.store().peek(("capture", *ident))
    assert whole is not None and whole.complete and whole.num_layers == 6
    assert compute.store().peek(("first-capture", *ident, 2)) is None  # let go
    full = compute.trace_for(request, view="derivation")
    assert full.complete and full.model_attentions is not None
    for name in ("x", "q", "k", "v", "scores", "scaled", "masked", "weights", "output"):
        assert np.array_equal(np.asarray(getattr(first.core, name)), np.asarray(getattr(full.core, name))), name
    assert np.array_equal(np.asarray(first.model.weights), np.asarray(full.model.weights))
    assert first.core_vs_model == full.core_vs_model


def test_a_short_text_and_the_last_layer_get_the_whole_capture(monkeypatch):
    compute.store().clear()
    short = TraceRequest(text=TEXT, layer=0)  # short: the check runs in the script, on the whole capture
    assert compute.trace_for(short, view="derivation").complete
    monkeypatch.setattr(compute, "SYNC_REPLAY_CELLS", 0)
    last = TraceRequest(text=TEXT + " The last layer.", layer=5)
    assert compute.trace_for(last, view="derivation").complete  # a first look would be the whole pass
    other = TraceRequest(text=TEXT + " Another view.", layer=0)
    assert compute.trace_for(other, view="heads").complete  # a view of every layer never gets a first look


def test_a_check_whose_capture_failed_says_n_a_without_asking_for_the_whole_trace(monkeypatch):
    from ui import header

    compute.store().clear()
    monkeypatch.setattr(compute, "SYNC_REPLAY_CELLS", 0)
    request = TraceRequest(text=TEXT + " A check that failed.", layer=0)
    key = (request.model, request.text, request.max_tokens, request.pad_to)
    monkeypatch.setitem(all_layers._REPLAY_FAILED, key, ((), ()))
    monkeypatch.setattr(compute, "capture", lambda *args: pytest.fail("the whole capture was asked for"))
    shown = []

    class Slot:
        def metric(self, label, value, help=None):
            shown.append((label, value))

    assert header.replay_check(Slot(), request) is True
    assert shown == [("Own core vs model, all layers", "n/a")]
