"""Switch a head off and rerun the real model; each head's direct effect on the next-token logit.

Ablation. A forward pre-hook on layer l's output projection (o_proj, c_proj, out_lin; BERT's
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

Direct logit attribution (decoders). The final norm divides the residual stream x by a scale s computed on
the whole of it (RMSNorm: s = sqrt(mean(x^2) + eps); LayerNorm also subtracts the mean), then multiplies by
its gain g. Holding s fixed at its value on the full residual makes the norm linear, so the logit of token t
splits over everything added into the stream:

    logit_t = sum_parts (centre(part) / s) * g . W_U[t]  (+ the norm's bias . W_U[t] + the unembedding's bias)

Each head's part is its output at the position, o_h W^O_h (from ``contributions``); "rest" is everything
else (embeddings, the other layers, the MLPs). This is the direct path only: what later layers make of the
head's output is not in its number (ablation measures that). The reconstruction is checked against the
model's own logit.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

if TYPE_CHECKING:
    from .contributions import LayerContributions
    from .pretrained.loading import LoadedModel
    from .pretrained.tokens import Tokens

ABLATIONS = ("zero", "mean")
TOP_K = 5
Progress = Callable[[str, float], None]


# --------------------------------------------------------------------------- what the model is made of


def _final_norm(runner: nn.Module) -> nn.Module | None:
    for name in ("norm", "ln_f", "final_layer_norm"):
        module = getattr(runner, name, None)
        if isinstance(module, nn.Module):
            return module
    return None


def _unembedding(loaded: LoadedModel) -> nn.Module | None:
    getter = getattr(loaded.model, "get_output_embeddings", None)
    head = getter() if callable(getter) else None
    return head if isinstance(head, nn.Module) and getattr(head, "weight", None) is not None else None


def is_decoder(loaded: LoadedModel) -> bool:
    """True for a causal model with an unembedding: its readout is the next-token distribution."""
    return bool(loaded.facts.causal) and _unembedding(loaded) is not None


def check_layer(loaded: LoadedModel, layer: int) -> None:
    """ValueError with a readable message for a model without captured sites or a layer out of range."""
    if not loaded.sites:
        raise ValueError(f"{loaded.name}: its attention layout is not one Attention Lens can take apart by head")
    if not 0 <= layer < len(loaded.sites):
        raise ValueError(f"layer {layer} is out of range: {loaded.name} has layers 0..{len(loaded.sites) - 1}")


def _real(tokens: Tokens) -> torch.Tensor:
    return tokens.attention_mask[0].bool()  # (L,) True = a real token (False = padding)


def default_position(tokens: Tokens) -> int:
    """The last real token: where a decoder predicts what comes next."""
    real = _real(tokens).nonzero().flatten()
    return int(real[-1]) if len(real) else tokens.length - 1


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
        return self.hidden[_real(self.tokens)].mean(dim=0)


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
    real = _real(tokens)

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
    norm = _final_norm(loaded.runner)
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


def _log_probs(loaded: LoadedModel, hidden: torch.Tensor) -> torch.Tensor:
    """(B, V) next-token log-probabilities from (B, D) final hidden states, through the model's own unembedding."""
    head = _unembedding(loaded)
    with torch.no_grad():
        logits = head(hidden.to(loaded.device, head.weight.dtype))  # (B, V)
    return logits.float().log_softmax(dim=-1).to("cpu")


def _check_mode(mode: str) -> None:
    if mode not in ABLATIONS:
        raise ValueError(f"unknown ablation {mode!r}; choose one of {ABLATIONS}")


def _check_position(tokens: Tokens, position: int | None) -> int:
    position = default_position(tokens) if position is None else int(position)
    if not 0 <= position < tokens.length:
        raise ValueError(f"position {position} is out of range 0..{tokens.length - 1}")
    return position


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
        return _log_probs(loaded, hidden[:, position])  # (B, V)
    real = mask[0].bool()
    return hidden[:, real].mean(dim=1)  # (B, D) mean over real tokens


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class TokenChoice:
    token_id: int
    label: str
    log_prob: float


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


def _label(loaded: LoadedModel, token_id: int) -> str:
    return loaded.tokenizer.decode([token_id], skip_special_tokens=False, clean_up_tokenization_spaces=False)


def _top(loaded: LoadedModel, log_probs: torch.Tensor, k: int) -> tuple[TokenChoice, ...]:
    values, ids = log_probs.topk(k)
    return tuple(TokenChoice(int(i), _label(loaded, int(i)), float(v)) for v, i in zip(values, ids, strict=True))


def baseline_readout(loaded: LoadedModel, reference: Reference, position: int) -> torch.Tensor:
    """(V,) log-probs at ``position`` (decoder) or (D,) the sentence embedding (encoder), unablated."""
    if reference.decoder:
        return _log_probs(loaded, reference.hidden[position][None])[0]
    return reference.embedding


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
    position = _check_position(tokens, position)
    reference = reference_run(loaded, tokens) if reference is None else reference
    rows = list(range(loaded.sites[layer].num_heads)) if heads is None else list(heads)
    before = baseline_readout(loaded, reference, position)
    after = _ablated_readouts(loaded, reference, layer, rows, mode, position)
    results = []
    if reference.decoder:
        top_before = _top(loaded, before, top_k)
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
                    top_after=_top(loaded, after[row], top_k),
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
    position = _check_position(tokens, position)
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


# --------------------------------------------------------------------------- direct logit attribution


@dataclass(frozen=True)
class DirectLogits:
    """Each head's direct contribution to one token's logit at one position (see the module docstring)."""

    layer: int
    position: int
    token: TokenChoice  # the token whose logit is split (its log-prob, unablated)
    heads: np.ndarray  # (H,)  (centre(o_h W^O_h) / s) g . W_U[t]
    bias: float  # b^O's term (0 without a bias)
    rest: float  # everything else in the residual stream: embeddings, the other layers, the MLPs
    constant: float  # the final norm's bias . W_U[t] + the unembedding's own bias
    logit: float  # the model's own logit of the token
    scale: float  # s, the final norm's divisor on the full residual stream

    @property
    def reconstructed(self) -> float:
        return float(self.heads.sum() + self.bias + self.rest + self.constant)

    @property
    def check(self) -> float:
        """|sum of the parts - the model's logit|: how well the linearised norm holds (about 1e-5 here)."""
        return abs(self.reconstructed - self.logit)


def direct_logit_attribution(
    loaded: LoadedModel,
    reference: Reference,
    parts: LayerContributions,
    position: int,
    token_id: int | None = None,
) -> DirectLogits:
    """Split the logit of ``token_id`` (default: the top next token) at ``position`` over layer
    ``parts.layer``'s heads and the rest of the residual stream (decoders only)."""
    norm = _final_norm(loaded.runner)
    head = _unembedding(loaded)
    if not reference.decoder or norm is None or head is None or reference.final_in is None:
        raise ValueError(
            f"{loaded.name}: direct logit attribution needs a decoder with a final norm and an unembedding"
        )
    position = _check_position(reference.tokens, position)
    log_probs = baseline_readout(loaded, reference, position)  # (V,)
    token_id = int(log_probs.argmax()) if token_id is None else int(token_id)
    residual = reference.final_in[position].double()  # (D,)   what the final norm reads
    centred = isinstance(norm, nn.LayerNorm)  # LayerNorm subtracts the mean; RMSNorm does not
    eps = float(getattr(norm, "variance_epsilon", getattr(norm, "eps", 1e-6)))
    if centred:
        scale = math.sqrt(float(residual.var(unbiased=False)) + eps)  # s = sqrt(var(x) + eps)
    else:
        scale = math.sqrt(float(residual.pow(2).mean()) + eps)  # s = sqrt(mean(x^2) + eps)
    gain = norm.weight.detach().to("cpu", torch.float64)  # (D,)   g
    direction = gain * head.weight.detach()[token_id].to("cpu", torch.float64)  # (D,)   g * W_U[t]

    def through(part: torch.Tensor) -> torch.Tensor:
        shifted = part - part.mean(dim=-1, keepdim=True) if centred else part  # centre(part)
        return (shifted / scale) @ direction  # (...,)   part's share of the logit

    head_parts = torch.from_numpy(parts.head_outputs[:, position])  # (H, D)   o_h[p] W^O_h
    bias = torch.zeros_like(residual) if parts.bias is None else torch.from_numpy(parts.bias)  # (D,)
    rest = residual - head_parts.sum(dim=0) - bias  # (D,)   embeddings, other layers, MLPs
    constant = 0.0
    norm_bias = getattr(norm, "bias", None)
    if isinstance(norm_bias, torch.Tensor):
        constant += float(norm_bias.detach().to("cpu", torch.float64) @ head.weight.detach()[token_id].double().cpu())
    head_bias = getattr(head, "bias", None)
    if isinstance(head_bias, torch.Tensor):
        constant += float(head_bias.detach()[token_id])
    with torch.no_grad():
        logit = float(head(reference.hidden[position][None].to(loaded.device, head.weight.dtype))[0, token_id])
    return DirectLogits(
        layer=parts.layer,
        position=position,
        token=TokenChoice(token_id, _label(loaded, token_id), float(log_probs[token_id])),
        heads=through(head_parts).numpy(),
        bias=float(through(bias)) if parts.bias is not None else 0.0,
        rest=float(through(rest)),
        constant=constant,
        logit=logit,
        scale=scale,
    )
