"""max |a - b|: the one number every check in the core reports (replay, permutation, tiling, symmetry)."""

from __future__ import annotations

import numpy as np
import torch


def max_difference(a: torch.Tensor | np.ndarray, b: torch.Tensor | np.ndarray) -> float:
    """max |a - b| over every entry, as a float (0.0 when empty); torch tensors or numpy arrays of one shape."""
    a, b = torch.as_tensor(a), torch.as_tensor(b)  # zero-copy for numpy
    if a.shape != b.shape:
        raise ValueError(f"cannot compare shapes {tuple(a.shape)} and {tuple(b.shape)}")
    return float((a - b).abs_().max()) if a.numel() else 0.0  # abs_ on the fresh difference: one buffer
