"""Server policy: how much heavy work the whole server runs at once, for every session together.

- ``heavy()``: at most ATTENTION_LENS_MAX_HEAVY (default 2) model loads, forwards or trace builds run
  at once in the whole server; others queue. A thread that already holds a slot never waits for a
  second one (no self-deadlock, even with a limit of 1), and a queue longer than
  ATTENTION_LENS_HEAVY_WAIT_S (default 120 s) ends in ``ServerBusy`` with a message, not a hang.
- ``training_slot()``: at most MAX_CONCURRENT_TRAININGS (2) training-lab runs or recurrence timings at
  once; another waits up to 30 s, then gets ``TrainingBusyError``. The training lab hands the slot to the
  core's training generator (``guard=``), which holds it while it runs and lets go when it ends or is
  closed (Stop). How many torch threads each training uses is the core's business
  (``attention_core.device.limited_threads``): this module never touches torch.

Plain threading and the environment; no streamlit, so tests use it without a page.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
from collections.abc import Iterator


def env_number(name: str, default: float, low: float) -> float:
    """A number from the environment, at least ``low``; ``default`` when unset, unreadable or not finite."""
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return max(low, value) if math.isfinite(value) else default


MAX_HEAVY = int(env_number("ATTENTION_LENS_MAX_HEAVY", 2, 1))
HEAVY_WAIT_S = env_number("ATTENTION_LENS_HEAVY_WAIT_S", 120.0, 1.0)
HEAVY_RUNS = threading.BoundedSemaphore(MAX_HEAVY)
_held = threading.local()

MAX_CONCURRENT_TRAININGS = 2
TRAINING_RUNS = threading.BoundedSemaphore(MAX_CONCURRENT_TRAININGS)


class ServerBusy(RuntimeError):
    """Every heavy slot stayed taken for HEAVY_WAIT_S seconds."""


class TrainingBusyError(RuntimeError):
    """Raised when every training slot stayed taken for the whole wait."""


@contextlib.contextmanager
def heavy() -> Iterator[None]:
    """Hold one of the server's MAX_HEAVY slots for a model load, a forward or a trace build.

    Re-entrant per thread: a thread that holds a slot goes straight through (so nested heavy calls
    never wait for themselves). Waits at most HEAVY_WAIT_S, then raises ServerBusy.
    """
    depth = getattr(_held, "depth", 0)
    if depth:
        _held.depth = depth + 1
        try:
            yield
        finally:
            _held.depth = depth
        return
    if not HEAVY_RUNS.acquire(timeout=HEAVY_WAIT_S):
        raise ServerBusy(
            f"The server is busy with other people's runs (waited {HEAVY_WAIT_S:.0f} s). Try again in a moment."
        )
    _held.depth = 1
    try:
        yield
    finally:
        _held.depth = 0
        HEAVY_RUNS.release()


@contextlib.contextmanager
def training_slot(timeout_s: float = 30.0) -> Iterator[None]:
    """Hold one of the server's training slots; raise TrainingBusyError after ``timeout_s``."""
    if not TRAINING_RUNS.acquire(timeout=timeout_s):
        raise TrainingBusyError(f"{MAX_CONCURRENT_TRAININGS} trainings are already running; try again shortly")
    try:
        yield
    finally:
        TRAINING_RUNS.release()
