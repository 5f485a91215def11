"""Where a model keeps its attention: one ``AttentionSite`` per layer, found by module names.

Three layouts are recognised (the family names follow ``ModelFacts.family``):

- ``bert``   BERT, RoBERTa, ELECTRA, MiniLM: ``attention.self.{query,key,value}``; the self-attention
             module returns the merged heads (the output projection lives in ``attention.output.dense``).
             DistilBERT: ``attention.{q_lin,k_lin,v_lin,out_lin}``.
- ``gpt2``   one fused Conv1D ``attn.c_attn`` (weight (D, 3D), x @ W + b) and ``attn.c_proj``.
- ``llama``  Llama, Mistral, Qwen2, SmolLM: ``self_attn.{q_proj,k_proj,v_proj,o_proj}``, rotary
             positions given to the attention module as ``position_embeddings=(cos, sin)``, and
             grouped-query attention (fewer key/value heads than query heads).

Anything else is ``other``: its returned attention weights are still shown, without q, k, v.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch
from torch import nn

from ..multihead import ProjectionWeights
from ..sdpa import default_scale
from ..traces import ModelFacts

FAMILIES = ("bert", "gpt2", "llama", "other")

# (family, names of the q, k, v children, name of the output projection child or None)
_LAYOUTS = (
    ("llama", ("q_proj", "k_proj", "v_proj"), "o_proj"),
    ("bert", ("query", "key", "value"), None),
    ("bert", ("q_lin", "k_lin", "v_lin"), "out_lin"),
    ("gpt2", ("c_attn",), "c_proj"),
)


@dataclass(frozen=True, eq=False)
class AttentionSite:
    """The modules of one layer's self-attention that capture hooks onto.

    ``q``/``k``/``v`` give (B, L, H*E), (B, S, Hkv*E), (B, S, Hkv*Ev) (for ``qk_norm`` models the
    norms after the projections); ``fused`` gives (B, L, H*E + 2*Hkv*E) for GPT-2's c_attn.
    The input of ``entry`` is the layer's hidden state X that the projections read, (B, L, D).
    ``out_proj``'s input is the merged head outputs (B, L, H*Ev); None means the attention module
    returns them itself as output[0] (BERT's self-attention).
    """

    layer: int
    name: str  # dotted module path, e.g. "encoder.layer.0.attention.self"
    attention: nn.Module
    entry: nn.Module
    q: nn.Module | None
    k: nn.Module | None
    v: nn.Module | None
    fused: nn.Module | None
    out_proj: nn.Module | None
    w_out: nn.Module | None  # the output projection whose weights go into ProjectionWeights.w_o
    num_heads: int
    num_kv_heads: int
    head_dim: int
    scale: float
    qk_norm: bool  # q and k pass through a norm after projecting (Qwen3-style)
    takes_rotary: bool  # the attention forward receives position_embeddings


def _is_cross_attention(name: str, module: nn.Module) -> bool:
    return bool(getattr(module, "is_cross_attention", False)) or "crossattention" in name or "cross_attn" in name


def _heads(config, module: nn.Module) -> tuple[int, int]:
    heads = getattr(config, "num_attention_heads", None) or getattr(module, "num_heads", None)
    if heads is None:
        raise ValueError("the config gives no num_attention_heads")
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    return int(heads), int(kv_heads)


def _scale(module: nn.Module, head_dim: int, layer: int) -> float:
    """The factor the model multiplies q.k by: module.scaling where it exists, else GPT-2's flags, else 1/sqrt(E)."""
    scaling = getattr(module, "scaling", None)
    if isinstance(scaling, (int, float)):
        return float(scaling)
    scale = default_scale(head_dim)
    if hasattr(module, "scale_attn_weights"):  # older GPT-2 code
        scale = scale if module.scale_attn_weights else 1.0
        if getattr(module, "scale_attn_by_inverse_layer_idx", False):
            scale /= float(layer + 1)
    return scale


def _site(layer: int, name: str, module: nn.Module, family: str, children, out_name, model) -> AttentionSite:
    config = model.config
    heads, kv_heads = _heads(config, module)
    parent = model.get_submodule(name.rsplit(".", 1)[0]) if "." in name else None
    if family == "gpt2":
        fused = module.c_attn  # Conv1D: weight (D, 3D)
        width = fused.weight.shape[1]
        head_dim = width // (heads + 2 * kv_heads)
        q = k = v = None
        entry = fused
    else:
        fused = None
        q, k, v = (getattr(module, c) for c in children)
        entry = q
        head_dim = q.out_features // heads
    qk_norm = isinstance(getattr(module, "q_norm", None), nn.Module) and isinstance(
        getattr(module, "k_norm", None), nn.Module
    )
    if qk_norm:
        q, k = module.q_norm, module.k_norm
    out_proj = getattr(module, out_name) if out_name else None
    w_out = out_proj
    if w_out is None and parent is not None:  # BERT: attention.output.dense beside attention.self
        w_out = getattr(getattr(parent, "output", None), "dense", None)
    takes_rotary = "position_embeddings" in inspect.signature(module.forward).parameters
    return AttentionSite(
        layer=layer,
        name=name,
        attention=module,
        entry=entry,
        q=q,
        k=k,
        v=v,
        fused=fused,
        out_proj=out_proj,
        w_out=w_out,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        scale=_scale(module, head_dim, layer),
        qk_norm=qk_norm,
        takes_rotary=takes_rotary,
    )


def find_sites(model: nn.Module) -> tuple[str, tuple[AttentionSite, ...]]:
    """(family, one site per layer in layer order); ("other", ()) when the layout is not recognised."""
    num_layers = getattr(model.config, "num_hidden_layers", None)
    for family, children, out_name in _LAYOUTS:
        found = [
            (name, module)
            for name, module in model.named_modules()
            if all(isinstance(getattr(module, c, None), nn.Module) for c in children)
            and (out_name is None or isinstance(getattr(module, out_name, None), nn.Module))
            and not _is_cross_attention(name, module)
        ]
        if not found:
            continue
        if num_layers is not None and len(found) != num_layers:
            return "other", ()
        try:
            return family, tuple(_site(i, n, m, family, children, out_name, model) for i, (n, m) in enumerate(found))
        except (AttributeError, ValueError, ZeroDivisionError):
            return "other", ()
    return "other", ()


def _linear_weight(module: nn.Module, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(D_in, D_out) weight and bias of an nn.Linear (weight stored (out, in)) or a Conv1D (stored (in, out)).

    Detached, on the CPU, in ``dtype``: views of the model's own parameters when it runs on the CPU in that
    dtype (read-only), copies otherwise.
    """
    weight = module.weight.detach().to("cpu", dtype)
    weight = weight.T if isinstance(module, nn.Linear) else weight  # (D_in, D_out)
    bias = getattr(module, "bias", None)
    return weight, None if bias is None else bias.detach().to("cpu", dtype)


def projection_weights(site: AttentionSite, dtype: torch.dtype = torch.float32) -> ProjectionWeights:
    """The layer's own W^Q (D, H*E), W^K (D, Hkv*E), W^V (D, Hkv*Ev), W^O (H*Ev, D), biases; CPU, read-only,
    in ``dtype`` (float64 for a float64 copy of the model)."""
    if site.fused is not None:
        weight, bias = _linear_weight(site.fused, dtype)  # (D, H*E + 2*Hkv*E)
        q_width, kv_width = site.num_heads * site.head_dim, site.num_kv_heads * site.head_dim
        w_q, w_k, w_v = weight.split((q_width, kv_width, kv_width), dim=1)  # (D, H*E), (D, Hkv*E), (D, Hkv*Ev)
        b_q, b_k, b_v = (None, None, None) if bias is None else bias.split((q_width, kv_width, kv_width))
    else:
        owner = site.attention
        names = (
            ("q_proj", "k_proj", "v_proj")
            if hasattr(owner, "q_proj")
            else (("q_lin", "k_lin", "v_lin") if hasattr(owner, "q_lin") else ("query", "key", "value"))
        )
        (w_q, b_q), (w_k, b_k), (w_v, b_v) = (_linear_weight(getattr(owner, n), dtype) for n in names)
    w_o, b_o = _linear_weight(site.w_out, dtype) if site.w_out is not None else (None, None)
    return ProjectionWeights(
        w_q=w_q,
        w_k=w_k,
        w_v=w_v,
        num_heads=site.num_heads,
        num_kv_heads=site.num_kv_heads,
        w_o=w_o,
        b_q=b_q,
        b_k=b_k,
        b_v=b_v,
        b_o=b_o,
    )


def _max_positions(config) -> int:
    limit = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None) or 0
    if "roberta" in str(getattr(config, "model_type", "")) or getattr(config, "model_type", "") == "camembert":
        limit -= int(getattr(config, "pad_token_id", 1) or 0) + 1  # positions start after the padding index
    return int(limit)


def _positional(config, sites: tuple[AttentionSite, ...]) -> str:
    rope_keys = ("rope_parameters", "rope_theta", "rotary_pct", "rotary_emb_base", "rope_scaling")
    if (sites and sites[0].takes_rotary) or (not sites and any(getattr(config, k, None) for k in rope_keys)):
        return "rotary"
    if getattr(config, "alibi", False) or getattr(config, "model_type", "") in ("bloom", "mpt"):
        return "alibi"
    if getattr(config, "sinusoidal_pos_embds", False):
        return "sinusoidal"
    kind = getattr(config, "position_embedding_type", "absolute")
    return "learned" if kind in (None, "absolute") else str(kind)


def model_facts(name: str, model: nn.Module, family: str, sites: tuple[AttentionSite, ...]) -> ModelFacts:
    """Sizes and kinds of one model, for the app's info panel."""
    config = model.config
    heads = int(getattr(config, "num_attention_heads", 0) or 0)
    d_model = int(getattr(config, "hidden_size", 0) or 0)
    return ModelFacts(
        name=name,
        family=family,
        num_layers=int(getattr(config, "num_hidden_layers", len(sites))),
        num_heads=sites[0].num_heads if sites else heads,
        num_kv_heads=sites[0].num_kv_heads if sites else int(getattr(config, "num_key_value_heads", heads) or heads),
        d_model=d_model,
        d_head=sites[0].head_dim if sites else (d_model // heads if heads else 0),
        positional=_positional(config, sites),
        causal=family in ("gpt2", "llama")
        or bool(getattr(config, "is_decoder", False))
        or any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in getattr(config, "architectures", None) or ()),
        max_positions=_max_positions(config),
        num_parameters=sum(p.numel() for p in model.parameters()),
    )
