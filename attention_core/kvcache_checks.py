"""References for a cached decoding run (``kvcache_model.kv_cache_decode``), none of them the core.

- ``compare_full``: a full causal pass over the final sequence (``capture``: no cache, eager,
  ``output_attentions``). Step t's row must equal row t of that pass (``diff_full``); and the cache step
  replayed on that pass's own q, k, v (one row against its first t keys, ``diff_full_replay``).
- ``compare_generate``: transformers' ``generate`` (greedy, ``use_cache=True``): same next tokens, same rows.
- ``compare_float64``: the whole run again on a float64 copy of the model fed the same tokens, the core in
  float64 too: the core against the model's cached forward (``diff_cached_float64``) and against its full
  causal pass (``diff_full_float64``).

Why the float64 run: in float32 the model's own cached forward and its own full forward round differently
(one query row per matmul instead of t, compounded over the layers): SmolLM2's cached rows drift from its
full pass's rows to about 1.3e-5 after 20-30 positions while the core matches the cached forward to 0. That
drift belongs to the model, yet it sits at the tolerance, so a float32 comparison with the full pass could
neither pass nor catch a core error reliably. The float64 copy does its projections, residual stream and
matmuls in float64; transformers still computes a few things in float32 on purpose (Llama's eager softmax
and RMSNorm), so what remains is those roundings: on SmolLM2 over 30 steps the core is within about 7e-7 of
the float64 cached forward and 3e-6 of the float64 full pass, while a wrong key, position or cached value
moves the rows by far more than the 1e-5 tolerance (tests/test_kvcache.py perturbs the cache to show it).
"""

from __future__ import annotations

import copy
import dataclasses
import threading

import torch

from .kvcache_model import LayerRow, Stepper, decode_one, eos_ids, max_diff
from .sdpa import scaled_dot_product_attention


def _later(weights: torch.Tensor, position: int) -> float:
    """Largest weight a full pass's row ``position`` (H, S) puts on keys after the query (0 when causal)."""
    return float(weights[:, position + 1 :].abs().max()) if position + 1 < weights.shape[-1] else 0.0


def compare_full(loaded, sequence: torch.Tensor, records: list[dict]) -> None:
    """Row ``position`` of a full causal pass over every fed token (no cache) against each step's row."""
    from .pretrained.capture import capture
    from .pretrained.tokens import Tokens

    ids = [int(i) for i in sequence[0].tolist()]
    special = set(getattr(loaded.tokenizer, "all_special_ids", ()) or ())
    tokens = Tokens(
        text="",
        ids=sequence,  # (1, n)
        attention_mask=torch.ones_like(sequence),  # (1, n)
        labels=tuple(decode_one(loaded.tokenizer, i) for i in ids),
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
            worst = max(
                worst,
                max_diff(row, layer.attentions[:, p, : p + 1]),  # (H, t)
                _later(layer.attentions[:, p], p),  # keys after the query weigh 0
                max_diff(out, layer.attn_output[:, p]),  # (H, Ev)
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
                max_diff(trace.weights[:, 0], layer.attentions[:, p, : p + 1]),
                max_diff(trace.output[:, 0], layer.attn_output[:, p]),
            )
        record["diff_full"] = worst
        record["diff_full_replay"] = replayed


def compare_generate(loaded, prompt: torch.Tensor, steps: int, records: list[dict]) -> tuple[int, ...]:
    """transformers' greedy ``generate`` with its own cache: its tokens, and its rows against the core's."""
    model = loaded.model
    pad = getattr(loaded.tokenizer, "pad_token_id", None)
    if pad is None:
        pad = next(iter(eos_ids(loaded)), 0)
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
            worst = max(worst, max_diff(mine[:, -seen:], row), evicted)
        record["diff_generate"] = worst
    return new


def float64_copy(loaded):
    """A private float64 CPU copy of ``loaded`` (its own model, attention sites and lock)."""
    from .pretrained.families import find_sites

    with loaded.lock:  # no capture's hooks are attached while the modules are copied
        model = copy.deepcopy(loaded.model)
    model = model.to("cpu", torch.float64)
    _, sites = find_sites(model)
    if len(sites) != len(loaded.sites):
        raise ValueError(f"the float64 copy of {loaded.name} has {len(sites)} attention sites, not {len(loaded.sites)}")
    return dataclasses.replace(
        loaded, model=model, sites=sites, projections=(), device=torch.device("cpu"), lock=threading.RLock()
    )


def _full_float64(layer_rows: list[LayerRow], full_layers, position: int) -> float:
    """The core's float64 rows at ``position`` (one per layer) against the float64 full pass's rows."""
    worst = 0.0
    for row, layer in zip(layer_rows, full_layers, strict=True):
        worst = max(
            worst,
            max_diff(row.weights, layer.attentions[:, position, : position + 1]),  # (H, t)
            _later(layer.attentions[:, position], position),
            max_diff(row.output, layer.attn_output[:, position]),  # (H, Ev)
        )
    return worst


def compare_float64(loaded, sequence: torch.Tensor, prompt_length: int, records: list[dict]) -> list[str]:
    """The run again on a float64 copy of the model, fed the tokens of ``sequence`` (1, n); returns notices.

    Each step's core row (float64, over the core's float64 cache) is compared with the float64 model's own
    cached forward and cache object (``diff_cached_float64``) and with row ``position`` of the float64
    model's full causal pass over ``sequence`` (``diff_full_float64``). The tokens are the float32 run's
    (the model's own greedy tokens); where the float64 copy's argmax would differ, a notice says so.
    """
    wide = float64_copy(loaded)
    stepper = Stepper(wide, torch.float64)
    per_step: list[list[LayerRow]] = []
    differ: list[int] = []
    with torch.no_grad():
        if prompt_length > 1:
            stepper.forward(sequence[:, : prompt_length - 1], 0, attentions=False)  # prefill
        for record in records:
            p = record["position"]
            outputs, layers, _ = stepper.forward(sequence[:, p : p + 1], p, attentions=True)  # (1, 1) fed token
            rows = stepper.core_rows(layers)
            record["diff_cached_float64"] = max(max(r.diff_cached, r.diff_cache_object) for r in rows)
            per_step.append(rows)
            if int(outputs.logits[0, -1].argmax()) != record["token_id"]:
                differ.append(record["step"])
        stepper.cache = None
        _, full_layers, _ = Stepper(wide, torch.float64).forward(sequence, 0, attentions=True)  # (1, n) at once
    for record, rows in zip(records, per_step, strict=True):
        record["diff_full_float64"] = _full_float64(rows, full_layers, record["position"])
    if not differ:
        return []
    return [
        f"The float64 copy of the model would pick another next token at step(s) {', '.join(map(str, differ))} "
        "(the float32 logits were that close); it was fed the model's own float32 tokens."
    ]
