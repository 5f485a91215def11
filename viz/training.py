"""Training-lab figures, from plain arrays the core's training and recurrence modules supply.

- ``training_curves(runs, ...)``: loss, accuracy, attention entropy and the typical gradient at the
  softmax input against the step, one line per variant ("scaled", "unscaled"), x fixed to the full
  run so a run in progress fills the axes from the left.
- ``probe_attention(weights, target_slot)``: where a few fixed queries attend (rows) over their slots
  (columns), one panel per variant, the right slot marked.
- ``attention_vs_recurrence(paths, timings)``: sequential steps and the longest token-to-token path
  against n (left), measured forward time against n (right), log-log.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .checks import as_matrix, as_vector
from .pitfalls import SCALED_COLOUR, THEORY_COLOUR, UNSCALED_COLOUR
from .theme import LINE_COLOURS, SEQUENTIAL, apply_theme

CURVES = ("loss", "accuracy", "entropy", "score_grad")
GRAD_FLOOR = 1e-12  # an exact 0 gradient is drawn here on the log axis
VARIANT_COLOURS = {"scaled": SCALED_COLOUR, "unscaled": UNSCALED_COLOUR}
VARIANT_NAMES = {"scaled": "scaled by 1/√d<sub>k</sub>", "unscaled": "unscaled (raw q·k)"}


def _colour(label: str, index: int) -> str:
    return VARIANT_COLOURS.get(label, LINE_COLOURS[index % len(LINE_COLOURS)])


def _run_arrays(label: str, curves: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    missing = [name for name in ("step", *CURVES) if name not in curves]
    if missing:
        raise ValueError(f"run {label!r} lacks {missing}; it has {sorted(curves)}")
    step = as_vector(f"{label}.step", curves["step"])
    return {"step": step} | {
        name: as_vector(f"{label}.{name}", curves[name], step.shape[0], f"{label}.step of shape {step.shape}")
        for name in CURVES
    }


def training_curves(
    runs: Mapping[str, Mapping[str, np.ndarray]],
    *,
    total_steps: int,
    chance_loss: float | None = None,
    chance_accuracy: float | None = None,
    max_entropy: float | None = None,
    title: str | None = None,
    theme: str = "screen",
) -> go.Figure:
    """2x2 panels of training curves, one line per run.

    ``runs`` maps a label ("scaled", "unscaled", or anything) to 1-D arrays of equal length under
    "step", "loss", "accuracy", "entropy" and "score_grad". Zero gradients are drawn at
    ``GRAD_FLOOR``. Reference lines: chance loss, chance accuracy, uniform-attention entropy.
    """
    if total_steps < 1:
        raise ValueError(f"total_steps must be >= 1, got {total_steps}")
    arrays = {label: _run_arrays(label, curves) for label, curves in runs.items()}
    fig = make_subplots(
        rows=2,
        cols=2,
        horizontal_spacing=0.11,
        vertical_spacing=0.17,
        subplot_titles=(
            "loss (cross-entropy)",
            "accuracy",
            "attention entropy (0 = one-hot)",
            "typical gradient at the scores (log; 0 drawn at 10<sup>-12</sup>)",
        ),
    )
    places = {"loss": (1, 1), "accuracy": (1, 2), "entropy": (2, 1), "score_grad": (2, 2)}
    for index, (label, data) in enumerate(arrays.items()):
        colour = _colour(label, index)
        for name, (row, col) in places.items():
            y = np.maximum(data[name], GRAD_FLOOR) if name == "score_grad" else data[name]
            fig.add_trace(
                go.Scatter(
                    x=data["step"],
                    y=y,
                    mode="lines",
                    name=VARIANT_NAMES.get(label, label),
                    legendgroup=label,
                    showlegend=name == "loss",
                    line=dict(color=colour, width=2),
                    hovertemplate=f"{label}<br>step %{{x:.0f}}<br>{name} %{{y:.3g}}<extra></extra>",
                ),
                row=row,
                col=col,
            )
    references = (
        ("loss", chance_loss, "chance"),
        ("accuracy", chance_accuracy, "chance"),
        ("entropy", max_entropy, "uniform"),
    )
    for name, value, text in references:
        if value is not None:
            row, col = places[name]
            fig.add_hline(
                y=value,
                line=dict(color=THEORY_COLOUR, dash="dot"),
                row=row,
                col=col,
                annotation_text=text,
                annotation_position="top right",
            )
    fig.update_xaxes(range=[0, total_steps], title_text="step", row=2)
    fig.update_xaxes(range=[0, total_steps])
    fig.update_yaxes(rangemode="tozero", row=1, col=1)
    fig.update_yaxes(range=[-0.02, 1.02], tickformat=".0%", row=1, col=2)
    fig.update_yaxes(rangemode="tozero", row=2, col=1)
    fig.update_yaxes(type="log", exponentformat="power", dtick=3, row=2, col=2)
    fig.update_layout(
        title_text=title if title is not None else "Training one attention layer, with and without 1/√d<sub>k</sub>",
        legend=dict(orientation="h", x=0.5, xanchor="center", y=-0.14),
        height=620,
    )
    return apply_theme(fig, theme)


def probe_attention(
    weights: Mapping[str, np.ndarray],
    target_slot,
    *,
    title: str | None = None,
    theme: str = "screen",
) -> go.Figure:
    """Attention of P fixed queries over their S slots, one heatmap per run, right slot marked ✕.

    ``weights`` maps a label to a (P, S) array of attention rows; ``target_slot`` is (P,) integers.
    """
    if not weights:
        raise ValueError("weights is empty: give at least one run")
    matrices = {label: as_matrix(f"weights[{label!r}]", w) for label, w in weights.items()}
    shapes = {m.shape for m in matrices.values()}
    if len(shapes) != 1:
        raise ValueError(f"every run's weights must share one shape; got {sorted(shapes)}")
    (num_probes, num_slots) = shapes.pop()
    target = as_vector("target_slot", target_slot, num_probes, f"weights of shape {(num_probes, num_slots)}")
    if ((target < 0) | (target >= num_slots) | (target != np.round(target))).any():
        raise ValueError(f"target_slot must hold slot indices 0..{num_slots - 1}, got {target.tolist()}")
    labels = list(matrices)
    fig = make_subplots(
        rows=1,
        cols=len(labels),
        horizontal_spacing=0.08,
        subplot_titles=[VARIANT_NAMES.get(label, label) for label in labels],
    )
    rows = np.arange(num_probes)
    for col, label in enumerate(labels, 1):
        fig.add_trace(
            go.Heatmap(
                z=matrices[label],
                x=np.arange(num_slots),
                y=rows,
                zmin=0.0,
                zmax=1.0,
                colorscale=SEQUENTIAL,
                coloraxis=None,
                showscale=col == len(labels),
                colorbar=dict(title="weight"),
                hovertemplate="query %{y}<br>slot %{x}<br>weight %{z:.3f}<extra>" + label + "</extra>",
            ),
            row=1,
            col=col,
        )
        fig.add_trace(
            go.Scatter(
                x=target,
                y=rows,
                mode="markers",
                marker=dict(symbol="x-thin", size=12, line=dict(width=2, color="#ff4f4f")),
                name="the matching slot",
                showlegend=col == 1,
                hovertemplate="query %{y}: the key sits in slot %{x}<extra></extra>",
            ),
            row=1,
            col=col,
        )
    fig.update_xaxes(title_text="slot", tickmode="linear", dtick=max(1, num_slots // 8))
    fig.update_yaxes(title_text="query", autorange="reversed", tickmode="linear", dtick=1, col=1)
    fig.update_yaxes(autorange="reversed", tickmode="linear", dtick=1)
    fig.update_layout(
        title_text=title if title is not None else "Where the queries look: weight on each slot (✕ = right slot)",
        legend=dict(orientation="h", x=0.5, xanchor="center", y=-0.25),
        height=max(280, 26 * num_probes + 170),
    )
    return apply_theme(fig, theme)


def _add_timings(fig: go.Figure, timings: Mapping[str, np.ndarray] | None) -> None:
    """The right panel of ``attention_vs_recurrence``: measured milliseconds per model, or a note."""
    if timings is None:
        fig.add_annotation(
            text="not measured yet",
            xref="x2 domain",
            yref="y2 domain",
            x=0.5,
            y=0.5,
            showarrow=False,
            font=dict(color=THEORY_COLOUR),
        )
    else:
        tn = as_vector("timings['n']", timings["n"])
        lines = (
            ("core_attention_ms", "attention, this core", SCALED_COLOUR, "solid"),
            ("fused_attention_ms", "attention, torch fused", SCALED_COLOUR, "dot"),
            ("rnn_ms", "torch.nn.RNN", UNSCALED_COLOUR, "solid"),
            ("gru_ms", "torch.nn.GRU", UNSCALED_COLOUR, "dot"),
        )
        for key, name, colour, dash in lines:
            if key not in timings:
                continue
            y = as_vector(f"timings[{key!r}]", timings[key], tn.shape[0], f"timings['n'] of shape {tn.shape}")
            fig.add_trace(
                go.Scatter(
                    x=tn,
                    y=y,
                    mode="lines+markers",
                    name=name,
                    legendgroup="time",
                    line=dict(color=colour, dash=dash, width=2),
                    marker=dict(size=7, symbol="square"),
                    hovertemplate=f"{name}<br>n %{{x:.0f}}: %{{y:.3g}} ms<extra></extra>",
                ),
                row=1,
                col=2,
            )


def attention_vs_recurrence(
    paths: Mapping[str, np.ndarray],
    timings: Mapping[str, np.ndarray] | None = None,
    *,
    device: str | None = None,
    title: str | None = None,
    theme: str = "screen",
) -> go.Figure:
    """Steps and path lengths (left) and measured time (right) against n, both log-log.

    ``paths``: "n", "attention_sequential_steps", "attention_longest_path",
    "recurrent_sequential_steps", "recurrent_longest_path" (1-D, same length; n >= 2 so every
    value is positive). ``timings`` (optional): "n" and any of "core_attention_ms",
    "fused_attention_ms", "rnn_ms", "gru_ms"; without it the right panel says nothing was measured.
    """
    n = as_vector("paths['n']", paths["n"])
    if (n < 2).any():
        raise ValueError(f"paths['n'] must be >= 2 for a log axis, got {n.tolist()}")
    series = (
        ("recurrent_sequential_steps", "recurrent: sequential steps (n)", UNSCALED_COLOUR, "solid"),
        ("recurrent_longest_path", "recurrent: longest path (n − 1)", UNSCALED_COLOUR, "dash"),
        ("attention_sequential_steps", "attention: sequential steps (1)", SCALED_COLOUR, "solid"),
        ("attention_longest_path", "attention: longest path (1)", SCALED_COLOUR, "dash"),
    )
    right_title = "measured forward time" + (f" on {device}" if device else "")
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.12,
        subplot_titles=("steps between two tokens", right_title),
    )
    for key, name, colour, dash in series:
        y = as_vector(f"paths[{key!r}]", paths[key], n.shape[0], f"paths['n'] of shape {n.shape}")
        fig.add_trace(
            go.Scatter(
                x=n,
                y=y,
                mode="lines+markers",
                name=name,
                legendgroup="paths",
                line=dict(color=colour, dash=dash, width=2),
                marker=dict(size=7),
                hovertemplate=f"{name}<br>n %{{x:.0f}}: %{{y:.0f}}<extra></extra>",
            ),
            row=1,
            col=1,
        )
    _add_timings(fig, timings)
    fig.update_xaxes(type="log", dtick=1, title_text="sequence length n")  # dtick 1: one tick per power of 10
    fig.update_yaxes(type="log", dtick=1, title_text="steps / hops", row=1, col=1)
    fig.update_yaxes(type="log", dtick=1, title_text="milliseconds", exponentformat="power", row=1, col=2)
    fig.update_layout(
        title_text=title if title is not None else "Attention links any two tokens in one step; recurrence needs n",
        legend=dict(orientation="h", x=0.5, xanchor="center", y=-0.25),
        height=480,
    )
    return apply_theme(fig, theme)
