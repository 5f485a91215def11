"""Direct logit attribution: each head's direct share of one token's logit at one position (decoders).

The final norm divides the residual stream x by a scale s computed on the whole of it (RMSNorm:
s = sqrt(mean(x^2) + eps); LayerNorm also subtracts the mean), then multiplies by its gain g. Holding s fixed
at its value on the full residual makes the norm linear, so the logit of token t splits over everything
added into the stream:

    logit_t = sum_parts (centre(part) / s) * g . W_U[t]  (+ the norm's bias . W_U[t] + the unembedding's bias)

Each head's part is its output at the position, o_h W^O_h (from ``contributions``); "rest" is everything
else (embeddings, the other layers, the MLPs). This is the direct path only: what later layers make of the
head's output is not in its number (ablation measures that). The reconstruction is checked against the
model's own logit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from .ablation_readout import TokenChoice, baseline_readout, check_position, final_norm, token_label, unembedding

if TYPE_CHECKING:
    from .ablation import Reference
    from .contributions import LayerContributions
    from .pretrained.loading import LoadedModel


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
    norm = final_norm(loaded.runner)
    head = unembedding(loaded)
    if not reference.decoder or norm is None or head is None or reference.final_in is None:
        raise ValueError(
            f"{loaded.name}: direct logit attribution needs a decoder with a final norm and an unembedding"
        )
    position = check_position(reference.tokens, position)
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
        token=TokenChoice(token_id, token_label(loaded, token_id), float(log_probs[token_id])),
        heads=through(head_parts).numpy(),
        bias=float(through(bias)) if parts.bias is not None else 0.0,
        rest=float(through(rest)),
        constant=constant,
        logit=logit,
        scale=scale,
    )
