"""One-line numbers under each derivation step (numpy in, plain floats out)."""

from __future__ import annotations

import math

import numpy as np
import torch

from .analysis import row_entropy
from .traces import HeadTrace


def step_readouts(head: HeadTrace) -> dict[str, float]:
    """Variance before/after scaling, blocked cells, empty rows, row sums, entropy of one head."""
    allowed = head.mask  # (L, S)
    scores = np.asarray(head.scores, dtype=np.float64)  # (L, S) sums in float64 whatever the trace holds
    finite_scores = scores[allowed] if allowed.any() else scores.ravel()
    weights = np.asarray(head.weights, dtype=np.float64)  # (L, S)
    entropy = row_entropy(torch.from_numpy(weights)).numpy()  # (L,) nats
    sums = weights.sum(axis=-1)  # (L,)
    empty = ~allowed.any(axis=-1)  # (L,)
    keys_per_row = allowed.sum(axis=-1).clip(min=1)  # (L,)
    return {
        "d_k": float(head.q.shape[-1]),
        "scale": float(head.scale),
        "score_var": float(np.var(finite_scores)),
        "scaled_var": float(np.var(finite_scores * head.scale)),
        "score_absmax": float(np.abs(finite_scores).max()),
        "blocked": int((~allowed).sum()),
        "cells": int(allowed.size),
        "empty_rows": int(empty.sum()),
        "row_sum_min": float(sums.min()),
        "row_sum_max": float(sums.max()),
        "entropy": float(entropy.mean()),
        "max_entropy": float(np.mean(np.log(keys_per_row))),
        "max_weight": float(weights.max(axis=-1).mean()),
        "uniform_entropy": math.log(weights.shape[-1]),
    }


def top_keys(weights_row: np.ndarray, count: int = 3) -> list[int]:
    """Key positions of one query row's ``count`` largest weights, largest first."""
    return [int(j) for j in np.argsort(weights_row, kind="stable")[::-1][:count]]
