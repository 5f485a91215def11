"""Replay a real model's attention with the from-scratch core and measure the difference.

Two replays per layer:
- ``replay_layer``: the model's own q, k, v and mask through ``scaled_dot_product_attention`` with the
  model's scale; ``replay`` reports max |core - model| of weights and per-head outputs for every layer.
- ``replay_from_hidden``: the layer's input X and its own W^Q, W^K, W^V (and biases) through
  ``multi_head_self_attention``, rotating q and k with the model's (cos, sin) where it uses rotary:
  the app's "replay this layer" mode, the whole path from X to the head outputs.
"""

from __future__ import annotations

from functools import partial

from ..difference import max_difference
from ..multihead import MultiHeadTrace, ProjectionWeights, multi_head_self_attention
from ..positional import apply_rotary
from ..sdpa import SDPATrace, scaled_dot_product_attention
from ..traces import ReplayDiff
from .capture import Capture, LayerCapture


def _captured(capture: Capture, layer: int) -> LayerCapture:
    captured = capture.layer(layer)
    if not captured.captured:
        raise ValueError(f"layer {layer}: q, k, v of this model were not captured, so it cannot be replayed")
    return captured


def replay_layer(capture: Capture, layer: int) -> SDPATrace:
    """softmax(q k^T * scale + mask) v from the captured q (H, L, E), k (Hkv, S, E), v (Hkv, S, Ev)."""
    captured = _captured(capture, layer)
    return scaled_dot_product_attention(
        captured.q,
        captured.k,
        captured.v,
        attn_mask=captured.mask,  # (1, L, S) additive, or None
        scale=captured.scale,
        enable_gqa=captured.k.shape[0] != captured.q.shape[0],  # grouped-query: Hkv < H
    )


REPLAY_CELLS = 1 << 22  # weights (heads x L x S) replayed in one call at most (16 MB of float32 per step)


def _groups(captured: LayerCapture, cells: int | None = None) -> list[tuple[slice, slice]]:
    """(query heads, key/value heads) of each call: as many whole key/value groups (a kv head and the query
    heads that share it) as keep the (heads, L, S) weights within ``cells`` (default ``REPLAY_CELLS``), and at least one group.

    A short input replays a layer in one call (MiniLM at 16 tokens: 12 calls per layer before, each a dozen
    torch operations); a long one a group at a time, so few (H, L, S) intermediates are alive at once."""
    cells = REPLAY_CELLS if cells is None else cells
    heads, rows = captured.q.shape[0], captured.q.shape[-2]
    groups, keys = captured.k.shape[0], captured.k.shape[-2]
    per = heads // groups
    step = max(1, cells // max(1, per * rows * keys))  # kv groups per call
    return [
        (slice(j * per, min(j + step, groups) * per), slice(j, min(j + step, groups))) for j in range(0, groups, step)
    ]


def replay(capture: Capture) -> tuple[ReplayDiff, ...]:
    """Per captured layer: max |difference| of the weights (H, L, S) and the head outputs (H, L, Ev).

    Heads are independent: a long input goes one key/value group of heads at a time, with a fraction of the
    (H, L, S) intermediates alive at once; a short one goes in one call (``_groups``).
    """
    diffs = []
    for captured in capture.layers:
        if not captured.captured:
            continue
        weights = output = 0.0
        for heads, kv in _groups(captured):
            trace = scaled_dot_product_attention(
                captured.q[heads],  # (g r, L, E)  g kv groups, r query heads each
                captured.k[kv],  # (g, S, E)
                captured.v[kv],  # (g, S, Ev)
                attn_mask=captured.mask,
                scale=captured.scale,
                enable_gqa=captured.q[heads].shape[0] != captured.k[kv].shape[0],
            )
            weights = max(weights, max_difference(trace.weights, captured.attentions[heads]))
            output = max(output, max_difference(trace.output, captured.attn_output[heads]))
        diffs.append(ReplayDiff(layer=captured.layer, weights=weights, output=output))
    return tuple(diffs)


def replay_from_hidden(capture: Capture, layer: int) -> MultiHeadTrace:
    """Q = X W^Q + b, K = X W^K + b, V = X W^V + b, heads split, rotary, attention: from the layer's input.

    Returns the core's MultiHeadTrace; its ``attention.weights`` (H, L, S) and ``attention.output``
    (H, L, Ev) should match the model's ``attentions`` and ``attn_output``.
    """
    captured = _captured(capture, layer)
    if captured.hidden_in is None or captured.projection is None:
        raise ValueError(f"layer {layer}: the layer input or its weights were not captured")
    if captured.qk_norm:
        raise ValueError(
            f"layer {layer}: this model normalises q and k after projecting them (q_norm/k_norm), a step the "
            "core's multi-head attention does not have; replay it from the captured q, k, v instead"
        )
    rotate = None if captured.rotary is None else partial(apply_rotary, cos=captured.rotary[0], sin=captured.rotary[1])
    return multi_head_self_attention(
        captured.hidden_in,  # (L, D)
        captured.projection,
        attn_mask=captured.mask,
        scale=captured.scale,
        rotate=rotate,
    )


def _group_projection(projection: ProjectionWeights, heads: slice, kv: slice) -> ProjectionWeights:
    """The columns of W^Q/W^K/W^V (and biases) that belong to the key/value groups ``kv`` and their query ``heads``."""
    e_q = projection.w_q.shape[1] // projection.num_heads
    e_v = projection.w_v.shape[1] // projection.kv_heads
    q_cols = slice(heads.start * e_q, heads.stop * e_q)
    k_cols = slice(kv.start * e_q, kv.stop * e_q)
    v_cols = slice(kv.start * e_v, kv.stop * e_v)

    def cut(t, cols):
        return None if t is None else t[..., cols]

    return ProjectionWeights(
        w_q=projection.w_q[:, q_cols],
        w_k=projection.w_k[:, k_cols],
        w_v=projection.w_v[:, v_cols],
        num_heads=heads.stop - heads.start,
        num_kv_heads=kv.stop - kv.start,
        b_q=cut(projection.b_q, q_cols),
        b_k=cut(projection.b_k, k_cols),
        b_v=cut(projection.b_v, v_cols),
    )


def replay_from_hidden_diff(capture: Capture, layer: int) -> ReplayDiff:
    """max |difference| of weights and head outputs when replaying ``layer`` from its input X.

    Computed in the calls ``replay`` makes (``_groups``: one for a short input, a key/value group at a time for a
    long one): the same per-head math as ``replay_from_hidden``, with a fraction of the intermediates alive at once.
    """
    captured = _captured(capture, layer)
    if captured.hidden_in is None or captured.projection is None or captured.qk_norm:
        replay_from_hidden(capture, layer)  # raises the clear error
    rotate = None if captured.rotary is None else partial(apply_rotary, cos=captured.rotary[0], sin=captured.rotary[1])
    weights = output = 0.0
    for heads, kv in _groups(captured):
        trace = multi_head_self_attention(
            captured.hidden_in,  # (L, D)
            _group_projection(captured.projection, heads, kv),
            attn_mask=captured.mask,
            scale=captured.scale,
            rotate=rotate,
        )
        weights = max(weights, max_difference(trace.attention.weights, captured.attentions[heads]))
        output = max(output, max_difference(trace.attention.output, captured.attn_output[heads]))
    return ReplayDiff(layer=layer, weights=weights, output=output)
