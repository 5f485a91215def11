"""Per-capture summaries of every layer's weights, made within one layer's (or one head's) memory.

Pure numpy, the same numbers as viz's whole-array functions (tests/test_summaries_memory.py).
"""

from __future__ import annotations

import numpy as np


def overview_by_head(attentions: np.ndarray, statistic: str) -> np.ndarray:
    """(layers, H) ``viz.stats.overview_matrix``, one head at a time: the same numbers (each statistic is
    per head), with one head's float64 temporaries (about 24 MB at 1,024 tokens) instead of one layer's (216 MB)."""
    return overviews_by_head(attentions, (statistic,))[statistic]


def overviews_by_head(attentions, statistics) -> dict[str, np.ndarray]:
    """{statistic: (layers, H)} for several statistics in one pass over the layers: each layer is read once
    (a packed causal store unpacks it once, not once per statistic), each head widened to float64 once for all
    of them, into buffers reused from head to head (``viz.stats.head_statistics``), each cell
    ``viz.stats.overview_matrix``'s number."""
    from viz.stats import head_statistics

    layers, heads = attentions.shape[:2]
    values = {name: np.empty((layers, heads), dtype=np.float64) for name in statistics}  # each (layers, H)
    scratch: dict = {}  # one head's float64 copy and temporaries, reused for every head
    for layer in range(layers):
        maps = attentions[layer]  # (H, L, S) this layer's weights
        for head in range(heads):
            for name, value in head_statistics(maps[head], statistics, scratch).items():
                values[name][layer, head] = value
    return values


def rollout_streamed(attentions: np.ndarray) -> np.ndarray:
    """(L, L) ``viz.rollout.attention_rollout``, one layer at a time: R_l = Â_l R_{l-1} from R_{-1} = I.

    The same numbers (each Â_l is made by viz's own ``_mixed_layers`` from its layer alone: every step is
    per row), with one layer's float64 maps alive (about 25 MB at 1,024 tokens) instead of all layers' at
    once (about 1 GB for SmolLM2's 30 layers), and an owned (L, L) result, not a view of every layer's rollout."""
    from viz.rollout import _mixed_layers

    current = np.eye(attentions.shape[-1])  # (L, L) R_{-1} = I
    for layer in attentions:
        mixed = _mixed_layers(layer[None], 0.5)[0]  # (L, L) Â_l = rownorm(0.5 mean_h A_l + 0.5 I)
        current = mixed @ current  # (L, L) R_l = Â_l R_{l-1}
    return current
