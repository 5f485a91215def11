"""Scaled dot-product attention from first principles, keeping every intermediate.

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k) + mask) V

Semantics follow ``torch.nn.functional.scaled_dot_product_attention`` exactly (the reference the
tests compare against): boolean mask True = may attend, float mask added to the scores, ``is_causal``
aligned top-left, ``scale`` keyword-only, grouped-query heads with ``enable_gqa``. One keyword torch
does not have: ``score_bias``, a float term added to the masked scores as its own step (ALiBi's
-slope * |i - j|), kept apart from the mask so ``masked`` holds the mask alone; without it every
result is torch's.

A query row whose keys are all masked (boolean mask all False, or float mask all -inf) gets weights
of exactly 0 and an output of exactly 0: the query "attends to nothing", and ``trace.empty_rows``
marks it. A plain softmax over a row of -inf gives NaN (0/0), and older torch releases returned
that NaN; the pinned torch 2.13 returns 0 for such a row too (checked on CPU with boolean and float
masks, math and default backends), so the output here matches torch's there. Half-precision inputs
(float16, bfloat16) are computed in float32, as torch's math backend does on CPU; the output is cast
back to the input dtype, the intermediates stay float32.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .masks import causal

_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


@dataclass(frozen=True)
class SDPATrace:
    """Every step of one attention call. Shapes use SDPA's letters (batch dims written ``...``)."""

    scores: torch.Tensor  # (..., H, L, S)  q_i . k_j
    scaled: torch.Tensor  # (..., H, L, S)  scores * scale
    masked: torch.Tensor  # (..., H, L, S)  scaled with -inf where not allowed, or + float mask
    weights: torch.Tensor  # (..., H, L, S)  softmax over keys; rows sum to 1 (0 for empty rows)
    output: torch.Tensor  # (..., H, L, Ev) weights @ value
    mask: torch.Tensor | None  # bool (L, S) or broadcastable, True = may attend; or the float mask
    scale: float  # the factor applied to the scores
    empty_rows: torch.Tensor  # bool (..., H, L, 1): rows whose keys were all masked
    dropout_p: float = 0.0
    score_bias: torch.Tensor | None = None  # (..., H, L, S) or broadcastable: a position bias (ALiBi), as given
    biased: torch.Tensor | None = None  # (..., H, L, S)  masked + score_bias, what softmax saw; None without a bias


def _describe(name: str, t: torch.Tensor) -> str:
    return f"{name} {tuple(t.shape)} {str(t.dtype).removeprefix('torch.')}"


def _check_inputs(query, key, value, attn_mask, is_causal, enable_gqa) -> None:
    shapes = ", ".join(_describe(n, t) for n, t in (("query", query), ("key", key), ("value", value)))
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dtype not in _FLOATS:
            raise ValueError(f"{name} must be a floating tensor, got {shapes}")
        if t.dim() < 2:
            raise ValueError(f"{name} needs at least 2 dims (L, E); got {shapes}")
    if not (query.dtype == key.dtype == value.dtype):
        raise ValueError(f"query, key and value must share a dtype; got {shapes}")
    if not (query.device == key.device == value.device):
        raise ValueError(
            f"query, key and value must be on one device; got {query.device}, {key.device}, {value.device}"
        )
    if query.dim() != key.dim() or key.dim() != value.dim():
        raise ValueError(f"query, key and value must have the same number of dims; got {shapes}")
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(f"query and key must share the last dim E; got {shapes}")
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(f"key and value must share the sequence dim S; got {shapes}")
    if key.shape[:-1] != value.shape[:-1]:
        raise ValueError(f"key and value batch/head dims must match; got {shapes}")
    if query.dim() >= 3:
        hq, hk = query.shape[-3], key.shape[-3]
        if enable_gqa and hq != hk:
            if hk == 0 or hq % hk:
                raise ValueError(f"grouped-query attention needs query heads divisible by key heads; got {shapes}")
        elif hq != hk and hk != 1 and hq != 1:
            raise ValueError(
                f"head dims differ ({hq} vs {hk}); pass enable_gqa=True for grouped-query attention; got {shapes}"
            )
        try:
            torch.broadcast_shapes(query.shape[:-3], key.shape[:-3])
        except RuntimeError as err:
            raise ValueError(f"batch dims do not broadcast; got {shapes}") from err
    if attn_mask is not None:
        if is_causal:
            raise ValueError("pass either attn_mask or is_causal=True, not both (torch refuses this too)")
        if not isinstance(attn_mask, torch.Tensor):
            raise ValueError(f"attn_mask must be a torch.Tensor, got {type(attn_mask).__name__}")
        if attn_mask.dtype != torch.bool and attn_mask.dtype not in _FLOATS:
            raise ValueError(
                f"attn_mask must be bool (True = may attend) or float (added); got {_describe('attn_mask', attn_mask)}"
            )
        target = (*query.shape[:-1], key.shape[-2])
        try:
            if torch.broadcast_shapes(attn_mask.shape, target) != torch.Size(target):
                raise RuntimeError
        except RuntimeError as err:
            raise ValueError(
                f"attn_mask {tuple(attn_mask.shape)} does not broadcast to the scores {target}; {shapes}"
            ) from err


def _check_bias(score_bias, query, key) -> None:
    if score_bias is None:
        return
    if not isinstance(score_bias, torch.Tensor) or score_bias.dtype not in _FLOATS:
        raise ValueError(f"score_bias must be a floating torch.Tensor, got {type(score_bias).__name__}")
    target = (*query.shape[:-1], key.shape[-2])
    try:
        if torch.broadcast_shapes(score_bias.shape, target) != torch.Size(target):
            raise RuntimeError
    except RuntimeError as err:
        raise ValueError(f"score_bias {tuple(score_bias.shape)} does not broadcast to the scores {target}") from err


def _empty_rows(attn_mask: torch.Tensor | None, weights: torch.Tensor) -> torch.Tensor:
    """(..., H, L, 1) True where the mask allows no key at all; read off the (small) mask, not the scores."""
    target = (*weights.shape[:-1], 1)
    if attn_mask is None:
        return torch.zeros((), dtype=torch.bool, device=weights.device).expand(target)
    if attn_mask.dtype == torch.bool:
        blocked = (~attn_mask).all(dim=-1, keepdim=True)  # (..., L, 1) every key blocked
    else:
        blocked = torch.isneginf(attn_mask).all(dim=-1, keepdim=True)  # every key at -inf
    return blocked.expand(target)


def default_scale(d_k: int) -> float:
    """1 / sqrt(d_k): the factor that keeps q . k at unit variance for unit-variance q and k."""
    return 1.0 / math.sqrt(d_k)


def repeat_kv(t: torch.Tensor, heads: int, *, dim: int = -3) -> torch.Tensor:
    """Grouped-query attention: each of the Hkv key/value heads on ``dim`` serves heads // Hkv query heads.

    (..., Hkv, S, E) -> (..., H, S, E); returned as it is (no copy) when there are already ``heads``.
    """
    if t.shape[dim] == heads:
        return t
    return t.repeat_interleave(heads // t.shape[dim], dim=dim)  # (..., H, S, E) kv head j serves a group


def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    *,
    scale: float | None = None,
    enable_gqa: bool = False,
    score_bias: torch.Tensor | None = None,
) -> SDPATrace:
    """softmax(query @ key^T * scale + mask [+ score_bias]) @ value, with every step returned.

    query (..., H, L, E), key (..., Hkv, S, E), value (..., Hkv, S, Ev) -> output (..., H, L, Ev).
    ``scale`` defaults to 1 / sqrt(E). ``score_bias`` (not torch's): a float tensor broadcastable to
    the scores, added after the mask (ALiBi). Raises ValueError for inputs torch would reject.
    """
    _check_inputs(query, key, value, attn_mask, is_causal, enable_gqa)
    _check_bias(score_bias, query, key)
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p}")
    out_dtype = query.dtype
    if out_dtype in (torch.float16, torch.bfloat16):
        query, key, value = query.float(), key.float(), value.float()
        if attn_mask is not None and attn_mask.dtype != torch.bool:
            attn_mask = attn_mask.float()
    num_queries, num_keys = query.shape[-2], key.shape[-2]
    scale = default_scale(query.shape[-1]) if scale is None else float(scale)

    if enable_gqa and query.dim() >= 3:
        key = repeat_kv(key, query.shape[-3])  # (..., H, S, E)    each kv head serves a group of queries
        value = repeat_kv(value, query.shape[-3])  # (..., H, S, Ev)
    if is_causal:
        rows, cols = max(num_queries, 1), max(num_keys, 1)  # torch accepts L = 0 or S = 0; masks.causal does not
        attn_mask = causal(rows, cols, device=query.device)[:num_queries, :num_keys]  # (L, S)

    scores = query @ key.transpose(-2, -1)  # (..., H, L, S)  q_i . k_j
    scaled = scores * scale  # 1/sqrt(d_k) unless told otherwise
    if attn_mask is None:
        masked = scaled  # nothing hidden
    elif attn_mask.dtype == torch.bool:
        masked = scaled.masked_fill(~attn_mask, float("-inf"))  # True = may attend
    else:
        masked = scaled + attn_mask  # float mask is added
    biased = None if score_bias is None else masked + score_bias.to(masked)  # + position bias; blocked stay -inf
    weights = (masked if biased is None else biased).softmax(dim=-1)  # (..., H, L, S) each row sums to 1
    empty_rows = _empty_rows(attn_mask, weights)  # (..., H, L, 1) no key allowed
    if attn_mask is not None and empty_rows.any():
        weights = weights.masked_fill(empty_rows, 0.0)  # softmax gave NaN (0/0); 0 as torch: attends to nothing
    used = torch.dropout(weights, dropout_p, train=True) if dropout_p > 0 else weights
    output = used @ value  # (..., H, L, Ev)  weighted sum of values
    return SDPATrace(
        scores=scores,
        scaled=scaled,
        masked=masked,
        weights=weights,
        output=output.to(out_dtype),
        mask=attn_mask,
        scale=scale,
        empty_rows=empty_rows,
        dropout_p=dropout_p,
        score_bias=score_bias,
        biased=biased,
    )
