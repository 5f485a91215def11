"""ui.prefetch: after a view is drawn, the neighbouring heads' figures are built in the background,
only while no script run is in progress, into the same store keys a click would use."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from ui import all_layers, compute, prefetch
from ui.store import Store

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def test_neighbours_alternate_and_stay_in_range():
    assert prefetch.neighbours(0, 12, 2) == [1, 2]
    assert prefetch.neighbours(5, 12, 2) == [6, 4, 7, 3]
    assert prefetch.neighbours(11, 12, 1) == [10]
    assert prefetch.neighbours(0, 1, 3) == []


def _job(head):
    return ("figures", head), lambda: {"head": head}


def test_schedule_builds_the_neighbours_once_the_server_is_idle(monkeypatch):
    monkeypatch.setattr(prefetch, "NEIGHBOURS", 2)
    prefetch._noted.calls = []  # nothing noted by earlier tests on this thread
    store = Store(2**20)
    with prefetch.running():  # a run in progress: nothing may be built yet
        prefetch.note(store, _job, lambda value: 8, 5, 12)
        assert prefetch.schedule() == 4
        time.sleep(0.3)
        assert len(store) == 0
    assert prefetch.wait_idle(10)
    assert {key[1] for key in store._entries} == {3, 4, 6, 7}
    assert store.peek(("figures", 6)) == {"head": 6}
    # a second schedule for the same call queues nothing: every neighbour is cached already
    prefetch.note(store, _job, lambda value: 8, 5, 12)
    assert prefetch.schedule() == 0


def test_a_failing_build_is_skipped(monkeypatch):
    monkeypatch.setattr(prefetch, "NEIGHBOURS", 1)
    prefetch._noted.calls = []
    store = Store(2**20)

    def job(head):
        def build():
            if head == 1:
                raise ValueError("boom")
            return head

        return ("k", head), build

    prefetch.note(store, job, lambda value: 8, 2, 4)
    assert prefetch.schedule() == 2
    assert prefetch.wait_idle(10)
    assert store.peek(("k", 3)) == 3 and store.peek(("k", 1)) is None


def test_a_new_schedule_replaces_what_the_same_session_queued(monkeypatch):
    """The page moved on: its older jobs (and the trace they hold) are dropped; another session's stay."""
    monkeypatch.setattr(prefetch, "NEIGHBOURS", 1)
    prefetch._noted.calls = []
    store = Store(2**20)
    with prefetch.running():  # nothing is built while a run is in progress
        prefetch.note(store, _job, lambda value: 8, 5, 12)
        assert prefetch.schedule(owner="tab A") == 2  # heads 6 and 4
        prefetch.note(store, _job, lambda value: 8, 9, 12)
        assert prefetch.schedule(owner="tab B") == 2  # heads 10 and 8
        prefetch.note(store, _job, lambda value: 8, 1, 12)
        assert prefetch.schedule(owner="tab A") == 2  # heads 2 and 0: A's 6 and 4 dropped
    assert prefetch.wait_idle(10)
    assert {key[1] for key in store._entries} == {0, 2, 8, 10}


def test_nothing_is_built_ahead_while_the_store_is_over_budget(monkeypatch):
    """A prefetched set would only evict the one on screen (the newest of its kind)."""
    monkeypatch.setattr(prefetch, "NEIGHBOURS", 1)
    prefetch._noted.calls = []
    store = Store(100)
    store.get(("capture", "long"), lambda: "C", lambda value: 150)  # alone over the budget
    on_screen = store.get(("figures", 5), lambda: {"head": 5}, lambda value: 8)
    prefetch.note(store, _job, lambda value: 8, 5, 12)
    assert prefetch.schedule() == 2
    assert prefetch.wait_idle(10)
    assert store.peek(("figures", 6)) is None and store.peek(("figures", 4)) is None
    assert store.peek(("figures", 5)) is on_screen


def test_off_when_no_neighbours(monkeypatch):
    monkeypatch.setattr(prefetch, "NEIGHBOURS", 0)
    prefetch.note(Store(1024), _job, lambda value: 8, 0, 12)
    assert prefetch.schedule() == 0
    assert threading.active_count() >= 1


def _opened_with_one_neighbour(monkeypatch, **state) -> AppTest:
    """The app opened with ``state`` in its session, one neighbour prefetched, the prefetch finished."""
    monkeypatch.setattr(prefetch, "NEIGHBOURS", 1)
    compute.store().clear()
    at = AppTest.from_file(APP, default_timeout=180)
    for key, value in state.items():
        at.session_state[key] = value
    at.run()
    assert not at.exception and not at.error
    assert prefetch.wait_idle(60)
    return at


@pytest.mark.slow
def test_the_next_head_is_a_store_hit_in_the_app(monkeypatch):
    at = _opened_with_one_neighbour(monkeypatch, text="A head change should find its figures already built.")
    keys = [key for key in compute.store()._entries if key[0] == "figures"]
    assert {key[2] for key in keys} == {0, 1, None}, keys  # the head shown and its neighbour; None: every head
    assert {key[3] for key in keys if key[2] is None} <= {"heads", "lines"}  # kept once, marked per head
    built = {key for key in keys if key[2] == 1}
    monkeypatch.setattr(prefetch, "NEIGHBOURS", 0)
    misses = compute.store().misses
    at.slider(key="head").set_value(1)
    at.run()
    assert not at.exception and not at.error
    after = {key for key in compute.store()._entries if key[0] == "figures" and key[2] == 1}
    assert after == built  # the click asked for exactly the prefetched keys ...
    assert compute.store().misses == misses  # ... and built nothing


@pytest.mark.slow
def test_the_views_one_switch_away_are_built_ahead(monkeypatch):
    """After the derivation is drawn, the Query inspector's, Core vs model's and Heads & layers' figures for the
    head shown (with the layer x head overviews and the attention lines) are built in the background: switching
    to any of them builds nothing."""
    at = _opened_with_one_neighbour(monkeypatch, text="A view switch should find its figure already built.")
    views = {key[3] for key in compute.store()._entries if key[0] == "figures" and key[2] in (0, None)}
    assert {"derivation", "compare", "query", "heads", "lines"} <= views, views
    assert any(key[0] == "overview" for key in compute.store()._entries)  # made by the builder
    monkeypatch.setattr(prefetch, "NEIGHBOURS", 0)
    misses = compute.store().misses
    for view in ("query", "compare", "heads"):
        at.segmented_control(key="view").set_value(view)
        at.run()
        assert not at.exception and not at.error
    assert compute.store().misses == misses
    assert [fig for fig in at.get("bidi_component")]  # the views drew their charts


def test_attention_lines_are_not_built_ahead_once_their_drawer_is_closed(monkeypatch):
    at = _opened_with_one_neighbour(monkeypatch, text="Closed drawers send nothing and build nothing ahead.")
    lines = [key for key in compute.store()._entries if key[0] == "figures" and key[3] == "lines"]
    assert lines  # the drawer starts open: built ahead
    compute.store().clear()
    at.session_state["open_lines"] = False  # a person closed it (as a click on its header does)
    at.run()
    assert not at.exception and not at.error
    assert prefetch.wait_idle(60)
    views = {key[3] for key in compute.store()._entries if key[0] == "figures"}
    assert "heads" in views and "lines" not in views, views


def test_note_ahead_is_queued_after_the_neighbours(monkeypatch):
    monkeypatch.setattr(prefetch, "NEIGHBOURS", 1)
    prefetch._noted.calls, prefetch._noted.ahead = [], []
    store = Store(2**20)
    order = []
    with prefetch.running():
        prefetch.note_ahead(store, ("ahead", 0), lambda: order.append("ahead") or 1, lambda value: 8)
        prefetch.note(store, lambda h: (("figures", h), lambda: order.append(h) or h), lambda value: 8, 5, 12)
        assert prefetch.schedule() == 3
    assert prefetch.wait_idle(10)
    assert order == [6, 4, "ahead"]
    monkeypatch.setattr(prefetch, "NEIGHBOURS", 0)  # off: nothing is noted ahead either
    prefetch.note_ahead(store, ("ahead", 1), lambda: 1, lambda value: 8)
    assert prefetch.schedule() == 0 and store.peek(("ahead", 1)) is None


def test_a_costly_view_waits_for_the_longer_pause_without_holding_up_the_rest(monkeypatch):
    monkeypatch.setattr(prefetch, "NEIGHBOURS", 1)
    monkeypatch.setattr(prefetch, "QUIET_S", 0.05)
    monkeypatch.setattr(prefetch, "OPEN_QUIET_S", 0.0)  # (a page's first run waits longer: the next test)
    prefetch._noted.calls, prefetch._noted.ahead = [], []
    store = Store(2**20)
    built_at = {}

    def build(name):
        return lambda: built_at.setdefault(name, time.monotonic()) and name

    with prefetch.running():
        prefetch.note_ahead(store, ("ahead", "heads"), build("heads"), lambda value: 8, quiet=0.6)
        prefetch.note_ahead(store, ("ahead", "query"), build("query"), lambda value: 8)
        assert prefetch.schedule(owner="a") == 2
        prefetch.note_ahead(store, ("ahead", "other"), build("other"), lambda value: 8)
        assert prefetch.schedule(owner="b") == 1  # another session's cheap job, queued behind the costly one
    ended = time.monotonic()
    assert prefetch.wait_idle(10)
    assert built_at["heads"] - ended >= 0.6  # only after the longer pause
    assert built_at["query"] - ended < 0.5 and built_at["other"] - ended < 0.5  # not held up behind it
    assert built_at["query"] < built_at["heads"] and built_at["other"] < built_at["heads"]


def test_what_a_page_just_opened_queues_waits_the_open_pause_and_its_later_runs_do_not(monkeypatch):
    monkeypatch.setattr(prefetch, "NEIGHBOURS", 1)
    monkeypatch.setattr(prefetch, "QUIET_S", 0.05)
    monkeypatch.setattr(prefetch, "OPEN_QUIET_S", 0.6)
    prefetch._noted.calls, prefetch._noted.ahead = [], []
    store = Store(2**20)
    built_at = {}

    def queue(owner: str, name: str) -> float:
        """One run of ``owner`` that queues one job; returns when the run ended, once the job is built."""
        with prefetch.running():
            prefetch.note_ahead(store, (owner, name), lambda: built_at.setdefault(name, time.monotonic()), len)
            assert prefetch.schedule(owner=owner) == 1
        ended = time.monotonic()
        assert prefetch.wait_idle(10)
        return ended

    ended = queue("tab", "first")
    assert built_at["first"] - ended >= 0.6  # its page is still being drawn: the longer pause
    ended = queue("tab", "second")
    assert built_at["second"] - ended < 0.5  # the same page later: the usual short one
    prefetch.drop({"tab"})  # the session ended: a new page with the same id would open again
    ended = queue("tab", "third")
    assert built_at["third"] - ended >= 0.6


def test_wait_quiet_waits_for_runs_to_end_and_a_pause_after_them_but_not_for_ever(monkeypatch):
    started = time.monotonic()
    held = threading.Event()

    def run_for(seconds: float) -> None:
        with prefetch.running():
            held.set()
            time.sleep(seconds)

    worker = threading.Thread(target=run_for, args=(0.4,))
    worker.start()
    held.wait(5)
    assert prefetch.wait_quiet(0.3)
    assert time.monotonic() - started >= 0.7  # the run's 0.4 s, then 0.3 s with none
    worker.join()
    with prefetch.running():  # a run that does not end within ``longest``
        assert prefetch.wait_quiet(0.1, longest=0.3) is False


def test_the_all_layers_check_in_the_background_starts_once_the_server_is_quiet(monkeypatch):
    monkeypatch.setattr(prefetch, "OPEN_QUIET_S", 0.3)
    started = []
    monkeypatch.setattr(compute.pipeline, "replay_summary", lambda cap: started.append(time.monotonic()))
    with prefetch.running():  # the page's run (and the browser drawing it)
        job = all_layers._REPLAY_POOL.submit(all_layers._replay_job, object(), ("a key",))
        time.sleep(0.3)
        assert not started
    ended = time.monotonic()
    job.result(timeout=10)
    assert started and started[0] - ended >= 0.3


def test_an_all_layers_check_asked_for_long_ago_does_not_wait_for_a_quiet_server_any_more(monkeypatch):
    started = []
    monkeypatch.setattr(compute.pipeline, "replay_summary", lambda cap: started.append(time.monotonic()))
    with prefetch.running():  # never quiet while this lasts
        asked = time.monotonic() - all_layers.REPLAY_WAIT_S  # queued behind other checks for all of its time
        all_layers._REPLAY_POOL.submit(all_layers._replay_job, object(), ("another key",), asked).result(timeout=5)
        assert started  # ran within the run: its time to wait was spent


@pytest.mark.slow
def test_the_next_query_is_a_store_hit_in_the_query_inspector(monkeypatch):
    at = _opened_with_one_neighbour(
        monkeypatch, text="A query change should find its step-through already built.", view="query", query=3
    )

    def queries() -> set:
        return {
            dict(key[4]).get("query")
            for key in compute.store()._entries
            if key[0] == "figures" and key[3] == "query" and key[2] == 0
        }

    assert queries() == {2, 3, 4}  # the query shown and its neighbours, at the head shown
    monkeypatch.setattr(prefetch, "NEIGHBOURS", 0)
    misses = compute.store().misses
    at.selectbox(key="query").set_value(4)
    at.run()
    assert not at.exception and not at.error
    assert compute.store().misses == misses  # the step-through of query 4 was built before the click


def test_a_build_in_the_background_thread_logs_no_missing_context_warning(monkeypatch):
    """The prefetch thread has no ScriptRunContext: looking up the session id there is expected, and must not
    write Streamlit's "missing ScriptRunContext" warning to the server log once per figure built."""
    from streamlit.runtime.scriptrunner_utils import script_run_context

    warned = []
    monkeypatch.setattr(script_run_context._LOGGER, "warning", lambda *args, **kw: warned.append(args))
    seen = []
    worker = threading.Thread(target=lambda: seen.append(compute.session_id()), name="attention-lens-prefetch")
    worker.start()
    worker.join()
    assert seen == [None]
    assert warned == []
    script_run_context.get_script_run_ctx()  # the check can fail: without suppress_warning it does warn
    assert len(warned) == 1


def test_what_a_background_job_stores_on_the_way_belongs_to_the_session_that_queued_it(monkeypatch):
    """A prefetched figure may store what it is made of (a summary) through ``compute.store()`` on the builder
    thread. That entry is the queuing session's, like the figure: the sweeper's release of that session drops
    both, instead of leaving the inner one to the byte budget (as an entry nobody owns)."""
    monkeypatch.setattr(prefetch, "NEIGHBOURS", 1)
    prefetch._noted.calls = []
    shared = Store(2**20)
    monkeypatch.setattr(compute, "shared_store", lambda: shared)
    seen = []

    def job(head):
        def build():
            seen.append(compute.session_id())
            inner = compute.store().get(("summary", head), lambda: [head], lambda value: 8)
            return {"head": head, "inner": inner}

        return ("figures", head), build

    from ui.store import Owned

    with prefetch.running():
        prefetch.note(Owned(shared, "tab-1"), job, lambda value: 8, 3, 12)
        assert prefetch.schedule(owner="tab-1") == 2
    assert prefetch.wait_idle(10)
    assert seen == ["tab-1", "tab-1"]
    assert prefetch.acting_owner() is None  # not on the builder thread
    assert {key for key in shared._entries} == {("figures", 2), ("figures", 4), ("summary", 2), ("summary", 4)}
    assert shared.owners() == {"tab-1"}
    shared.release({"tab-1"})
    assert len(shared) == 0


def test_the_check_s_job_retries_a_busy_server_and_says_n_a_for_a_capture_that_fails(monkeypatch):
    """A first look's check job makes the whole capture first: a full server leaves it to the next poll (no
    verdict kept); any other failure is kept as the header's n/a, never a check waiting forever."""
    from ui.policy import ServerBusy

    monkeypatch.setattr(prefetch, "OPEN_QUIET_S", 0.0)

    def busy():
        raise ServerBusy("full")

    def broken():
        raise RuntimeError("this model cannot be captured")

    all_layers._REPLAY_POOL.submit(all_layers._replay_job, busy, ("busy key",)).result(timeout=10)
    assert "busy key" not in str(all_layers._REPLAY_FAILED)
    all_layers._REPLAY_POOL.submit(all_layers._replay_job, broken, ("broken key",)).result(timeout=10)
    assert all_layers._REPLAY_FAILED.pop(("broken key",)) == ((), ())
