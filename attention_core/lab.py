"""Numbers for the pitfalls lab: permutation, sparse-mask savings, live cost. Numpy out.

The variance and saturation curves live in analysis.py; this module wires them to the app's
controls (token ids, chosen encoding, seed) and returns plain arrays for viz/.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from . import analysis, masks, positional
from .multihead import init_weights, multi_head_self_attention
from .traces import HeadTrace

DEMO_D_MODEL, DEMO_D_K, DEMO_HEADS = 32, 16, 2  # sizes of the permutation demo's small attention layer


@dataclass(frozen=True)
class PermutationDemo:
    permutation: tuple[int, ...]  # new position k holds old token permutation[k]
    weights: np.ndarray  # (L, S) head 0, original order
    weights_shuffled: np.ndarray  # (L, S) head 0, shuffled input
    output: np.ndarray  # (L, Dv) original order
    output_shuffled: np.ndarray  # (L, Dv) computed from the shuffled input
    max_difference: float  # max |attn(P X) - P attn(X)|
    equivariant: bool


def permutation_demo(
    embeddings: torch.Tensor, encoding: str, permutation, *, d_k: int = DEMO_D_K, heads: int = DEMO_HEADS, seed: int = 0
) -> PermutationDemo:
    """Self-attention of X and of X with its rows shuffled, with the chosen positional encoding.

    Position is attached AFTER shuffling (position 0 is whatever token now stands first), as in a
    real model: that is what makes the encodings break the symmetry.
    """
    x = embeddings.to(torch.float64)  # (L, D)
    positional.apply(encoding, x, heads=heads, head_dim=d_k)  # refuses an unknown name before any work
    weights = init_weights(x.shape[-1], d_k, heads, seed=seed, dtype=torch.float64, with_output=False)

    def attend(t: torch.Tensor):
        positions = positional.apply(encoding, t, heads=heads, head_dim=d_k, seed=seed)  # after any shuffle
        return multi_head_self_attention(positions.x, weights, rotate=positions.rotate, score_bias=positions.score_bias)

    check = analysis.permutation_check(x, lambda t: attend(t).merged, permutation)
    perm = list(check.permutation)
    original, shuffled = attend(x), attend(x[perm])
    return PermutationDemo(
        permutation=check.permutation,
        weights=original.attention.weights[0].numpy(),
        weights_shuffled=shuffled.attention.weights[0].numpy(),
        output=original.merged.numpy(),
        output_shuffled=shuffled.merged.numpy(),
        max_difference=check.max_difference,
        equivariant=check.equivariant,
    )


def local_strided(n: int, *, window: int, stride: int) -> torch.Tensor:
    """(n, n) bool: the causal sliding window of ``window`` keys OR the causal strided keys, (i - j) % stride == 0."""
    local = masks.sliding_window(n, width=window, causal=True)  # (n, n) 0 <= i - j < window
    strided = masks.strided(n, stride=stride) & masks.causal(n)  # (n, n) i - j in {0, s, 2s, ...}
    return local | strided


@dataclass(frozen=True)
class SparseCost:
    n: np.ndarray  # (m,)
    entries: dict[str, np.ndarray]  # mask name -> (m,) allowed (query, key) pairs


def sparse_mask_entries(ns=(64, 128, 256, 512, 1024, 2048), *, window: int = 32, stride: int = 32) -> SparseCost:
    """How many (query, key) pairs each pattern allows: full n^2 against local and strided patterns.

    The from-scratch core still computes all n^2 scores and then masks them; these counts are what a
    sparse kernel that skips blocked pairs would compute.
    """
    _check_sizes(window=window, stride=stride)
    patterns = {
        "full": lambda n: masks.full(n),
        "causal": lambda n: masks.causal(n),
        f"sliding window {window} (causal)": lambda n: masks.sliding_window(n, width=window, causal=True),
        f"strided {stride} (causal)": lambda n: masks.strided(n, stride=stride) & masks.causal(n),
        f"local + strided {window}/{stride}": lambda n: local_strided(n, window=window, stride=stride),
    }
    entries = {name: np.array([int(make(n).sum()) for n in ns]) for name, make in patterns.items()}
    return SparseCost(n=np.asarray(ns), entries=entries)


def _check_sizes(**sizes: int) -> None:
    for name, value in sizes.items():
        if int(value) != value or value < 1:
            raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")


@dataclass(frozen=True)
class SparseReach:
    n: int
    window: int
    stride: int
    one_layer: float  # fraction of (query, earlier-or-same key) pairs the local + strided mask links directly
    two_layers: float  # fraction reachable through one intermediate token (two stacked layers)
    layers_to_all: int | None  # layers until every query reaches every earlier key; None: more than max_layers


def sparse_reach(n: int = 2048, *, window: int, stride: int, max_layers: int = 64) -> SparseReach:
    """Which earlier tokens a query can reach when ``local_strided`` layers are stacked.

    A layer lets query i read key j when the mask allows it; stacking h layers lets i read j when some
    chain i -> ... -> j of h allowed steps exists. The mask depends only on the distance d = i - j,
    and every step goes back (causal), so a chain stays inside [j, i]: d is reachable in h layers
    when it is a sum of h allowed step distances.
    """
    _check_sizes(n=n, window=window, stride=stride, max_layers=max_layers)
    steps = local_strided(n, window=window, stride=stride)[-1].flip(0).numpy()  # (n,) steps[d]: last query sees d back
    pairs = (n - np.arange(n)).astype(float)  # (n,) how many (query, key) pairs lie at distance d
    total = pairs.sum()  # n (n + 1) / 2 causal pairs

    def covered(reach: np.ndarray) -> float:
        return float(pairs[reach].sum() / total)

    step_spectrum = np.fft.rfft(steps, 2 * n)  # (n + 1,) convolving with the steps = one more layer
    reach = steps.copy()  # (n,) distances one layer reaches
    fractions = [covered(reach)]
    layers = 1
    while not reach.all() and layers < max_layers:
        chains = np.fft.irfft(np.fft.rfft(reach, 2 * n) * step_spectrum, 2 * n)[:n]  # (n,) chains per distance
        reach = chains > 0.5  # (n,) one more layer: d = d_before + one step (counts are whole numbers)
        layers += 1
        fractions.append(covered(reach))
    two = fractions[1] if len(fractions) > 1 else fractions[0]
    return SparseReach(n, window, stride, fractions[0], two, layers if reach.all() else None)


@dataclass(frozen=True)
class CostTable:
    n: np.ndarray  # (m,)
    seconds: np.ndarray  # (m,) measured: median wall time of one core call
    peak_bytes: np.ndarray  # (m,) measured: peak bytes one core call allocates
    flops: np.ndarray  # (m,) computed from the formula, not measured
    matrix_bytes: np.ndarray  # (m,) computed: one (H, n, n) float32 matrix
    device: str
    memory_method: str  # how peak_bytes was measured, in words for a label


def cost_table(
    ns=(64, 128, 256, 512, 1024), *, heads: int = 12, d_k: int = 64, device="cpu", repeats=3, threads=None
) -> CostTable:
    """Measured time and peak memory of the core at each n, beside the formula's n^2 counts."""
    ns = tuple(ns)
    if not ns:
        raise ValueError("cost_table needs at least one sequence length n")
    _check_sizes(**{f"n[{i}]": n for i, n in enumerate(ns)}, heads=heads, d_k=d_k, repeats=repeats)
    timings = analysis.measure_core_sizes(ns, heads=heads, d_k=d_k, device=device, repeats=repeats, threads=threads)
    costs = [analysis.attention_cost(n, d_k, heads) for n in ns]
    return CostTable(
        n=np.asarray(ns),
        seconds=np.array([t.seconds for t in timings]),
        peak_bytes=np.array([t.peak_bytes for t in timings]),
        flops=np.array([c.flops for c in costs]),
        matrix_bytes=np.array([c.matrix_bytes for c in costs]),
        device=str(device),
        memory_method=timings[0].memory_method,
    )


def permutation_demo_for_ids(
    token_ids, encoding: str, permutation, *, d_model: int = DEMO_D_MODEL, seed: int = 0
) -> PermutationDemo:
    """The permutation demo on seeded embeddings of real token ids (same word, same vector)."""
    from .pipeline import scratch_embeddings

    return permutation_demo(scratch_embeddings(token_ids, d_model, seed), encoding, permutation, seed=seed)


def shuffled_order(length: int, seed: int) -> tuple[int, ...]:
    """A seeded permutation of 0..length-1 that moves something whenever length > 1."""
    generator = torch.Generator().manual_seed(seed)
    order = torch.randperm(length, generator=generator).tolist()
    if length > 1 and order == list(range(length)):
        order = order[1:] + order[:1]
    return tuple(order)


def encoding_table(encoding: str, length: int, d_model: int = 64, *, seed: int = 0) -> np.ndarray | None:
    """(n, d) the table an additive encoding puts on X; rotary: cos of its angles; ALiBi: head 0's
    (n, n) score bias; None for "none"."""
    if encoding not in positional.ENCODINGS:
        raise ValueError(f"unknown encoding {encoding!r}; choose one of {', '.join(positional.ENCODINGS)}")
    if encoding == "sinusoidal":
        return positional.sinusoidal(length, d_model).numpy()
    if encoding == "learned":
        return positional.learned(length, d_model, seed=seed).numpy()
    if encoding == "rotary":
        cos, _ = positional.rotary_cos_sin(length, d_model)
        return cos.numpy()
    if encoding == "alibi":
        return positional.alibi_bias(1, length)[0].numpy()
    return None


def demo_encoding_table(encoding: str, length: int, *, seed: int = 0) -> tuple[np.ndarray, str] | None:
    """The table the permutation demo (``permutation_demo_for_ids``) uses, and its name for a figure:
    sinusoidal or learned (length, DEMO_D_MODEL) added to X; rotary's cos table (length, DEMO_D_K)
    applied per head. None for encodings without a table (none, ALiBi)."""
    if encoding in ("sinusoidal", "learned"):
        return encoding_table(encoding, length, DEMO_D_MODEL, seed=seed), encoding
    if encoding == "rotary":
        return encoding_table(encoding, length, DEMO_D_K), "rotary, cos of the angles"
    encoding_table(encoding, length)  # refuses unknown names
    return None


@dataclass(frozen=True)
class HeadTemperature:
    curve: analysis.TemperatureCurve  # entropy, max weight, gradient norm at each temperature
    d_k: int
    sqrt_d_k: float  # the article's temperature
    own: float  # 1 / head.scale: the temperature this head runs at now
    own_entropy: float  # the curve at t = own: the head's real mean row entropy
    marks: dict[str, float]  # labelled temperatures to draw (one mark where both coincide)


def head_temperature_curve(head: HeadTrace, temperatures=(0.25, 0.5, 1.0, 2.0, 4.0, 16.0, 64.0)) -> HeadTemperature:
    """One head's softmax as its raw QK^T is divided by each temperature, with the head's own mask and bias.

    Each row's softmax runs over the keys the head may attend (a causal head's past only), plus what
    the head adds after scaling (ALiBi), so at t = 1 / head.scale the curve is the head itself.
    ``temperatures`` get sqrt(d_k) and 1 / head.scale added.
    """
    d_k = int(head.q.shape[-1])
    own = 1.0 / float(head.scale)
    temps = sorted({*(float(t) for t in temperatures), math.sqrt(d_k), own})
    allowed = torch.as_tensor(head.mask, dtype=torch.bool)  # (L, S) True = may attend
    bias = None if head.score_bias is None else torch.as_tensor(head.score_bias, dtype=torch.float64)  # (L, S) ALiBi
    curve = analysis.temperature_sweep(torch.as_tensor(head.scores), temps, allowed=allowed, bias=bias)
    same = math.isclose(own, math.sqrt(d_k), rel_tol=1e-9)
    marks = {"√d_k": math.sqrt(d_k)} if same else {"√d_k": math.sqrt(d_k), "this head": own}
    return HeadTemperature(curve, d_k, math.sqrt(d_k), own, float(curve.entropy[temps.index(own)]), marks)


def mask_patterns(n: int = 32, *, window: int = 4, stride: int = 4) -> dict[str, np.ndarray]:
    """Named boolean (n, n) patterns to draw side by side."""
    _check_sizes(n=n, window=window, stride=stride)
    return {
        "full": masks.full(n).numpy(),
        "causal": masks.causal(n).numpy(),
        f"window {window}": masks.sliding_window(n, width=window, causal=True).numpy(),
        f"strided {stride}": (masks.strided(n, stride=stride) & masks.causal(n)).numpy(),
        f"window {window} + strided {stride}": local_strided(n, window=window, stride=stride).numpy(),
        f"block {window}": masks.block_local(n, block=window).numpy(),
    }
