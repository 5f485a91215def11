"""The one path from a request to numbers: text -> tokens -> real model + own core -> ModelTrace.

The app, ``python -m viz export`` and the tests all call ``run_trace``, so a slide always matches
the screen. Heavy steps are separate functions (``load``, ``capture_text``) so callers can cache
them; ``build_trace`` is cheap and reruns on every control change that does not need the model.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from . import masks, positional
from .device import pick_device
from .difference import max_difference
from .multihead import MultiHeadTrace, ProjectionWeights, init_weights, multi_head_self_attention
from .pretrained import (
    Capture,
    LoadedModel,
    Tokens,
    capture,
    load_model,
    replay,
    replay_from_hidden_diff,
    tokenize,
)
from .request import TraceRequest, validate
from .sdpa import repeat_kv
from .traces import LayerTrace, ModelFacts, ModelTrace, ReplayDiff


def load(request: TraceRequest, *, models_dir=None, progress=None, allow_local: bool = True) -> LoadedModel:
    """The model and tokenizer the request names (slow: cache the result).

    ``allow_local=False`` (the app without a models directory) refuses local folders.
    """
    return load_model(request.model, device="cpu", models_dir=models_dir, progress=progress, allow_local=allow_local)


def capture_text(loaded: LoadedModel, request: TraceRequest, upto: int | None = None) -> Capture:
    """Tokenise the text (cap, optional padding) and run the model once with hooks (cache it). ``upto``: layers
    0..upto only, the pass stopped there (a first look at one layer; ``Capture.complete`` False)."""
    return capture(loaded, request_tokens(loaded, request), upto=upto)


def request_tokens(loaded: LoadedModel, request: TraceRequest) -> Tokens:
    """The positions a request's capture holds: its text tokenised (cap, optional padding)."""
    tokens = tokenize(loaded, request.text, max_tokens=request.max_tokens)
    return pad_tokens(loaded, tokens, request.pad_to)


def pad_tokens(loaded: LoadedModel, tokens: Tokens, pad_to: int) -> Tokens:
    """Append pad tokens up to ``pad_to`` positions (attention_mask 0), within the model's limit."""
    limit = loaded.facts.max_positions or pad_to
    target = min(pad_to, limit)
    length = tokens.ids.shape[1]
    if target <= length:
        return tokens
    tokenizer = loaded.tokenizer
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    if pad_id is None:
        raise ValueError(f"{loaded.name} has no pad or end-of-text token to pad with")
    extra = target - length
    pad_label = tokenizer.convert_ids_to_tokens([pad_id])[0]
    return replace(
        tokens,
        ids=torch.cat([tokens.ids, torch.full((1, extra), pad_id, dtype=tokens.ids.dtype)], dim=1),  # (1, L')
        attention_mask=torch.cat([tokens.attention_mask, torch.zeros(1, extra, dtype=tokens.attention_mask.dtype)], 1),
        labels=(*tokens.labels, *[pad_label] * extra),
        offsets=(*tokens.offsets, *[(len(tokens.text), len(tokens.text))] * extra),
        special=(*tokens.special, *[True] * extra),
    )


# ---------------------------------------------------------------- the own core's inputs


def scratch_embeddings(token_ids, d_model: int, seed: int) -> torch.Tensor:
    """(L, D) one seeded random vector per token id: the same word always gets the same row."""
    rows = []
    for token_id in token_ids:
        generator = torch.Generator().manual_seed(seed * 1_000_003 + int(token_id))
        rows.append(torch.randn(d_model, generator=generator, dtype=torch.float64))
    return torch.stack(rows).float()  # (L, D)


def base_mask(request: TraceRequest, causal_model: bool, length: int) -> torch.Tensor:
    """(L, L) bool, True = may attend, from the request's mask name (before padding)."""
    name = request.mask
    if name == "model":
        return masks.causal(length) if causal_model else masks.full(length)
    if name == "none":
        return masks.full(length)
    if name == "causal":
        return masks.causal(length)
    if name == "sliding_window":
        return masks.sliding_window(length, width=request.window, causal=request.window_causal)
    if name == "strided":
        return masks.strided(length, stride=request.stride)
    if name == "block_local":
        return masks.block_local(length, block=request.block)
    if name == "blocked_keys":
        return masks.blocked_keys(length, keys=[j for j in request.blocked if j < length])
    raise ValueError(f"unknown mask {name!r}")


def _encoding_of(request: TraceRequest, facts: ModelFacts) -> str:
    return facts.positional if request.encoding == "model" else request.encoding


@dataclass(frozen=True)
class CoreInputs:
    """What the own core attends over for one layer: X, the projections and where position enters."""

    x: torch.Tensor  # (L, D) the layer input, with any added positional table
    weights: ProjectionWeights  # W^Q, W^K, W^V (+ biases) of the layer, or seeded ones
    positions: positional.Positions  # the chosen encoding: x above, rotate for q and k, or a score bias


def core_inputs(request: TraceRequest, cap: Capture, facts: ModelFacts, layer: int) -> CoreInputs:
    """X, projection weights and the positional hooks (rotate, score bias) for the own core."""
    if request.source == "replay":
        layer_cap = cap.layers[layer]
        if layer_cap.projection is None or layer_cap.hidden_in is None:
            raise ValueError(f"{facts.name}: this layer's W^Q/W^K/W^V could not be captured; use source=scratch")
        x = layer_cap.hidden_in.float()  # (L, D) the layer's real input (positions already inside for BERT)
        weights = layer_cap.projection
        rotary = layer_cap.rotary
    else:
        x = scratch_embeddings(cap.tokens.ids.reshape(-1).tolist(), request.d_model, request.seed)  # (L, D)
        weights = init_weights(request.d_model, request.d_k, request.heads, seed=request.seed, with_output=False)
        rotary = None
    encoding = _encoding_of(request, facts)
    positions = positional.apply(
        encoding if encoding in positional.ENCODINGS else "none",  # a kind the core lacks (relative_key): nothing
        x,
        heads=weights.num_heads,
        head_dim=weights.d_k,
        seed=request.seed,
        inside_x=facts.positional if request.source == "replay" else None,  # BERT's X holds its learned table
        rotary=rotary,
    )
    return CoreInputs(x=positions.x, weights=weights, positions=positions)


def _per_head(w: torch.Tensor, heads: int, total_heads: int) -> np.ndarray:
    d_model, width = w.shape
    per = w.reshape(d_model, heads, width // heads).permute(1, 0, 2)  # (Hw, D, E)
    return _np(repeat_kv(per, total_heads))  # (H, D, E)


def _bias_per_head(b: torch.Tensor | None, heads: int, total_heads: int) -> np.ndarray | None:
    if b is None:
        return None
    per = b.reshape(heads, -1)  # (Hw, E)
    return _np(repeat_kv(per, total_heads, dim=0))  # (H, E)


def _np(t: torch.Tensor) -> np.ndarray:
    """float32 numpy, zero-copy for a CPU float32 tensor: the numbers exactly as computed, held once."""
    return t.detach().to("cpu", torch.float32).numpy()


def layer_trace_from_core(mh: MultiHeadTrace, mask: torch.Tensor, weights: ProjectionWeights) -> LayerTrace:
    """Numpy view of one multi-head call (kv heads repeated to H for grouped-query)."""
    att, heads = mh.attention, weights.num_heads
    return LayerTrace(
        q=_np(mh.q),
        k=_np(repeat_kv(mh.k, heads)),
        v=_np(repeat_kv(mh.v, heads)),
        scores=_np(att.scores),
        scaled=_np(att.scaled),
        masked=_np(att.masked),
        weights=_np(att.weights),
        output=_np(att.output),
        mask=mask.cpu().numpy().astype(bool),
        scale=att.scale,
        x=_np(mh.x),
        w_q=_per_head(weights.w_q, heads, heads),
        w_k=_per_head(weights.w_k, weights.kv_heads, heads),
        w_v=_per_head(weights.w_v, weights.kv_heads, heads),
        b_q=_bias_per_head(weights.b_q, heads, heads),
        b_k=_bias_per_head(weights.b_k, weights.kv_heads, heads),
        b_v=_bias_per_head(weights.b_v, weights.kv_heads, heads),
        q_before_rotary=None if mh.q_unrotated is None else _np(mh.q_unrotated),
        k_before_rotary=None if mh.k_unrotated is None else _np(repeat_kv(mh.k_unrotated, heads)),
        score_bias=None if att.score_bias is None else _np(att.score_bias.expand_as(att.scores)),
    )


def model_layer_trace(cap: Capture, layer: int) -> LayerTrace | None:
    """The real model's own layer: its q, k, v, its returned weights and output; scores via replay.

    Depends on the capture and the layer only, so it is built once per capture and layer.
    """
    key = ("model_layer", layer)
    others = [k for k in list(cap.memo) if isinstance(k, tuple) and k[0] == "model_layer" and k != key]
    for old in others[:-1]:  # keep this layer and the one seen last: a walk through layers stays bounded
        cap.memo.pop(old, None)
    return cap.derived(key, lambda: _model_layer_trace(cap, layer))


def _model_layer_trace(cap: Capture, layer: int) -> LayerTrace | None:
    layer_cap = cap.layers[layer]
    if layer_cap.q is None:
        return None
    heads, length, keys = layer_cap.attentions.shape
    if layer_cap.mask is None:
        allowed = np.ones((length, keys), dtype=bool)  # (L, S) no mask: every key
    else:
        additive = _np(layer_cap.mask)  # (1 or H, L, S) 0 where allowed, -inf or finfo.min where blocked
        allowed = (np.isfinite(additive) & (additive > -1e30)).all(axis=0)  # (L, S)
    projection = layer_cap.projection
    return LayerTrace(  # the model returns no pre-softmax steps: scores, scaled, masked stay None (the core has them)
        q=_np(layer_cap.q),
        k=_np(repeat_kv(layer_cap.k, heads)),
        v=_np(repeat_kv(layer_cap.v, heads)),
        scores=None,
        scaled=None,
        masked=None,
        weights=_np(layer_cap.attentions),
        output=_np(layer_cap.attn_output),
        mask=allowed,
        scale=float(layer_cap.scale),
        x=None if layer_cap.hidden_in is None else _np(layer_cap.hidden_in),
        w_q=None if projection is None else _per_head(projection.w_q, heads, heads),
        w_k=None if projection is None else _per_head(projection.w_k, projection.kv_heads, heads),
        w_v=None if projection is None else _per_head(projection.w_v, projection.kv_heads, heads),
    )


def replay_summary(cap: Capture) -> tuple[tuple[ReplayDiff, ...], tuple[ReplayDiff, ...]]:
    """Per-layer max |core - model|: from captured q, k, v, and from X through W^Q/W^K/W^V (once per capture)."""
    return cap.derived("replay_summary", lambda: _replay_summary(cap))


def _replay_summary(cap: Capture) -> tuple[tuple[ReplayDiff, ...], tuple[ReplayDiff, ...]]:
    captured = tuple(replay(cap)) if any(layer.q is not None for layer in cap.layers) else ()
    hidden = []
    for index, layer in enumerate(cap.layers):
        if layer.projection is not None and layer.hidden_in is not None and not layer.qk_norm:
            hidden.append(replay_from_hidden_diff(cap, index))
    return captured, tuple(hidden)


def departures(request: TraceRequest, facts: ModelFacts) -> list[str]:
    """Plain-language list of where the own core's settings differ from what the model does."""
    said = []
    if request.source == "scratch":
        said.append("Source is 'from scratch': random embeddings and weights, so no match with the model is expected.")
    if request.scaling == "none":
        said.append("Scaling is off: scores are not divided by sqrt(d_k) as the model does, so softmax is sharper.")
    elif request.scaling == "custom":
        said.append(f"Scaling uses temperature {request.temperature:g} instead of the model's sqrt(d_k).")
    model_mask = "causal" if facts.causal else "none"
    if request.mask not in ("model", model_mask):
        said.append(f"Mask '{request.mask}' is not what the model uses ({'causal' if facts.causal else 'no mask'}).")
    encoding = _encoding_of(request, facts)
    if encoding != facts.positional and request.source == "replay":
        if facts.positional == "learned" and encoding == "none":
            said.append("The model's learned positions are already inside the layer input; 'none' cannot remove them.")
        else:
            said.append(f"Positional encoding '{encoding}' differs from the model's '{facts.positional}'.")
    if request.fill == "-1e9":
        said.append("Blocked scores are filled with -1e9 instead of -inf: rows with every key blocked leak.")
    return said


def build_trace(
    request: TraceRequest, loaded_facts: ModelFacts, cap: Capture, notices=(), *, with_replay: bool = True
) -> ModelTrace:
    """Cheap step: the own core for the chosen layer from a capture, beside the model's layer.

    ``with_replay=False`` leaves ``replay``/``replay_hidden`` empty: the app draws the view first and
    asks ``replay_summary(cap)`` (every layer replayed twice, once per capture) afterwards.
    """
    facts = loaded_facts
    notices = list(notices) + list(cap.notices)
    layer = min(request.layer, facts.num_layers - 1)
    if layer != request.layer:
        notices.append(f"layer {request.layer} does not exist in {facts.name}; showing layer {layer}")
    device = pick_device(request.device)
    inputs = core_inputs(request, cap, facts, layer)
    length = inputs.x.shape[0]
    mask = base_mask(request, facts.causal, length)  # (L, L)
    mask = mask & masks.padding(cap.tokens.attention_mask.reshape(-1))  # padded keys are never seen
    attn_mask = mask if request.fill == "-inf" else masks.to_additive(mask, -1e9)
    weights = replace(
        inputs.weights,
        **{
            f: getattr(inputs.weights, f).to(device)
            for f in ("w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o")
            if getattr(inputs.weights, f) is not None
        },
    )
    bias = inputs.positions.score_bias
    mh = multi_head_self_attention(
        inputs.x.to(device),
        weights,
        attn_mask=attn_mask.to(device),
        scale=request.scale_for(weights.d_k, cap.layers[layer].scale if request.source == "replay" else None),
        rotate=inputs.positions.rotate,
        score_bias=None if bias is None else bias.to(device),
    )
    core = layer_trace_from_core(mh, mask, weights)
    head = min(request.head, core.num_heads - 1)
    if head != request.head:
        notices.append(f"head {request.head} does not exist; showing head {head}")
    model = model_layer_trace(cap, layer)
    replay_captured, replay_hidden = replay_summary(cap) if with_replay else ((), ())
    return ModelTrace(
        tokens=tuple(cap.tokens.labels),
        token_ids=tuple(int(i) for i in cap.tokens.ids.reshape(-1).tolist()),
        offsets=tuple(tuple(o) for o in cap.tokens.offsets),
        core=core,
        model=model,
        # never copied: a view, or the packed causal store; None from a first look (not every layer captured)
        model_attentions=cap.weights_by_layer if cap.complete else None,
        replay=replay_captured,
        replay_hidden=replay_hidden,
        core_vs_model=None
        if model is None
        else max_difference(core.weights, model.weights)
        if core.weights.shape == model.weights.shape
        else None,
        facts=facts,
        layer=layer,
        head=head,
        notices=tuple(notices),
        departures=tuple(departures(request, facts)),
        complete=cap.complete,
    )


def run_trace(request: TraceRequest, *, models_dir=None) -> ModelTrace:
    """request -> ModelTrace, uncached (the CLI path). The app caches ``load`` and ``capture_text``."""
    request, notices = validate(request)
    loaded = load(request, models_dir=models_dir)
    cap = capture_text(loaded, request)
    return build_trace(request, loaded.facts, cap, notices)
