"""Attention computed from first principles, step by step, beside real pretrained transformers.

Where each formula of the article lives:
- Q = X W^Q, K = X W^K, V = X W^V, heads split/merged ......... multihead.py
- Q K^T, / sqrt(d_k), mask, softmax, O = A V ................... sdpa.py
- masks (causal, padding, sliding window, strided, ...) ......... masks.py
- positional encodings (sinusoidal, learned, rotary, ALiBi) ..... positional.py
- variance vs d_k, saturation and gradients, O(n^2) cost,
  head statistics, permutation ................................. analysis.py
- real models: load, capture q/k/v, replay ..................... pretrained/
- the one path request -> ModelTrace (app, CLI, export) ......... request.py, pipeline.py, traces.py
- pitfalls-lab numbers, derivation readouts ..................... lab.py, readouts.py
- training lab (scaling decides learning), attention vs RNN ..... training.py, recurrence.py
- command line: verify, bench .................................. __main__.py, bench.py
"""

from .device import pick_device
from .masks import block_local, blocked_keys, causal, full, padding, sliding_window, strided, to_additive
from .multihead import ProjectionWeights, init_weights, merge_heads, multi_head_self_attention, split_heads
from .sdpa import SDPATrace, scaled_dot_product_attention

__all__ = [
    "ProjectionWeights",
    "SDPATrace",
    "block_local",
    "blocked_keys",
    "causal",
    "full",
    "init_weights",
    "merge_heads",
    "multi_head_self_attention",
    "padding",
    "pick_device",
    "scaled_dot_product_attention",
    "sliding_window",
    "split_heads",
    "strided",
    "to_additive",
]
