"""A small shared cache for big read-only results: bounded by bytes, computed once, never copied.

Streamlit's ``st.cache_data`` pickles its value on every hit (376 MB for one trace at 512 MiniLM
tokens) and ``st.cache_resource`` bounds entries, not bytes. ``Store`` keeps objects by reference
(zero-copy: callers treat them as read-only), evicts the least recently used once the total passes
its byte budget (the newest entry of each kind always stays, however large), and computes each key once even when
many sessions ask for it at the same moment (a per-key lock: the others wait and share the result).

Room is made before a value is computed, not only after: when the store is over its budget, entries of the
kind about to be computed (and any older entries) go first, so an old trace is freed before its replacement
is built instead of both being held at the peak (SmolLM2 at 1,024 tokens: one trace is about 160 MB). The
newest entry of every *other* kind still stays.

Pure Python: no streamlit, no torch; the caller says how many bytes a value holds.

Evicted values are often reference cycles: every plotly object points back to its parent, so a figure's
arrays are freed only by Python's cycle collector, which runs after enough new objects, not enough
bytes. Left to it, a 1,024-token SmolLM2 session kept about 170 MB of dead figures per recompute (RSS
1.9 -> 2.6 GB over six changes). So once evictions pass ``collect_bytes`` (32 MB), the store runs ``gc.collect()``
(outside its lock; about 1 ms once the server has frozen its long-lived objects: ``freeze_long_lived``).
Figures are now kept as the bytes sent (``ui.plotly_spec.Sent``), which are freed at once; traces and the
closures around them can still be cycles.

Entries remember which sessions used them (``owner``: a session id, or None for a caller outside a session).
When sessions end, ``release(ended)`` lets go of every entry no live session used (``ui/sweep.py`` asks the
runtime which ended): thirty visitors who leave no longer keep their texts' traces and figures until other
values push them out. Entries no session owns (built outside one) are left to the byte budget.
"""

from __future__ import annotations

import gc
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

_NO_KIND = object()  # ``Store._evict`` without room made for a kind


def _kind(key: Hashable) -> Hashable:
    """``key[0]`` for a tuple key ("capture", "trace", "figures", ...); every other key is one kind."""
    return key[0] if isinstance(key, tuple) and key else None


class Store:
    """key -> value, least recently used evicted beyond ``budget_bytes`` (see the module docstring)."""

    def __init__(self, budget_bytes: int, collect_bytes: int = 32 * 2**20) -> None:
        self.budget_bytes = int(budget_bytes)
        self.collect_bytes = int(collect_bytes)  # evicted bytes after which the cycle collector runs
        self._evicted = 0  # bytes evicted since it last ran
        self._entries: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._total = 0  # bytes of every entry held
        self._newest: dict[Hashable, Hashable] = {}  # kind -> its most recently used key (see _newest_of)
        self._owners: dict[Hashable, set] = {}  # key -> the sessions that used it (absent: nobody's, kept)
        self._lock = threading.Lock()  # guards _entries and _computing
        self._computing: dict[Hashable, threading.Lock] = {}
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable, compute: Callable[[], Any], size: Callable[[Any], int], owner: Hashable = None) -> Any:
        """The value for ``key``: cached, or ``compute()`` once (its bytes by ``size(value)``); ``owner``
        (a session id) is remembered as one of its users (see ``release``)."""
        while True:
            with self._lock:
                entry = self._entries.get(key)
                if entry is not None:
                    self._entries.move_to_end(key)
                    self._newest[_kind(key)] = key
                    self._own(key, owner)
                    self.hits += 1
                    return entry[0]
                running = self._computing.get(key)
                if running is None:
                    running = self._computing[key] = threading.Lock()
                    running.acquire()
                    self._evict(room_for=_kind(key))  # before computing: see the module docstring
                    collect = self._collect_due()
                    break
            with running:  # another thread computes this key: wait, then look again (if it failed, compute here)
                pass
        try:
            if collect:
                gc.collect()  # what was just evicted is freed before the new value is built
            value = compute()
            nbytes = int(size(value))
            with self._lock:
                self.misses += 1
                self._entries[key] = (value, nbytes)
                self._entries.move_to_end(key)
                self._total += nbytes
                self._newest[_kind(key)] = key
                self._own(key, owner)
                self._evict()
                collect = self._collect_due()
            if collect:
                gc.collect()  # free evicted figures now (plotly objects are cycles: see the module docstring)
            return value
        finally:
            with self._lock:
                self._computing.pop(key, None)
            running.release()

    def peek(self, key: Hashable, owner: Hashable = None) -> Any:
        """The value for ``key`` if it is cached, else None (never computes; not a use for the LRU order, but
        ``owner``, when given, is remembered as a user)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._own(key, owner)
        return None if entry is None else entry[0]

    def discard(self, key: Hashable) -> bool:
        """Drop ``key``'s entry if it is held (a value another one has replaced); True when it was."""
        with self._lock:
            if key not in self._entries:
                return False
            self._owners.pop(key, None)
            self._pop(key)
            return True

    def _own(self, key: Hashable, owner: Hashable) -> None:  # callers hold the lock
        if owner is not None:
            self._owners.setdefault(key, set()).add(owner)

    def owners(self) -> set:
        """Every session that used an entry still held."""
        with self._lock:
            return set().union(*self._owners.values())

    def release(self, ended: set) -> int:
        """Forget the ``ended`` sessions; drop every entry that only they used (and run the cycle collector
        when that freed anything). Returns the bytes dropped."""
        freed = 0
        with self._lock:
            for key in list(self._owners):
                users = self._owners[key]
                users -= ended
                if users:
                    continue
                del self._owners[key]
                if key in self._entries:
                    freed += self._pop(key)
        if freed:
            gc.collect()
        return freed

    def _evict(self, room_for: Hashable = _NO_KIND) -> None:
        """Least recently used first while over the budget, but the newest entry of each kind (``key[0]`` for
        tuple keys: a capture, a trace, figures) stays: a long capture is never evicted by the trace built from
        it. ``room_for`` (before a value of that kind is computed): also count the size of that kind's newest
        entry (what the new value will likely need), and let that entry go too. Callers hold the lock.
        Under the budget (most calls) it looks at no entry: the total and each kind's newest are kept as they
        change (thousands of entries with 30 sessions, and this runs twice for every value computed)."""
        room_key = self._newest_of(room_for) if room_for is not _NO_KIND else None
        expected = 0 if room_key is None else self._entries[room_key][1]  # the same kind is about the same size
        if self._total + expected <= self.budget_bytes:
            return
        keep = {self._newest_of(kind) for kind in list(self._newest) if kind != room_for}
        for key in [k for k in self._entries if k not in keep]:
            if self._total + expected <= self.budget_bytes:
                break
            self._owners.pop(key, None)
            self._evicted += self._pop(key)

    def _pop(self, key: Hashable) -> int:
        """Drop ``key``'s entry (callers hold the lock); its bytes."""
        nbytes = self._entries.pop(key)[1]
        self._total -= nbytes
        return nbytes

    def _newest_of(self, kind: Hashable) -> Hashable | None:
        """The most recently used key of ``kind`` still held (callers hold the lock); None when none is."""
        key = self._newest.get(kind)
        if key is not None and key in self._entries:
            return key
        key = next((k for k in reversed(self._entries) if _kind(k) == kind), None)  # it was dropped: look again
        if key is None:
            self._newest.pop(kind, None)
        else:
            self._newest[kind] = key
        return key

    def _collect_due(self) -> bool:
        """True (and the count restarted) once ``collect_bytes`` were evicted since the last collection."""
        if self._evicted < self.collect_bytes:
            return False
        self._evicted = 0
        return True

    @property
    def over_budget(self) -> bool:
        """True when the newest entries of each kind alone hold more than the budget: a new value of a kind
        would then evict the one before it (so building one ahead of need is wasted)."""
        with self._lock:
            return self._total > self.budget_bytes

    @property
    def nbytes(self) -> int:
        with self._lock:
            return self._total

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._owners.clear()
            self._newest.clear()
            self._total = 0


_frozen = threading.Lock()  # guards FROZEN
FROZEN: list[int] = []  # objects moved out of the cycle collector's sight, once per server (tests read it)


def freeze_long_lived() -> None:
    """Once per server, after its first model is loaded: ``gc.collect()`` then ``gc.freeze()``. What exists
    then (Streamlit, torch, transformers' modules and classes, the model: about 420,000 objects) lives as long
    as the server, and a full collection walked all of it every time: 260 ms, which the store's collection
    after big evictions (above) paid on a click. Frozen, a collection walks only what came later (about
    1 ms after a rerun). Later model loads do not freeze again: by then figures of other sessions may be
    alive, and frozen cycles would never be collected."""
    with _frozen:
        if FROZEN:
            return
        gc.collect()
        gc.freeze()
        FROZEN.append(gc.get_freeze_count())


class Owned:
    """The store as one session sees it: ``get`` and ``peek`` name that session as a user (see ``release``);
    everything else is the store's own. Handed to the prefetch worker, it keeps naming the session that
    queued the job."""

    def __init__(self, store: Store, owner: Hashable) -> None:
        self.store, self.owner = store, owner

    def get(self, key: Hashable, compute: Callable[[], Any], size: Callable[[Any], int]) -> Any:
        return self.store.get(key, compute, size, owner=self.owner)

    def peek(self, key: Hashable) -> Any:
        return self.store.peek(key, owner=self.owner)

    def __len__(self) -> int:  # dunders are looked up on the class, not through __getattr__
        return len(self.store)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)
