"""Per-head statistics of attention weights, in numpy.

Every function takes weights of shape (..., L, S) (rows = queries, softmax over keys) and returns
shape (...): one number per head (or per layer and head). Query i and key j share positions
(self-attention, i = j on the diagonal). Non-finite weights (a fully masked row returned as NaN)
count as 0. These are the only definitions: the core keeps just a torch ``row_entropy``
(``attention_core.analysis``, for its own curves), and a test holds the two entropies equal.

- ``entropy``         mean over rows of -Σ_j w_ij ln w_ij (nats; 0 ln 0 = 0). Low = focused.
- ``max_weight``      mean over rows of max_j w_ij. High = one key takes nearly everything.
- ``distance``        mean over rows of Σ_j w_ij |i - j|: how far back/ahead a head looks.
- ``previous_token``  mean over rows i >= 1 of w_{i,i-1} (0 when L < 2).
- ``first_token``     mean over rows of w_{i,0}: attention parked on the first token.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from .checks import layer_stack

STATISTICS: dict[str, str] = {
    "entropy": "mean row entropy (nats)",
    "max_weight": "mean max weight",
    "distance": "mean attention distance |i−j|",
    "previous_token": "mean weight on previous token",
    "first_token": "mean weight on first token",
}

SHORT_NAMES: dict[str, str] = {
    "entropy": "entropy",
    "max_weight": "max weight",
    "distance": "|i−j|",
    "previous_token": "prev. token",
    "first_token": "first token",
}


def _checked(weights) -> np.ndarray:
    weights = np.asarray(weights)
    if weights.ndim < 2:
        raise ValueError(f"weights must be (..., L, S), got shape {weights.shape}")
    return weights


def _weights(weights) -> np.ndarray:
    """float64 weights with non-finite cells as 0."""
    widened = _checked(weights).astype(np.float64)  # (..., L, S) always a fresh float64 copy: zeroed in place
    widened[~np.isfinite(widened)] = 0.0
    return widened


def _entropy_rows(w: np.ndarray, terms: np.ndarray, positive: np.ndarray) -> np.ndarray:
    """(..., L) -Σ_j w ln w of float64 weights ``w`` (non-finite already 0), in ``terms`` (float64) and ``positive``
    (bool), both of w's shape and overwritten: the one definition, for ``row_entropy`` and ``head_statistics``."""
    terms.fill(0.0)
    np.log(w, out=terms, where=np.greater(w, 0, out=positive))  # ln w, and 0 where w = 0
    np.multiply(w, terms, out=terms)  # w ln w (one temporary, not four)
    return -terms.sum(axis=-1)


def _distance_rows(w: np.ndarray) -> np.ndarray:
    """(..., L) Σ_j w_ij |i - j| of float64 weights ``w`` (non-finite already 0), which it overwrites."""
    np.multiply(w, _distances(*w.shape[-2:]), out=w)  # w_ij |i - j|
    return w.sum(axis=-1)


def _previous_cells(weights: np.ndarray) -> np.ndarray | None:
    """(..., count) w_{i,i-1} for i = 1..count in C order (fancy indexing may not give it, and numpy's sum order
    follows the memory order); None when there is no such row."""
    rows, cols = weights.shape[-2:]
    count = min(rows - 1, cols)
    if count < 1:
        return None
    i = np.arange(1, count + 1)
    return np.ascontiguousarray(weights[..., i, i - 1])


def _first_cells(weights: np.ndarray) -> np.ndarray:
    """(..., L) w_{i,0} in C order: the sum's order is the layout's."""
    return np.ascontiguousarray(weights[..., :, 0])


def row_entropy(weights) -> np.ndarray:
    """(..., L): -Σ_j w_ij ln w_ij per row, with 0 ln 0 = 0."""
    weights = _weights(weights)
    return _entropy_rows(weights, np.empty_like(weights), np.empty(weights.shape, dtype=bool))


def mean_entropy(weights) -> np.ndarray:
    """(...): row entropy averaged over rows."""
    return row_entropy(weights).mean(axis=-1)


def mean_max_weight(weights) -> np.ndarray:
    """(...): the largest weight of each row, averaged over rows."""
    weights = _checked(weights)  # the max in the weights' own dtype: widening to float64 after it is exact
    finite = np.where(np.isfinite(weights), weights, 0)
    return finite.max(axis=-1).astype(np.float64).mean(axis=-1)


def mean_distance(weights) -> np.ndarray:
    """(...): Σ_j w_ij |i - j| per row, averaged over rows."""
    return _distance_rows(_weights(weights)).mean(axis=-1)  # (in a fresh copy)


@functools.lru_cache(maxsize=4)
def _distances(rows: int, cols: int) -> np.ndarray:
    """(L, S) |i - j| as float64 (exact: integers), made once per size and shared read-only."""
    distance = np.abs(np.arange(rows)[:, None] - np.arange(cols)[None, :]).astype(np.float64)
    distance.flags.writeable = False
    return distance


def previous_token_weight(weights) -> np.ndarray:
    """(...): w_{i,i-1} averaged over rows i = 1..L-1 (0 when there is no such row)."""
    weights = _checked(weights)
    below = _previous_cells(weights)  # (..., count)
    if below is None:
        return np.zeros(weights.shape[:-2])
    return _weights(below[..., None])[..., 0].mean(axis=-1)  # only those cells are widened


def first_token_weight(weights) -> np.ndarray:
    """(...): w_{i,0} averaged over rows."""
    first = _first_cells(_checked(weights))  # (..., L)
    return _weights(first[..., None])[..., 0].mean(axis=-1)  # only the first column is widened


STATISTIC_FUNCTIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "entropy": mean_entropy,
    "max_weight": mean_max_weight,
    "distance": mean_distance,
    "previous_token": previous_token_weight,
    "first_token": first_token_weight,
}


def _known(statistic: str) -> str:
    if statistic not in STATISTIC_FUNCTIONS:
        raise ValueError(f"unknown statistic {statistic!r}; choose one of {tuple(STATISTICS)}")
    return statistic


def head_statistic(weights, statistic: str) -> np.ndarray:
    """(...): the named statistic (a key of ``STATISTICS``) of weights (..., L, S)."""
    return STATISTIC_FUNCTIONS[_known(statistic)](weights)


def head_statistics(weights, names, scratch: dict | None = None) -> dict[str, float]:
    """{name: statistic} of one head's weights (L, S), every statistic from one float64 copy (non-finite cells 0):
    each is the number ``head_statistic`` gives, the same operations on the same values in the same order (max in
    float64 is the float32 max widened; tests/test_summaries_memory.py holds them equal bit for bit). For
    ``viz.summaries.overviews_by_head``: one widening per head instead of one per statistic, into ``scratch`` (a
    dict this fills with (L, S) buffers on first use and reuses for every head of that size). The server maps every
    allocation over 128 kB on its own (``ui.sizes.return_freed_memory``), so each fresh temporary was a new mapping
    to fault in: at 1,024 SmolLM2 tokens (270 heads) 2.2 s before, 0.51 s now; at 512 MiniLM tokens 243 -> 42 ms
    (``python -m benchmarks.overviews``, report "thirty-ninth")."""
    for name in names:
        _known(name)
    weights = _checked(weights)
    if weights.ndim != 2:
        raise ValueError(f"one head's weights must be (L, S), got shape {weights.shape}")
    scratch = {} if scratch is None else scratch
    if scratch.get("shape") != weights.shape:
        scratch.update(shape=weights.shape, w=np.empty(weights.shape), terms=np.empty(weights.shape),
                       mask=np.empty(weights.shape, dtype=bool))  # fmt: skip
    w, terms, mask = scratch["w"], scratch["terms"], scratch["mask"]  # (L, S) float64, float64, bool
    np.copyto(w, weights)  # float64 weights (widening is exact)
    np.isfinite(w, out=mask)
    w[np.logical_not(mask, out=mask)] = 0.0  # non-finite cells count as 0, as ``_weights``
    found: dict[str, float] = {}
    if "max_weight" in names:
        found["max_weight"] = w.max(axis=-1).mean()  # (L,) -> mean of each row's largest weight
    if "first_token" in names:
        found["first_token"] = _first_cells(w).mean()
    if "previous_token" in names:
        below = _previous_cells(w)
        found["previous_token"] = np.float64(0.0) if below is None else below.mean()
    if "entropy" in names:
        found["entropy"] = _entropy_rows(w, terms, mask).mean()
    if "distance" in names:  # last: it overwrites the copy
        found["distance"] = _distance_rows(w).mean()
    return {name: found[name] for name in names}


def overview_matrix(attentions, statistic: str) -> np.ndarray:
    """(layers, H): the statistic for every head of every layer, from attentions (layers, H, L, S)."""
    attentions = layer_stack("attentions", attentions)
    _known(statistic)
    # one layer at a time: float64 sums without a float64 copy of every layer (1.1 GB at 1,024 SmolLM2 tokens)
    return np.stack([head_statistic(layer, statistic) for layer in attentions])  # (layers, H)
