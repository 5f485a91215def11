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

``kv_cache_decode(loaded, text, steps)`` runs a real causal model this way (its own forward with its own
cache object, hooks from ``pretrained/capture.py`` record each new q, k, v) and recomputes every new row
with the core (``sdpa.scaled_dot_product_attention``) over the core's own cache (the hooked keys and
values appended step by step). Three independent references check it:
- the model's own weights for the new row in the same cached forward, and its own cache object;
- a full causal pass over the final sequence (``capture``: no cache, eager, ``output_attentions``):
  step t's row must equal row t of that pass (``diff_full``); and the cache step replayed on that pass's
  own q, k, v (one row against its first t keys, ``diff_full_replay``). The two differ where the model's
  cached forward and its full forward round differently in float32 (one row vs t rows per matmul,
  compounded over the layers): SmolLM2 drifts to about 1e-5 after 20-30 positions, while the core
  matches the cached forward to 0;
- transformers' ``generate`` (greedy, ``use_cache=True``): same next tokens, same attention rows.
``kv_cache_scratch(x, weights)`` is the same walk for a from-scratch causal layer (no model).

The prompt is run through the model minus its last token (the prefill fills the cache); step 1 feeds
the last prompt token, step s the token produced by step s-1. Decoding stops after ``steps`` tokens or
after an end-of-text token, as ``generate`` does.

A sliding-window layer (Mistral) reads only its last keys and its cache object evicts older ones: the
core keeps every key and masks those outside the window with -inf (weight 0, as in the full pass); the
cache bytes reported are what the model's cache object holds.

Timings: the hooked cached forward of one token vs a forward of the model over the whole sequence so
far without a cache (both produce the next token). Multiply-adds count q k^T and weights V only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
import time
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


# ---------------------------------------------------------------- a real causal model, step by step


def _max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    if a.shape != b.shape:
        raise ValueError(f"cannot compare shapes {tuple(a.shape)} and {tuple(b.shape)}")
    return float((a - b).abs().max()) if a.numel() else 0.0


def _cache_name(model) -> str:
    """The forward's cache keyword: ``cache`` (transformers >= 5.2x) or ``past_key_values`` (earlier)."""
    import inspect

    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _returned_cache(outputs):
    cache = getattr(outputs, "cache", None)
    return cache if cache is not None else getattr(outputs, "past_key_values", None)


def _cache_layer(cache, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(keys (B, Hkv, S, E), values (B, Hkv, S, Ev)) one layer holds in a transformers cache object."""
    layers = getattr(cache, "layers", None)
    if layers is not None:
        return layers[layer].keys, layers[layer].values
    if hasattr(cache, "key_cache"):
        return cache.key_cache[layer], cache.value_cache[layer]
    keys, values = cache[layer][:2]  # legacy tuple of (k, v) per layer
    return keys, values


@dataclass(frozen=True)
class _LayerRow:
    weights: torch.Tensor  # (H, t) the new row over every position; 0 where a sliding cache evicted the key
    output: torch.Tensor  # (H, Ev)
    seen: int  # keys the model's attention actually read this step (t, or its window)
    held_bytes: int  # keys + values the model's cache object holds for this layer after the step
    diff_cached: float  # vs the model's own weights and head outputs in this cached forward
    diff_cache_object: float  # the core's cached keys/values vs the model's cache object


def _core_row(captured, keys, values, model_keys, model_values) -> _LayerRow:
    """The core's attention for one layer's new query row over the core's own cache, checked against the model.

    captured: the hooked LayerCapture of the step (q (H, 1, E), weights (H, 1, S'), head outputs (H, 1, Ev),
    mask (1, 1, S') or None); keys (Hkv, t, E) / values (Hkv, t, Ev): every key and value seen so far;
    model_keys / model_values: (1, Hkv, held, E) what the model's cache object holds. A sliding-window layer
    reads only its last S' keys (and caches fewer): the older ones get -inf here, as the window says.
    """
    heads, kv_heads = captured.q.shape[0], keys.shape[0]
    total, seen = keys.shape[-2], captured.attentions.shape[-1]
    mask = captured.mask  # (1, 1, S') additive, or None
    if seen != total:
        row_mask = torch.full((1, 1, total), float("-inf"))  # (1, 1, t) keys outside the window
        row_mask[..., total - seen :] = 0.0 if mask is None else mask[..., -seen:]
        mask = row_mask
    trace = scaled_dot_product_attention(
        captured.q,  # (H, 1, E)
        keys,  # (Hkv, t, E)
        values,  # (Hkv, t, Ev)
        attn_mask=mask,  # (1, 1, t) additive, or None
        scale=captured.scale,
        enable_gqa=heads != kv_heads,  # query head h reads key/value head h // (H / Hkv)
    )
    weights, output = trace.weights[:, 0], trace.output[:, 0]  # (H, t), (H, Ev)
    held = model_keys.shape[-2]
    if held > total:
        raise ValueError(f"the model's cache holds {held} positions, more than the {total} fed in")
    diff_object = max(
        _max_diff(keys[:, total - held :], model_keys[0].to("cpu", torch.float32)),  # (Hkv, held, E)
        _max_diff(values[:, total - held :], model_values[0].to("cpu", torch.float32)),  # (Hkv, held, Ev)
    )
    diff_cached = max(
        _max_diff(weights[:, total - seen :], captured.attentions[:, 0]),  # (H, S')
        float(weights[:, : total - seen].abs().max()) if seen < total else 0.0,  # evicted keys weigh 0
        _max_diff(output, captured.attn_output[:, 0]),  # (H, Ev)
    )
    return _LayerRow(
        weights=weights,
        output=output,
        seen=seen,
        held_bytes=int(model_keys[0].nbytes + model_values[0].nbytes),
        diff_cached=diff_cached,
        diff_cache_object=diff_object,
    )


def _eos_ids(loaded) -> set[int]:
    found = getattr(getattr(loaded.model, "generation_config", None), "eos_token_id", None)
    if found is None:
        found = getattr(loaded.tokenizer, "eos_token_id", None)
    if found is None:
        return set()
    return {int(i) for i in (found if isinstance(found, (list, tuple)) else [found])}


def _check_decoder(loaded) -> None:
    if not loaded.facts.causal:
        raise ValueError(f"{loaded.name} is not a causal (decoder) model: it has no next token to decode")
    head = loaded.model.get_output_embeddings() if hasattr(loaded.model, "get_output_embeddings") else None
    if head is None or not hasattr(loaded.model, "generate"):
        raise ValueError(f"{loaded.name} was loaded without a language-model head, so it cannot pick a next token")
    if not loaded.capturable:
        raise ValueError(
            f"the attention layout of {loaded.name} is not one Attention Lens captures q, k, v for, so the core "
            "cannot recompute its cached steps"
        )


class _Stepper:
    """Runs the model with its own cache object and hooks; keeps the core's own cache beside it."""

    def __init__(self, loaded) -> None:
        self.loaded = loaded
        self.model = loaded.model
        self.cache_kw = _cache_name(loaded.model)
        self.cache = None  # the model's own cache object (e.g. DynamicCache), returned by its forward
        self.keys: list[torch.Tensor | None] = [None] * len(loaded.sites)  # core's cache, (Hkv, t, E) per layer
        self.values: list[torch.Tensor | None] = [None] * len(loaded.sites)  # (Hkv, t, Ev) per layer
        self.extra = {"logits_to_keep": 1} if "logits_to_keep" in self._params() else {}

    def _params(self):
        import inspect

        return inspect.signature(self.model.forward).parameters

    def forward(self, ids: torch.Tensor, seen: int, *, attentions: bool):
        """Feed ids (1, n) after ``seen`` cached tokens; returns (outputs, per-layer LayerCapture, seconds)."""
        from .pretrained.capture import _layer, _Recorder

        device = self.loaded.device
        recorder = _Recorder(self.loaded.sites)
        recorder.attach()
        try:
            start = time.perf_counter()
            outputs = self.model(
                input_ids=ids.to(device),
                attention_mask=torch.ones(1, seen + ids.shape[1], dtype=torch.long, device=device),
                use_cache=True,
                output_attentions=attentions,
                return_dict=True,
                **{self.cache_kw: self.cache},
                **self.extra,
            )
            seconds = time.perf_counter() - start
        finally:
            recorder.detach()
        self.cache = _returned_cache(outputs)
        returned = list(getattr(outputs, "attentions", None) or ()) if attentions else []
        notes: list[str] = []
        masks: dict = {}
        rotaries: dict = {}
        layers = []
        for i, (site, record) in enumerate(zip(self.loaded.sites, recorder.records, strict=True)):
            weights = returned[i].detach()[0].to("cpu", torch.float32) if returned else torch.empty(0)  # (H, n, S)
            captured = _layer(site, record, weights, None, masks, rotaries, notes)
            if not captured.captured:
                raise ValueError(f"layer {i}: the hooks did not see q, k, v of {self.loaded.name}")
            self.keys[i] = captured.k if self.keys[i] is None else torch.cat((self.keys[i], captured.k), dim=-2)
            self.values[i] = captured.v if self.values[i] is None else torch.cat((self.values[i], captured.v), dim=-2)
            layers.append(captured)
        return outputs, layers, seconds

    def time_full(self, ids: torch.Tensor) -> float:
        """Seconds of one forward over all of ``ids`` (1, t) without a cache: recomputing the prefix."""
        device = self.loaded.device
        start = time.perf_counter()
        self.model(
            input_ids=ids.to(device),
            attention_mask=torch.ones_like(ids, device=device),
            use_cache=False,
            output_attentions=True,
            return_dict=True,
            **self.extra,
        )
        return time.perf_counter() - start


def _decode_one(tokenizer, token_id: int) -> str:
    return tokenizer.decode([token_id], skip_special_tokens=False, clean_up_tokenization_spaces=False)


def kv_cache_decode(
    loaded,
    text: str,
    steps: int,
    *,
    max_tokens: int = 256,
    check_full: bool = True,
    check_generate: bool = True,
    time_full: bool = True,
) -> KVCacheRun:
    """Greedy decoding of ``text`` for up to ``steps`` tokens, one cached step at a time (see the module docstring).

    ``loaded`` is an ``attention_core.pretrained.LoadedModel`` of a causal model whose q, k, v can be captured.
    ``check_full``: compare every row with a full causal pass over the final sequence (``diff_full``).
    ``check_generate``: run transformers' greedy ``generate`` and compare tokens and rows (``diff_generate``).
    ``time_full``: time a cache-less forward over the prefix at every step (``seconds_full``).
    Raises ValueError for an encoder, an uncapturable layout, empty text or ``steps < 1``.
    """
    from .pretrained.tokens import tokenize_text

    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    _check_decoder(loaded)
    limit = loaded.facts.max_positions or None
    if limit is not None and limit <= steps:
        raise ValueError(f"{loaded.name} takes at most {limit} positions; ask for fewer than {limit} steps")
    tokens = tokenize_text(
        loaded.tokenizer, text, max_tokens=max_tokens if limit is None else min(max_tokens, limit - steps)
    )
    prompt = tokens.ids  # (1, P)
    site = loaded.sites[0]
    heads, kv_heads, head_dim = site.num_heads, site.num_kv_heads, site.head_dim
    num_layers = len(loaded.sites)
    eos = _eos_ids(loaded)
    notices = [tokens.notice] if tokens.notice else []
    stepper = _Stepper(loaded)
    sequence = prompt  # (1, n) every token fed so far, plus the one about to be fed
    records: list[dict] = []
    with loaded.lock, torch.no_grad():  # hooks live on shared modules: one run at a time
        if prompt.shape[1] > 1:
            stepper.forward(prompt[:, :-1], 0, attentions=False)  # prefill: fills both caches
        for step in range(1, steps + 1):
            position = sequence.shape[1] - 1
            fed = sequence[:, -1:]  # (1, 1)
            outputs, layers, seconds = stepper.forward(fed, position, attentions=True)
            new_id = int(outputs.logits[0, -1].argmax())
            weights, output = [], []
            diff_cached = diff_object = 0.0
            per_layer, macs_step = [], 0
            for i, captured in enumerate(layers):
                layer = _core_row(captured, stepper.keys[i], stepper.values[i], *_cache_layer(stepper.cache, i))
                diff_cached = max(diff_cached, layer.diff_cached)
                diff_object = max(diff_object, layer.diff_cache_object)
                per_layer.append(layer.held_bytes)
                macs_step += attention_macs(1, heads, 1, layer.seen, head_dim, layer.output.shape[-1])
                weights.append(layer.weights)
                output.append(layer.output)
            keys_now = position + 1
            value_dim = stepper.values[0].shape[-1]
            itemsize = _cache_layer(stepper.cache, 0)[0].element_size()
            seconds_full = stepper.time_full(sequence) if time_full else math.nan
            records.append(
                {
                    "step": step,
                    "position": position,
                    "fed_id": int(fed[0, 0]),
                    "fed_text": _decode_one(loaded.tokenizer, int(fed[0, 0])),
                    "token_id": new_id,
                    "token_text": _decode_one(loaded.tokenizer, new_id),
                    "weights": torch.stack(weights).numpy(),  # (layers, H, t)
                    "output": torch.stack(output).numpy(),  # (layers, H, Ev)
                    "cache_bytes_per_layer": tuple(per_layer),
                    "cache_bytes": sum(per_layer),
                    "cache_bytes_one_kv_per_head": sum(per_layer) * heads // kv_heads,
                    "seconds_step": seconds,
                    "seconds_full": seconds_full,
                    "macs_step": macs_step,
                    "macs_full": attention_macs(num_layers, heads, keys_now, keys_now, head_dim, value_dim),
                    "diff_cached": diff_cached,
                    "diff_cache_object": diff_object,
                }
            )
            if new_id in eos:
                notices.append(f"Decoding stopped after {step} steps: the model produced its end-of-text token.")
                break
            if step < steps:
                sequence = torch.cat((sequence, torch.tensor([[new_id]])), dim=1)  # (1, n + 1)
        stepper.cache = None
    if check_full:
        _compare_full(loaded, sequence, records)
    generate_ids = None
    if check_generate:
        generate_ids = _compare_generate(loaded, prompt, steps, records)
    return KVCacheRun(
        model=loaded.name,
        family=loaded.family,
        num_layers=num_layers,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        value_dim=int(records[0]["output"].shape[-1]),
        bytes_per_element=itemsize,
        groups=kv_groups(heads, kv_heads),
        prompt_ids=tokens.token_ids,
        prompt_labels=tokens.labels,
        steps=tuple(DecodeStep(**r) for r in records),
        generate_ids=generate_ids,
        notices=tuple(dict.fromkeys((*loaded.notices, *notices))),
    )


def _compare_full(loaded, sequence: torch.Tensor, records: list[dict]) -> None:
    """Row ``position`` of a full causal pass over every fed token (no cache) against each step's row."""
    from .pretrained.capture import capture
    from .pretrained.tokens import Tokens

    ids = [int(i) for i in sequence[0].tolist()]
    special = set(getattr(loaded.tokenizer, "all_special_ids", ()) or ())
    tokens = Tokens(
        text="",
        ids=sequence,  # (1, n)
        attention_mask=torch.ones_like(sequence),  # (1, n)
        labels=tuple(_decode_one(loaded.tokenizer, i) for i in ids),
        offsets=((0, 0),) * len(ids),
        special=tuple(i in special for i in ids),
    )
    full = capture(loaded, tokens)
    for record in records:
        p = record["position"]
        worst = 0.0
        replayed = 0.0
        for i, layer in enumerate(full.layers):
            row = torch.from_numpy(record["weights"][i])  # (H, t)
            out = torch.from_numpy(record["output"][i])  # (H, Ev)
            later = float(layer.attentions[:, p, p + 1 :].abs().max()) if p + 1 < layer.attentions.shape[-1] else 0.0
            worst = max(
                worst,
                _max_diff(row, layer.attentions[:, p, : p + 1]),  # (H, t)
                later,  # keys after the query weigh 0
                _max_diff(out, layer.attn_output[:, p]),  # (H, Ev)
            )
            # The cache step on the full pass's own q, k, v: one query row against the first t keys.
            trace = scaled_dot_product_attention(
                layer.q[:, p : p + 1],  # (H, 1, E)
                layer.k[:, : p + 1],  # (Hkv, t, E)   what a cache holds at step t
                layer.v[:, : p + 1],  # (Hkv, t, Ev)
                attn_mask=None if layer.mask is None else layer.mask[..., p : p + 1, : p + 1],  # (1, 1, t)
                scale=layer.scale,
                enable_gqa=layer.q.shape[0] != layer.k.shape[0],
            )
            replayed = max(
                replayed,
                _max_diff(trace.weights[:, 0], layer.attentions[:, p, : p + 1]),
                _max_diff(trace.output[:, 0], layer.attn_output[:, p]),
            )
        record["diff_full"] = worst
        record["diff_full_replay"] = replayed


def _compare_generate(loaded, prompt: torch.Tensor, steps: int, records: list[dict]) -> tuple[int, ...]:
    """transformers' greedy ``generate`` with its own cache: its tokens, and its rows against the core's."""
    model = loaded.model
    pad = getattr(loaded.tokenizer, "pad_token_id", None)
    if pad is None:
        pad = next(iter(_eos_ids(loaded)), 0)
    with loaded.lock, torch.no_grad():
        out = model.generate(
            input_ids=prompt.to(loaded.device),
            attention_mask=torch.ones_like(prompt, device=loaded.device),
            max_new_tokens=steps,
            do_sample=False,
            num_beams=1,
            use_cache=True,
            output_attentions=True,
            return_dict_in_generate=True,
            pad_token_id=pad,
        )
    new = tuple(int(i) for i in out.sequences[0, prompt.shape[1] :].tolist())
    for s, record in enumerate(records):
        if s >= len(out.attentions):
            break
        worst = 0.0
        for i, returned in enumerate(out.attentions[s]):
            row = returned.detach()[0, :, -1].to("cpu", torch.float32)  # (H, t) the last query row of the call
            mine = torch.from_numpy(record["weights"][i])  # (H, t)
            seen = row.shape[-1]  # a sliding-window layer returns only its window
            evicted = float(mine[:, :-seen].abs().max()) if mine.shape[-1] > seen else 0.0
            worst = max(worst, _max_diff(mine[:, -seen:], row), evicted)
        record["diff_generate"] = worst
    return new


# ---------------------------------------------------------------- command line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        default="smollm2",
        help="smollm2 (default), a causal hub id or local folder, or 'scratch' (a random from-scratch layer)",
    )
    parser.add_argument("--text", default=DEFAULT_TEXT, help="the prompt")
    parser.add_argument("--steps", type=int, default=8, help="tokens to decode (fewer if end-of-text comes first)")
    parser.add_argument("--tolerance", type=float, default=MAX_ABS_DIFF, help="largest allowed difference")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--no-generate", action="store_true", help="skip the comparison with transformers' generate")
    parser.add_argument("--device", default=None, help="cpu, cuda, mps or auto")
    parser.add_argument("--models-dir", default=None, help="only allow local model folders inside this directory")


def _finite(value: float) -> float | None:
    return None if math.isnan(value) else value


def _step_row(step: DecodeStep) -> dict:
    return {
        "step": step.step,
        "position": step.position,
        "fed": step.fed_text,
        "token_id": step.token_id,
        "token": step.token_text,
        "keys": step.keys,
        "cache_bytes": step.cache_bytes,
        "cache_bytes_per_layer": list(step.cache_bytes_per_layer),
        "cache_bytes_one_kv_per_head": step.cache_bytes_one_kv_per_head,
        "seconds_step": step.seconds_step,
        "seconds_full": _finite(step.seconds_full),
        "macs_step": step.macs_step,
        "macs_full": step.macs_full,
        "max_abs_diff_full": _finite(step.diff_full),
        "max_abs_diff_full_replay": _finite(step.diff_full_replay),
        "max_abs_diff_cached": step.diff_cached,
        "max_abs_diff_cache_object": step.diff_cache_object,
        "max_abs_diff_generate": _finite(step.diff_generate),
    }


def _run_scratch(args) -> int:
    from .multihead import init_weights

    generator = torch.Generator().manual_seed(0)
    heads, kv_heads, d_model, head_dim = 8, 2, 64, 16
    full = init_weights(d_model, head_dim, heads, seed=0)
    keep = kv_heads * head_dim  # the first Hkv heads' key/value columns: a grouped-query layer
    weights = ProjectionWeights(
        w_q=full.w_q, w_k=full.w_k[:, :keep], w_v=full.w_v[:, :keep], num_heads=heads, num_kv_heads=kv_heads
    )
    x = torch.randn(args.steps, d_model, generator=generator)  # (L, D)
    run = kv_cache_scratch(x, weights)
    rows = [
        {
            "step": s.position + 1,
            "position": s.position,
            "keys": s.position + 1,
            "cache_bytes": s.cache_bytes,
            "cache_bytes_one_kv_per_head": s.cache_bytes_one_kv_per_head,
            "macs_step": s.macs_step,
            "macs_full": s.macs_full,
        }
        for s in run.steps
    ]
    ok = run.diff_full <= args.tolerance
    if args.json:
        print(
            json.dumps(
                {
                    "model": "scratch",
                    "num_heads": heads,
                    "num_kv_heads": kv_heads,
                    "head_dim": head_dim,
                    "groups": [list(g) for g in run.groups],
                    "max_abs_diff_full": run.diff_full,
                    "tolerance": args.tolerance,
                    "ok": ok,
                    "steps": rows,
                },
                indent=1,
            )
        )
    else:
        print(f"scratch causal layer: {heads} query heads, {kv_heads} key/value heads, E={head_dim}, rotary")
        print(f"{'step':>4}  {'keys':>4}  {'cache B':>9}  {'one kv/head B':>13}  {'MACs step':>9}  {'MACs full':>10}")
        for r in rows:
            print(
                f"{r['step']:>4}  {r['keys']:>4}  {r['cache_bytes']:>9}  {r['cache_bytes_one_kv_per_head']:>13}  "
                f"{r['macs_step']:>9}  {r['macs_full']:>10}"
            )
        print(f"{'OK' if ok else 'FAILED'}: max |incremental - full causal pass| {run.diff_full:.3g}")
    return 0 if ok else 1


def run(args: argparse.Namespace) -> int:
    """Decode, compare, print; exit 0 within tolerance, 1 above it (or tokens differ), 2 unusable input."""
    if args.steps < 1:
        print("error: --steps must be at least 1", file=sys.stderr)
        return 2
    if args.model == "scratch":
        return _run_scratch(args)
    from .pretrained import load_model

    quiet = contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext()
    try:
        with quiet:
            loaded = load_model(args.model, device=args.device, models_dir=args.models_dir)
            result = kv_cache_decode(loaded, args.text, args.steps, check_generate=not args.no_generate)
    except ValueError as err:  # ModelLoadError is a ValueError
        print(f"error: {err}", file=sys.stderr)
        return 2
    worst = {name: result.worst(name) for name in ("full", "full_replay", "cached", "cache_object", "generate")}
    over = [name for name, value in worst.items() if not math.isnan(value) and not value <= args.tolerance]
    ok = not over and result.tokens_match_generate is not False
    notices = list(result.notices)
    if "full" in over and "full_replay" not in over and worst["cached"] <= args.tolerance:
        notices.append(
            f"The cached rows differ from the full pass by {worst['full']:.2g}, yet the core equals the model's own "
            f"cached forward ({worst['cached']:.2g}) and the full pass's own q, k, v replayed step-wise "
            f"({worst['full_replay']:.2g}): the model's cached and full forwards round differently in float32."
        )
    if args.json:
        print(
            json.dumps(
                {
                    "model": result.model,
                    "family": result.family,
                    "num_layers": result.num_layers,
                    "num_heads": result.num_heads,
                    "num_kv_heads": result.num_kv_heads,
                    "head_dim": result.head_dim,
                    "groups": [list(g) for g in result.groups],
                    "gqa_saving": result.gqa_saving,
                    "prompt": list(result.prompt_labels),
                    "new_text": result.new_text,
                    "new_ids": list(result.new_ids),
                    "generate_ids": None if result.generate_ids is None else list(result.generate_ids),
                    "tokens_match_generate": result.tokens_match_generate,
                    "max_abs_diff": {name: _finite(value) for name, value in worst.items()},
                    "tolerance": args.tolerance,
                    "ok": ok,
                    "notices": notices,
                    "steps": [_step_row(s) for s in result.steps],
                },
                indent=1,
            )
        )
    else:
        print(
            f"{result.model}: {result.family}, {result.num_layers} layers, {result.num_heads} query heads, "
            f"{result.num_kv_heads} key/value heads (E={result.head_dim}); prompt {len(result.prompt_ids)} tokens"
        )
        shared = ", ".join(f"kv{j}<-q{','.join(map(str, g))}" for j, g in enumerate(result.groups))
        print(f"grouped-query: {shared}; the cache is {result.gqa_saving:g}x smaller than one K/V per query head")
        print(
            f"{'step':>4}  {'token':<14} {'keys':>4}  {'cache KiB':>9}  {'1 kv/head':>9}  {'ms step':>8}  "
            f"{'ms full':>8}  {'MACs step':>10}  {'MACs full':>11}  {'diff full':>9}  {'diff cached':>11}"
        )
        for s in result.steps:
            full_ms = "n/a" if math.isnan(s.seconds_full) else f"{1e3 * s.seconds_full:.1f}"
            diff_full = "n/a" if math.isnan(s.diff_full) else f"{s.diff_full:.2g}"
            print(
                f"{s.step:>4}  {json.dumps(s.token_text)[:14]:<14} {s.keys:>4}  {s.cache_bytes / 1024:>9.1f}  "
                f"{s.cache_bytes_one_kv_per_head / 1024:>9.1f}  {1e3 * s.seconds_step:>8.1f}  {full_ms:>8}  "
                f"{s.macs_step:>10}  {s.macs_full:>11}  {diff_full:>9}  {max(s.diff_cached, s.diff_cache_object):>11.2g}"
            )
        match = result.tokens_match_generate
        print(
            f"text: {result.new_text!r}; generate's tokens: {'not run' if match is None else ('same' if match else 'DIFFERENT')}"
        )
        for notice in notices:
            print(f"note: {notice}")
        shown = ", ".join(f"{k} {v:.2g}" for k, v in worst.items() if not math.isnan(v))
        print(f"{'OK' if ok else 'FAILED'}: max |difference| {shown}; tolerance {args.tolerance:g}")
    return 0 if ok else 1
