"""Pitfalls lab, O(n²) cost: the modern answer, tiled (flash) attention, stepped through on this head, with
the section's slides zip (both figures, their numbers, the tile size, step and check) built on a click."""

from __future__ import annotations

import math
from dataclasses import asdict

import streamlit as st

from attention_core.traces import ModelTrace
from viz.tiled import tiled_cost_figure, tiled_figure, tiled_zip

from .. import lab_runs
from ..settings import TILED_BLOCKS, UI_RANGES, Settings
from .common import figure, zip_button

MAX_STEPS = UI_RANGES["tiled_step"][1]  # tiles a stepped walk may have (each is recorded for the slider)
COST_SERIES = ("peak_bytes_tiled", "peak_bytes_full", "seconds_tiled", "seconds_full")  # tiled_cost_figure's order
MEASURE_BLOCK = 64  # the measured curves use 64 x 64 tiles whatever the stepped tile (a Python loop per tile)


def render(trace: ModelTrace, settings: Settings) -> None:
    st.markdown("#### The modern answer: attention one tile at a time (FlashAttention's idea)")
    st.markdown(
        "The n × n matrix need not exist all at once. Split the queries and keys into blocks; for each query "
        "block, visit the key blocks one by one and keep, per query row, only a running maximum **m**, a running "
        "sum **l** of exp(score − m) and a running output. When a new block raises the maximum, everything kept so "
        "far is multiplied by exp(m_old − m_new) before the new block is added. After the last block, output / l "
        "is exactly softmax(QKᵀ·s)V: the same numbers, with memory that grows like n instead of n²."
    )
    st.latex(
        r"m' = \max(m, \max_j s_{ij}) \quad l' = l\,e^{m - m'} + \sum_j e^{s_{ij} - m'} \quad "
        r"o' = o\,e^{m - m'} + \sum_j e^{s_{ij} - m'} v_j \quad O_i = o_i / l_i"
    )
    cols = st.columns(2)
    n = trace.core.weights.shape[-2]
    blocks = [b for b in TILED_BLOCKS if math.ceil(n / b) ** 2 <= MAX_STEPS] or [TILED_BLOCKS[-1]]  # a few thousand
    asked = st.session_state.get("tiled_block", Settings.tiled_block)
    if asked not in blocks:  # a link's tile too small for this text: the nearest one offered, said under the slider
        st.session_state["tiled_block"] = min(blocks, key=lambda b: (abs(b - asked), b))
        cols[0].caption(
            f"{asked}×{asked} tiles would take {math.ceil(n / asked) ** 2:,} steps at n = {n}; "
            f"using {st.session_state['tiled_block']}."
        )
    block = cols[0].select_slider("Tile size (queries × keys)", blocks, key="tiled_block")
    walk = lab_runs.tiled_walk(trace, settings.request(), block)
    steps = len(walk.rows)
    if not 1 <= st.session_state.get("tiled_step", 0) <= steps:
        st.session_state["tiled_step"] = steps  # 0 (the default) or beyond this size: the end, the finished output
    if steps > 1:
        step = cols[1].slider("Step", 1, steps, key="tiled_step", help="Which tile was just loaded.")
    else:
        step = 1
        cols[1].caption("One tile holds the whole matrix at this size: pick a smaller tile to see the steps.")
    n, keys = trace.core.weights.shape[-2:]
    figure(tiled_figure(walk, min(step, steps) - 1, length=n, keys=keys, theme=settings.theme), "tiled")
    note = " (fill -1e9 leaks on fully blocked rows; tiles treat blocked keys as -∞)" if settings.fill == "-1e9" else ""
    st.caption(
        f"{steps} tiles of at most {block}×{block} = {walk.peak_tile_cells:,} scores each, instead of one "
        f"{n}×{keys} = {n * keys:,} matrix. Max |tiled − full core| over this head's output: "
        f"{walk.max_abs_diff:.1e}{note}."
    )
    smallest = walk.smallest_rescale(min(step, steps) - 1) if steps else 1.0
    st.caption(
        f"Step {min(step, steps)}: the smallest rescale exp(m_old − m_new) among the block's rows is {smallest:.3g} "
        "(1: no row found a larger score in this tile; below 1: what was kept so far shrinks to the new maximum)."
    )
    ns = tuple(x for x in (64, 128, 256, 512, 1024) if x <= max(1024, n))
    curve = [lab_runs.tiled_memory(x, MEASURE_BLOCK, trace.core.q.shape[-1]) for x in ns]
    cost = (ns, *([getattr(c, name) for c in curve] for name in COST_SERIES))
    figure(tiled_cost_figure(*cost, theme=settings.theme), "tiled_cost")
    measured = lab_runs.tiled_memory(n, MEASURE_BLOCK, trace.core.q.shape[-1])
    st.caption(
        f"Measured on this server with 64×64 tiles at n = {n} ({trace.core.num_heads} heads' worth is this × {trace.core.num_heads}, "
        f"head dim {trace.core.q.shape[-1]}): peak memory allocated by the tiled call "
        f"{measured.peak_bytes_tiled / 2**10:,.0f} KiB vs the full core {measured.peak_bytes_full / 2**10:,.0f} KiB; "
        f"{measured.seconds_tiled * 1e3:.1f} ms vs {measured.seconds_full * 1e3:.1f} ms "
        "(`python -m attention_core tiled --n N` measures any size)."
    )
    _slides_button(walk, min(step, steps) - 1, (n, keys), cost, trace, settings)


def _slides_button(walk, step: int, size: tuple[int, int], cost: tuple, trace: ModelTrace, settings: Settings) -> None:
    """Both figures of the section in the 'slides' theme, their numbers as CSV and a manifest, zipped on a click."""
    length, keys = size

    def build(formats: str) -> bytes:
        return tiled_zip(
            walk,
            step,
            formats,
            length=length,
            keys=keys,
            cost=cost,
            layer=trace.layer,
            head=trace.head,
            settings={**asdict(settings.request()), "head": trace.head},
        )

    zip_button(
        build,
        what="section",
        file_name=f"attention-lens-tiled-L{trace.layer}H{trace.head}-b{walk.block}-s{step + 1}.zip",
        key="export_zip_tiled",
        help="The tiled step and the memory/time chart in the white 'slides' theme, their numbers as CSV, and a "
        "manifest of the tile size, the step and max |tiled − full core|.",
    )
