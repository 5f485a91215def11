"""KV-cache decoding stepped through: the new token's row over the cached keys, and the cache as t grows.

Reads a ``KVCacheRun`` by attribute (steps, prompt_labels, num_heads, num_kv_heads): viz never imports
attention_core at run time. ``kv_cache_zip`` is the section's slides zip: the figure in the 'slides' theme
with its numbers as CSV and the step's checks in a manifest, through ``viz.export``.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .export import FORMATS, figures_zip
from .labels import escape_label, plain_labels, tick_labels, visible_label
from .theme import LINE_COLOURS, apply_theme


def cached_labels(run, step: int) -> list[str]:
    """Labels of the t keys cached at ``step`` (0-based): the prompt, then the tokens fed in so far."""
    fed = [s.fed_text for s in run.steps[1 : step + 1]]  # step 1 feeds the prompt's last token
    return [*run.prompt_labels, *fed][: run.steps[step].keys]


def kv_cache_figure(run, step: int, layer: int, head: int, *, theme: str = "screen") -> go.Figure:
    """Left: the fed token's weights over the t cached keys (layer, head); right: cache size against t."""
    if not 0 <= step < len(run.steps):
        raise ValueError(f"step {step} out of range 0..{len(run.steps) - 1}")
    current = run.steps[step]
    weights = np.asarray(current.weights[layer, head], dtype=float)  # (t,)
    labels = tick_labels(cached_labels(run, step))
    fig = make_subplots(
        rows=1,
        cols=2,
        column_widths=[0.62, 0.38],
        horizontal_spacing=0.12,
        subplot_titles=(
            f"'{escape_label(visible_label(current.fed_text, 16))}' (position {current.position}) reads "
            f"{current.keys} cached keys",
            "cache size as tokens arrive",
        ),
    )
    fig.add_trace(
        go.Bar(
            x=np.arange(len(weights)),
            y=weights,
            name="weight",
            marker_color=LINE_COLOURS[0],
            customdata=labels,
            hovertemplate="key %{customdata}<br>weight %{y:.4f}<extra></extra>",
            showlegend=False,
        ),
        row=1,
        col=1,
    )
    fig.update_xaxes(tickmode="array", tickvals=list(range(len(labels))), ticktext=labels, tickangle=-45, row=1, col=1)
    fig.update_yaxes(range=[0, 1], title_text="weight", row=1, col=1)
    t = np.array([s.keys for s in run.steps])
    mib = 2**20
    fig.add_trace(
        go.Scatter(
            x=t,
            y=np.array([s.cache_bytes for s in run.steps]) / mib,
            mode="lines+markers",
            name=f"cached ({run.num_kv_heads} key/value heads)",
            line=dict(color=LINE_COLOURS[1]),
        ),
        row=1,
        col=2,
    )
    fig.add_trace(
        go.Scatter(
            x=t,
            y=np.array([s.cache_bytes_one_kv_per_head for s in run.steps]) / mib,
            mode="lines",
            name=f"one key/value per query head ({run.num_heads})",
            line=dict(color="#999", dash="dot"),
        ),
        row=1,
        col=2,
    )
    fig.add_vline(x=current.keys, line=dict(color="#D55E00", width=1), row=1, col=2)
    fig.update_xaxes(title_text="cached positions t", row=1, col=2)
    fig.update_yaxes(title_text="MiB (all layers, K and V)", rangemode="tozero", row=1, col=2)
    fig.update_layout(
        title_text=f"KV cache, step {step + 1} of {len(run.steps)}: layer {layer}, head {head} "
        f"→ next token '{escape_label(visible_label(current.token_text, 16))}'",
        legend=dict(orientation="h", y=-0.3, x=1, xanchor="right"),
        height=460,
    )
    return apply_theme(fig, theme)


GROWTH_COLUMNS = (
    "cached positions t",
    "cache bytes",
    "cache bytes one kv per head",
    "max diff cached",
    "max diff full",
)


def kv_cache_tables(run, step: int, layer: int, head: int) -> dict:
    """The figure's numbers as (matrix, row labels, column labels): the fed token's weights over the cached
    keys at ``step`` (0-based; layer, head), and per step the cache size and the core's max differences."""
    weights = np.asarray(run.steps[step].weights[layer, head])[:, None]  # (t, 1)
    growth = [[s.keys, s.cache_bytes, s.cache_bytes_one_kv_per_head, s.diff_cached, s.diff_full] for s in run.steps]
    return {
        "kv_cache_row": (weights, plain_labels(cached_labels(run, step)), ["weight"]),
        "kv_cache_growth": (
            np.array(growth, dtype=float),
            [f"step {s.step}: {visible_label(s.fed_text)}" for s in run.steps],
            list(GROWTH_COLUMNS),
        ),
    }


def _number(value: float) -> float | None:
    return None if math.isnan(value) else float(value)  # JSON has no NaN: "not measured" is null


def kv_cache_zip(
    run,
    step: int,
    layer: int,
    head: int,
    formats: str = ",".join(FORMATS),
    *,
    kv_steps: int,
    settings: dict | None = None,
    theme: str = "slides",
) -> bytes:
    """``kv_cache_figure`` at ``step`` (0-based; drawn in ``theme``) with ``kv_cache_tables`` as CSV, zipped with
    a manifest.json of the steps asked for, the step shown, the generated text and the max differences of the
    core against the model at this step and over the run (``viz.export.figures_zip``)."""
    current = run.steps[step]
    manifest = {
        "views": ["pitfalls"],
        "section": "kvcache",
        "model": run.model,
        "layer": layer,
        "head": head,
        "kv_steps": kv_steps,
        "kv_step": step + 1,
        "steps": len(run.steps),
        "prompt_tokens": list(run.prompt_labels),
        "generated": run.new_text,
        "settings": settings or {},
        "max_diff": {
            "step_cached": _number(current.diff_cached),
            "step_full": _number(current.diff_full),
            "run_cached": _number(run.worst("cached")),
            "run_full": _number(run.worst("full")),
            "run_cache_object": _number(run.worst("cache_object")),
        },
        "tokens_match_generate": run.tokens_match_generate,
        "cache_bytes": current.cache_bytes,
        "gqa_saving": run.gqa_saving,
    }
    fig = kv_cache_figure(run, step, layer, head, theme=theme)
    return figures_zip(
        {"kv_cache": fig}, kv_cache_tables(run, step, layer, head), formats, theme=theme, manifest=manifest
    )
