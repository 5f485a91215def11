"""Let go of what ended sessions held: every few seconds, ask Streamlit's runtime which of the sessions the
shared store remembers are no longer connected, drop the entries only they used (``Store.release``) and the
prefetch jobs they queued, and hand the freed heap back to the system (``trim_heap``).

Without it, thirty visitors who read thirty texts and left kept the store full (its 512 MB budget) until
other values pushed their entries out: the server's RSS stayed about 300 MB above one warm session's.

A session that disconnects and comes back (a reloaded tab) finds its entries gone and computes them again.
Outside a server (AppTest, scripts) there is no runtime, and nothing is released.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Hashable

from . import prefetch
from .sizes import trim_heap

SWEEP_S = float(os.environ.get("ATTENTION_LENS_SWEEP_S", "2"))  # seconds between looks
log = logging.getLogger("attention_lens.sweep")

_started = threading.Lock()
_thread: list[threading.Thread] = []


def runtime_alive() -> Callable[[Hashable], bool] | None:
    """``is_active_session`` of the running Streamlit server, or None outside one."""
    from streamlit import runtime

    if not runtime.exists():
        return None
    return runtime.get_instance().is_active_session


def sweep_once(store, alive: Callable[[Hashable], bool] | None) -> tuple[int, int]:
    """Release the store's entries of the sessions ``alive`` says ended: (sessions ended, bytes dropped)."""
    if alive is None:
        return 0, 0
    ended = {owner for owner in store.owners() if not alive(owner)}
    if not ended:
        return 0, 0
    prefetch.drop(ended)  # what they queued would only be built to be released at the next look
    freed = store.release(ended)
    trim_heap()
    log.info("released %.1f MB held only by %d ended session(s)", freed / 2**20, len(ended))
    return len(ended), freed


def _loop(store, every: float) -> None:
    while True:
        time.sleep(every)
        try:
            sweep_once(store, runtime_alive())
        except Exception:  # noqa: BLE001 - a failed look frees nothing this time; the next one tries again
            log.exception("sweep failed")


def start(store, every: float | None = None) -> bool:
    """Start the sweeper for ``store`` once per server (a daemon thread). True if this call started it."""
    with _started:
        if _thread or not (every or SWEEP_S) > 0:
            return False
        thread = threading.Thread(
            target=_loop, args=(store, every or SWEEP_S), name="attention-lens-sweep", daemon=True
        )
        thread.start()
        _thread.append(thread)
        if not log.handlers:
            handler = logging.StreamHandler()
            handler.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s"))
            log.addHandler(handler)
            log.setLevel(logging.INFO)
        return True
