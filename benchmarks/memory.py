"""Peak memory of one CPU attention call, as the Linux kernel counts it, measured in a child process.

torch's CPU allocations are invisible to tracemalloc, and torch keeps no CPU allocator statistics,
so this asks the kernel. The child process first tells glibc malloc (``mallopt``) to serve every
block over 64 KiB with its own ``mmap`` and to unmap it at ``free``; from then on the resident set
(RSS) rises and falls with the live tensors instead of keeping freed memory around. For each call:
warm up once, free, reset the peak-RSS mark (write ``5`` to ``/proc/self/clear_refs``), read
``VmRSS``, call once, read ``VmHWM`` (the peak since the reset) and ``VmRSS`` again.

- peak  = VmHWM after - VmRSS before: everything the call had alive at its worst moment (page-granular)
- held  = VmRSS after - VmRSS before, while the result is still referenced: what the caller keeps
- tensor bytes = the sizes of the distinct tensor storages inside the result (an exact cross-check of held)

It runs in a child so that the ``mallopt`` setting (which slows allocation) never touches the timings.
``python -m benchmarks.memory --sizes 64,512 [--heads 12 --dim 64]`` prints one JSON object.
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
METHOD = (
    "peak = Linux VmHWM minus VmRSS before the call, after resetting the peak mark through "
    "/proc/self/clear_refs, in a child process whose glibc malloc maps every block over 64 KiB "
    "separately (mallopt M_MMAP_THRESHOLD) and returns it at free, so the resident set follows live tensors; "
    "held = resident growth while the result is still referenced"
)


def supported() -> str | None:
    """None when this machine can measure, else why not."""
    if not sys.platform.startswith("linux"):
        return f"needs Linux /proc (this is {sys.platform})"
    if not Path("/proc/self/clear_refs").exists():
        return "/proc/self/clear_refs is missing"
    return None


def _status() -> dict[str, int]:
    text = Path("/proc/self/status").read_text()
    return {key: int(re.search(rf"{key}:\s+(\d+)", text).group(1)) * 1024 for key in ("VmRSS", "VmHWM")}


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")


def tensor_bytes(obj) -> int:
    """Bytes of the distinct tensor storages reachable from ``obj`` (tensors, tuples, lists, dataclasses)."""
    import torch

    seen: dict[int, int] = {}

    def visit(item) -> None:
        if isinstance(item, torch.Tensor):
            storage = item.untyped_storage()
            seen[storage.data_ptr()] = storage.nbytes()
        elif isinstance(item, tuple | list):
            for value in item:
                visit(value)
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            for f in dataclasses.fields(item):
                visit(getattr(item, f.name))

    visit(obj)
    return sum(seen.values())


def measure(sizes: list[int], heads: int, dim: int) -> dict:
    """In this process (call it only in a child): {n: {method: {peak, held, tensor_bytes}}}."""
    libc = ctypes.CDLL("libc.so.6")
    libc.mallopt(_M_MMAP_THRESHOLD, 64 * 1024)
    libc.mallopt(_M_TRIM_THRESHOLD, 128 * 1024)
    import torch

    from benchmarks.core_sdpa import methods

    torch.manual_seed(0)
    found: dict[str, dict] = {}
    for n in sizes:
        q, k, v = (torch.randn(1, heads, n, dim) for _ in range(3))
        found[str(n)] = {}
        for name, fn in methods(dim).items():
            result = fn(q, k, v)  # warm-up: one-time allocations (thread pools, kernels) are not the call's
            del result
            _reset_peak()
            before = _status()
            result = fn(q, k, v)
            after = _status()
            found[str(n)][name] = {
                "peak": after["VmHWM"] - before["VmRSS"],
                "held": after["VmRSS"] - before["VmRSS"],
                "tensor_bytes": tensor_bytes(result),
            }
            del result
    return found


def probe(sizes, heads: int = 12, dim: int = 64, timeout: float = 600.0) -> dict | str:
    """Run ``measure`` in a child process; the JSON it printed, or a message saying why there is none."""
    reason = supported()
    if reason:
        return reason
    cmd = [sys.executable, "-m", "benchmarks.memory", "--sizes", ",".join(str(n) for n in sizes)]
    cmd += ["--heads", str(heads), "--dim", str(dim)]
    try:
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"the memory probe took longer than {timeout:.0f} s"
    if done.returncode != 0:
        return f"the memory probe failed ({done.returncode}): {done.stderr.strip()[-500:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.memory", description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="64,512")
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--dim", type=int, default=64)
    args = parser.parse_args(argv)
    reason = supported()
    if reason:
        print(reason, file=sys.stderr)
        return 2
    print(json.dumps(measure([int(s) for s in args.sizes.split(",")], args.heads, args.dim)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
