"""Capture what every attention layer of a real model computed, with hooks on its own modules.

One forward pass. Forward hooks (``register_forward_hook`` /
``register_forward_pre_hook(..., with_kwargs=True)``) on the model's own modules record, per layer:

- the attention weights the layer returned (the attention module's (attn_output, attn_weights), the very
  tensor ``output_attentions=True`` would collect), packed at once when causal (attention_core/packed.py);
  a model whose modules do not hand them over is run again with ``output_attentions=True``,
- the input X of the q/k/v projections (pre-hook on q_proj / query / c_attn),
- q, k, v (forward hooks on the projections; GPT-2's fused c_attn is split in three),
- the attention mask and rotary (cos, sin) the attention module was called with (pre-hook kwargs),
- the merged head outputs before the output projection (pre-hook on o_proj / c_proj / out_lin, or
  BERT's self-attention output).
Rotary models get their rotation applied here with ``attention_core.positional.apply_rotary``
(Hugging Face's rotate_half convention), so q and k are exactly what the model multiplied.
No model code is copied or patched; hooks are removed when the pass ends.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import torch

from ..multihead import ProjectionWeights, split_heads
from ..packed import CausalStack, LayerSink, stack_returned
from ..positional import apply_rotary
from ..traces import ModelFacts
from .errors import ModelLoadError
from .tokens import Tokens

if TYPE_CHECKING:
    from .families import AttentionSite
    from .loading import LoadedModel


@dataclass(frozen=True)
class LayerCapture:
    """One layer of one model on one text (CPU tensors, float32, batch dim removed).

    Layers whose q/k/v could not be captured keep only ``attentions`` (the rest None, scale NaN).
    """

    layer: int
    hidden_in: torch.Tensor | None  # (L, D)      X read by the projections (after the layer norm where pre-LN)
    q: torch.Tensor | None  # (H, L, E)           queries, after rotary where the model applies it
    k: torch.Tensor | None  # (Hkv, S, E)         keys, after rotary
    v: torch.Tensor | None  # (Hkv, S, Ev)        values
    mask: torch.Tensor | None  # (1, L, S)        additive float mask (0 or finfo.min); None = no mask
    returned: torch.Tensor | tuple[CausalStack, int]  # (H, L, S) the model's weights, or (packed stack, layer)
    attn_output: torch.Tensor | None  # (H, L, Ev) per-head outputs before the output projection
    scale: float  # the factor on q.k (module.scaling)
    projection: ProjectionWeights | None  # the layer's own W^Q, W^K, W^V, W^O, biases (read-only on CPU)
    rotary: tuple[torch.Tensor, torch.Tensor] | None  # (cos, sin), each (L, E)
    qk_norm: bool = False  # q and k were normalised after projecting (replay_from_hidden cannot follow)

    @property
    def captured(self) -> bool:
        return self.q is not None and self.k is not None and self.v is not None

    @property
    def attentions(self) -> torch.Tensor:
        """(H, L, S) the weights the model returned, bit for bit (unpacked on demand when stored packed;
        read-only, shared: do not write to it)."""
        if isinstance(self.returned, torch.Tensor):
            return self.returned
        stack, index = self.returned
        return stack.tensor(index)


@dataclass(frozen=True)
class Capture:
    """Every layer of one forward pass, plus what the app should tell the user."""

    tokens: Tokens
    layers: tuple[LayerCapture, ...]
    facts: ModelFacts
    family: str
    notices: tuple[str, ...] = ()
    # False: a first look (``capture(..., upto=)``), layers 0..upto only; ``num_layers`` counts those
    complete: bool = True

    # (layers, H, L, S): the one store of every layer's returned weights, a float32 buffer (each layer's
    # ``attentions`` a view of it) or, for a causal model, a CausalStack of lower triangles (half the bytes)
    stacked: torch.Tensor | CausalStack | None = None
    memo: dict = field(default_factory=dict, compare=False, repr=False)  # results derived once per capture

    def derived(self, key, compute):
        """``compute()`` once per capture and key (e.g. a layer's replay): kept with the capture, freed with it."""
        if key not in self.memo:
            self.memo[key] = compute()
        return self.memo[key]

    @property
    def attentions(self) -> torch.Tensor:
        """(layers, H, L, S) the model's returned weights as one tensor: the capture's own buffer when it is
        dense; a packed causal store is unpacked into a new tensor (use ``weights_by_layer`` in the app)."""
        if isinstance(self.stacked, torch.Tensor):
            return self.stacked
        if isinstance(self.stacked, CausalStack):
            return torch.from_numpy(np.asarray(self.stacked))
        return torch.stack([layer.attentions for layer in self.layers])

    @property
    def weights_by_layer(self):
        """(layers, H, L, S) numpy, never copied: a view of the dense buffer, or the CausalStack itself
        (``[layer]`` gives that layer's (H, L, S) array, ``[layer, head]`` one map)."""
        if isinstance(self.stacked, CausalStack):
            return self.stacked
        return self.attentions.numpy()

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def layer(self, index: int) -> LayerCapture:
        if not -self.num_layers <= index < self.num_layers:
            raise ValueError(f"layer {index} out of range 0..{self.num_layers - 1}")
        return self.layers[index]


class _Recorder:
    """Hooks that write into one dict per layer while the forward pass runs."""

    def __init__(self, sites: tuple[AttentionSite, ...]) -> None:
        self.sites = sites
        self.records: list[dict] = [{} for _ in sites]
        self.weights = LayerSink(len(sites))  # each layer's returned weights, packed as the pass runs
        self.handles: list = []
        self.signatures = [inspect.signature(s.attention.forward) for s in sites]

    def attach(self) -> None:
        for site, record, signature in zip(self.sites, self.records, self.signatures, strict=True):
            hook = self.handles.append
            hook(site.attention.register_forward_pre_hook(partial(self._call, record, signature), with_kwargs=True))
            hook(site.entry.register_forward_pre_hook(partial(self._input, record, "hidden_in")))
            if site.fused is not None:
                hook(site.fused.register_forward_hook(partial(self._output, record, "qkv")))
            else:
                for key in ("q", "k", "v"):
                    hook(getattr(site, key).register_forward_hook(partial(self._output, record, key)))
            if site.out_proj is not None:
                hook(site.out_proj.register_forward_pre_hook(partial(self._input, record, "merged")))
            else:
                hook(site.attention.register_forward_hook(partial(self._output, record, "merged")))
        for index, site in enumerate(self.sites):
            self.handles.append(site.attention.register_forward_hook(partial(self._weights, index, site.num_heads)))

    def detach(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles.clear()

    @staticmethod
    def _copy(t: torch.Tensor) -> torch.Tensor:
        return t.detach()[0].to("cpu", dtype=torch.float32, copy=True)  # batch 1 -> drop B

    @staticmethod
    def _call(record: dict, signature: inspect.Signature, module, args, kwargs) -> None:
        try:
            given = signature.bind_partial(*args, **kwargs).arguments
        except TypeError:
            given = kwargs
        record["mask"] = given.get("attention_mask")  # kept by reference: one tensor shared by layers
        record["position_embeddings"] = given.get("position_embeddings")

    def _input(self, record: dict, key: str, module, args) -> None:
        if args and isinstance(args[0], torch.Tensor):
            record[key] = self._copy(args[0])

    def _weights(self, index: int, heads: int, module, args, output) -> None:
        """The attention module's (attn_output, attn_weights): the very tensor ``output_attentions`` collects."""
        weights = output[1] if isinstance(output, tuple) and len(output) > 1 else None
        if isinstance(weights, torch.Tensor) and weights.dim() == 4 and weights.shape[:2] == (1, heads):
            self.weights.add(index, weights.detach()[0].to("cpu", torch.float32))

    def _output(self, record: dict, key: str, module, args, output) -> None:
        tensor = output[0] if isinstance(output, tuple) else output
        if isinstance(tensor, torch.Tensor):
            record[key] = self._copy(tensor)


def _additive(mask: torch.Tensor | None, cache: dict) -> torch.Tensor | None:
    """The model's mask as (1 or H, L, S) additive float32 on CPU; boolean masks become 0 / finfo.min."""
    if mask is None or not isinstance(mask, torch.Tensor):
        return None
    if id(mask) not in cache:
        m = mask.detach()
        if m.dtype == torch.bool:
            m = torch.zeros(m.shape, dtype=torch.float32, device=m.device).masked_fill(
                ~m, torch.finfo(torch.float32).min
            )
        m = m.to("cpu", dtype=torch.float32, copy=True)
        cache[id(mask)] = (mask, m[0] if m.dim() == 4 else m)  # (B, 1, L, S) -> (1, L, S)
    return cache[id(mask)][1]


def _rotary(pair, cache: dict) -> tuple[torch.Tensor, torch.Tensor] | None:
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        return None
    if id(pair[0]) not in cache:
        cos, sin = (t.detach()[0].to("cpu", dtype=torch.float32, copy=True) for t in pair)  # (L, E) each
        cache[id(pair[0])] = (pair[0], (cos, sin))
    return cache[id(pair[0])][1]


def _layer(site: AttentionSite, record: dict, attentions, projection, masks: dict, rotaries: dict, notes):
    """Turn one layer's raw records into a LayerCapture (heads split, rotary applied)."""
    heads, kv_heads, head_dim = site.num_heads, site.num_kv_heads, site.head_dim
    mask = _additive(record.get("mask"), masks)
    if "qkv" in record:
        q, k, v = record["qkv"].split((heads * head_dim, kv_heads * head_dim, kv_heads * head_dim), dim=-1)
    else:
        q, k, v = record.get("q"), record.get("k"), record.get("v")
    if q is None or k is None or v is None or "merged" not in record:
        notes.append(f"Layer {site.layer}: q, k, v were not seen by the hooks; only the attention weights are shown.")
        return LayerCapture(site.layer, None, None, None, None, mask, attentions, None, math.nan, None, None)
    length = q.shape[0]
    q = split_heads(q.reshape(length, -1), heads)  # (H, L, E)
    k = split_heads(k.reshape(k.shape[0], -1), kv_heads)  # (Hkv, S, E)
    v = split_heads(v.reshape(v.shape[0], -1), kv_heads)  # (Hkv, S, Ev)
    rotary = _rotary(record.get("position_embeddings"), rotaries) if site.takes_rotary else None
    if rotary is not None:
        cos, sin = rotary  # (L, E) each
        q = apply_rotary(q, cos, sin)  # (H, L, E)    q cos + rotate_half(q) sin
        k = apply_rotary(k, cos, sin)  # (Hkv, S, E)
    elif site.takes_rotary:
        notes.append(f"Layer {site.layer}: no rotary (cos, sin) reached the attention; q and k are unrotated.")
    attn_output = split_heads(record["merged"].reshape(length, -1), heads)  # (H, L, Ev)
    return LayerCapture(
        layer=site.layer,
        hidden_in=record.get("hidden_in"),
        q=q,
        k=k,
        v=v,
        mask=mask,
        returned=attentions,
        attn_output=attn_output,
        scale=site.scale,
        projection=projection,
        rotary=rotary,
        qk_norm=site.qk_norm,
    )


def _layer_weights(stored, index: int):
    """A LayerCapture's ``returned``: a view of the dense buffer, or (packed stack, layer)."""
    return stored[index] if isinstance(stored, torch.Tensor) else (stored, index)


def _forward_kwargs(runner, output_attentions: bool) -> dict:
    params = inspect.signature(runner.forward).parameters
    kwargs = {"output_attentions": output_attentions, "return_dict": True}
    if "use_cache" in params:
        kwargs["use_cache"] = False  # no key/value cache: one pass over the whole text
    return kwargs


class _Enough(Exception):
    """Raised by the hook on the last layer asked for: the pass stops there (``capture(..., upto=)``)."""


def _stop(module, args, output) -> None:
    raise _Enough


def _run(loaded: LoadedModel, tokens: Tokens, *, output_attentions: bool, upto: int | None = None):
    """One forward pass with the recorder's hooks on: (recorder, the model's outputs). ``upto``: hooks on layers
    0..upto only, and the pass stops once layer ``upto``'s attention has returned (outputs None)."""
    runner = loaded.runner
    sites = loaded.sites if upto is None else loaded.sites[: upto + 1]
    recorder = _Recorder(sites)
    with loaded.lock, torch.no_grad():  # hooks live on shared modules: one capture at a time
        recorder.attach()
        if upto is not None:  # after the recorder's own hooks on that module, so they have all run
            recorder.handles.append(sites[-1].attention.register_forward_hook(_stop))
        try:
            outputs = runner(
                input_ids=tokens.ids.to(loaded.device),
                attention_mask=tokens.attention_mask.to(loaded.device),
                **_forward_kwargs(runner, output_attentions),
            )
        except _Enough:
            outputs = None
        finally:
            recorder.detach()
    return recorder, outputs


def capture(loaded: LoadedModel, tokens: Tokens, upto: int | None = None) -> Capture:
    """Run ``tokens`` (batch 1) through the model once and record every layer (see LayerCapture).

    ``upto``: only layers 0..upto, the pass stopped right after layer ``upto``'s attention (a first look at one
    layer costs that layer's share of the pass: layer 0 of SmolLM2's 30 at 512 tokens, about 0.05 s against
    1.4 s). Those layers are the full pass's, bit for bit (nothing later feeds back into them); the capture says
    it is partial (``complete`` False). A model whose attention modules do not hand their weights to the hooks
    gets the full pass."""
    if tokens.ids.dim() != 2 or tokens.ids.shape[0] != 1:
        raise ValueError(f"capture takes one sequence: ids must be (1, L), got {tuple(tokens.ids.shape)}")
    if upto is not None and loaded.sites and 0 <= upto < len(loaded.sites) - 1:
        recorder, _ = _run(loaded, tokens, output_attentions=False, upto=upto)
        if recorder.weights.complete:
            return _assemble(loaded, tokens, recorder, recorder.weights.result(), complete=False)
    # Each attention layer's returned weights are taken by a hook as the pass runs (packed at once when
    # causal); only where the hooks did not see every layer is the model asked to collect them itself
    # (``output_attentions=True``: every layer's full maps held until the pass ends).
    recorder, outputs = _run(loaded, tokens, output_attentions=False)
    if loaded.sites and recorder.weights.complete:
        attentions = recorder.weights.result()  # (layers, H, L, S): a CausalStack, or one dense buffer
        del outputs
    else:
        recorder, outputs = _run(loaded, tokens, output_attentions=True)
        returned = list(getattr(outputs, "attentions", None) or ())
        del outputs  # the output object holds every layer's weights too; keep only ``returned``
        if not returned or any(a is None for a in returned):
            raise ModelLoadError(
                loaded.name,
                "the model returned no attention weights (its attention runs in a fused kernel such as sdpa)",
                "Load it with attn_implementation='eager'; Attention Lens does this itself, so this architecture "
                "may not support eager attention",
            )
        # (layers, H, L, S): one store (``torch.stack`` would hold two full copies: 2.3 GB for SmolLM2 at 1,024
        # tokens); a causal model's lower triangles only (attention_core/packed.py)
        attentions = stack_returned(returned)
    return _assemble(loaded, tokens, recorder, attentions)


def _assemble(loaded: LoadedModel, tokens: Tokens, recorder: _Recorder, attentions, complete: bool = True) -> Capture:
    """The recorder's layers (all of them, or the first ones of a partial pass) with their returned weights."""
    notes: list[str] = [tokens.notice] if tokens.notice else []
    masks: dict = {}
    rotaries: dict = {}
    sites = recorder.sites
    if sites and len(sites) == len(attentions):
        layers = tuple(
            _layer(site, record, _layer_weights(attentions, i), loaded.projections[i], masks, rotaries, notes)
            for i, (site, record) in enumerate(zip(sites, recorder.records, strict=True))
        )
    else:
        if loaded.sites:
            notes.append(f"The model returned {len(attentions)} attention maps for {len(loaded.sites)} layers.")
        layers = tuple(
            LayerCapture(i, None, None, None, None, None, _layer_weights(attentions, i), None, math.nan, None, None)
            for i in range(len(attentions))
        )
    return Capture(
        tokens=tokens,
        stacked=attentions,
        layers=layers,
        facts=loaded.facts,
        family=loaded.family,
        notices=tuple(dict.fromkeys((*loaded.notices, *notes))),
        complete=complete,
    )
