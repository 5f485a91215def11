"""Multi-head self-attention from X: project, split heads, attend, merge, project out.

    Q = X W^Q      K = X W^K      V = X W^V      (+ biases when a real model has them)
    head_h = softmax(Q_h K_h^T * scale + mask) V_h
    O = concat(head_1 .. head_H) W^O

Weights come from a seeded initialisation at teaching sizes, or from a real model's layer
(``ProjectionWeights`` takes them as (d_model, out) matrices, i.e. an nn.Linear weight transposed).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from .sdpa import SDPATrace, scaled_dot_product_attention


@dataclass(frozen=True)
class ProjectionWeights:
    """W^Q (D, H*E), W^K (D, Hkv*E), W^V (D, Hkv*Ev), optional W^O (H*Ev, D) and biases."""

    w_q: torch.Tensor
    w_k: torch.Tensor
    w_v: torch.Tensor
    num_heads: int
    num_kv_heads: int | None = None
    w_o: torch.Tensor | None = None
    b_q: torch.Tensor | None = None
    b_k: torch.Tensor | None = None
    b_v: torch.Tensor | None = None
    b_o: torch.Tensor | None = None

    def __post_init__(self) -> None:
        kv_heads = self.kv_heads
        d_model = self.w_q.shape[0]
        for name, w, heads in (
            ("w_q", self.w_q, self.num_heads),
            ("w_k", self.w_k, kv_heads),
            ("w_v", self.w_v, kv_heads),
        ):
            if w.dim() != 2 or w.shape[0] != d_model or w.shape[1] % heads:
                raise ValueError(f"{name} {tuple(w.shape)} must be (d_model={d_model}, heads*d) with heads={heads}")
        if self.w_q.shape[1] // self.num_heads != self.w_k.shape[1] // kv_heads:
            raise ValueError(
                f"query and key head dims differ: w_q {tuple(self.w_q.shape)}, w_k {tuple(self.w_k.shape)}"
            )
        if self.num_heads % kv_heads:
            raise ValueError(f"num_heads {self.num_heads} must be a multiple of num_kv_heads {kv_heads}")

    @property
    def kv_heads(self) -> int:
        return self.num_heads if self.num_kv_heads is None else self.num_kv_heads

    @property
    def d_model(self) -> int:
        return self.w_q.shape[0]

    @property
    def d_k(self) -> int:
        return self.w_q.shape[1] // self.num_heads

    @property
    def d_v(self) -> int:
        return self.w_v.shape[1] // self.kv_heads

    def head(self, name: str, h: int) -> torch.Tensor:
        """(D, E) slice of W^Q/W^K/W^V belonging to head ``h`` (kv heads are shared in GQA)."""
        w = getattr(self, f"w_{name}")
        heads = self.num_heads if name == "q" else self.kv_heads
        if name != "q":
            h = h // (self.num_heads // self.kv_heads)
        width = w.shape[1] // heads
        return w[:, h * width : (h + 1) * width]


def init_weights(
    d_model: int,
    d_k: int,
    num_heads: int,
    *,
    d_v: int | None = None,
    seed: int = 0,
    with_output: bool = True,
    dtype=torch.float32,
    device=None,
) -> ProjectionWeights:
    """Seeded random weights with std 1/sqrt(d_model): unit-variance X gives unit-variance q, k, v."""
    for name, size in (("d_model", d_model), ("d_k", d_k), ("num_heads", num_heads)):
        if size < 1:
            raise ValueError(f"{name} must be >= 1, got {size}")
    d_v = d_k if d_v is None else d_v
    generator = torch.Generator().manual_seed(seed)

    def draw(rows: int, cols: int) -> torch.Tensor:
        w = torch.randn(rows, cols, generator=generator, dtype=torch.float64) / rows**0.5
        return w.to(dtype=dtype, device=device)

    return ProjectionWeights(
        w_q=draw(d_model, num_heads * d_k),
        w_k=draw(d_model, num_heads * d_k),
        w_v=draw(d_model, num_heads * d_v),
        w_o=draw(num_heads * d_v, d_model) if with_output else None,
        num_heads=num_heads,
    )


def project(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """(..., L, D) @ (D, F) (+ bias) -> (..., L, F)."""
    out = x @ weight  # (..., L, F)
    return out if bias is None else out + bias


def split_heads(t: torch.Tensor, num_heads: int) -> torch.Tensor:
    """(..., L, H*E) -> (..., H, L, E)."""
    *batch, length, width = t.shape
    if width % num_heads:
        raise ValueError(f"cannot split width {width} into {num_heads} heads")
    return t.reshape(*batch, length, num_heads, width // num_heads).transpose(-3, -2)  # (..., H, L, E)


def merge_heads(t: torch.Tensor) -> torch.Tensor:
    """(..., H, L, E) -> (..., L, H*E)."""
    *batch, heads, length, width = t.shape
    return t.transpose(-3, -2).reshape(*batch, length, heads * width)  # (..., L, H*E)


@dataclass(frozen=True)
class MultiHeadTrace:
    """Everything one multi-head self-attention call computed."""

    x: torch.Tensor  # (..., L, D) input
    q: torch.Tensor  # (..., H, L, E)   after any rotary encoding
    k: torch.Tensor  # (..., Hkv, S, E)
    v: torch.Tensor  # (..., Hkv, S, Ev)
    attention: SDPATrace  # scores .. output per head
    merged: torch.Tensor  # (..., L, H*Ev) heads concatenated
    output: torch.Tensor  # (..., L, D) after W^O, or ``merged`` without W^O
    q_unrotated: torch.Tensor | None = None  # (..., H, L, E)   X W^Q (+ b^Q) before the rotation, when rotated
    k_unrotated: torch.Tensor | None = None  # (..., Hkv, S, E)


def multi_head_self_attention(
    x: torch.Tensor,
    weights: ProjectionWeights,
    *,
    attn_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    scale: float | None = None,
    rotate: Callable[[torch.Tensor], torch.Tensor] | None = None,
    score_bias: torch.Tensor | None = None,
) -> MultiHeadTrace:
    """Self-attention of X (..., L, D) through ``weights``.

    ``rotate`` is applied to q and k after the head split (rotary encoding). ``score_bias`` (H, L, S)
    is added to the masked scores as its own step (ALiBi), never folded into the mask.
    """
    if x.dim() < 2 or x.shape[-1] != weights.d_model:
        raise ValueError(f"x {tuple(x.shape)} must be (..., L, d_model={weights.d_model})")
    q = split_heads(project(x, weights.w_q, weights.b_q), weights.num_heads)  # (..., H, L, E)
    k = split_heads(project(x, weights.w_k, weights.b_k), weights.kv_heads)  # (..., Hkv, S, E)
    v = split_heads(project(x, weights.w_v, weights.b_v), weights.kv_heads)  # (..., Hkv, S, Ev)
    q_unrotated, k_unrotated = (q, k) if rotate is not None else (None, None)
    if rotate is not None:
        q, k = rotate(q), rotate(k)  # position enters through the angle of q and k
    attention = scaled_dot_product_attention(
        q,
        k,
        v,
        attn_mask=attn_mask,
        is_causal=is_causal,
        scale=scale,
        enable_gqa=weights.kv_heads != weights.num_heads,
        score_bias=score_bias,
    )
    merged = merge_heads(attention.output)  # (..., L, H*Ev)
    output = merged if weights.w_o is None else project(merged, weights.w_o, weights.b_o)  # (..., L, D)
    return MultiHeadTrace(
        x=x,
        q=q,
        k=k,
        v=v,
        attention=attention,
        merged=merged,
        output=output,
        q_unrotated=q_unrotated,
        k_unrotated=k_unrotated,
    )
