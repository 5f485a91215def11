"""Attention rollout across layers (Abnar & Zuidema, 2020).

Each layer's attention is averaged over heads and mixed with the identity to account for the
residual connection, Â_l = rownorm(0.5 · mean_h A_l + 0.5 · I); the rollout multiplies these from
the first layer up, R_l = Â_l R_{l-1}, R_0 = Â_0. Row i of R says how much each input position
flows into position i after the layers so far. Rows sum to 1.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from .checks import as_array, layer_stack
from .heatmaps import matrix_heatmap


def _mixed_layers(attentions, residual: float) -> np.ndarray:
    attentions = layer_stack("attentions", attentions)
    layers, heads, rows, cols = attentions.shape
    if rows != cols:
        raise ValueError(f"rollout needs square attention (L == S), got attentions of shape {attentions.shape}")
    if not 0.0 <= residual <= 1.0:
        raise ValueError(f"residual must be in [0, 1], got {residual}")
    mean = np.stack(  # (layers, L, L) average over heads, one layer at a time in float64
        [np.where(np.isfinite(layer), layer, 0.0).mean(axis=0, dtype=np.float64) for layer in attentions]
    )
    mixed = (1.0 - residual) * mean + residual * np.eye(rows)  # (layers, L, L) + identity for the residual path
    return mixed / mixed.sum(axis=-1, keepdims=True)  # row-normalised


def rollout_by_layer(attentions, *, residual: float = 0.5) -> np.ndarray:
    """(layers, L, L): the rollout after each layer, from attentions (layers, H, L, L)."""
    mixed = _mixed_layers(attentions, residual)
    rollouts = np.empty_like(mixed)
    current = np.eye(mixed.shape[-1])
    for layer, matrix in enumerate(mixed):
        current = matrix @ current  # (L, L) Â_l R_{l-1}
        rollouts[layer] = current
    return rollouts


def attention_rollout(attentions, *, residual: float = 0.5, upto: int | None = None) -> np.ndarray:
    """(L, L): the rollout through layers 0..``upto`` (all layers by default)."""
    rollouts = rollout_by_layer(attentions, residual=residual)
    last = rollouts.shape[0] - 1 if upto is None else upto
    if not 0 <= last < rollouts.shape[0]:
        raise ValueError(f"upto {upto} out of range for {rollouts.shape[0]} layers")
    return rollouts[last]


def rollout_heatmap(
    rollout,
    tokens: Sequence[str],
    *,
    layers: int | None = None,
    show_values: bool | None = None,
    title: str | None = None,
    theme: str = "screen",
) -> go.Figure:
    """Heatmap of a rollout matrix (L, L): rows = output position (query), columns = input position (key)."""
    rollout = as_array("rollout", rollout, 2)
    through = "" if layers is None else f" through {layers} layers"
    return matrix_heatmap(
        rollout,
        tokens,
        tokens,
        title=title if title is not None else f"Attention rollout{through}  (0.5·A + 0.5·I, heads averaged)",
        row_title="query",
        col_title="key",
        scale="sequential",
        zmin=0.0,
        show_values=show_values,
        value_name="rollout",
        theme=theme,
    )
