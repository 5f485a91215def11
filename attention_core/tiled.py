"""Attention tile by tile with the online softmax: the same numbers, memory linear in n.

    Attention(Q, K, V) = softmax(Q K^T * scale + mask) V

The full core (``sdpa.py``) builds the whole (L, S) score matrix, then takes its softmax. Here a block
of queries meets one block of keys at a time, and three small running quantities per query row carry
the softmax across the key blocks (Milakov & Gimelshein 2018, "Online normalizer calculation for
softmax"; Dao et al. 2022, FlashAttention):

    m    running row max of the scores seen so far             (..., H, bq, 1)
    l    running sum of exp(score - m) over the keys seen        (..., H, bq, 1)
    acc  running sum of exp(score - m) * v over the keys seen    (..., H, bq, Ev)

When a new key block raises the max from m to m_new, every term already summed was exp(s - m) and
must become exp(s - m_new): one multiplication by rescale = exp(m - m_new) <= 1 fixes l and acc at
once. After the last key block output = acc / l, exactly softmax(scores) @ V up to rounding.

Only tiles of (bq, bk) scores exist at any time, never an (L, S) matrix (an (L, S) ``attn_mask`` the
caller passes in is read one tile at a time; ``is_causal`` builds each tile's mask from indices).

Semantics are those of ``sdpa.scaled_dot_product_attention`` (and torch's SDPA): boolean mask
True = may attend, float mask added to the scores, ``is_causal`` aligned top-left, grouped-query heads
with ``enable_gqa``. A query row whose keys are all masked returns an output of exactly 0, as the
full core does (and torch 2.13): its m stays -inf and l stays 0, and the two -inf - -inf = NaN traps
(the exponent of the tile and the rescale) are guarded. Half precision is computed in float32 and cast
back, as in the full core. Under ``is_causal`` the key blocks that lie wholly after every query of the
block are skipped (their scores would all be -inf and change nothing), as FlashAttention does.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass

import numpy as np
import torch

from .difference import max_difference
from .sdpa import _check_inputs, default_scale, repeat_kv, scaled_dot_product_attention

NEG_INF = float("-inf")
MAX_ABS_DIFF = 1e-5  # the command line fails above this difference to the full core


@dataclass(frozen=True)
class TileStep:
    """One query block meeting one key block: the running state right after the step (for teaching)."""

    q_block: int  # index of the query block: query rows q_block * block_q ...
    k_block: int  # index of the key block: keys k_block * block_k ...
    rows: tuple[int, int]  # query rows [start, stop) of this block
    keys: tuple[int, int]  # key positions [start, stop) of this block
    m: torch.Tensor  # (..., H, bq, 1) running row max after the step (-inf: no key seen yet)
    l: torch.Tensor  # (..., H, bq, 1) running sum of exp(score - m) after the step
    rescale: torch.Tensor  # (..., H, bq, 1) exp(m_before - m_after) in (0, 1]; 1 before any key (0 on underflow)
    partial: torch.Tensor  # (..., H, bq, Ev) acc / l after the step: the output over the keys seen so far


@dataclass(frozen=True)
class TiledTrace:
    """The output of one tiled call and, with ``record=True``, every step in the order computed."""

    output: torch.Tensor  # (..., H, L, Ev)
    steps: tuple[TileStep, ...]  # empty unless record=True
    scale: float
    block_q: int
    block_k: int


def _tile_mask(attn_mask, is_causal: bool, rows: tuple[int, int], keys: tuple[int, int], device):
    """The (..., bq, bk) slice of the mask for one tile, or None where nothing is hidden."""
    (q0, q1), (k0, k1) = rows, keys
    if is_causal:
        query_index = torch.arange(q0, q1, device=device).unsqueeze(1)  # (bq, 1) i
        key_index = torch.arange(k0, k1, device=device).unsqueeze(0)  # (1, bk) j
        return key_index <= query_index  # (bq, bk) True where j <= i, aligned top-left
    if attn_mask is None:
        return None
    return attn_mask[..., q0:q1, k0:k1]  # (..., bq, bk) a view, no copy


def _normalise(acc: torch.Tensor, row_sum: torch.Tensor) -> torch.Tensor:
    """acc / l; a row with no visible key has l = 0 and acc = 0, and gets 0 (divide by 1, not 0)."""
    return acc / row_sum.masked_fill(row_sum == 0, 1.0)  # (..., H, bq, Ev)


def _tile_update(
    query_tile: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None,
    is_causal: bool,
    rows: tuple[int, int],
    keys: tuple[int, int],
    scale: float,
    group: int,
    m: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """One tile's scores against the running max ``m``: (m_new, rescale, probs, value_tile), or None.

    None when the mask hides every key of the tile from every query of the block (nothing to add).
    probs (..., H, bq, bk) = exp(s - m_new) (0 for hidden keys), rescale (..., H, bq, 1) = exp(m - m_new).
    """
    k0, k1 = keys
    tile_mask = _tile_mask(attn_mask, is_causal, rows, keys, query_tile.device)
    if tile_mask is not None and tile_mask.dtype == torch.bool and not bool(tile_mask.any()):
        return None
    key_tile = key[..., k0:k1, :]  # (..., Hkv, bk, E)
    value_tile = value[..., k0:k1, :]  # (..., Hkv, bk, Ev)
    if group > 1:
        key_tile = repeat_kv(key_tile, query_tile.shape[-3])  # (..., H, bk, E) only this tile
        value_tile = repeat_kv(value_tile, query_tile.shape[-3])  # (..., H, bk, Ev)
    scores = query_tile @ key_tile.transpose(-2, -1)  # (..., H, bq, bk)  q_i . k_j
    scaled = scores * scale  # 1/sqrt(d_k) unless told otherwise
    if tile_mask is None:
        masked = scaled  # nothing hidden
    elif tile_mask.dtype == torch.bool:
        masked = scaled.masked_fill(~tile_mask, NEG_INF)  # True = may attend
    else:
        masked = scaled + tile_mask  # float mask is added
    m_new = torch.maximum(m, masked.amax(dim=-1, keepdim=True))  # (..., H, bq, 1) max(m, rowmax(tile))
    shift = m_new.masked_fill(m_new == NEG_INF, 0.0)  # no key visible yet: shift by 0, not -inf
    rescale = torch.exp(m - shift).masked_fill(m == NEG_INF, 1.0)  # exp(m - m_new); 1 while l = acc = 0
    probs = torch.exp(masked - shift)  # (..., H, bq, bk)  exp(s - m_new), 0 for hidden keys
    del scores, scaled, masked  # free the tile's scores before acc is updated: they are spent
    return m_new, rescale, probs, value_tile


def tiled_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    *,
    is_causal: bool = False,
    scale: float | None = None,
    block_q: int = 64,
    block_k: int = 64,
    enable_gqa: bool = False,
    record: bool = False,
) -> TiledTrace:
    """softmax(query @ key^T * scale + mask) @ value, one (block_q, block_k) tile at a time.

    query (..., H, L, E), key (..., Hkv, S, E), value (..., Hkv, S, Ev) -> ``TiledTrace.output``
    (..., H, L, Ev), equal to the full core's output up to rounding. ``scale`` defaults to 1 / sqrt(E).
    With ``record=True`` the trace keeps one ``TileStep`` per tile computed (memory grows with the
    number of tiles: meant for small teaching examples). Raises ValueError for inputs torch would reject.
    """
    _check_inputs(query, key, value, attn_mask, is_causal, enable_gqa)
    if int(block_q) < 1 or int(block_k) < 1:
        raise ValueError(f"block sizes must be >= 1, got block_q={block_q}, block_k={block_k}")
    block_q, block_k = int(block_q), int(block_k)
    out_dtype = query.dtype
    if out_dtype in (torch.float16, torch.bfloat16):
        query, key, value = query.float(), key.float(), value.float()
        if attn_mask is not None and attn_mask.dtype != torch.bool:
            attn_mask = attn_mask.float()
    num_queries, num_keys = query.shape[-2], key.shape[-2]
    scale = default_scale(query.shape[-1]) if scale is None else float(scale)

    group = 1  # query heads served by each key/value head
    key_heads = key.shape[:-2]  # (..., Hkv)
    if enable_gqa and query.dim() >= 3 and query.shape[-3] != key.shape[-3]:
        group = query.shape[-3] // key.shape[-3]
        key_heads = (*key.shape[:-3], query.shape[-3])  # (..., H) once each kv head is repeated
    heads = torch.broadcast_shapes(query.shape[:-2], key_heads)  # (..., H) of the output
    if attn_mask is not None:
        attn_mask = attn_mask.reshape((1,) * max(0, 2 - attn_mask.dim()) + tuple(attn_mask.shape))
        attn_mask = attn_mask.expand(*attn_mask.shape[:-2], num_queries, num_keys)  # (..., L, S) a view

    output = query.new_empty((*heads, num_queries, value.shape[-1]))  # (..., H, L, Ev)
    steps: list[TileStep] = []
    for q_block, q0 in enumerate(range(0, num_queries, block_q)):
        q1 = min(q0 + block_q, num_queries)
        query_tile = query[..., q0:q1, :]  # (..., H, bq, E)
        m = query.new_full((*heads, q1 - q0, 1), NEG_INF)  # (..., H, bq, 1) running row max
        l = query.new_zeros((*heads, q1 - q0, 1))  # (..., H, bq, 1) running sum of exp(score - m)
        acc = query.new_zeros((*heads, q1 - q0, value.shape[-1]))  # (..., H, bq, Ev) unnormalised output
        for k_block, k0 in enumerate(range(0, num_keys, block_k)):
            k1 = min(k0 + block_k, num_keys)
            if is_causal and k0 > q1 - 1:
                break  # this key block and all later ones come after every query of the block
            update = _tile_update(query_tile, key, value, attn_mask, is_causal, (q0, q1), (k0, k1), scale, group, m)
            if update is None:
                continue  # every key of this tile is hidden from every query of the block: nothing to add
            m_new, rescale, probs, value_tile = update
            l = l * rescale + probs.sum(dim=-1, keepdim=True)  # (..., H, bq, 1)
            acc = acc * rescale + probs @ value_tile  # (..., H, bq, Ev)
            m = m_new
            del probs, update  # free before the next tile is made
            if record:
                steps.append(TileStep(q_block, k_block, (q0, q1), (k0, k1), m, l, rescale, _normalise(acc, l)))
        output[..., q0:q1, :] = _normalise(acc, l)  # (..., H, bq, Ev) acc / l
    return TiledTrace(output=output.to(out_dtype), steps=tuple(steps), scale=scale, block_q=block_q, block_k=block_k)


# ---------------------------------------------------------------- measured against the full core


@dataclass(frozen=True)
class TiledComparison:
    n: int
    block: int
    max_abs_diff: float  # max |tiled - full| over the output
    peak_bytes_tiled: int  # measured: peak bytes torch allocated during one tiled call (output included)
    peak_bytes_full: int  # measured: the same for one call of the full core (which keeps every step)
    seconds_tiled: float  # wall time of one call (after the measured call, which warms up)
    seconds_full: float


def compare_with_full(n: int, block: int = 64, *, heads: int = 12, dim: int = 64, seed: int = 0) -> TiledComparison:
    """Tiled against the full core on one seeded random (1, H, n, E) float32 input, on the CPU.

    Memory is measured by ``analysis.AllocationMeter`` (every storage torch allocates while a call runs,
    and the live peak), not computed from the shapes.
    """
    from .analysis import AllocationMeter

    if min(n, block, heads, dim) < 1:
        raise ValueError(f"n, block, heads and dim must be >= 1, got {n}, {block}, {heads}, {dim}")
    generator = torch.Generator().manual_seed(seed)
    query, key, value = (torch.randn(1, heads, n, dim, generator=generator) for _ in range(3))  # (1, H, n, E)

    def tiled() -> torch.Tensor:
        return tiled_attention(query, key, value, block_q=block, block_k=block).output

    def full() -> torch.Tensor:
        return scaled_dot_product_attention(query, key, value).output

    measured = {}
    for name, call in (("tiled", tiled), ("full", full)):
        with AllocationMeter() as meter:
            out = call()
        start = time.perf_counter()
        call()
        measured[name] = (out, meter.peak, time.perf_counter() - start)
        del out
    tiled_out, full_out = measured["tiled"][0], measured["full"][0]
    return TiledComparison(
        n=n,
        block=block,
        max_abs_diff=max_difference(tiled_out, full_out),
        peak_bytes_tiled=measured["tiled"][1],
        peak_bytes_full=measured["full"][1],
        seconds_tiled=measured["tiled"][2],
        seconds_full=measured["full"][2],
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n", type=int, default=1024, help="sequence length (L = S = n)")
    parser.add_argument("--block", type=int, default=64, help="query and key block size")
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--dim", type=int, default=64, help="head dimension E")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")


def run(args: argparse.Namespace) -> int:
    result = compare_with_full(args.n, args.block, heads=args.heads, dim=args.dim, seed=args.seed)
    if args.json:
        print(json.dumps(result.__dict__))
    else:
        print(f"# tiled vs full attention, B=1 H={args.heads} E={args.dim} float32 cpu, seed {args.seed}")
        print(f"n = {result.n}, block = {result.block}, max |tiled - full| = {result.max_abs_diff:.3g}")
        print("|       | peak MiB | seconds |")
        print("|-------|---------:|--------:|")
        for name in ("tiled", "full"):
            peak, seconds = getattr(result, f"peak_bytes_{name}"), getattr(result, f"seconds_{name}")
            print(f"| {name:<5} | {peak / 2**20:8.2f} | {seconds:7.3f} |")
        ratio = result.peak_bytes_full / max(result.peak_bytes_tiled, 1)
        print(f"full / tiled peak memory: {ratio:.1f}x")
    if not result.max_abs_diff <= MAX_ABS_DIFF:  # NaN fails too
        print(f"tiled differs from the full core by {result.max_abs_diff:.3g} > {MAX_ABS_DIFF:g}", file=sys.stderr)
        return 1
    return 0


@dataclass(frozen=True)
class TiledWalk:
    """One head computed tile by tile, as numpy, for stepping through it (see ``tiled_walkthrough``)."""

    block: int
    rows: np.ndarray  # (T, 2) query rows [start, stop) of each step's tile
    keys: np.ndarray  # (T, 2) key positions [start, stop) of each step's tile
    running_max: np.ndarray  # (T, L) m of every query row after each step (NaN: that row's block not reached yet)
    running_sum: np.ndarray  # (T, L) l of every query row after each step
    rescale: np.ndarray  # (T, L) exp(m_before - m_after) of the step's rows (NaN for rows not in the step)
    distance: np.ndarray  # (T,) max |partial - final| over the rows of the step's query block
    output: np.ndarray  # (L, Ev) the tiled output
    max_abs_diff: float  # max |tiled - full| over the output, full = the core's output given by the caller
    peak_tile_cells: int  # the largest score tile held at once (block x block), vs L x S for the full matrix

    def smallest_rescale(self, step: int) -> float:
        """min over the step's query rows of exp(m_old - m_new): 1 when no row found a larger score."""
        values = self.rescale[step]
        return float(np.min(values[np.isfinite(values)], initial=1.0))


def tiled_walkthrough(q, k, v, mask, scale: float, full_output, block: int = 16, score_bias=None) -> TiledWalk:
    """One head (q (L, E), k (S, E), v (S, Ev), boolean mask (L, S), optional score bias (L, S) such as
    ALiBi's) through ``tiled_attention``, with the running max, sum and rescale of every row after every
    tile, and the distance of each step's partial output to the final rows. Blocked keys count as -inf."""
    query = torch.as_tensor(np.asarray(q), dtype=torch.float32)[None]  # (1, L, E)
    key = torch.as_tensor(np.asarray(k), dtype=torch.float32)[None]  # (1, S, E)
    value = torch.as_tensor(np.asarray(v), dtype=torch.float32)[None]  # (1, S, Ev)
    allowed = torch.as_tensor(np.asarray(mask, dtype=bool))  # (L, S) True = may attend
    attn_mask = allowed
    if score_bias is not None:  # a float mask: the bias where allowed, -inf where blocked
        bias = torch.as_tensor(np.asarray(score_bias), dtype=torch.float32)  # (L, S)
        attn_mask = bias.masked_fill(~allowed, float("-inf"))
    trace = tiled_attention(query, key, value, attn_mask, scale=scale, block_q=block, block_k=block, record=True)
    length = query.shape[-2]
    steps = trace.steps
    running_max = np.full((len(steps), length), np.nan)
    running_sum = np.full((len(steps), length), np.nan)
    rescale = np.full((len(steps), length), np.nan)
    distance = np.zeros(len(steps))
    output = trace.output[0].numpy()  # (L, Ev)
    for t, step in enumerate(steps):
        if t:
            running_max[t], running_sum[t] = running_max[t - 1], running_sum[t - 1]
        r0, r1 = step.rows
        running_max[t, r0:r1] = step.m[0, :, 0].numpy()
        running_sum[t, r0:r1] = step.l[0, :, 0].numpy()
        rescale[t, r0:r1] = step.rescale[0, :, 0].numpy()
        distance[t] = max_difference(step.partial[0], output[r0:r1])
    return TiledWalk(
        block=block,
        rows=np.array([s.rows for s in steps]).reshape(-1, 2),
        keys=np.array([s.keys for s in steps]).reshape(-1, 2),
        running_max=running_max,
        running_sum=running_sum,
        rescale=rescale,
        distance=distance,
        output=output,
        max_abs_diff=max_difference(output, np.asarray(full_output, dtype=np.float32)),
        peak_tile_cells=block * block,
    )


def walk_head(head, block: int = 16) -> TiledWalk:
    """``tiled_walkthrough`` of one ``HeadTrace`` of the core: its q, k, v, mask and scale, and its score
    bias (ALiBi) when it has one, against its own output."""
    allowed = np.asarray(head.mask, dtype=bool)  # (L, S)
    return tiled_walkthrough(head.q, head.k, head.v, allowed, head.scale, head.output, block, head.score_bias)
