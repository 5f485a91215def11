"""The neighbouring heads' figures, built in the background while the server is idle.

A head change reruns only the view (a fragment) and recomputes no numbers, but the figures of a head
not seen before still have to be built: plotly's Python objects cost tens of milliseconds each, a
few hundred for a view, on the click's path. After a view is drawn, ``schedule`` queues the same
figure calls for the heads next to the one shown (h+1, h-1, h+2, h-2), then the main figure of the views one
switch away (``note_ahead``: Query inspector, Core vs model, for the head shown; Heads & layers, which costs
more, only after a longer pause, ``PAUSE_S``); one daemon thread builds them into the shared ``Store`` (the same
keys, so a later click is a cache hit) and pauses whenever any script run of the server is in progress
(``running``) or ended less than ``QUIET_S`` ago (its messages are still on their way), so it only uses time
nobody is waiting on. What a session queues on its first run (a page just opened, which the browser is still
drawing for a second or more) waits ``OPEN_QUIET_S``; so does the all-layers check (``wait_quiet``).

Two rules keep it from costing memory for nothing: a session's new schedule replaces the jobs it queued
before (they were for a page that has moved on, and each held on to that page's trace), and nothing is
built ahead while the store is over its budget (then a prefetched figure set would only evict the one on
screen: SmolLM2 at 1,024 tokens, where one capture alone is larger than the default budget).

Nothing here changes a number: the prefetched figures are exactly what the click would have built.
Pure Python (no streamlit): the store and the builders are handed in by ``ui.compute``.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Any

DEFAULT_NEIGHBOURS = 2  # heads (and queries of the Query inspector) on each side; 0 turns it off
NEIGHBOURS = int(os.environ.get("ATTENTION_LENS_PREFETCH_HEADS", str(DEFAULT_NEIGHBOURS)))
QUEUE_MAX = 64  # jobs waiting; older ones are dropped first (the page has moved on)
IDLE_POLL_S = 0.05
# After a script run ends, the browser is still taking in and drawing what it sent (a head change's frames,
# all written by the server 0.1 s after the click, were read by Chromium over the next 0.3-0.5 s at 64 tokens).
# Where the server and a browser share the machine (a laptop, the benchmarks), a builder that started at once
# took the cores that drawing needed. It now waits until no run has ended for this long.
QUIET_S = float(os.environ.get("ATTENTION_LENS_PREFETCH_QUIET_S", "0.4"))
# A view built ahead that costs a few hundred milliseconds (Heads & layers: a grid of every head) waits for a
# longer pause: it is one view switch away, the neighbouring heads one key press. Started 0.4 s after a run,
# it was still running when the next head change came (GIL and cores shared): in an alternating A/B the head
# change at 64 tokens was 0.27-0.34 s with it and 0.22-0.26 s without (benchmarks/REPORT.md, ninth session).
PAUSE_S = float(os.environ.get("ATTENTION_LENS_PREFETCH_PAUSE_S", "1.5"))
# A page just opened is still being drawn well after its run ended: at 512 tokens the softmax weights (1 MB) reached
# the browser 0.25-0.45 s after the server sent them and were drawn 0.5-0.8 s after that, on the same two cores
# where the neighbouring heads' figures (0.35-0.7 s of CPU) and the all-layers check (0.5-1.1 s, ui/compute.py)
# started as soon as the run ended. The jobs a session queues on its first run (its page's first view), and that
# check, wait for this longer pause instead.
OPEN_QUIET_S = float(os.environ.get("ATTENTION_LENS_PREFETCH_OPEN_QUIET_S", str(PAUSE_S)))

# job(head) -> (key, build): the store key and the builder of one figure call at that head
Job = Callable[[int], tuple[Hashable, Callable[[], Any]]]

_lock = threading.Lock()
_last_end = 0.0  # time.monotonic() when the last of them ended
_queue: deque = deque(maxlen=QUEUE_MAX)
_worker: threading.Thread | None = None
_noted = threading.local()  # the figure calls of the script run on this thread
_acting = threading.local()  # the session whose job the builder thread is running (``acting_owner``)
_scheduled_by: set = set()  # sessions that have queued jobs before (the others' first run is a page just opened)
_active_by: dict = {}  # session -> its script runs in progress, none listed at 0 (``running(owner)``; None: not told)
_last_end_by: dict = {}  # session -> when its last run ended (the last minute's)
built = 0  # figure calls built in the background (tests and the benchmark read it)


@contextlib.contextmanager
def running(owner: Hashable = None):
    """Mark a script run in progress (of ``owner``, the session, when given): the background builder waits until
    none is."""
    global _last_end
    with _lock:
        _active_by[owner] = _active_by.get(owner, 0) + 1
    try:
        yield
    finally:
        with _lock:
            _last_end = time.monotonic()
            _active_by[owner] -= 1
            if not _active_by[owner]:
                del _active_by[owner]
            _last_end_by[owner] = _last_end
            for old in [o for o, t in _last_end_by.items() if _last_end - t > 60.0]:
                del _last_end_by[old]  # (sessions long gone)


def alone(owner: Hashable, at_least: float) -> bool:
    """Whether no other session (than ``owner``) has a run in progress or ended one less than ``at_least`` seconds
    ago: this visitor has the server to itself for now."""
    with _lock:
        now = time.monotonic()
        if any(count for other, count in _active_by.items() if other != owner):
            return False
        return all(now - ended >= at_least for other, ended in _last_end_by.items() if other != owner)


def note(store, job: Job, size: Callable[[Any], int], head: int, num_heads: int) -> None:
    """Remember one figure call of this run (the store it used, how to make it at another head)."""
    if NEIGHBOURS <= 0:
        return
    calls = getattr(_noted, "calls", None)
    if calls is None:
        calls = _noted.calls = []
    calls.append((store, job, size, head, num_heads))


def note_ahead(
    store, key: Hashable, build: Callable[[], Any], size: Callable[[Any], int], *, quiet: float | None = None
) -> None:
    """Remember a figure call of a view that is not shown (built after the neighbouring heads' calls), once no
    run has ended for ``quiet`` seconds (default ``QUIET_S``; ``PAUSE_S`` for a costly view)."""
    if NEIGHBOURS <= 0:
        return
    ahead = getattr(_noted, "ahead", None)
    if ahead is None:
        ahead = _noted.ahead = []
    ahead.append((store, key, build, size, QUIET_S if quiet is None else quiet))


def neighbours(head: int, num_heads: int, count: int | None = None) -> list[int]:
    """h+1, h-1, h+2, h-2, ... within 0..num_heads-1, at most ``count`` (default NEIGHBOURS) on each side."""
    count = NEIGHBOURS if count is None else count
    order = []
    for step in range(1, count + 1):
        order += [h for h in (head + step, head - step) if 0 <= h < num_heads]
    return order


def forget() -> None:
    """Drop this run's noted figure calls without queuing them (a view drawn ahead, hidden: its neighbouring
    heads are not what the person looks at, and the queue of the view shown stays as it is)."""
    _noted.calls, _noted.ahead = [], []


def schedule(owner: Hashable = None) -> int:
    """Queue this run's figure calls at the neighbouring heads; start the builder. Returns jobs queued.

    ``owner`` (the session): the jobs it queued before are dropped first, built or not."""
    calls = getattr(_noted, "calls", None) or []
    ahead = getattr(_noted, "ahead", None) or []
    _noted.calls, _noted.ahead = [], []
    if NEIGHBOURS <= 0:
        return 0
    with _lock:
        opened = owner is not None and owner not in _scheduled_by  # this session's first run: its page is opening
    least = OPEN_QUIET_S if opened else 0.0
    jobs = []
    for store, job, size, head, num_heads in calls:
        for other in neighbours(head, num_heads):
            key, build = job(other)
            if store.peek(key) is None:
                jobs.append((owner, store, key, build, size, max(QUIET_S, least)))
    ahead = sorted(ahead, key=lambda call: call[4])  # stable: the cheap views first, the costly ones last
    jobs += [(owner, *call[:4], max(call[4], least)) for call in ahead if call[0].peek(call[1]) is None]
    global _worker
    with _lock:
        if owner is not None:
            _scheduled_by.add(owner)
            _drop_locked({owner})
        _queue.extend(jobs)
        if jobs and (_worker is None or not _worker.is_alive()):
            _worker = threading.Thread(target=_work, name="attention-lens-prefetch", daemon=True)
            _worker.start()
    return len(jobs)


def drop(owners: set) -> int:
    """Forget the queued jobs of these sessions (they ended: ui/sweep.py); returns how many were dropped."""
    with _lock:
        _scheduled_by.difference_update(owners)
        return _drop_locked(owners)


def _drop_locked(owners: set) -> int:  # the caller holds ``_lock``
    kept = [queued for queued in _queue if queued[0] not in owners]
    dropped = len(_queue) - len(kept)
    _queue.clear()
    _queue.extend(kept)
    return dropped


def quiet(at_least: float | None = None) -> bool:
    """Whether no script run of this server is in progress nor ended less than ``at_least`` seconds ago (default
    ``QUIET_S``): nobody is waiting on the server now."""
    with _lock:
        quiet_for = _quiet_for_locked()
    return quiet_for is not None and quiet_for >= (QUIET_S if at_least is None else at_least)


def _quiet_for_locked() -> float | None:
    """Seconds since the last script run ended; None while one is in progress. The caller holds ``_lock``."""
    return None if _active_by else time.monotonic() - _last_end


def _take_ready():
    """Remove and return the first queued job whose quiet time has passed with no run in progress (a costly view
    waiting for a longer pause does not hold up the cheap jobs queued after it); None while none may start.
    The caller holds ``_lock``."""
    quiet_for = _quiet_for_locked()
    if quiet_for is None:
        return None
    for index, job in enumerate(_queue):
        if quiet_for >= job[5]:
            del _queue[index]
            return job
    return None


def _work() -> None:
    global built
    while True:
        with _lock:
            if not _queue:
                return
            job = _take_ready()
        if job is None:
            time.sleep(IDLE_POLL_S)
            continue
        owner, store, key, build, size, _ = job
        if store.peek(key) is not None or store.over_budget:
            continue
        _acting.owner = owner
        try:
            store.get(key, build, size)
            built += 1
        except Exception:  # noqa: BLE001 - a prefetch that fails costs nothing: the click builds it and says why
            continue
        finally:
            _acting.owner = None


def wait_quiet(quiet: float | None = None, longest: float = 10.0) -> bool:
    """Block until no script run is in progress and none has ended for ``quiet`` seconds (default
    ``OPEN_QUIET_S``), or ``longest`` seconds have passed (a server that is never quiet still gets the work done).
    True if it went quiet. For background work nobody waits on (the all-layers check, ui/compute.py), on a thread
    of its own."""
    quiet = OPEN_QUIET_S if quiet is None else quiet
    deadline = time.monotonic() + longest
    while time.monotonic() < deadline:
        with _lock:
            quiet_for = _quiet_for_locked()
            if quiet_for is not None and quiet_for >= quiet:
                return True
        time.sleep(IDLE_POLL_S)
    return False


def acting_owner() -> Hashable:
    """On the builder thread, the session that queued the job being built (None elsewhere, or between jobs):
    what the job stores on the way (a summary a figure needs) is that session's too, so the sweeper
    (ui/sweep.py) lets it go when the session ends instead of leaving it to the store's byte budget."""
    return getattr(_acting, "owner", None)


def wait_idle(timeout: float = 30.0) -> bool:
    """Block until the queue is empty and the builder stopped (tests, the benchmark). True if it did."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with _lock:
            done = not _queue and (_worker is None or not _worker.is_alive())
        if done:
            return True
        time.sleep(IDLE_POLL_S)
    return False
