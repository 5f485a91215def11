"""The all-layers check of the header (every layer replayed through the own core, ``pipeline.replay_summary``) for
an input too long to check in the script: run in the background, once per capture, after the page's first chart.

When the view was drawn from a first look (``compute.first_look``: the model run up to the chosen layer only), the
check's job also captures the other layers first, so the whole pass never sits between a link and its first chart.
Streamlit glue and a thread; the computation is ``attention_core.pipeline``'s.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from attention_core import pipeline
from attention_core.pretrained.capture import Capture
from attention_core.request import TraceRequest

from . import compute, prefetch
from .policy import ServerBusy, heavy

_REPLAY_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="attention-lens-replay")
_REPLAY_RUNNING: set[tuple] = set()
_REPLAY_LOCK = threading.Lock()
_REPLAY_FAILED: dict[tuple, tuple] = {}  # inputs whose whole capture failed in the check's job: the check says n/a


def replay_if_ready(request: TraceRequest):
    """The all-layers replay check if it is done, else None after starting it in the background (once per
    capture): opening a long text draws its view first, and a click is never queued behind the check. The check
    starts once the server has been quiet for ``prefetch.OPEN_QUIET_S`` (the browser is drawing the page meanwhile)."""
    key = compute.input_key(request)
    cap = compute.first_look(*key, request.layer)  # the whole capture when it is held (or the input is short)
    if "replay_summary" in cap.memo:
        return cap.memo["replay_summary"]
    if key in _REPLAY_FAILED:
        return _REPLAY_FAILED[key]
    if cap.complete and compute.replays_in_script(*cap.weights_by_layer.shape[:3]):  # quick (about 0.1 s): not deferred
        with heavy():
            return pipeline.replay_summary(cap)
    # a first look: the other layers are captured by the check's job, after the page's first chart
    if cap.complete:
        whole = cap
    else:
        # the job's thread has no script run: it is handed the model and this session's view of the store
        loaded = compute.load_model(key[0])
        whole = partial(compute.whole_capture, compute.store(), lambda _name: loaded, *key)
    with _REPLAY_LOCK:
        if key not in _REPLAY_RUNNING:
            _REPLAY_RUNNING.add(key)
            _REPLAY_POOL.submit(_replay_job, whole, key, time.monotonic())
    return None


REPLAY_WAIT_S = 10.0  # the longest a check waits for a quiet server, counted from when it was asked for


def _replay_job(cap, key, asked: float | None = None) -> None:
    """``cap``: the whole capture, or what makes it (a first look was drawn: the other layers are captured here)."""
    try:
        # after the page's first chart is drawn (it shares the cores with the browser); on a server that is never
        # quiet, checks queued one behind the other (one worker) each wait out what is left of their own time
        waited = 0.0 if asked is None else time.monotonic() - asked
        prefetch.wait_quiet(longest=max(0.0, REPLAY_WAIT_S - waited))
        if callable(cap):
            cap = cap()
        with heavy():
            pipeline.replay_summary(cap)
    except ServerBusy:
        pass  # the server was full: the next poll asks again
    except Exception:  # a model the core cannot replay: the header says n/a instead of waiting forever
        if isinstance(cap, Capture):
            cap.memo.setdefault("replay_summary", ((), ()))
        else:
            _REPLAY_FAILED[key] = ((), ())
    finally:
        with _REPLAY_LOCK:
            _REPLAY_RUNNING.discard(key)
