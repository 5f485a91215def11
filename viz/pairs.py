"""Minimal pairs: one token's attention row in two texts, aligned by token, and the difference.

Reads a ``PairRows`` by attribute (labels, first, second, difference, changed_mass, query_first,
query_second; ``table()`` for the CSV): viz never imports attention_core at run time. ``pairs_zip`` is
the view's slides zip: the same figure in the 'slides' theme and the same table, through ``viz.export``.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .export import FORMATS, figures_zip
from .labels import escape_label, tick_labels, visible_label
from .theme import LINE_COLOURS, apply_theme


def pair_figure(rows, *, query_label: str, names: tuple[str, str] = ("text 1", "text 2"), theme: str = "screen"):
    """Top: the two rows as grouped bars on the aligned keys (a gap where a key is in one text only);
    bottom: text 2 − text 1 on the keys both texts have."""
    labels = list(rows.labels)
    first, second = np.asarray(rows.first, dtype=float), np.asarray(rows.second, dtype=float)
    difference = np.asarray(rows.difference, dtype=float)
    if not (len(labels) == first.shape[0] == second.shape[0] == difference.shape[0]):
        raise ValueError(f"labels {len(labels)}, rows {first.shape}, {second.shape}, {difference.shape} differ")
    x = np.arange(len(labels))
    ticks = tick_labels(labels)
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.08,
        row_heights=[0.62, 0.38],
        subplot_titles=("attention weight of the query on each key", f"{names[1]} − {names[0]}"),
    )
    for values, name, colour in ((first, names[0], LINE_COLOURS[0]), (second, names[1], LINE_COLOURS[1])):
        fig.add_trace(
            go.Bar(
                x=x,
                y=values,
                name=name,
                marker_color=colour,
                customdata=ticks,
                hovertemplate=f"{escape_label(name)}<br>key %{{customdata}}<br>weight %{{y:.4f}}<extra></extra>",
            ),
            row=1,
            col=1,
        )
    colours = np.where(np.nan_to_num(difference) >= 0, LINE_COLOURS[1], LINE_COLOURS[0])
    fig.add_trace(
        go.Bar(
            x=x,
            y=difference,
            name="difference",
            marker_color=list(colours),
            showlegend=False,
            customdata=ticks,
            hovertemplate="key %{customdata}<br>change %{y:+.4f}<extra></extra>",
        ),
        row=2,
        col=1,
    )
    fig.update_xaxes(tickmode="array", tickvals=list(x), ticktext=ticks, tickangle=-45, row=2, col=1)
    fig.update_yaxes(range=[0, 1], title_text="weight", row=1, col=1)
    fig.update_yaxes(title_text="change", zeroline=True, row=2, col=1)
    fig.update_layout(
        barmode="group",
        title_text=f"Query '{escape_label(visible_label(query_label, 24))}' in both texts",
        legend=dict(orientation="h", y=1.08, x=1, xanchor="right"),
        height=560,
    )
    return apply_theme(fig, theme)


def pairs_zip(
    rows,
    formats: str = ",".join(FORMATS),
    *,
    texts: tuple[str, str],
    query_label: str,
    layer: int,
    head: int,
    names: tuple[str, str] = ("first text", "second text"),
    settings: dict | None = None,
    theme: str = "slides",
) -> bytes:
    """``pair_figure`` (drawn in ``theme``) and ``rows.table()`` as ``pairs.csv``, zipped with a manifest.json
    of both texts, the query, the changed mass and the largest change on a shared key (``viz.export.figures_zip``)."""
    largest = rows.largest_change()
    manifest = {
        "views": ["pairs"],
        "texts": {"first": texts[0], "second": texts[1]},
        "layer": layer,
        "head": head,
        "query": rows.query_first,
        "query_token": query_label,
        "query_second": rows.query_second,
        "settings": settings or {},
        "changed_mass": rows.changed_mass,
        "largest_change": None
        if largest is None
        else {"key": rows.labels[largest], "first": rows.first[largest], "second": rows.second[largest]},
    }
    fig = pair_figure(rows, query_label=query_label, names=names, theme=theme)
    return figures_zip({"pairs": fig}, {"pairs": rows.table()}, formats, theme=theme, manifest=manifest)
