"""Benchmark: the from-scratch core against torch's own SDPA (math backend, and the default one).

Prints a table; it asserts nothing. Ratios are taken within one run, interleaved, because the
machine is noisy. ``python -m attention_core bench [--sizes 128,512,2048] [--repeats 5]``.
"""

from __future__ import annotations

import argparse
import platform
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from .device import pick_device
from .sdpa import scaled_dot_product_attention


@dataclass(frozen=True)
class CoreBenchRow:
    n: int
    core_s: float
    math_s: float
    default_s: float

    @property
    def ratio_math(self) -> float:
        return self.core_s / self.math_s


def _timed(fn, device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def bench_core(sizes=(128, 512, 2048), *, heads=12, head_dim=64, repeats=5, device=None, causal=False):
    """Median seconds per call of core / torch math / torch default at each n (B=1)."""
    device = pick_device(device)
    rows = []
    for n in sizes:
        generator = torch.Generator().manual_seed(n)
        q, k, v = (torch.randn(1, heads, n, head_dim, generator=generator).to(device) for _ in range(3))

        def core(q=q, k=k, v=v):
            return scaled_dot_product_attention(q, k, v, is_causal=causal)

        def math_backend(q=q, k=k, v=v):
            with sdpa_kernel(SDPBackend.MATH):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        def default(q=q, k=k, v=v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        for fn in (core, math_backend, default):  # warm-up
            fn()
        samples = {"core": [], "math": [], "default": []}
        for _ in range(repeats):  # interleaved so drift hits all three alike
            samples["core"].append(_timed(core, device))
            samples["math"].append(_timed(math_backend, device))
            samples["default"].append(_timed(default, device))
        rows.append(CoreBenchRow(n, *(float(np.median(samples[k])) for k in ("core", "math", "default"))))
    return rows


def format_table(rows, device) -> str:
    lines = [
        f"# core vs torch SDPA, B=1 H=12 E=64, device={device}, torch {torch.__version__}, "
        f"{platform.machine()} {torch.get_num_threads()} threads",
        "| n | core (ms) | torch math (ms) | torch default (ms) | core / math |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.n} | {r.core_s * 1e3:.2f} | {r.math_s * 1e3:.2f} | {r.default_s * 1e3:.2f} | {r.ratio_math:.2f}x |"
        )
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", default="128,512,2048", help="comma-separated sequence lengths")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default=None, help="auto, cpu, cuda, mps (default: $ATTENTION_LENS_DEVICE or auto)")
    parser.add_argument("--causal", action="store_true")


def run(args: argparse.Namespace) -> int:
    sizes = tuple(int(s) for s in args.sizes.split(","))
    device = pick_device(args.device)
    rows = bench_core(sizes, repeats=args.repeats, device=device, causal=args.causal)
    print(format_table(rows, device))
    at_512 = [r for r in rows if r.n == 512]
    if at_512:
        verdict = "met" if at_512[0].ratio_math <= 1.5 else "MISSED"
        print(f"target core/math <= 1.5x at n=512: {verdict} ({at_512[0].ratio_math:.2f}x)")
    return 0
