"""Each head's part of the attention block's output: value-weighted attention, and the check that it adds up.

One layer's attention block, for one sequence (H query heads, Hkv key/value heads, Ev per head, D model):

    o_h[i]  = sum_j alpha[h, i, j] v[g(h), j]                    # (Ev,)  head h's weighted sum of values
    out[i]  = concat_h(o_h[i]) @ W^O + b^O                       # (D,)   the output projection (H*Ev, D)
            = sum_h o_h[i] @ W^O_h + b^O                         # W^O_h: rows h*Ev..(h+1)*Ev of W^O
            = sum_h sum_j alpha[h, i, j] (v[g(h), j] @ W^O_h) + b^O

with g(h) = h // (H / Hkv) (grouped-query attention: each key/value head serves H / Hkv query heads,
transformers' ``repeat_kv``). So each term c[h, i, j] = alpha[h, i, j] (v_j W^O_h) is a vector in the
model's own space, and the terms add up exactly to what the block writes into the residual stream.

The weight alpha says how much query i looks at key j; the norm ||c[h, i, j]|| = alpha[h, i, j] ||v_j W^O_h||
(alpha >= 0) says how much that look moves the output. A head may put most of its weight on a token whose
transformed value is small (a "sink" such as [CLS] or the first token) and so change almost nothing:
weights alone overstate it (Kobayashi et al., 2020, "Attention is not only a weight").

The check: the per-head outputs plus b^O, summed in float64, against what the output projection of the real
model returned (a forward hook). Its number is ``sum_check_max_abs_diff``, a plain max |difference|, and the
tolerance is 1e-5. It is meant to be run on a float64 copy of the model (``contributions_check``): in float32
the model's own rounding alone reaches 5e-5..9e-5 on SmolLM2 (attention outputs near 180, where float32's
spacing is 1.5e-5), while in float64 what is left is about 1e-13 and a wrong head order, a missing b^O or a
wrong key/value head misses by a sizeable part of the output. The same function applied to the float32
capture gives the float32 difference, shown beside it for information only.

Torch in, numpy out (the figures and the app read numpy); no model is run here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

SUM_CHECK_TOLERANCE = 1e-5  # largest |sum of per-head parts + b^O - the model's attention output| accepted


def head_value_outputs(v: torch.Tensor, w_o: torch.Tensor, num_heads: int) -> torch.Tensor:
    """(H, S, D): every key's value through its head's slice of the output projection, v[g(h), j] @ W^O_h.

    ``v`` (Hkv, S, Ev) values, ``w_o`` (H*Ev, D) the output projection as x @ W^O (rows = merged heads).
    """
    kv_heads, length, head_dim = v.shape
    if num_heads % kv_heads:
        raise ValueError(f"{num_heads} query heads cannot share {kv_heads} key/value heads evenly")
    if w_o.shape[0] != num_heads * head_dim:
        raise ValueError(f"W^O {tuple(w_o.shape)} must have H*Ev = {num_heads}*{head_dim} rows")
    v_per_query = v.repeat_interleave(num_heads // kv_heads, dim=0)  # (H, S, Ev)   query head h reads kv head g(h)
    w_o_heads = w_o.reshape(num_heads, head_dim, w_o.shape[1])  # (H, Ev, D)   W^O_h, head by head
    return v_per_query @ w_o_heads  # (H, S, D)   v_j W^O_h


def contribution_terms(weights: torch.Tensor, v: torch.Tensor, w_o: torch.Tensor) -> torch.Tensor:
    """(H, L, S, D): every term c[h, i, j] = alpha[h, i, j] v[g(h), j] W^O_h (small inputs only: it is 4-D)."""
    value_out = head_value_outputs(v, w_o, weights.shape[0])  # (H, S, D)
    return weights[..., None] * value_out[:, None, :, :]  # (H, L, S, D)


@dataclass(frozen=True)
class LayerContributions:
    """One layer's attention block taken apart by head (numpy; float64 where computed here).

    ``head_outputs.sum(0) + bias`` is the block's output; ``model_output`` is what the real model's output
    projection returned (None when no forward was recorded; kept at its own precision, widened to float64), and
    ``sum_check_max_abs_diff`` their largest absolute difference (NaN without ``model_output``).
    """

    layer: int
    weights: np.ndarray  # (H, L, S)       alpha, the model's own attention weights
    value_norms: np.ndarray  # (H, S)      ||v[g(h), j] W^O_h||
    contribution_norms: np.ndarray  # (H, L, S)  ||alpha[h, i, j] v[g(h), j] W^O_h||
    head_outputs: np.ndarray  # (H, L, D)  sum_j c[h, i, j] = o_h[i] W^O_h
    bias: np.ndarray | None  # (D,)        b^O
    model_output: np.ndarray | None  # (L, D)  the model's own attention output (hooked)
    num_kv_heads: int

    @property
    def num_heads(self) -> int:
        return self.weights.shape[0]

    @property
    def block_output(self) -> np.ndarray:
        """(L, D) sum over heads of their outputs, plus b^O."""
        total = self.head_outputs.sum(axis=0)  # (L, D)
        return total if self.bias is None else total + self.bias

    @property
    def sum_check_max_abs_diff(self) -> float:
        """max |sum_h head output + b^O - the model's own attention output| (NaN without the model's)."""
        if self.model_output is None:
            return float("nan")
        return float(np.abs(self.block_output - self.model_output).max())

    @property
    def sum_check_ok(self) -> bool:
        """The plain max |difference| within 1e-5 (meaningful on a float64 model: see the module docstring)."""
        return self.sum_check_max_abs_diff <= SUM_CHECK_TOLERANCE

    def kv_head(self, head: int) -> int:
        """The key/value head that query head ``head`` reads."""
        return head // (self.num_heads // self.num_kv_heads)

    def contribution_shares(self) -> np.ndarray:
        """(H, L, S) each row's contribution norms scaled to sum to 1: comparable with the weights cell by cell."""
        return _row_shares(self.contribution_norms)

    def output_norms(self) -> np.ndarray:
        """(H, L) ||o_h[i] W^O_h||: how far each head moves each token."""
        return np.linalg.norm(self.head_outputs, axis=-1)

    def head_shares(self) -> np.ndarray:
        """(H, L) each head's share of the block's output per token: ||o_h[i] W^O_h|| / sum_h' ||o_h'[i] W^O_h'||."""
        return _row_shares(self.output_norms().T).T  # shares over heads, per token


def _row_shares(values: np.ndarray) -> np.ndarray:
    """Last axis scaled to sum to 1 (an all-zero row stays zero)."""
    total = values.sum(axis=-1, keepdims=True)
    return np.divide(values, total, out=np.zeros_like(values), where=total > 0)


def contributions(
    weights: torch.Tensor,
    v: torch.Tensor,
    w_o: torch.Tensor,
    b_o: torch.Tensor | None = None,
    *,
    model_output: torch.Tensor | None = None,
    layer: int = 0,
    dtype: torch.dtype = torch.float64,
) -> LayerContributions:
    """Take one layer's attention block apart by head (see the module docstring).

    ``weights`` (H, L, S) alpha, ``v`` (Hkv, S, Ev), ``w_o`` (H*Ev, D), ``b_o`` (D,) or None,
    ``model_output`` (L, D) the model's own output-projection output, for the sum check.
    Computed in ``dtype`` (float64: the check then measures the model's rounding, not ours).
    """
    if weights.dim() != 3 or v.dim() != 3 or weights.shape[2] != v.shape[1]:
        raise ValueError(f"weights (H, L, S) and v (Hkv, S, Ev) do not fit: {tuple(weights.shape)}, {tuple(v.shape)}")
    weights, v, w_o = (t.detach().to("cpu", dtype) for t in (weights, v, w_o))
    value_out = head_value_outputs(v, w_o, weights.shape[0])  # (H, S, D)   v_j W^O_h
    value_norms = value_out.norm(dim=-1)  # (H, S)
    contribution_norms = weights * value_norms[:, None, :]  # (H, L, S)   ||alpha_ij v_j W^O_h|| (alpha >= 0)
    head_outputs = weights @ value_out  # (H, L, D)   sum_j alpha_ij v_j W^O_h = o_h W^O_h
    return LayerContributions(
        layer=layer,
        weights=weights.numpy(),
        value_norms=value_norms.numpy(),
        contribution_norms=contribution_norms.numpy(),
        head_outputs=head_outputs.numpy(),
        bias=None if b_o is None else b_o.detach().to("cpu", dtype).numpy(),
        model_output=None if model_output is None else model_output.detach().to("cpu", dtype).numpy(),
        num_kv_heads=v.shape[0],
    )


def layer_contributions(layer_capture, model_output: torch.Tensor | None = None) -> LayerContributions:
    """``contributions`` of one captured layer (``pretrained.LayerCapture``): its returned weights, its
    captured values and its own W^O and b^O. ValueError when the layer's values or W^O were not captured."""
    projection = layer_capture.projection
    if layer_capture.v is None or projection is None or projection.w_o is None:
        raise ValueError(
            f"layer {layer_capture.layer}: the values or the output projection of this model were not captured, "
            "so its heads cannot be taken apart"
        )
    return contributions(
        layer_capture.attentions,
        layer_capture.v,
        projection.w_o,
        projection.b_o,
        model_output=model_output,
        layer=layer_capture.layer,
    )
