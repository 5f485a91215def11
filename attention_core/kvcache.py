"""Key/value cache: greedy decoding one token at a time, each new query row against the cached keys.

A decoder predicts token t+1 from tokens 0..t. Without a cache, every step would run the whole prefix
again: t queries against t keys, O(t^2) dot products per layer. With a cache, only the new token is
projected; its key and value are appended to what every layer already holds, and its single query
row meets all of them:

    q_t = x_t W^Q                                   # (H, 1, E)     only the new token is projected
    K = [K; x_t W^K]                                # (Hkv, t, E)   one row appended per layer
    V = [V; x_t W^V]                                # (Hkv, t, Ev)
    scores = q_t K^T                                # (H, 1, t)     O(t) multiply-adds, not O(t^2)
    weights = softmax(scores * scale + mask)        # (H, 1, t)     the new row of the causal pattern
    output = weights V                              # (H, 1, Ev)

(rotary models rotate q_t and the new key by position t before they are used and cached.)
Grouped-query attention (SmolLM2: 9 query heads, 3 key/value heads) caches only the Hkv key/value
heads; query head h reads key/value head h // (H / Hkv), so the cache is H / Hkv times smaller than
one key/value per query head.

This module holds the arithmetic (sizes, multiply-adds, which query heads share a key/value head), the
results of a decoding run, and ``kv_cache_scratch``: the walk above for a from-scratch causal layer.
A real model is stepped through in ``kvcache_model`` (``kv_cache_decode``), checked against independent
references in ``kvcache_checks`` (its full causal pass, transformers' ``generate``, and the same run repeated
on a float64 copy of the model), and driven from the command line by ``kvcache_cli``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import torch

from .multihead import ProjectionWeights, split_heads
from .positional import apply_rotary, rotary_cos_sin
from .sdpa import scaled_dot_product_attention

MAX_ABS_DIFF = 1e-5  # the command line fails above this difference
DEFAULT_TEXT = "The capital of France is"


# ---------------------------------------------------------------- results


@dataclass(frozen=True)
class DecodeStep:
    """One cached step: the fed token's query row against the t cached keys of every layer (numpy, float32)."""

    step: int  # 1, 2, ...
    position: int  # position of the token fed in (its query row); t = position + 1 keys are cached
    fed_id: int  # the token fed in (the last prompt token at step 1, then the previous step's output)
    fed_text: str
    token_id: int  # the greedy next token this step produced
    token_text: str
    weights: np.ndarray  # (layers, H, t) the query row's weights over the cached keys
    output: np.ndarray  # (layers, H, Ev) the head outputs of the row (before the output projection)
    cache_bytes_per_layer: tuple[int, ...]  # keys + values the model's cache holds per layer after the step
    cache_bytes: int  # their sum over layers
    cache_bytes_one_kv_per_head: int  # the same positions with one key/value head per query head (x H / Hkv)
    seconds_step: float  # the cached forward of one token (hooks attached)
    seconds_full: float  # a forward over all t tokens without a cache (nan when not timed)
    macs_step: int  # attention multiply-adds of the cached step, all layers: H t (E + Ev) (t: the window, if any)
    macs_full: int  # the same for recomputing the prefix: H t^2 (E + Ev) (eager builds the full t x t scores)
    diff_cached: float  # max |core - model| over weights and outputs, the model's own cached forward
    diff_cache_object: float  # max |core's cache - the model's cache object| (keys and values)
    diff_full: float = math.nan  # max |core - full causal pass| over the row's weights and outputs
    diff_full_replay: float = math.nan  # the same row computed step-wise from the full pass's own q, k, v
    diff_generate: float = math.nan  # max |core - generate's returned weights| for the row
    # The same step on a float64 copy of the model, fed the same tokens (nan when not run): the core against
    # the model at matching precision, so float32 rounding inside the model does not hide a core error.
    diff_cached_float64: float = math.nan  # core vs the float64 model's own cached forward
    diff_full_float64: float = math.nan  # core's incremental row vs the float64 model's full causal pass

    @property
    def keys(self) -> int:
        return int(self.weights.shape[-1])


@dataclass(frozen=True)
class KVCacheRun:
    """A whole step-through decoding run of one model on one prompt."""

    model: str
    family: str
    num_layers: int
    num_heads: int  # H query heads
    num_kv_heads: int  # Hkv cached key/value heads
    head_dim: int  # E
    value_dim: int  # Ev
    bytes_per_element: int  # of the cached tensors (4 for float32)
    groups: tuple[tuple[int, ...], ...]  # key/value head j -> the query heads that read it
    prompt_ids: tuple[int, ...]
    prompt_labels: tuple[str, ...]
    steps: tuple[DecodeStep, ...]
    generate_ids: tuple[int, ...] | None  # transformers' generate, greedy (None when not run)
    notices: tuple[str, ...] = ()

    @property
    def new_ids(self) -> tuple[int, ...]:
        return tuple(s.token_id for s in self.steps)

    @property
    def new_text(self) -> str:
        return "".join(s.token_text for s in self.steps)

    @property
    def tokens_match_generate(self) -> bool | None:
        return None if self.generate_ids is None else self.generate_ids == self.new_ids

    def worst(self, name: str) -> float:
        """Largest ``diff_<name>`` over the steps (nan when none was measured)."""
        values = [getattr(s, f"diff_{name}") for s in self.steps if not math.isnan(getattr(s, f"diff_{name}"))]
        return max(values, default=math.nan)

    @property
    def gqa_saving(self) -> float:
        """How many times smaller the cache is than with one key/value head per query head (H / Hkv)."""
        return self.num_heads / self.num_kv_heads


def kv_groups(num_heads: int, num_kv_heads: int) -> tuple[tuple[int, ...], ...]:
    """Key/value head j -> the query heads that share it (h // (H / Hkv) == j, transformers' repeat_kv)."""
    if num_kv_heads < 1 or num_heads % num_kv_heads:
        raise ValueError(f"{num_heads} query heads cannot share {num_kv_heads} key/value heads evenly")
    per = num_heads // num_kv_heads
    return tuple(tuple(range(j * per, (j + 1) * per)) for j in range(num_kv_heads))


def cache_bytes(num_layers: int, kv_heads: int, keys: int, head_dim: int, value_dim: int, itemsize: int = 4) -> int:
    """Bytes of a key/value cache: layers x (keys (Hkv, t, E) + values (Hkv, t, Ev)) x bytes per element."""
    return num_layers * kv_heads * keys * (head_dim + value_dim) * itemsize


def attention_macs(num_layers: int, heads: int, queries: int, keys: int, head_dim: int, value_dim: int) -> int:
    """Multiply-adds of q k^T (H L S E) and weights v (H L S Ev), all layers."""
    return num_layers * heads * queries * keys * (head_dim + value_dim)


# ---------------------------------------------------------------- one decoder layer from scratch


@dataclass(frozen=True)
class ScratchStep:
    """One step of ``kv_cache_scratch``: the new query row against the t cached keys."""

    position: int
    weights: np.ndarray  # (H, t) in the dtype of x
    output: np.ndarray  # (H, Ev)
    cache_bytes: int  # keys + values held after the step (Hkv heads)
    cache_bytes_one_kv_per_head: int
    macs_step: int
    macs_full: int


@dataclass(frozen=True)
class ScratchRun:
    steps: tuple[ScratchStep, ...]
    groups: tuple[tuple[int, ...], ...]
    diff_full: float  # max |incremental - the core's full causal pass| over weights rows and outputs
    k_cache: np.ndarray = field(repr=False)  # (Hkv, L, E) the cache at the end
    v_cache: np.ndarray = field(repr=False)  # (Hkv, L, Ev)


def kv_cache_scratch(
    x: torch.Tensor, weights: ProjectionWeights, *, rotary_base: float | None = 10000.0, scale: float | None = None
) -> ScratchRun:
    """A causal self-attention layer of the core fed x (L, D) one row at a time through a key/value cache.

    Compared inside with the core's full causal pass (``multi_head_self_attention(is_causal=True)``);
    tests compare both with torch's own SDPA.
    """
    from .multihead import multi_head_self_attention, project

    if x.dim() != 2 or x.shape[-1] != weights.d_model:
        raise ValueError(f"x {tuple(x.shape)} must be (L, d_model={weights.d_model})")
    length, heads, kv_heads = x.shape[0], weights.num_heads, weights.kv_heads
    head_dim, value_dim = weights.d_k, weights.d_v
    rotate = None
    if rotary_base is not None:
        cos, sin = rotary_cos_sin(length, head_dim, base=rotary_base, dtype=x.dtype)  # (L, E) each
        rotate = partial(apply_rotary, cos=cos, sin=sin)
    full = multi_head_self_attention(x, weights, is_causal=True, scale=scale, rotate=rotate)
    k_cache = x.new_zeros(kv_heads, 0, head_dim)  # (Hkv, 0, E)
    v_cache = x.new_zeros(kv_heads, 0, value_dim)  # (Hkv, 0, Ev)
    steps, worst = [], 0.0
    for t in range(length):
        x_t = x[t : t + 1]  # (1, D)
        q = split_heads(project(x_t, weights.w_q, weights.b_q), heads)  # (H, 1, E)
        k = split_heads(project(x_t, weights.w_k, weights.b_k), kv_heads)  # (Hkv, 1, E)
        v = split_heads(project(x_t, weights.w_v, weights.b_v), kv_heads)  # (Hkv, 1, Ev)
        if rotary_base is not None:
            q = apply_rotary(q, cos[t : t + 1], sin[t : t + 1])  # rotated by position t
            k = apply_rotary(k, cos[t : t + 1], sin[t : t + 1])
        k_cache = torch.cat((k_cache, k), dim=-2)  # (Hkv, t+1, E)
        v_cache = torch.cat((v_cache, v), dim=-2)  # (Hkv, t+1, Ev)
        trace = scaled_dot_product_attention(q, k_cache, v_cache, scale=scale, enable_gqa=heads != kv_heads)
        row = trace.weights[:, 0]  # (H, t+1) no mask: every cached key lies at or before t
        out = trace.output[:, 0]  # (H, Ev)
        worst = max(
            worst,
            float((row - full.attention.weights[:, t, : t + 1]).abs().max()),
            float((full.attention.weights[:, t, t + 1 :]).abs().max()) if t + 1 < length else 0.0,
            float((out - full.attention.output[:, t]).abs().max()),
        )
        steps.append(
            ScratchStep(
                position=t,
                weights=row.detach().numpy(),  # dtype as computed
                output=out.detach().numpy(),
                cache_bytes=k_cache.nbytes + v_cache.nbytes,
                cache_bytes_one_kv_per_head=cache_bytes(1, heads, t + 1, head_dim, value_dim, x.element_size()),
                macs_step=attention_macs(1, heads, 1, t + 1, head_dim, value_dim),
                macs_full=attention_macs(1, heads, t + 1, t + 1, head_dim, value_dim),
            )
        )
    return ScratchRun(
        steps=tuple(steps),
        groups=kv_groups(heads, kv_heads),
        diff_full=worst,
        k_cache=k_cache.detach().numpy(),
        v_cache=v_cache.detach().numpy(),
    )


def __getattr__(name: str):
    """``from attention_core.kvcache import kv_cache_decode`` keeps working (it lives in ``kvcache_model``)."""
    if name == "kv_cache_decode":
        from .kvcache_model import kv_cache_decode

        return kv_cache_decode
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
