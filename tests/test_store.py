"""ui/store.Store: bounded by bytes, least recently used out first, each key computed once."""

from __future__ import annotations

import threading
import time

import pytest

from ui.store import Store


def test_evicts_least_recently_used_beyond_the_budget():
    store = Store(budget_bytes=100)
    store.get("a", lambda: "A", lambda v: 40)
    store.get("b", lambda: "B", lambda v: 40)
    store.get("a", lambda: pytest.fail("a is cached"), lambda v: 40)  # a is now the most recent
    store.get("c", lambda: "C", lambda v: 40)  # 120 > 100: b (least recent) goes
    assert len(store) == 2 and store.nbytes == 80
    assert store.get("b", lambda: "B again", lambda v: 40) == "B again"
    assert store.hits == 1 and store.misses == 4


def test_the_newest_entry_stays_even_when_over_budget():
    store = Store(budget_bytes=10)
    store.get("small", lambda: 1, lambda v: 5)
    assert store.get("huge", lambda: 2, lambda v: 1000) == 2
    assert len(store) == 1 and store.get("huge", lambda: pytest.fail("cached"), lambda v: 0) == 2


def test_one_computation_for_many_callers_at_once():
    store, calls, results = Store(budget_bytes=10**6), [], []

    def slow():
        calls.append(1)
        time.sleep(0.2)
        return object()

    threads = [threading.Thread(target=lambda: results.append(store.get("k", slow, lambda v: 1))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(calls) == 1
    assert len(results) == 8 and all(r is results[0] for r in results)  # the same object: never copied


def test_a_failed_computation_is_not_cached_and_waiting_callers_retry():
    store, attempts = Store(budget_bytes=100), []
    started = threading.Event()

    def failing():
        attempts.append("fail")
        started.set()
        time.sleep(0.1)
        raise RuntimeError("boom")

    def second():
        started.wait(5)
        return store.get("k", lambda: attempts.append("ok") or "value", lambda v: 1)

    out = []
    waiter = threading.Thread(target=lambda: out.append(second()))
    waiter.start()
    with pytest.raises(RuntimeError, match="boom"):
        store.get("k", failing, lambda v: 1)
    waiter.join(5)
    assert out == ["value"] and attempts == ["fail", "ok"]


def test_the_newest_entry_of_each_kind_stays():
    store = Store(budget_bytes=100)
    store.get(("capture", "long text"), lambda: "C", lambda v: 90)
    store.get(("trace", 1), lambda: "T1", lambda v: 30)  # 120 > 100, but each is the newest of its kind
    assert len(store) == 2
    store.get(("trace", 2), lambda: "T2", lambda v: 30)  # the older trace goes, the capture stays
    assert store.get(("capture", "long text"), lambda: pytest.fail("evicted"), lambda v: 0) == "C"
    assert store.get(("trace", 2), lambda: pytest.fail("evicted"), lambda v: 0) == "T2"
    assert store.get(("trace", 1), lambda: "T1 again", lambda v: 30) == "T1 again"


class _Cyclic:
    """A value in a reference cycle, like a plotly figure (each child points back to its parent)."""

    def __init__(self, nbytes: int) -> None:
        import numpy as np

        self.array = np.ones(nbytes // 8)
        self.child = {"parent": self}


@pytest.mark.parametrize("collect_bytes", [1000, 10**9])
def test_evicted_cycles_are_collected_once_enough_bytes_were_evicted(collect_bytes):
    import gc
    import weakref

    store = Store(1000, collect_bytes=collect_bytes)
    gc.collect()
    gc.disable()  # as if the cycle collector's object count had not been reached
    try:
        first = store.get(("trace", 1), lambda: _Cyclic(800), lambda value: 800)
        alive = weakref.ref(first.array)
        del first
        store.get(("trace", 2), lambda: _Cyclic(800), lambda value: 800)  # evicts the first
        assert store.peek(("trace", 1)) is None
        assert (alive() is None) == (collect_bytes <= 800)  # freed by the store's collect, else still held
    finally:
        gc.enable()
        gc.collect()


def test_the_server_freezes_what_it_loaded_once_so_collections_stay_cheap():
    import gc

    from ui import compute, store

    compute.load_model("minilm")  # the bundled default (cached per process)
    assert store.FROZEN and store.FROZEN[0] > 1000 and gc.get_freeze_count() > 1000  # (frees shrink it)
    count = store.FROZEN[:]
    store.freeze_long_lived()  # once per server: a second call changes nothing
    assert store.FROZEN == count


def test_room_is_made_before_a_new_value_of_a_kind_is_computed():
    """Over budget, the old trace is let go before its replacement is built (not both held at the peak)."""
    store = Store(budget_bytes=100)
    store.get(("capture", "text"), lambda: "C", lambda v: 60)
    store.get(("trace", 1), lambda: "T1", lambda v: 30)  # 90: under budget
    seen = []

    def build():
        seen.append((store.peek(("trace", 1)), store.peek(("capture", "text"))))
        return "T2"

    store.get(("trace", 2), build, lambda v: 30)  # 90 + 30 expected > 100: trace 1 goes first
    assert seen == [(None, "C")]  # the capture (another kind's newest) stays
    assert store.get(("trace", 2), lambda: pytest.fail("cached"), lambda v: 0) == "T2"


def test_no_room_is_made_while_the_new_value_fits():
    store = Store(budget_bytes=100)
    store.get(("trace", 1), lambda: "T1", lambda v: 30)
    seen = []
    store.get(("trace", 2), lambda: seen.append(store.peek(("trace", 1))) or "T2", lambda v: 30)
    assert seen == ["T1"] and len(store) == 2


def test_over_budget_when_the_newest_entries_alone_pass_the_budget():
    store = Store(budget_bytes=100)
    store.get(("trace", 1), lambda: "T1", lambda v: 60)
    assert not store.over_budget
    store.get(("capture", "long"), lambda: "C", lambda v: 90)  # each the newest of its kind: both stay
    assert store.over_budget and len(store) == 2


def _filled(store, owners: dict):
    for key, owner in owners.items():
        store.get(key, lambda key=key: key, lambda value: 10, owner=owner)


def test_an_ended_session_s_entries_are_released_and_a_shared_one_stays():
    store = Store(budget_bytes=10_000)
    _filled(store, {("trace", "a"): "A", ("trace", "b"): "B", ("figures", "a"): "A", ("trace", "free"): None})
    store.get(("trace", "b"), lambda: "never", lambda value: 10, owner="A")  # A read B's trace too
    assert store.owners() == {"A", "B"}
    assert store.release({"B"}) == 0  # B's only entry is A's as well
    assert store.release({"A"}) == 30  # A's two, and B's trace that only A still used
    assert set(store._entries) == {("trace", "free")}  # nobody's entry is left to the budget
    assert store.owners() == set() and store.release({"A", "B"}) == 0


def test_a_peek_with_an_owner_counts_as_a_use_and_eviction_forgets_owners():
    store = Store(budget_bytes=25)
    _filled(store, {("trace", "a"): "A"})
    assert store.peek(("trace", "a"), owner="B") == ("trace", "a") and store.owners() == {"A", "B"}
    assert store.release({"A"}) == 0 and len(store) == 1
    _filled(store, {("trace", "b"): "C", ("trace", "c"): "C"})  # 30 bytes of one kind: the oldest goes
    assert ("trace", "a") not in store._entries and store.owners() == {"C"}


def test_the_owned_view_names_its_session_and_passes_everything_else_through():
    from ui.store import Owned

    store = Store(budget_bytes=100)
    mine = Owned(store, "A")
    assert mine.get(("trace", "a"), lambda: 1, lambda value: 10) == 1 and mine.peek(("trace", "a")) == 1
    assert store.owners() == {"A"} and mine.nbytes == 10 and mine.misses == 1
    assert store.release({"A"}) == 10 and len(mine) == 0


def test_the_sweep_releases_only_what_the_runtime_says_ended(monkeypatch):
    from ui import sweep

    trims = []
    monkeypatch.setattr(sweep, "trim_heap", lambda: trims.append(1) or True)
    store = Store(budget_bytes=10_000)
    _filled(store, {("trace", "a"): "A", ("trace", "b"): "B"})
    assert sweep.sweep_once(store, None) == (0, 0)  # outside a server: nothing
    assert sweep.sweep_once(store, lambda owner: True) == (0, 0) and not trims
    assert sweep.sweep_once(store, lambda owner: owner == "A") == (1, 10) and trims == [1]
    assert set(store._entries) == {("trace", "a")}


def test_outside_a_server_there_is_no_runtime_to_ask_and_trimming_is_safe():
    from ui import sweep
    from ui.sizes import trim_heap

    assert sweep.runtime_alive() is None
    assert trim_heap() in (True, False)


def test_the_sweep_drops_the_prefetch_jobs_an_ended_session_queued(monkeypatch):
    from ui import prefetch, sweep

    monkeypatch.setattr(sweep, "trim_heap", lambda: True)
    monkeypatch.setattr(prefetch, "_queue", prefetch.deque([("A", None), ("B", None), ("A", None)]))
    store = Store(budget_bytes=10_000)
    _filled(store, {("trace", "a"): "A", ("trace", "b"): "B"})
    assert sweep.sweep_once(store, lambda owner: owner == "B") == (1, 10)
    assert list(prefetch._queue) == [("B", None)]


def test_the_kept_total_and_each_kinds_newest_follow_every_change():
    """The store keeps its byte total and each kind's most recently used key as entries come and go (so a call under
    the budget looks at no entry); after any mix of hits, misses, evictions, releases and a clear they are what a
    walk over the entries finds, and the newest entry of every kind is never evicted."""
    import random

    from ui.store import Store, _kind

    rng = random.Random(7)
    store = Store(budget_bytes=1000)
    for step in range(600):
        kind = rng.choice(["capture", "trace", "figures"])
        key = (kind, rng.randrange(12))
        size = rng.randrange(1, 400)
        store.get(key, lambda key=key: key, lambda _v, size=size: size, owner=rng.choice(["a", "b", "c"]))
        assert key in store._entries, "the value just computed or read stays"
        if step % 97 == 0:
            store.release({rng.choice(["a", "b", "c"])})
        if step == 450:
            store.clear()
        entries = store._entries
        assert store.nbytes == sum(n for _, n in entries.values())
        for kind_seen in {_kind(k) for k in entries}:
            assert store._newest_of(kind_seen) == [k for k in entries if _kind(k) == kind_seen][-1]


def test_discard_drops_an_entry_and_its_bytes_and_forgets_its_users():
    store = Store(1000)
    store.get(("first-capture", 1), lambda: "a", lambda v: 100, owner="s1")
    store.get(("capture", 1), lambda: "b", lambda v: 300, owner="s1")
    assert store.discard(("first-capture", 1)) is True
    assert store.peek(("first-capture", 1)) is None and store.nbytes == 300 and len(store) == 1
    assert store.discard(("first-capture", 1)) is False  # already gone
    assert store.release({"s1"}) == 300  # only the entry still held was the session's
