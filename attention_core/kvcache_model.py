"""A real causal model decoded greedily one cached step at a time, every new row recomputed by the core.

``kv_cache_decode(loaded, text, steps)`` runs the model with its own cache object (its own forward; hooks
from ``pretrained/capture.py`` record each new q, k, v) and recomputes every new query row with the core
(``sdpa.scaled_dot_product_attention``) over the core's own cache: the hooked keys and values appended
step by step. Within the step it is compared with the model's own weights and head outputs and with the
model's cache object; ``kvcache_checks`` adds the references outside the run (a full causal pass,
transformers' ``generate``, the same run on a float64 copy of the model).

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

import inspect
import math
import time
from dataclasses import dataclass

import torch

from .kvcache import DecodeStep, KVCacheRun, attention_macs, kv_groups
from .sdpa import scaled_dot_product_attention

# ---------------------------------------------------------------- transformers' cache objects


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b| (0 for empty tensors); refuses tensors of different shapes."""
    if a.shape != b.shape:
        raise ValueError(f"cannot compare shapes {tuple(a.shape)} and {tuple(b.shape)}")
    return float((a - b).abs().max()) if a.numel() else 0.0


def _cache_name(model) -> str:
    """The forward's cache keyword: ``cache`` (transformers >= 5.2x) or ``past_key_values`` (earlier)."""
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _returned_cache(outputs):
    cache = getattr(outputs, "cache", None)
    return cache if cache is not None else getattr(outputs, "past_key_values", None)


def cache_layer(cache, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(keys (B, Hkv, S, E), values (B, Hkv, S, Ev)) one layer holds in a transformers cache object."""
    layers = getattr(cache, "layers", None)
    if layers is not None:
        return layers[layer].keys, layers[layer].values
    if hasattr(cache, "key_cache"):
        return cache.key_cache[layer], cache.value_cache[layer]
    keys, values = cache[layer][:2]  # legacy tuple of (k, v) per layer
    return keys, values


def decode_one(tokenizer, token_id: int) -> str:
    return tokenizer.decode([token_id], skip_special_tokens=False, clean_up_tokenization_spaces=False)


def eos_ids(loaded) -> set[int]:
    """The model's end-of-text token ids (generation config first, then the tokenizer)."""
    found = getattr(getattr(loaded.model, "generation_config", None), "eos_token_id", None)
    if found is None:
        found = getattr(loaded.tokenizer, "eos_token_id", None)
    if found is None:
        return set()
    return {int(i) for i in (found if isinstance(found, (list, tuple)) else [found])}


# ---------------------------------------------------------------- one layer's new row, by the core


@dataclass(frozen=True)
class LayerRow:
    weights: torch.Tensor  # (H, t) the new row over every position; 0 where a sliding cache evicted the key
    output: torch.Tensor  # (H, Ev)
    seen: int  # keys the model's attention actually read this step (t, or its window)
    held_bytes: int  # keys + values the model's cache object holds for this layer after the step
    diff_cached: float  # vs the model's own weights and head outputs in this cached forward
    diff_cache_object: float  # the core's cached keys/values vs the model's cache object


def core_row(captured, keys, values, model_keys, model_values) -> LayerRow:
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
        row_mask = torch.full((1, 1, total), float("-inf"), dtype=keys.dtype)  # (1, 1, t) keys outside the window
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
        max_diff(keys[:, total - held :], model_keys[0].to("cpu", keys.dtype)),  # (Hkv, held, E)
        max_diff(values[:, total - held :], model_values[0].to("cpu", values.dtype)),  # (Hkv, held, Ev)
    )
    diff_cached = max(
        max_diff(weights[:, total - seen :], captured.attentions[:, 0]),  # (H, S')
        float(weights[:, : total - seen].abs().max()) if seen < total else 0.0,  # evicted keys weigh 0
        max_diff(output, captured.attn_output[:, 0]),  # (H, Ev)
    )
    return LayerRow(
        weights=weights,
        output=output,
        seen=seen,
        held_bytes=int(model_keys[0].nbytes + model_values[0].nbytes),
        diff_cached=diff_cached,
        diff_cache_object=diff_object,
    )


# ---------------------------------------------------------------- the model, one token at a time


def _recorder(sites, dtype: torch.dtype):
    """capture's hooks; for a float64 model a variant that keeps float64 (capture's own copies are float32)."""
    from .pretrained.capture import _Recorder

    if dtype != torch.float64:
        return _Recorder(sites)

    class _Float64Recorder(_Recorder):
        @staticmethod
        def _copy(t: torch.Tensor) -> torch.Tensor:
            return t.detach()[0].to("cpu", dtype=torch.float64, copy=True)  # batch 1 -> drop B

    return _Float64Recorder(sites)


class Stepper:
    """Runs the model with its own cache object and hooks; keeps the core's own cache beside it.

    ``dtype``: what the hooked q, k, v, weights and head outputs are kept in (float32, or float64 for a
    float64 copy of the model).
    """

    def __init__(self, loaded, dtype: torch.dtype = torch.float32) -> None:
        self.loaded = loaded
        self.model = loaded.model
        self.dtype = dtype
        self.cache_kw = _cache_name(loaded.model)
        self.cache = None  # the model's own cache object (e.g. DynamicCache), returned by its forward
        self.keys: list[torch.Tensor | None] = [None] * len(loaded.sites)  # core's cache, (Hkv, t, E) per layer
        self.values: list[torch.Tensor | None] = [None] * len(loaded.sites)  # (Hkv, t, Ev) per layer
        params = inspect.signature(self.model.forward).parameters
        self.extra = {"logits_to_keep": 1} if "logits_to_keep" in params else {}

    def forward(self, ids: torch.Tensor, seen: int, *, attentions: bool):
        """Feed ids (1, n) after ``seen`` cached tokens; returns (outputs, per-layer LayerCapture, seconds)."""
        from .pretrained.capture import _layer

        device = self.loaded.device
        recorder = _recorder(self.loaded.sites, self.dtype)
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
            weights = returned[i].detach()[0].to("cpu", self.dtype) if returned else torch.empty(0)  # (H, n, S)
            captured = _layer(site, record, weights, None, masks, rotaries, notes)
            if not captured.captured:
                raise ValueError(f"layer {i}: the hooks did not see q, k, v of {self.loaded.name}")
            self.keys[i] = captured.k if self.keys[i] is None else torch.cat((self.keys[i], captured.k), dim=-2)
            self.values[i] = captured.v if self.values[i] is None else torch.cat((self.values[i], captured.v), dim=-2)
            layers.append(captured)
        return outputs, layers, seconds

    def core_rows(self, layers) -> list[LayerRow]:
        """The core's new row of every layer over its own cache, each checked against the model (``core_row``)."""
        return [
            core_row(captured, self.keys[i], self.values[i], *cache_layer(self.cache, i))
            for i, captured in enumerate(layers)
        ]

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


# ---------------------------------------------------------------- greedy decoding


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


def _tokenize(loaded, text: str, steps: int, max_tokens: int):
    from .pretrained.tokens import tokenize_text

    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    _check_decoder(loaded)
    limit = loaded.facts.max_positions or None
    if limit is not None and limit <= steps:
        raise ValueError(f"{loaded.name} takes at most {limit} positions; ask for fewer than {limit} steps")
    return tokenize_text(
        loaded.tokenizer, text, max_tokens=max_tokens if limit is None else min(max_tokens, limit - steps)
    )


def _step_record(loaded, stepper: Stepper, step: int, sequence, outputs, layers, seconds, time_full) -> dict:
    """One step's row of every layer by the core, its checks against the model, sizes and timings."""
    site = loaded.sites[0]
    heads, kv_heads, head_dim = site.num_heads, site.num_kv_heads, site.head_dim
    position = sequence.shape[1] - 1
    fed_id = int(sequence[0, -1])
    new_id = int(outputs.logits[0, -1].argmax())
    rows = stepper.core_rows(layers)
    per_layer = tuple(row.held_bytes for row in rows)
    value_dim = stepper.values[0].shape[-1]
    return {
        "step": step,
        "position": position,
        "fed_id": fed_id,
        "fed_text": decode_one(loaded.tokenizer, fed_id),
        "token_id": new_id,
        "token_text": decode_one(loaded.tokenizer, new_id),
        "weights": torch.stack([row.weights for row in rows]).numpy(),  # (layers, H, t)
        "output": torch.stack([row.output for row in rows]).numpy(),  # (layers, H, Ev)
        "cache_bytes_per_layer": per_layer,
        "cache_bytes": sum(per_layer),
        "cache_bytes_one_kv_per_head": sum(per_layer) * heads // kv_heads,
        "seconds_step": seconds,
        "seconds_full": stepper.time_full(sequence) if time_full else math.nan,
        "macs_step": sum(attention_macs(1, heads, 1, row.seen, head_dim, row.output.shape[-1]) for row in rows),
        "macs_full": attention_macs(len(rows), heads, position + 1, position + 1, head_dim, value_dim),
        "diff_cached": max(row.diff_cached for row in rows),
        "diff_cache_object": max(row.diff_cache_object for row in rows),
    }


def kv_cache_decode(
    loaded,
    text: str,
    steps: int,
    *,
    max_tokens: int = 256,
    check_full: bool = True,
    check_generate: bool = True,
    check_float64: bool = False,
    time_full: bool = True,
) -> KVCacheRun:
    """Greedy decoding of ``text`` for up to ``steps`` tokens, one cached step at a time (see the module docstring).

    ``loaded`` is an ``attention_core.pretrained.LoadedModel`` of a causal model whose q, k, v can be captured.
    ``check_full``: compare every row with a full causal pass over the final sequence (``diff_full``).
    ``check_generate``: run transformers' greedy ``generate`` and compare tokens and rows (``diff_generate``).
    ``check_float64``: repeat the run on a float64 copy of the model fed the same tokens, the core in float64
    too (``diff_cached_float64``, ``diff_full_float64``; the model's size again in memory, twice the time).
    ``time_full``: time a cache-less forward over the prefix at every step (``seconds_full``).
    Raises ValueError for an encoder, an uncapturable layout, empty text or ``steps < 1``.
    """
    from . import kvcache_checks

    tokens = _tokenize(loaded, text, steps, max_tokens)
    prompt = tokens.ids  # (1, P)
    eos = eos_ids(loaded)
    notices = [tokens.notice] if tokens.notice else []
    stepper = Stepper(loaded)
    sequence = prompt  # (1, n) every token fed so far, the last one about to be fed
    records: list[dict] = []
    with loaded.lock, torch.no_grad():  # hooks live on shared modules: one run at a time
        if prompt.shape[1] > 1:
            stepper.forward(prompt[:, :-1], 0, attentions=False)  # prefill: fills both caches
        for step in range(1, steps + 1):
            outputs, layers, seconds = stepper.forward(sequence[:, -1:], sequence.shape[1] - 1, attentions=True)
            records.append(_step_record(loaded, stepper, step, sequence, outputs, layers, seconds, time_full))
            new_id = records[-1]["token_id"]
            if new_id in eos:
                notices.append(f"Decoding stopped after {step} steps: the model produced its end-of-text token.")
                break
            if step < steps:
                sequence = torch.cat((sequence, torch.tensor([[new_id]])), dim=1)  # (1, n + 1)
        itemsize = cache_layer(stepper.cache, 0)[0].element_size()
        stepper.cache = None
    if check_full:
        kvcache_checks.compare_full(loaded, sequence, records)
    if check_float64:
        notices.extend(kvcache_checks.compare_float64(loaded, sequence, prompt.shape[1], records))
    generate_ids = kvcache_checks.compare_generate(loaded, prompt, steps, records) if check_generate else None
    site = loaded.sites[0]
    return KVCacheRun(
        model=loaded.name,
        family=loaded.family,
        num_layers=len(loaded.sites),
        num_heads=site.num_heads,
        num_kv_heads=site.num_kv_heads,
        head_dim=site.head_dim,
        value_dim=int(records[0]["output"].shape[-1]),
        bytes_per_element=itemsize,
        groups=kv_groups(site.num_heads, site.num_kv_heads),
        prompt_ids=tokens.token_ids,
        prompt_labels=tokens.labels,
        steps=tuple(DecodeStep(**r) for r in records),
        generate_ids=generate_ids,
        notices=tuple(dict.fromkeys((*loaded.notices, *notices))),
    )
