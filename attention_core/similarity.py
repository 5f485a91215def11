"""The dot product as a similarity: q_i . k_j split into lengths and the angle between them.

    q_i . k_j = |q_i| |k_j| cos(theta_ij)          # the score before scaling
    cos(theta_ij) = q_i . k_j / (|q_i| |k_j|)       # in [-1, 1]: 1 same direction, 0 orthogonal, -1 opposite

So a score is high when the key points the way the query points (cos near 1) AND both vectors are
long; two orthogonal vectors score 0 whatever their lengths. ``dot_decomposition`` splits one head's
real q and k this way; ``toy_pair`` does it for two 2-D arrows at a chosen angle.
A zero-length vector has no direction: its cosine is reported as 0 (as its dot product is).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class DotDecomposition:
    """Every (query, key) pair of one head: the score and its two factors, float64 numpy."""

    dot: np.ndarray  # (L, S)  q_i . k_j
    query_norms: np.ndarray  # (L,)  |q_i|
    key_norms: np.ndarray  # (S,)  |k_j|
    cosine: np.ndarray  # (L, S)  cos(theta_ij); 0 where either vector has length 0
    angle_deg: np.ndarray  # (L, S)  theta_ij in degrees, 0..180; 90 where either vector has length 0

    def row(self, query: int) -> dict[str, np.ndarray | float]:
        """One query's scores and factors: dot (S,), query_norm, key_norms (S,), lengths (S,) = |q_i| |k_j|,
        cosine (S,), angle_deg (S,)."""
        if not 0 <= query < self.dot.shape[0]:
            raise ValueError(f"query {query} out of range 0..{self.dot.shape[0] - 1}")
        return {
            "dot": self.dot[query],
            "query_norm": float(self.query_norms[query]),
            "key_norms": self.key_norms,
            "lengths": self.query_norms[query] * self.key_norms,
            "cosine": self.cosine[query],
            "angle_deg": self.angle_deg[query],
        }


def _as_matrix(name: str, values) -> torch.Tensor:
    t = torch.as_tensor(np.asarray(values) if not isinstance(values, torch.Tensor) else values)
    if t.dim() != 2:
        raise ValueError(f"{name} must be 2-D (rows, E), got shape {tuple(t.shape)}")
    return t.detach().to(torch.float64)


def dot_decomposition(q, k) -> DotDecomposition:
    """Split every score q_i . k_j of one head into |q_i|, |k_j| and cos(theta_ij).

    ``q`` (L, E) and ``k`` (S, E), numpy or torch (one head's query and key vectors, e.g. a
    ``HeadTrace``'s). Computed in float64, so dot == |q| |k| cos holds to rounding.
    """
    query, key = _as_matrix("q", q), _as_matrix("k", k)
    if query.shape[1] != key.shape[1]:
        raise ValueError(f"q {tuple(query.shape)} and k {tuple(key.shape)} must share the last dimension E")
    dot = query @ key.T  # (L, S)  q_i . k_j
    query_norms = query.norm(dim=-1)  # (L,)  |q_i|
    key_norms = key.norm(dim=-1)  # (S,)  |k_j|
    lengths = query_norms[:, None] * key_norms[None, :]  # (L, S)  |q_i| |k_j|
    has_direction = lengths > 0
    cosine = torch.where(has_direction, dot / torch.where(has_direction, lengths, 1.0), 0.0)  # (L, S)
    cosine = cosine.clamp(-1.0, 1.0)  # rounding can step a hair past +-1
    angle = torch.rad2deg(torch.arccos(cosine))  # (L, S)  0..180 degrees
    return DotDecomposition(
        dot=dot.numpy(),
        query_norms=query_norms.numpy(),
        key_norms=key_norms.numpy(),
        cosine=cosine.numpy(),
        angle_deg=angle.numpy(),
    )


@dataclass(frozen=True)
class ToyPair:
    """Two 2-D vectors: a along the x axis, b at ``angle_deg`` from it."""

    a: np.ndarray  # (2,)
    b: np.ndarray  # (2,)
    angle_deg: float
    dot: float  # a . b, computed from the coordinates
    cosine: float  # a . b / (|a| |b|)


def toy_pair(angle_deg: float, length_a: float = 1.0, length_b: float = 1.0) -> ToyPair:
    """Vectors a = |a| (1, 0) and b = |b| (cos t, sin t); their dot product from the coordinates."""
    if length_a <= 0 or length_b <= 0:
        raise ValueError(f"lengths must be positive, got {length_a}, {length_b}")
    theta = math.radians(float(angle_deg))
    a = np.array([length_a, 0.0])  # (2,)
    b = np.array([length_b * math.cos(theta), length_b * math.sin(theta)])  # (2,)
    dot = float(a @ b)  # sum of coordinate products, not the cosine formula
    return ToyPair(a=a, b=b, angle_deg=float(angle_deg), dot=dot, cosine=dot / (length_a * length_b))
