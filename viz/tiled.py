"""Tiled (flash) attention stepped through: which tile is loaded, the running max and sum, convergence.

Reads a ``TiledWalk`` by attribute (rows, keys, running_max, running_sum, rescale, distance, block):
any object of that shape works, so viz never imports attention_core at run time. ``tiled_zip`` is the
section's slides zip: both figures in the 'slides' theme with their numbers as CSV, through ``viz.export``.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .export import FORMATS, figures_zip
from .theme import LINE_COLOURS, MASK_COLOUR, apply_theme

TILE_STATES = ("not yet", "done", "this step", "never (all blocked)")


def tile_states(walk, step: int, length: int, keys: int) -> np.ndarray:
    """(L/b, S/b) state of each tile after ``step``: 0 not yet, 1 done, 2 this step, 3 never computed."""
    block = walk.block
    states = np.full((math.ceil(length / block), math.ceil(keys / block)), 3, dtype=np.int8)
    for t, (row, key) in enumerate(zip(walk.rows, walk.keys, strict=True)):
        states[row[0] // block, key[0] // block] = 0 if t > step else (2 if t == step else 1)
    return states


TILE_COLOURS = [
    [0.0, "#f2f2f2"],
    [0.25, "#f2f2f2"],
    [0.25, "#9ecae1"],
    [0.5, "#9ecae1"],
    [0.5, "#D55E00"],
    [0.75, "#D55E00"],
    [0.75, MASK_COLOUR],
    [1.0, MASK_COLOUR],
]  # one band per entry of TILE_STATES


def _tiles_panel(fig: go.Figure, walk, step: int, length: int, keys: int) -> None:
    """Top left: the grid of tiles, coloured by ``tile_states`` after ``step``."""
    states = tile_states(walk, step, length, keys)
    labels = np.array(TILE_STATES, dtype=object)[states]
    fig.add_trace(
        go.Heatmap(
            z=states,
            zmin=-0.5,
            zmax=3.5,
            colorscale=TILE_COLOURS,
            showscale=False,
            customdata=labels,
            name="tiles",
            x=np.arange(states.shape[1]),
            y=np.arange(states.shape[0]),
            hovertemplate=f"query block %{{y}}, key block %{{x}} ({walk.block} positions each): %{{customdata}}"
            "<extra></extra>",
            xgap=1,
            ygap=1,
        ),
        row=1,
        col=1,
    )
    fig.update_yaxes(autorange="reversed", title_text="query block", dtick=1, row=1, col=1)
    fig.update_xaxes(title_text="key block", dtick=1, row=1, col=1)


def _running_panels(fig: go.Figure, walk, step: int, length: int, query_rows: tuple[int, int]) -> None:
    """Top right: the running max m per query row; bottom left: the running sum l; the step's rows shaded."""
    r0, r1 = query_rows
    rows = np.arange(length)
    for col, values, final, name in (
        (2, walk.running_max[step], walk.running_max[-1], "m"),
        (1, walk.running_sum[step], walk.running_sum[-1], "l"),
    ):
        where = dict(row=1, col=2) if col == 2 else dict(row=2, col=1)
        fig.add_trace(
            go.Scatter(
                x=rows,
                y=final,
                mode="lines",
                name=f"{name} at the end",
                showlegend=False,
                line=dict(color="#999", dash="dot"),
            ),
            **where,
        )
        fig.add_trace(
            go.Scatter(
                x=rows,
                y=values,
                mode="lines",
                name=f"{name} after this step",
                showlegend=False,
                line=dict(color=LINE_COLOURS[0]),
            ),
            **where,
        )
        fig.add_vrect(x0=r0 - 0.5, x1=r1 - 0.5, fillcolor="#D55E00", opacity=0.12, line_width=0, **where)
        fig.update_xaxes(title_text="query row", **where)


def _distance_panel(fig: go.Figure, walk, step: int) -> None:
    """Bottom right: max |partial output − final| after each step, this step marked."""
    fig.add_trace(
        go.Scatter(
            x=np.arange(len(walk.rows)),
            y=walk.distance,
            mode="lines+markers",
            name="distance",
            showlegend=False,
            line=dict(color=LINE_COLOURS[2]),
        ),
        row=2,
        col=2,
    )
    fig.add_trace(
        go.Scatter(
            x=[step],
            y=[walk.distance[step]],
            mode="markers",
            name="this step",
            showlegend=False,
            marker=dict(color="#D55E00", size=10),
        ),
        row=2,
        col=2,
    )
    fig.update_xaxes(title_text="step", row=2, col=2)
    fig.update_yaxes(exponentformat="e", rangemode="tozero", row=2, col=2)


def tiled_figure(walk, step: int, *, length: int, keys: int, theme: str = "screen") -> go.Figure:
    """Four panels for one step of the tiled computation of one head (see the module docstring)."""
    steps = len(walk.rows)
    if not 0 <= step < steps:
        raise ValueError(f"step {step} out of range 0..{steps - 1}")
    r0, r1 = (int(x) for x in walk.rows[step])
    k0, k1 = (int(x) for x in walk.keys[step])
    fig = make_subplots(
        rows=2,
        cols=2,
        vertical_spacing=0.16,
        horizontal_spacing=0.12,
        subplot_titles=(
            f"tiles: query rows {r0}–{r1 - 1} meet keys {k0}–{k1 - 1}",
            "running max m per query row",
            "running sum l = Σ exp(s − m) per query row",
            "max |partial output − final| of the step's rows",
        ),
    )
    _tiles_panel(fig, walk, step, length, keys)
    _running_panels(fig, walk, step, length, (r0, r1))
    _distance_panel(fig, walk, step)
    fig.update_layout(
        title_text=f"Tiled attention, {walk.block}×{walk.block} tiles: step {step + 1} of {steps}", height=720
    )
    return apply_theme(fig, theme)


def tiled_cost_figure(ns, tiled_bytes, full_bytes, tiled_seconds, full_seconds, *, theme: str = "screen") -> go.Figure:
    """Measured peak memory and time against n for the tiled call and the full core, side by side (log-log)."""
    ns = np.asarray(ns, dtype=float)
    series = [np.asarray(x, dtype=float) for x in (tiled_bytes, full_bytes, tiled_seconds, full_seconds)]
    if any(s.shape != ns.shape for s in series):
        raise ValueError(f"every series must have one value per n ({ns.shape}), got {[s.shape for s in series]}")
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.14, subplot_titles=("peak memory", "time"))
    for col, (tiled, full, unit) in enumerate(((series[0], series[1], "bytes"), (series[2], series[3], "seconds")), 1):
        for values, name, colour in ((full, "full core (n × n)", LINE_COLOURS[1]), (tiled, "tiled", LINE_COLOURS[0])):
            fig.add_trace(
                go.Scatter(
                    x=ns,
                    y=values,
                    mode="lines+markers",
                    name=name,
                    line=dict(color=colour),
                    showlegend=col == 1,
                    hovertemplate=f"n %{{x}}<br>%{{y:.3g}} {unit}<extra>{name}</extra>",
                ),
                row=1,
                col=col,
            )
        fig.update_xaxes(type="log", title_text="sequence length n", row=1, col=col)
        fig.update_yaxes(type="log", title_text=unit, row=1, col=col)
    fig.update_layout(
        title_text="Measured: the tiled call against the full core, one head",
        height=420,
        legend=dict(orientation="h", y=-0.25, x=1, xanchor="right"),
    )
    return apply_theme(fig, theme)


def tiled_tables(walk, step: int, *, length: int, keys: int, cost) -> dict:
    """The numbers of both figures as (matrix, row labels, column labels): the tile states after ``step``
    (0 not yet, 1 done, 2 this step, 3 never), m and l per query row after the step and at the end, the
    distance after each step, and the measured ``cost`` = (ns, tiled bytes, full bytes, tiled s, full s)."""
    states = tile_states(walk, step, length, keys)
    running = np.stack(
        [walk.running_max[step], walk.running_sum[step], walk.running_max[-1], walk.running_sum[-1]], axis=1
    )  # (L, 4)
    ns, *series = (np.asarray(x, dtype=float) for x in cost)
    return {
        "tiled_tiles": (
            states,
            [f"query block {i}" for i in range(states.shape[0])],
            [f"key block {j}" for j in range(states.shape[1])],
        ),
        "tiled_running": (
            running,
            [f"query {i}" for i in range(length)],
            ["m after this step", "l after this step", "m at the end", "l at the end"],
        ),
        "tiled_distance": (
            np.asarray(walk.distance, dtype=float)[:, None],
            [f"step {t + 1}" for t in range(len(walk.rows))],
            ["max |partial - final|"],
        ),
        "tiled_cost": (
            np.stack(series, axis=1),
            [f"n = {int(n)}" for n in ns],
            ["peak bytes tiled", "peak bytes full", "seconds tiled", "seconds full"],
        ),
    }


def tiled_zip(
    walk,
    step: int,
    formats: str = ",".join(FORMATS),
    *,
    length: int,
    keys: int,
    cost,
    layer: int,
    head: int,
    settings: dict | None = None,
    theme: str = "slides",
) -> bytes:
    """``tiled_figure`` at ``step`` (0-based) and ``tiled_cost_figure`` of ``cost`` (drawn in ``theme``) with
    ``tiled_tables`` as CSV, zipped with a manifest.json of the tile size, the step and the final
    max |tiled − full core| (``viz.export.figures_zip``)."""
    figures = {
        "tiled": tiled_figure(walk, step, length=length, keys=keys, theme=theme),
        "tiled_cost": tiled_cost_figure(*cost, theme=theme),
    }
    manifest = {
        "views": ["pitfalls"],
        "section": "tiled",
        "layer": layer,
        "head": head,
        "tiled_block": walk.block,
        "tiled_step": step + 1,
        "steps": len(walk.rows),
        "length": length,
        "keys": keys,
        "settings": settings or {},
        "max_abs_diff_vs_full": walk.max_abs_diff,
        "peak_tile_cells": walk.peak_tile_cells,
        "full_matrix_cells": length * keys,
        "smallest_rescale": walk.smallest_rescale(step),
    }
    tables = tiled_tables(walk, step, length=length, keys=keys, cost=cost)
    return figures_zip(figures, tables, formats, theme=theme, manifest=manifest)
