"""The article's claims turned into numbers: variance, saturation, gradients, cost, heads, order.

Each function is pure (seeded where random) and returns numpy or plain floats, ready for viz/.
"""

from __future__ import annotations

import math
import time
import weakref
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from .difference import max_difference
from .sdpa import scaled_dot_product_attention

# ---------------------------------------------------------------- variance of q . k against d_k

VARIANCE_SAMPLES = 20_000  # (q, k) pairs per d_k: the measured variance lands within a few percent of d_k


@dataclass(frozen=True)
class VarianceCurve:
    d_k: np.ndarray  # (m,)
    unscaled: np.ndarray  # (m,) measured Var(q . k)
    scaled: np.ndarray  # (m,) measured Var(q . k / sqrt(d_k))
    theory_unscaled: np.ndarray  # (m,) d_k
    theory_scaled: np.ndarray  # (m,) 1


def dot_product_variance(
    d_ks=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512), *, samples: int = VARIANCE_SAMPLES, seed: int = 0
) -> VarianceCurve:
    """For q, k with independent unit-variance entries, Var(q . k) = d_k; dividing by sqrt(d_k) gives 1."""
    generator = torch.Generator().manual_seed(seed)
    unscaled, scaled = [], []
    for d_k in d_ks:
        q = torch.randn(samples, d_k, generator=generator, dtype=torch.float64)  # (N, d_k)
        k = torch.randn(samples, d_k, generator=generator, dtype=torch.float64)  # (N, d_k)
        dots = (q * k).sum(dim=-1)  # (N,) q . k
        unscaled.append(dots.var().item())
        scaled.append((dots / math.sqrt(d_k)).var().item())
    d = np.asarray(d_ks, dtype=float)
    return VarianceCurve(d, np.asarray(unscaled), np.asarray(scaled), d.copy(), np.ones_like(d))


# ---------------------------------------------------------------- softmax saturation and gradients


def softmax_jacobian(probs: torch.Tensor) -> torch.Tensor:
    """d softmax / d scores for one row: diag(p) - p p^T, shape (S, S)."""
    return torch.diag(probs) - torch.outer(probs, probs)


def softmax_gradient(scores: torch.Tensor, upstream: torch.Tensor) -> torch.Tensor:
    """Gradient of sum(upstream * softmax(scores)) w.r.t. scores, by autograd. Shapes (..., S)."""
    scores = scores.detach().clone().requires_grad_(True)
    (scores.softmax(dim=-1) * upstream).sum().backward()
    return scores.grad


def row_entropy(weights: torch.Tensor) -> torch.Tensor:
    """(..., L, S) -> (..., L) entropy in nats, -sum_j w_ij ln w_ij, with 0 ln 0 = 0 (the torch twin of
    ``viz.stats.row_entropy``, which the numpy side uses)."""
    return torch.special.entr(weights).sum(dim=-1)  # entr(w) = -w ln w, 0 at w = 0


@dataclass(frozen=True)
class SaturationCurve:
    x: np.ndarray  # (m,) d_k values or temperatures
    entropy_unscaled: np.ndarray  # (m,) mean row entropy, nats
    entropy_scaled: np.ndarray
    max_weight_unscaled: np.ndarray  # (m,) mean of each row's largest weight
    max_weight_scaled: np.ndarray
    grad_norm_unscaled: np.ndarray  # (m,) mean ||d loss / d scores|| per row
    grad_norm_scaled: np.ndarray
    max_entropy: float  # log(S): a uniform row


def _row_stats(scores: torch.Tensor, upstream: torch.Tensor) -> tuple[float, float, float]:
    weights = scores.softmax(dim=-1)  # (N, S)
    grad = softmax_gradient(scores, upstream)  # (N, S)
    return row_entropy(weights).mean().item(), weights.max(dim=-1).values.mean().item(), grad.norm(dim=-1).mean().item()


def saturation_vs_dk(
    d_ks=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512), *, num_keys: int = 16, rows: int = 512, seed: int = 0
) -> SaturationCurve:
    """Random unit-variance q, k: as d_k grows, unscaled rows go one-hot and their gradients vanish.

    The loss is sum(g * softmax(scores)) with a fixed random upstream g, so the gradient with respect
    to the scores is (diag(p) - p p^T) g: it tends to 0 as p becomes one-hot.
    """
    generator = torch.Generator().manual_seed(seed)
    upstream = torch.randn(rows, num_keys, generator=generator, dtype=torch.float64)  # (N, S)
    columns: dict[str, list[float]] = {}  # SaturationCurve field ("entropy_scaled", ...) -> one value per d_k
    for d_k in d_ks:
        q = torch.randn(rows, 1, d_k, generator=generator, dtype=torch.float64)  # (N, 1, d_k)
        k = torch.randn(rows, num_keys, d_k, generator=generator, dtype=torch.float64)  # (N, S, d_k)
        scores = (q @ k.transpose(-2, -1)).squeeze(1)  # (N, S) q . k_j
        for scaling, logits in (("unscaled", scores), ("scaled", scores / math.sqrt(d_k))):
            entropy, max_weight, grad_norm = _row_stats(logits, upstream)
            for statistic, value in (("entropy", entropy), ("max_weight", max_weight), ("grad_norm", grad_norm)):
                columns.setdefault(f"{statistic}_{scaling}", []).append(value)
    return SaturationCurve(
        x=np.asarray(d_ks, dtype=float),
        **{field: np.asarray(values) for field, values in columns.items()},
        max_entropy=math.log(num_keys),
    )


def saturation_vs_temperature(scores: torch.Tensor, temperatures) -> SaturationCurve:
    """One set of score rows (N, S) divided by each temperature: entropy, max weight, gradient norm.

    Both "scaled" and "unscaled" columns hold the same curve here (there is one knob): the caller
    plots them against temperature, where a temperature of sqrt(d_k) is the article's scaling.
    """
    generator = torch.Generator().manual_seed(0)
    scores = scores.detach().to(torch.float64)
    upstream = torch.randn(scores.shape, generator=generator, dtype=torch.float64)  # (N, S)
    stats = np.array([_row_stats(scores / t, upstream) for t in temperatures])  # (m, 3)
    return SaturationCurve(
        np.asarray(temperatures, dtype=float),
        stats[:, 0],
        stats[:, 0],
        stats[:, 1],
        stats[:, 1],
        stats[:, 2],
        stats[:, 2],
        math.log(scores.shape[-1]),
    )


@dataclass(frozen=True)
class TemperatureCurve:
    temperature: np.ndarray  # (m,) the divisor t in softmax(scores / t + bias)
    entropy: np.ndarray  # (m,) mean row entropy in nats, over rows with at least one allowed key
    max_weight: np.ndarray  # (m,) mean of each row's largest weight
    grad_norm: np.ndarray  # (m,) mean ||d loss / d logits|| per row, loss = sum(g * softmax), g fixed random
    uniform_entropy: float  # mean over those rows of ln(allowed keys): every allowed key weighted equally
    rows: int  # rows with at least one allowed key (rows with none have no softmax and are left out)


def temperature_sweep(
    scores: torch.Tensor, temperatures, *, allowed: torch.Tensor | None = None, bias: torch.Tensor | None = None
) -> TemperatureCurve:
    """One head's score rows (L, S) through softmax(scores / t + bias) with blocked keys at -inf, for each t.

    ``allowed`` (L, S) bool, True = may attend (a causal head's future keys are False), so each row's
    softmax runs over its own allowed keys only; ``bias`` (L, S) is what the head adds after scaling
    (ALiBi). At t = 1 / scale this is exactly the head's own softmax.
    """
    scores = scores.detach().to(torch.float64)  # (L, S)  q_i . k_j
    if scores.dim() != 2 or not scores.numel():
        raise ValueError(f"scores must be a non-empty (L, S) matrix, got shape {tuple(scores.shape)}")
    temps = np.asarray(temperatures, dtype=float)  # (m,)
    if temps.ndim != 1 or not temps.size or not np.all(np.isfinite(temps) & (temps > 0)):
        raise ValueError(f"temperatures must be positive finite numbers, got {list(np.ravel(temps))}")
    allowed = (
        torch.ones_like(scores, dtype=torch.bool) if allowed is None else torch.as_tensor(allowed, dtype=torch.bool)
    )
    bias = torch.zeros_like(scores) if bias is None else torch.as_tensor(bias, dtype=torch.float64)
    allowed, bias = allowed.expand_as(scores), bias.expand_as(scores)  # (L, S)
    live = allowed.any(dim=-1)  # (L,) rows with at least one key to attend to
    if not live.any():
        raise ValueError("every key is blocked for every query: there is no softmax to sweep")
    scores, allowed, bias = scores[live], allowed[live], bias[live]  # (N, S)
    counts = allowed.sum(dim=-1).to(torch.float64)  # (N,) allowed keys per row
    generator = torch.Generator().manual_seed(0)
    upstream = torch.randn(scores.shape, generator=generator, dtype=torch.float64)  # (N, S)
    stats = []
    for t in temps:
        logits = (scores / t + bias).masked_fill(~allowed, float("-inf"))  # (N, S) blocked keys get 0 weight
        stats.append(_row_stats(logits, upstream))
    table = np.array(stats)  # (m, 3)
    return TemperatureCurve(temps, table[:, 0], table[:, 1], table[:, 2], counts.log().mean().item(), int(live.sum()))


# ---------------------------------------------------------------- O(n^2) cost


@dataclass(frozen=True)
class Cost:
    n: int
    flops: int  # multiply-adds counted as 2 FLOPs: QK^T and AV, plus softmax (~5 per entry)
    matrix_bytes: int  # bytes of ONE (H, L, S) matrix at this dtype
    trace_bytes: int  # bytes of scores + scaled + masked + weights kept for display


def attention_cost(n: int, d_k: int = 64, heads: int = 12, *, bytes_per_value: int = 4) -> Cost:
    """Analytic cost of self-attention at sequence length n: every term grows as n^2."""
    entries = heads * n * n  # (H, L, S)
    flops = 2 * entries * d_k + 2 * entries * d_k + 5 * entries  # QK^T + AV + softmax
    matrix = entries * bytes_per_value
    return Cost(n=n, flops=flops, matrix_bytes=matrix, trace_bytes=4 * matrix)


@dataclass(frozen=True)
class Timing:
    n: int
    seconds: float  # median wall time of one core call (after one untimed warm-up call)
    peak_bytes: int  # measured: peak bytes allocated by one call, above what was allocated before it
    memory_method: str  # how peak_bytes was measured, in words for a label


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class AllocationMeter(TorchDispatchMode):
    """Counts the bytes of every tensor storage that torch ops allocate while active, and the live peak.

    Each op's outputs are seen as they are made; a storage that no input of the op shares is new
    (views and in-place results are not counted twice); it is released when the last tensor seen
    on it is garbage-collected. Scratch buffers a kernel frees before returning are not seen.
    """

    def __init__(self) -> None:
        super().__init__()
        self.live = 0  # bytes allocated now, by ops run under the meter
        self.peak = 0  # the largest ``live`` seen
        self._held: dict[int, list[int]] = {}  # storage address -> [bytes, tensors still alive on it]

    def _release(self, address: int) -> None:
        entry = self._held.get(address)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            self.live -= entry[0]
            del self._held[address]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        for tensor in tree_leaves(out):
            if not isinstance(tensor, torch.Tensor):
                continue
            storage = tensor.untyped_storage()
            address = storage.data_ptr()
            if address in self._held:
                self._held[address][1] += 1  # a view of a storage made under the meter
            elif address in inputs or storage.nbytes() == 0:
                continue  # a view of (or in-place on) memory that existed before the op
            else:
                self._held[address] = [storage.nbytes(), 1]
                self.live += storage.nbytes()
                self.peak = max(self.peak, self.live)
            weakref.finalize(tensor, self._release, address)
        return out


def _peak_bytes(call, device: torch.device) -> tuple[int, str]:
    """Peak bytes allocated while ``call()`` runs (its result included), above what existed before."""
    if device.type == "cuda":
        _synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        result = call()
        _synchronize(device)
        peak = torch.cuda.max_memory_allocated(device) - before
        del result
        return peak, "peak allocated (torch.cuda.max_memory_allocated)"
    with AllocationMeter() as meter:
        result = call()
    del result
    return meter.peak, "peak allocated (every tensor torch allocates, traced by a TorchDispatchMode)"


def measure_core_sizes(
    ns, *, d_k: int = 64, heads: int = 12, repeats: int = 3, device=None, seed: int = 0, threads: int | None = None
) -> list[Timing]:
    """Time the from-scratch core at each sequence length n (median of repeats) and measure the peak
    memory one call allocates (CUDA: the allocator's own peak; elsewhere: AllocationMeter).

    The sizes are timed in turns (n1, n2, ..., n1, n2, ...), so a slow spell on a shared machine lands
    on every size alike instead of on one. ``threads`` sets torch's intra-op threads while timing
    (restored after); None keeps the current setting.
    """
    ns = [int(n) for n in ns]
    if not ns or min(ns) < 1 or d_k < 1 or heads < 1 or repeats < 1:
        raise ValueError(f"n (each), d_k, heads and repeats must be >= 1, got n={ns}, {d_k}, {heads}, {repeats}")
    device = torch.device(device or "cpu")
    generator = torch.Generator().manual_seed(seed)
    inputs = [
        tuple(torch.randn(1, heads, n, d_k, generator=generator).to(device) for _ in range(3))  # (1, H, n, E) q, k, v
        for n in ns
    ]
    previous_threads = torch.get_num_threads()
    times: list[list[float]] = [[] for _ in ns]
    try:
        if threads is not None:
            torch.set_num_threads(threads)
        for q, k, v in inputs:
            scaled_dot_product_attention(q, k, v)  # warm-up: first-call set-up is not attention's cost
        for _ in range(repeats):
            for index, (q, k, v) in enumerate(inputs):
                _synchronize(device)
                start = time.perf_counter()
                trace = scaled_dot_product_attention(q, k, v)
                _synchronize(device)
                times[index].append(time.perf_counter() - start)
                del trace
    finally:
        torch.set_num_threads(previous_threads)
    timings = []
    for n, (q, k, v), seconds in zip(ns, inputs, times, strict=True):
        peak, method = _peak_bytes(lambda q=q, k=k, v=v: scaled_dot_product_attention(q, k, v), device)
        timings.append(Timing(n=n, seconds=float(np.median(seconds)), peak_bytes=int(peak), memory_method=method))
    return timings


def measure_core(n: int, *, d_k: int = 64, heads: int = 12, repeats: int = 3, device=None, seed: int = 0) -> Timing:
    """``measure_core_sizes`` at one sequence length n."""
    return measure_core_sizes((n,), d_k=d_k, heads=heads, repeats=repeats, device=device, seed=seed)[0]


# ---------------------------------------------------------------- permutation


@dataclass(frozen=True)
class PermutationCheck:
    permutation: tuple[int, ...]
    max_difference: float  # max |attn(P X) - P attn(X)|: 0 means the rows just moved
    equivariant: bool


def permutation_check(x: torch.Tensor, attend, permutation, *, tolerance: float = 1e-5) -> PermutationCheck:
    """Does shuffling the tokens just shuffle the outputs? ``attend`` maps X (L, D) -> output (L, Dv).

    Without positional information self-attention is permutation-equivariant: attend(X[p]) ==
    attend(X)[p]. Add position (to X, to q/k, or to the scores) and the equality breaks.
    """
    perm = torch.as_tensor(list(permutation), dtype=torch.long, device=x.device)  # (L,)
    if sorted(perm.tolist()) != list(range(x.shape[-2])):
        raise ValueError(f"{list(permutation)} is not a permutation of 0..{x.shape[-2] - 1}")
    shuffled_then_attended = attend(x[..., perm, :])  # (L, Dv)
    attended_then_shuffled = attend(x)[..., perm, :]  # (L, Dv)
    difference = max_difference(shuffled_then_attended, attended_then_shuffled)
    return PermutationCheck(tuple(perm.tolist()), difference, difference <= tolerance)
