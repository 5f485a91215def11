"""Section 6: the limit: how many GFLOP/s the core achieves against plain matrix multiplies on this machine.

Attention's arithmetic is two batched matmuls: Q Kᵀ (H·n·n·E multiply-adds) and A V (H·n·n·E),
i.e. 4·H·n²·E floating-point operations; scaling, softmax and masking add O(H·n²) cheap operations
that cost memory traffic, not arithmetic. Compared, interleaved, at each n:

- core: the from-scratch ``scaled_dot_product_attention`` (keeps every intermediate)
- the two matmuls alone: ``q @ kᵀ`` then ``w @ v`` on tensors of the same shapes (the best the
  core could do if everything between them were free)
- torch SDPA default backend (fused on CPU: never writes the n x n scores)

and, once, a large square float32 matmul (2048³) as this machine's practical peak.
"""

from __future__ import annotations

from functools import partial

from . import plots
from .common import (
    Config,
    SectionResult,
    code_block,
    interleaved,
    median,
    ms,
    table,
    torch_profile_table,
)
from .core_sdpa import DIM, HEADS, inputs, methods


def run(cfg: Config) -> SectionResult:
    import torch

    sizes = cfg.pick((512, 2048), (64,))
    repeats = cfg.pick(5, 1)
    fns = methods()
    rows = []
    for n in sizes:
        q, k, v = inputs(n)
        w = torch.softmax(q @ k.transpose(-2, -1), dim=-1)  # (1, H, n, n) weights to multiply with v

        def matmuls(q=q, k=k, w=w, v=v):
            return q @ k.transpose(-2, -1), w @ v

        samples = interleaved(
            {
                "core": partial(fns["core"], q, k, v),
                "matmuls": matmuls,
                "torch_default": partial(fns["torch_default"], q, k, v),
            },
            repeats,
        )
        flops = 4 * HEADS * n * n * DIM
        rows.append({"n": n, "flops": flops, **{f"{name}_s": median(s) for name, s in samples.items()}})
        del q, k, v, w

    big = cfg.pick(2048, 256)
    a, b = torch.randn(big, big), torch.randn(big, big)
    peak = interleaved({"sgemm": partial(torch.matmul, a, b)}, repeats)["sgemm"]
    peak_s = median(peak)
    peak_gflops = 2 * big**3 / peak_s / 1e9
    del a, b
    profile_n = sizes[-1]
    q, k, v = inputs(profile_n)
    profile = torch_profile_table(partial(fns["core"], q, k, v))
    del q, k, v

    result = SectionResult("limit", "6. The limit: achieved GFLOP/s")
    result.data = {"rows": rows, "sgemm": {"size": big, "seconds": peak_s, "gflops": peak_gflops}}
    table_rows = []
    for r in rows:
        core_g = r["flops"] / r["core_s"] / 1e9
        mm_g = r["flops"] / r["matmuls_s"] / 1e9
        table_rows.append(
            [
                r["n"],
                f"{r['flops'] / 1e9:.2f}",
                ms(r["core_s"], 2),
                f"{core_g:.1f}",
                ms(r["matmuls_s"], 2),
                f"{mm_g:.1f}",
                ms(r["torch_default_s"], 2),
                f"{r['flops'] / r['torch_default_s'] / 1e9:.1f}",
                f"{100 * core_g / peak_gflops:.0f}%",
                f"{100 * (1 - r['matmuls_s'] / r['core_s']):.0f}%",
            ]
        )
    result.body = "\n\n".join(
        [
            f"FLOPs = 4·H·n²·E (the two matmuls), B=1, H={HEADS}, E={DIM}, float32, {torch.get_num_threads()} "
            f"torch threads. This machine's plain {big}x{big} float32 matmul: {peak_gflops:.1f} GFLOP/s "
            f"({ms(peak_s)} ms), the practical peak. Median of {repeats} interleaved rounds.",
            table(
                [
                    "n",
                    "GFLOP",
                    "core (ms)",
                    "core GFLOP/s",
                    "two matmuls alone (ms)",
                    "matmuls GFLOP/s",
                    "torch default (ms)",
                    "torch default GFLOP/s",
                    "core / peak",
                    "core time outside the matmuls",
                ],
                table_rows,
            ),
            f"Where the core's time goes at n={profile_n} (torch.profiler, one call, ops by self CPU time): the "
            "two `bmm` calls are the arithmetic; every other op (`mul` for the scaling, `_softmax`, any masking) "
            "streams the (H, n, n) scores through memory once more and writes a new tensor the trace keeps.",
            code_block(profile),
            "![GFLOP/s](results/limit_gflops.png)",
        ]
    )
    last = rows[-1]
    result.figures["limit_gflops"] = plots.bars(
        [f"core n={last['n']}", f"two matmuls n={last['n']}", f"torch default n={last['n']}", f"sgemm {big}³"],
        [
            last["flops"] / last["core_s"] / 1e9,
            last["flops"] / last["matmuls_s"] / 1e9,
            last["flops"] / last["torch_default_s"] / 1e9,
            peak_gflops,
        ],
        title="Achieved GFLOP/s (float32, CPU)",
        y_title="GFLOP/s",
    )
    return result
