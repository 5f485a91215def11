"""Which device the core runs on: CUDA, then Apple MPS, then CPU.

Override with an argument (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``, ``"auto"``) or the
``ATTENTION_LENS_DEVICE`` environment variable. Nothing here moves tensors: callers create tensors
on the device they were given, and the core computes wherever its inputs already are.

Threads: ``configure_threads()`` caps torch at the CPUs the process may use; ``limited_threads(n)``
lowers the count for one run (a training) and puts it back when the last overlapping run leaves.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import torch

ENV_VAR = "ATTENTION_LENS_DEVICE"


def available_devices() -> list[str]:
    """Names a user may pick on this machine, best first after "auto"."""
    names = ["auto"]
    if torch.cuda.is_available():
        names += [f"cuda:{i}" if i else "cuda" for i in range(torch.cuda.device_count())]
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        names.append("mps")
    names.append("cpu")
    return names


def pick_device(preference: str | torch.device | None = None) -> torch.device:
    """Resolve a device name; ``None`` reads the environment variable, then "auto".

    Raises ValueError for a device that does not exist here (never silently falls back).
    """
    if isinstance(preference, torch.device):
        preference = str(preference)
    name = (preference or os.environ.get(ENV_VAR) or "auto").strip().lower()
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        device = torch.device(name)
    except RuntimeError as err:
        raise ValueError(f"unknown device {name!r}; choose one of {available_devices()}") from err
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {name!r} asked for, but CUDA is not available on this machine")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise ValueError(f"device {name!r} asked for, but only {torch.cuda.device_count()} CUDA device(s)")
    if device.type == "mps" and not (
        getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()
    ):
        raise ValueError(f"device {name!r} asked for, but Apple MPS is not available on this machine")
    if device.type not in {"cpu", "cuda", "mps"}:
        raise ValueError(f"unsupported device {name!r}; choose one of {available_devices()}")
    return device


def cpu_quota() -> int | None:
    """CPUs this process may use under a cgroup (container) quota, or None when unlimited."""
    try:
        quota, period = open("/sys/fs/cgroup/cpu.max").read().split()[:2]  # cgroup v2: "max 100000"
        if quota != "max":
            return max(1, int(int(quota) / int(period)))
    except (OSError, ValueError):
        pass
    try:
        quota = int(open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").read())  # cgroup v1
        period = int(open("/sys/fs/cgroup/cpu/cpu.cfs_period_us").read())
        if quota > 0:
            return max(1, quota // period)
    except (OSError, ValueError):
        pass
    return None


def configure_threads() -> int:
    """Make torch use no more threads than the container's CPU quota (and the machine's cores)."""
    limit = min(filter(None, (cpu_quota(), len(os.sched_getaffinity(0)), torch.get_num_threads())))
    if limit != torch.get_num_threads():
        torch.set_num_threads(limit)
    return limit


_THREADS_LOCK = threading.Lock()
_THREADS_STATE = {"active": 0, "baseline": 0}  # runs inside limited_threads; threads before the first


@contextmanager
def limited_threads(num_threads: int) -> Iterator[int]:
    """Use at most ``num_threads`` torch threads (never more than the process had) while inside.

    The count the process had before the first of overlapping runs (two sessions' trainings) is put
    back when the last one leaves, so overlapping sessions cannot leave the process stuck at a lower count.
    """
    with _THREADS_LOCK:
        if _THREADS_STATE["active"] == 0:
            _THREADS_STATE["baseline"] = torch.get_num_threads()
        _THREADS_STATE["active"] += 1
        used = max(1, min(num_threads, _THREADS_STATE["baseline"]))
        torch.set_num_threads(used)
    try:
        yield used
    finally:
        with _THREADS_LOCK:
            _THREADS_STATE["active"] -= 1
            if _THREADS_STATE["active"] == 0:
                torch.set_num_threads(_THREADS_STATE["baseline"])
