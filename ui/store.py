"""A small shared cache for big read-only results: bounded by bytes, computed once, never copied.

Streamlit's ``st.cache_data`` pickles its value on every hit (376 MB for one trace at 512 MiniLM
tokens) and ``st.cache_resource`` bounds entries, not bytes. ``Store`` keeps objects by reference
(zero-copy: callers treat them as read-only), evicts the least recently used once the total passes
its byte budget (the newest entry always stays, however large), and computes each key once even when
many sessions ask for it at the same moment (a per-key lock: the others wait and share the result).

Pure Python: no streamlit, no torch; the caller says how many bytes a value holds.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any


class Store:
    """key -> value, least recently used evicted beyond ``budget_bytes`` (see the module docstring)."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = int(budget_bytes)
        self._entries: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()  # guards _entries and _computing
        self._computing: dict[Hashable, threading.Lock] = {}
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable, compute: Callable[[], Any], size: Callable[[Any], int]) -> Any:
        """The value for ``key``: cached, or ``compute()`` once (its bytes by ``size(value)``)."""
        while True:
            with self._lock:
                if key in self._entries:
                    self._entries.move_to_end(key)
                    self.hits += 1
                    return self._entries[key][0]
                running = self._computing.get(key)
                if running is None:
                    running = self._computing[key] = threading.Lock()
                    running.acquire()
                    break
            with running:  # another thread computes this key: wait, then look again (if it failed, compute here)
                pass
        try:
            value = compute()
            nbytes = int(size(value))
            with self._lock:
                self.misses += 1
                self._entries[key] = (value, nbytes)
                self._entries.move_to_end(key)
                self._evict()
            return value
        finally:
            with self._lock:
                self._computing.pop(key, None)
            running.release()

    def _evict(self) -> None:
        total = sum(n for _, n in self._entries.values())
        while total > self.budget_bytes and len(self._entries) > 1:
            _, (_, nbytes) = self._entries.popitem(last=False)
            total -= nbytes

    @property
    def nbytes(self) -> int:
        with self._lock:
            return sum(n for _, n in self._entries.values())

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
