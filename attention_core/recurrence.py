"""Attention against recurrence: how many steps apart two tokens are, and what each costs in time.

One self-attention layer computes every output from every input at once:

    o_i = sum_j softmax_j(q_i . k_j / sqrt(d_k)) v_j     # all i in parallel: 1 sequential step
    path from token j to position i: 1 hop, for any i != j

A recurrent net walks the sequence:

    h_t = f(x_t, h_{t-1})                                 # t = 1 .. n: n sequential steps
    path from token j to position i >= j: i - j hops, up to n - 1 (first token to last)

The counts are exact for one layer of each (a bidirectional recurrent net still needs up to n - 1
hops, just in either direction). ``time_sequence_models`` measures the wall time of the from-scratch
core, of torch's fused attention, and of ``torch.nn.RNN`` / ``torch.nn.GRU`` over n on a device:
attention does O(n^2 d) work in one parallel step, recurrence O(n d^2) work in n steps that cannot
overlap, so which is faster depends on n, d and the hardware (many cores favour attention).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .device import pick_device
from .multihead import ProjectionWeights, init_weights, merge_heads, multi_head_self_attention, split_heads


@dataclass(frozen=True)
class PathLengths:
    """Sequential steps of one layer and the longest token-to-token path, for sequence length n."""

    n: int
    attention_sequential_steps: int  # 1: every position is computed at once
    attention_longest_path: int  # 1 hop between any two distinct tokens (0 when n == 1)
    recurrent_sequential_steps: int  # n: h_t needs h_{t-1}
    recurrent_longest_path: int  # n - 1 hops, from the first token to the last


def path_lengths(n: int) -> PathLengths:
    """Exact counts for one attention layer and one recurrent layer over ``n`` tokens."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    return PathLengths(
        n=n,
        attention_sequential_steps=1,
        attention_longest_path=min(1, n - 1),
        recurrent_sequential_steps=n,
        recurrent_longest_path=n - 1,
    )


def path_length_columns(ns: Sequence[int]) -> dict[str, np.ndarray]:
    """``path_lengths`` over several n, as float arrays keyed by field name (for figures and tables)."""
    rows = [path_lengths(n) for n in ns]
    fields = PathLengths.__dataclass_fields__
    return {name: np.asarray([getattr(r, name) for r in rows], dtype=np.float64) for name in fields}


@dataclass(frozen=True)
class SequenceTiming:
    """Best-of-repeats forward time (milliseconds) of one layer of each kind at sequence length n."""

    n: int
    core_attention_ms: float  # attention_core.multi_head_self_attention (keeps every intermediate)
    fused_attention_ms: float  # torch.nn.functional.scaled_dot_product_attention with the same projections
    rnn_ms: float  # torch.nn.RNN (tanh), one layer
    gru_ms: float  # torch.nn.GRU, one layer


@dataclass(frozen=True)
class TimingReport:
    """Timings over n on one device, with the sizes they were measured at."""

    device: str
    d_model: int
    num_heads: int
    batch_size: int
    repeats: int
    threads: int
    rows: tuple[SequenceTiming, ...]

    def columns(self) -> dict[str, np.ndarray]:
        """Each field of ``SequenceTiming`` as a float array over n."""
        fields = SequenceTiming.__dataclass_fields__
        return {name: np.asarray([getattr(r, name) for r in self.rows], dtype=np.float64) for name in fields}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def _best_ms(fn: Callable[[], object], device: torch.device, repeats: int, budget_s: float = 0.05) -> float:
    """Fastest of at least ``repeats`` calls; quick calls repeat more (up to 50), to fill ``budget_s``."""
    start = time.perf_counter()
    fn()  # warm-up: first calls allocate and pick kernels
    _sync(device)
    warm_s = time.perf_counter() - start
    times = []
    for _ in range(max(repeats, min(50, int(budget_s / max(warm_s, 1e-6))))):
        start = time.perf_counter()
        fn()
        _sync(device)
        times.append((time.perf_counter() - start) * 1e3)
    return min(times)  # best of the repeats: the least disturbed by other work on the machine


def _fused_layer(x: torch.Tensor, weights: ProjectionWeights) -> torch.Tensor:
    """The same layer as the core through torch's fused SDPA: (B, n, D) -> (B, n, D)."""
    q = split_heads(x @ weights.w_q, weights.num_heads)  # (B, H, n, E)
    k = split_heads(x @ weights.w_k, weights.num_heads)  # (B, H, n, E)
    v = split_heads(x @ weights.w_v, weights.num_heads)  # (B, H, n, Ev)
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v)  # (B, H, n, Ev)
    return merge_heads(out) @ weights.w_o  # (B, n, D)


def _time_one(
    x: torch.Tensor, weights: ProjectionWeights, rnn: torch.nn.RNN, gru: torch.nn.GRU, repeats: int
) -> SequenceTiming:
    """Time every layer on one input x (B, n, D)."""
    device = x.device
    return SequenceTiming(
        n=x.shape[1],
        core_attention_ms=_best_ms(lambda: multi_head_self_attention(x, weights).output, device, repeats),
        fused_attention_ms=_best_ms(lambda: _fused_layer(x, weights), device, repeats),
        rnn_ms=_best_ms(lambda: rnn(x), device, repeats),
        gru_ms=_best_ms(lambda: gru(x), device, repeats),
    )


def time_sequence_models(
    ns: Sequence[int] = (16, 64, 256, 1024),
    *,
    d_model: int = 64,
    num_heads: int = 4,
    batch_size: int = 4,
    repeats: int = 5,
    device: torch.device | str | None = None,
    seed: int = 0,
) -> TimingReport:
    """Time one attention layer (core and fused) and one RNN / GRU layer, (B, n, D) -> (B, n, D).

    Forward passes only, under ``torch.no_grad``; each number is the fastest of ``repeats`` calls
    (more for quick ones) after one warm-up. A server shares the machine: the app runs this under its
    training slot (``ui.policy.training_slot``), so it never runs beside two trainings.
    """
    if d_model % num_heads:
        raise ValueError(f"d_model {d_model} must be divisible by num_heads {num_heads}")
    if repeats < 1 or any(n < 1 for n in ns):
        raise ValueError(f"repeats and every n must be >= 1, got repeats={repeats}, ns={list(ns)}")
    dev = device if isinstance(device, torch.device) else pick_device(device)
    weights = init_weights(d_model, d_model // num_heads, num_heads, seed=seed, device=dev)
    with torch.random.fork_rng(devices=[]):  # nn.RNN/GRU draw from the global generator; leave it as it was
        torch.manual_seed(seed)
        rnn = torch.nn.RNN(d_model, d_model, batch_first=True).to(dev)
        gru = torch.nn.GRU(d_model, d_model, batch_first=True).to(dev)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        rows = tuple(
            _time_one(torch.randn(batch_size, n, d_model, generator=generator).to(dev), weights, rnn, gru, repeats)
            for n in ns
        )
    return TimingReport(
        device=str(dev),
        d_model=d_model,
        num_heads=num_heads,
        batch_size=batch_size,
        repeats=repeats,
        threads=torch.get_num_threads(),
        rows=rows,
    )


def timing_summary(report: TimingReport) -> str:
    """What the measurement says at the largest n, in one or two sentences built from the numbers."""
    last = report.rows[-1]
    named = {
        "torch's fused attention": last.fused_attention_ms,
        "this core's attention": last.core_attention_ms,
        "torch.nn.RNN": last.rnn_ms,
        "torch.nn.GRU": last.gru_ms,
    }
    fastest = min(named, key=named.get)
    listed = ", ".join(f"{name} {ms:.2f} ms" for name, ms in named.items())
    return (
        f"At n = {last.n} on {report.device} ({report.threads} thread(s), batch {report.batch_size}, "
        f"d_model {report.d_model}): {listed}; fastest: {fastest}. The core keeps every intermediate "
        f"(scores, weights, ...) so it is slower than a fused kernel. Attention does about n^2 work in one "
        f"parallel step, a recurrent net {last.n} steps that must run one after another, so the more "
        "parallel the hardware, the better attention fares."
    )
