"""Can the Hugging Face hub be reached? Asked once a minute, so an offline machine fails fast.

Without this, a hub id on a machine with no network waits through the hub client's retries (~25 s)
before it falls back to the cache. When the hub cannot be reached, loading uses
``local_files_only=True``: cached models still load, others fail at once with a clear message.
"""

from __future__ import annotations

import os
import socket
import time
from urllib.parse import urlparse

_TTL_S = 60.0
_last: tuple[float, bool] | None = None


def hub_offline_forced() -> bool:
    """True when the user switched the hub off (HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE)."""
    return any(
        os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
        for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def hub_reachable(timeout_s: float = 2.0) -> bool:
    """False when offline is forced or a TCP connection to the hub fails; True behind a proxy (not probed)."""
    global _last
    if hub_offline_forced():
        return False
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return True  # the proxy decides; let the hub client try
    now = time.monotonic()
    if _last is not None and now - _last[0] < _TTL_S:
        return _last[1]
    endpoint = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        with socket.create_connection((endpoint.hostname or "huggingface.co", port), timeout=timeout_s):
            reachable = True
    except OSError:
        reachable = False
    _last = (now, reachable)
    return reachable
