"""Switch a head off and rerun the real model: what the layer's heads, one at a time, change downstream.

A forward pre-hook on layer l's output projection (o_proj, c_proj, out_lin; BERT's
``attention.output.dense``) edits its input, the merged head outputs (B, L, H*Ev), before W^O is applied:

    zero:  o_h[i] <- 0                                  for every position i
    mean:  o_h[i] <- mean over the sentence's real tokens of o_h (from the unablated run)

Nothing is copied or patched; the hook is removed when the pass ends. "Rerun from that layer" is done as
a full forward pass with the hook in place: the layers below l see exactly what they saw before, so the
result is the same as restarting at layer l, at the price of recomputing them. What changes downstream:

- decoder: the next-token distribution at a chosen position. The effect is log p_after(t) - log p_before(t)
  for t, the token the unablated model ranks first there (negative: the head was helping to predict it).
  A causal model's position p reads positions 0..p only, so ablation runs stop at p (exact, and cheaper).
- encoder: the sentence embedding, the mean of the last hidden states over real tokens (how
  all-MiniLM-L6-v2 pools). The effect is 1 - cos(before, after) (0: nothing changed).

One layer's heads run as one batch (row r has head r switched off); the layer x head map runs each layer
in turn (MiniLM 6 batches of 12, SmolLM2 30 batches of 9).

Each head's direct effect on the next-token logit is in ``logit_attribution``; what both read off the model
(final norm, unembedding, positions) in ``ablation_readout``. Their public names are re-exported here.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from .ablation_readout import (
    TokenChoice,
    baseline_readout,
    check_layer,
    check_position,
    default_position,
    final_norm,
    is_decoder,
    next_token_log_probs,
    real_tokens,
    top_tokens,
)
from .logit_attribution import DirectLogits, direct_logit_attribution

if TYPE_CHECKING:
    from .pretrained.loading import LoadedModel
    from .pretrained.tokens import Tokens

__all__ = [  # what callers import from here, including the re-exports
    "ABLATIONS",
    "TOP_K",
    "AblationMap",
    "DirectLogits",
    "HeadAblation",
    "Reference",
    "TokenChoice",
    "ablate_layer",
    "ablation_map",
    "baseline_readout",
    "check_layer",
    "default_position",
    "direct_logit_attribution",
    "is_decoder",
    "metric_name",
    "reference_run",
]

ABLATIONS = ("zero", "mean")
TOP_K = 5
Progress = Callable[[str, float], None]


# --------------------------------------------------------------------------- running the model with hooks


@dataclass(frozen=True, eq=False)
class Reference:
    """The unablated model on one text (CPU float32 tensors, batch removed). Treat as read-only."""

    tokens: Tokens
    attn_outputs: torch.Tensor  # (layers, L, D)  each layer's output projection's output (the attention output)
    merged_means: torch.Tensor  # (layers, H*Ev)  the merged head outputs averaged over the real tokens
    hidden: torch.Tensor  # (L, D)            the last hidden state (after the final norm where there is one)
    final_in: torch.Tensor | None  # (L, D)   what the final norm reads: the whole residual stream
    decoder: bool

    @property
    def embedding(self) -> torch.Tensor:
        """(D,) the sentence embedding: the last hidden states averaged over real tokens."""
        return self.hidden[real_tokens(self.tokens)].mean(dim=0)


def _forward(loaded: LoadedModel, ids: torch.Tensor, mask: torch.Tensor, hooks) -> torch.Tensor:
    """The base model on (B, L) ids with ``hooks`` = [(module, "pre" | "post", fn)] attached; (B, L, D) on CPU."""
    runner = loaded.runner
    handles = []
    kwargs = {"use_cache": False} if "use_cache" in inspect.signature(runner.forward).parameters else {}
    with loaded.lock, torch.no_grad():  # hooks live on shared modules: one run at a time
        try:
            for module, kind, fn in hooks:
                register = module.register_forward_pre_hook if kind == "pre" else module.register_forward_hook
                handles.append(register(fn))
            out = runner(input_ids=ids.to(loaded.device), attention_mask=mask.to(loaded.device), **kwargs)
        finally:
            for handle in handles:
                handle.remove()
    return out.last_hidden_state.detach().to("cpu", torch.float32)


def reference_run(loaded: LoadedModel, tokens: Tokens) -> Reference:
    """One unablated forward pass that records every layer's attention output (the output projection's
    output), the mean of its merged head outputs and the final norm's input."""
    if not loaded.sites:
        raise ValueError(f"{loaded.name}: its attention layout is not one Attention Lens can take apart by head")
    layers = len(loaded.sites)
    outputs: list = [None] * layers
    means: list = [None] * layers
    final: dict = {}
    real = real_tokens(tokens)

    def record_output(index, module, args, output):
        outputs[index] = output[0].detach().to("cpu", torch.float32, copy=True)  # (L, D)

    def record_mean(index, module, args):
        merged = args[0][0].detach().to("cpu", torch.float32)  # (L, H*Ev)
        means[index] = merged[real].mean(dim=0)  # (H*Ev,)

    def record_final(module, args):
        final["in"] = args[0][0].detach().to("cpu", torch.float32, copy=True)  # (L, D)

    hooks = []
    for index, site in enumerate(loaded.sites):
        hooks.append((site.w_out, "post", lambda m, a, o, i=index: record_output(i, m, a, o)))
        hooks.append((site.w_out, "pre", lambda m, a, i=index: record_mean(i, m, a)))
    norm = final_norm(loaded.runner)
    decoder = is_decoder(loaded)
    if decoder and norm is not None:
        hooks.append((norm, "pre", record_final))
    hidden = _forward(loaded, tokens.ids, tokens.attention_mask, hooks)[0]  # (L, D)
    return Reference(
        tokens=tokens,
        attn_outputs=torch.stack(outputs),  # (layers, L, D)
        merged_means=torch.stack(means),  # (layers, H*Ev)
        hidden=hidden,
        final_in=final.get("in"),
        decoder=decoder,
    )


def _ablating_hook(rows: list[int | None], head_dim: int, mode: str, mean: torch.Tensor):
    """A pre-hook for W^O that switches off head ``rows[r]`` in batch row r (None: row r untouched)."""

    def hook(module, args):
        merged = args[0]  # (B, L, H*Ev)  the merged head outputs, before W^O
        edited = merged.clone()
        for row, head in enumerate(rows):
            if head is None:
                continue
            part = slice(head * head_dim, (head + 1) * head_dim)  # head h's Ev columns
            if mode == "zero":
                edited[row, :, part] = 0.0  # o_h <- 0
            else:
                edited[row, :, part] = mean[part].to(edited.device, edited.dtype)  # o_h <- its mean over the sentence
        return (edited, *args[1:])

    return hook


def _check_mode(mode: str) -> None:
    if mode not in ABLATIONS:
        raise ValueError(f"unknown ablation {mode!r}; choose one of {ABLATIONS}")


def _ablated_readouts(
    loaded: LoadedModel, reference: Reference, layer: int, rows: list[int | None], mode: str, position: int
) -> torch.Tensor:
    """One batched forward, row r with head rows[r] of ``layer`` switched off: (B, V) log-probs at
    ``position`` (decoder) or (B, D) sentence embeddings (encoder)."""
    site = loaded.sites[layer]
    tokens = reference.tokens
    ids, mask = tokens.ids, tokens.attention_mask  # (1, L)
    if reference.decoder:
        ids, mask = ids[:, : position + 1], mask[:, : position + 1]  # position p reads 0..p only
    batch = len(rows)
    head_dim = reference.merged_means.shape[1] // site.num_heads  # Ev
    hook = _ablating_hook(rows, head_dim, mode, reference.merged_means[layer])
    hidden = _forward(loaded, ids.expand(batch, -1), mask.expand(batch, -1), [(site.w_out, "pre", hook)])
    if reference.decoder:
        return next_token_log_probs(loaded, hidden[:, position])  # (B, V)
    real = mask[0].bool()
    return hidden[:, real].mean(dim=1)  # (B, D) mean over real tokens


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class HeadAblation:
    """What switching off one head (or none) changed. ``effect`` as in the module docstring."""

    layer: int
    head: int | None  # None: nothing switched off (the rerun should equal the reference)
    mode: str
    position: int
    effect: float  # decoder: log p_after(t) - log p_before(t); encoder: 1 - cosine
    cosine: float | None = None  # encoder: cos(sentence embedding before, after)
    target: TokenChoice | None = None  # decoder: the token ranked first before, with its log-prob before
    target_after: float | None = None  # decoder: its log-prob after
    top_before: tuple[TokenChoice, ...] = ()
    top_after: tuple[TokenChoice, ...] = ()


def metric_name(decoder: bool) -> str:
    """What ``HeadAblation.effect`` measures, in words."""
    if decoder:
        return "change in log-probability of the top next token (after − before)"
    return "1 − cosine between the sentence embeddings before and after"


def ablate_layer(
    loaded: LoadedModel,
    tokens: Tokens,
    layer: int,
    *,
    mode: str = "zero",
    heads: list[int | None] | None = None,
    position: int | None = None,
    reference: Reference | None = None,
    top_k: int = TOP_K,
) -> tuple[HeadAblation, ...]:
    """Switch off each of ``heads`` (default: every head of ``layer``; None = switch off nothing) in turn,
    in one batched forward, and measure what changed (see the module docstring)."""
    check_layer(loaded, layer)
    _check_mode(mode)
    position = check_position(tokens, position)
    reference = reference_run(loaded, tokens) if reference is None else reference
    rows = list(range(loaded.sites[layer].num_heads)) if heads is None else list(heads)
    before = baseline_readout(loaded, reference, position)
    after = _ablated_readouts(loaded, reference, layer, rows, mode, position)
    results = []
    if reference.decoder:
        top_before = top_tokens(loaded, before, top_k)
        target = top_before[0]
        for row, head in enumerate(rows):
            moved = float(after[row, target.token_id])
            results.append(
                HeadAblation(
                    layer=layer,
                    head=head,
                    mode=mode,
                    position=position,
                    effect=moved - target.log_prob,
                    target=target,
                    target_after=moved,
                    top_before=top_before,
                    top_after=top_tokens(loaded, after[row], top_k),
                )
            )
        return tuple(results)
    for row, head in enumerate(rows):
        cosine = float(torch.nn.functional.cosine_similarity(before.double(), after[row].double(), dim=0))
        results.append(
            HeadAblation(layer=layer, head=head, mode=mode, position=position, effect=1.0 - cosine, cosine=cosine)
        )
    return tuple(results)


@dataclass(frozen=True)
class AblationMap:
    """The ablation effect of every head of every layer (one head switched off at a time)."""

    effects: np.ndarray  # (layers, H)
    mode: str
    position: int
    decoder: bool
    target: TokenChoice | None  # decoder: the token whose log-prob is followed

    @property
    def metric(self) -> str:
        return metric_name(self.decoder)


def ablation_map(
    loaded: LoadedModel,
    tokens: Tokens,
    *,
    mode: str = "zero",
    position: int | None = None,
    reference: Reference | None = None,
    progress: Progress | None = None,
) -> AblationMap:
    """``ablate_layer`` for every layer: one batched forward per layer. ``progress(message, fraction)``
    hears about each layer (SmolLM2: 30 forwards of 9 rows; about a second each at a few dozen tokens)."""
    if not loaded.sites:
        check_layer(loaded, 0)
    _check_mode(mode)
    position = check_position(tokens, position)
    reference = reference_run(loaded, tokens) if reference is None else reference
    layers = len(loaded.sites)
    rows = []
    target = None
    for layer in range(layers):
        if progress is not None:
            progress(f"Layer {layer + 1} of {layers}: switching off each head in turn", layer / layers)
        found = ablate_layer(loaded, tokens, layer, mode=mode, position=position, reference=reference, top_k=1)
        rows.append([a.effect for a in found])
        target = found[0].target
    if progress is not None:
        progress("Done", 1.0)
    return AblationMap(np.array(rows, dtype=np.float64), mode, position, reference.decoder, target)
