"""What ablation and direct logit attribution read off a real model: its final norm and unembedding,
the next-token log-probabilities at a position, the top tokens there, and which positions are real tokens.

Shared by ``ablation`` (switch a head off, rerun) and ``logit_attribution`` (split a logit over heads);
both re-export what their callers use, so ``from attention_core.ablation import ...`` keeps working.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import nn

if TYPE_CHECKING:
    from .ablation import Reference
    from .pretrained.loading import LoadedModel
    from .pretrained.tokens import Tokens


@dataclass(frozen=True)
class TokenChoice:
    token_id: int
    label: str
    log_prob: float


def final_norm(runner: nn.Module) -> nn.Module | None:
    """The norm the base model applies to the residual stream before the unembedding (None: none found)."""
    for name in ("norm", "ln_f", "final_layer_norm"):
        module = getattr(runner, name, None)
        if isinstance(module, nn.Module):
            return module
    return None


def unembedding(loaded: LoadedModel) -> nn.Module | None:
    """The model's output embedding W_U (the LM head), or None for a model without one."""
    getter = getattr(loaded.model, "get_output_embeddings", None)
    head = getter() if callable(getter) else None
    return head if isinstance(head, nn.Module) and getattr(head, "weight", None) is not None else None


def is_decoder(loaded: LoadedModel) -> bool:
    """True for a causal model with an unembedding: its readout is the next-token distribution."""
    return bool(loaded.facts.causal) and unembedding(loaded) is not None


def check_layer(loaded: LoadedModel, layer: int) -> None:
    """ValueError with a readable message for a model without captured sites or a layer out of range."""
    if not loaded.sites:
        raise ValueError(f"{loaded.name}: its attention layout is not one Attention Lens can take apart by head")
    if not 0 <= layer < len(loaded.sites):
        raise ValueError(f"layer {layer} is out of range: {loaded.name} has layers 0..{len(loaded.sites) - 1}")


def real_tokens(tokens: Tokens) -> torch.Tensor:
    """(L,) True = a real token (False = padding)."""
    return tokens.attention_mask[0].bool()


def default_position(tokens: Tokens) -> int:
    """The last real token: where a decoder predicts what comes next."""
    real = real_tokens(tokens).nonzero().flatten()
    return int(real[-1]) if len(real) else tokens.length - 1


def check_position(tokens: Tokens, position: int | None) -> int:
    """``position`` (None: the default one) as an int; ValueError when it is out of range."""
    position = default_position(tokens) if position is None else int(position)
    if not 0 <= position < tokens.length:
        raise ValueError(f"position {position} is out of range 0..{tokens.length - 1}")
    return position


def next_token_log_probs(loaded: LoadedModel, hidden: torch.Tensor) -> torch.Tensor:
    """(B, V) next-token log-probabilities from (B, D) final hidden states, through the model's own unembedding."""
    head = unembedding(loaded)
    with torch.no_grad():
        logits = head(hidden.to(loaded.device, head.weight.dtype))  # (B, V)
    return logits.float().log_softmax(dim=-1).to("cpu")


def token_label(loaded: LoadedModel, token_id: int) -> str:
    return loaded.tokenizer.decode([token_id], skip_special_tokens=False, clean_up_tokenization_spaces=False)


def top_tokens(loaded: LoadedModel, log_probs: torch.Tensor, k: int) -> tuple[TokenChoice, ...]:
    """The ``k`` most likely tokens of (V,) ``log_probs``, most likely first."""
    values, ids = log_probs.topk(k)
    return tuple(TokenChoice(int(i), token_label(loaded, int(i)), float(v)) for v, i in zip(values, ids, strict=True))


def baseline_readout(loaded: LoadedModel, reference: Reference, position: int) -> torch.Tensor:
    """(V,) log-probs at ``position`` (decoder) or (D,) the sentence embedding (encoder), unablated."""
    if reference.decoder:
        return next_token_log_probs(loaded, reference.hidden[position][None])[0]
    return reference.embedding
