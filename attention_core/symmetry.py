"""Permutation: which symmetry self-attention has, measured three ways.

With no positional information, shuffling the input rows by a permutation P gives

    attn(P X) = P attn(X)                 # equivariant: every output row moves with its token
    attn(P X) != attn(X)  (in general)     # so the rows themselves are NOT invariant
    mean_rows attn(P X) = mean_rows attn(X)   # a pooled output IS invariant (a sum ignores order)

and one query's output, as a function of the set of (key, value) pairs, is invariant too:

    o(q; P K, P V) = sum_j softmax_j(q . k_pj) v_pj = o(q; K, V)      # the sum just runs in another order

"Permutation invariant", as people often say of attention, is exact for the last two; for the
per-token outputs the precise word is equivariant. Either way, order is invisible to the layer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .difference import max_difference
from .lab import PermutationDemo
from .sdpa import scaled_dot_product_attention


@dataclass(frozen=True)
class SymmetryGaps:
    """max |difference| of three comparisons between attn(X) and attn(P X)."""

    permutation: tuple[int, ...]
    rows_unchanged: float  # max |attn(P X) - attn(X)|: invariance of the rows (fails: rows moved)
    rows_moved: float  # max |attn(P X) - P attn(X)|: equivariance (0 without positions)
    pooled: float  # max |mean_i attn(P X)_i - mean_i attn(X)_i|: invariance of the pooled output
    tolerance: float

    @property
    def equivariant(self) -> bool:
        return self.rows_moved <= self.tolerance

    @property
    def rows_invariant(self) -> bool:
        return self.rows_unchanged <= self.tolerance

    @property
    def pooled_invariant(self) -> bool:
        return self.pooled <= self.tolerance


def symmetry_gaps(output, output_shuffled, permutation, *, tolerance: float = 1e-5) -> SymmetryGaps:
    """Compare attn(X) (``output``, (L, Dv)) with attn(P X) (``output_shuffled``, (L, Dv)).

    ``permutation[k]`` is the old position of the token now at position k, so P attn(X) is
    ``output[permutation]``.
    """
    original = np.asarray(output, dtype=np.float64)
    shuffled = np.asarray(output_shuffled, dtype=np.float64)
    if original.ndim != 2 or original.shape != shuffled.shape:
        raise ValueError(f"outputs must be (L, Dv) of one shape, got {original.shape} and {shuffled.shape}")
    order = np.asarray(list(permutation), dtype=np.int64)
    if sorted(order.tolist()) != list(range(original.shape[0])):
        raise ValueError(f"{list(permutation)} is not a permutation of 0..{original.shape[0] - 1}")
    return SymmetryGaps(
        permutation=tuple(order.tolist()),
        rows_unchanged=max_difference(shuffled, original),
        rows_moved=max_difference(shuffled, original[order]),
        pooled=max_difference(shuffled.mean(axis=0), original.mean(axis=0)),
        tolerance=tolerance,
    )


def demo_gaps(demo: PermutationDemo, *, tolerance: float = 1e-5) -> SymmetryGaps:
    """The three gaps of the pitfalls lab's permutation demo (``lab.permutation_demo``)."""
    return symmetry_gaps(demo.output, demo.output_shuffled, demo.permutation, tolerance=tolerance)


def key_order_gap(q, k, v, permutation, *, mask=None, scale: float | None = None) -> float:
    """max |o(q; P K, P V) - o(q; K, V)| over all queries: reorder the (key, value) pairs together.

    ``q`` (L, E), ``k`` (S, E), ``v`` (S, Ev), an optional boolean ``mask`` (L, S) whose columns move
    with their keys. Rotary or other positions already inside q and k travel with them, so this
    is ~0 for any head: a query sees a set of keys, not a sequence.
    """
    query, key, value = (torch.as_tensor(np.asarray(a), dtype=torch.float64) for a in (q, k, v))
    order = torch.as_tensor(list(permutation), dtype=torch.long)
    if sorted(order.tolist()) != list(range(key.shape[0])):
        raise ValueError(f"{list(permutation)} is not a permutation of 0..{key.shape[0] - 1}")
    allowed = None if mask is None else torch.as_tensor(np.asarray(mask, dtype=bool))
    before = scaled_dot_product_attention(query, key, value, allowed, scale=scale).output  # (L, Ev)
    after = scaled_dot_product_attention(
        query, key[order], value[order], None if allowed is None else allowed[:, order], scale=scale
    ).output  # (L, Ev)
    return max_difference(after, before)
