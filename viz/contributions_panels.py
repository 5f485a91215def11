"""The head contributions view's figures, each with the table of its numbers, and the view's slides zip.

One path for the screen and the slides: the app draws each panel from a ``ShownContributions`` (what the
view computed, as plain arrays and numbers) in its screen theme, and ``contributions_zip`` draws the same
panels in the 'slides' theme and writes them with their CSVs through ``viz.export`` (the zip of every
other view, ``export_zip``, is made from a trace alone; this view needs the real model, so the app
computes its numbers and hands them over). viz never imports attention_core at run time.

Panels, in the order the view shows them (names are the file names in the zip):
``contributions_grid``, ``contributions_row``, ``contributions_head_shares``, ``contributions_ablation_layer``,
then for a decoder ``contributions_next_token`` and ``contributions_direct_logits``, and
``contributions_ablation_map`` once it has been computed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import plotly.graph_objects as go

from .contributions import (
    ablation_bars,
    ablation_map_figure,
    contribution_grid,
    direct_logit_figure,
    head_share_figure,
    next_token_figure,
    row_comparison,
)
from .export import FORMATS, figures_zip
from .labels import plain_labels, visible_label

Table = tuple[np.ndarray | list, list[str], list[str]]  # (matrix, row labels, column labels) for a CSV
Panel = tuple[go.Figure, Table]


@dataclass(frozen=True)
class DirectParts:
    """Direct logit attribution at one position (``attention_core.logit_attribution.DirectLogits``'s numbers)."""

    heads: np.ndarray  # (H,)  each head's direct part of the logit
    bias: float  # b^O's part
    rest: float  # the rest of the residual stream
    constant: float  # the final norm's and the unembedding's biases
    logit: float  # the model's own logit of the token
    token: str  # the token whose logit is split
    check: float  # |sum of the parts - the model's logit|


@dataclass(frozen=True, eq=False)
class ShownContributions:
    """Everything the contributions view shows for one layer, head and position, as plain numbers."""

    tokens: Sequence[str]  # L token labels (raw text: figures escape them, CSVs make whitespace visible)
    layer: int
    head: int
    position: int
    mode: str  # what the grid shows: "weights" or "contributions"
    weights: np.ndarray  # (H, L, S)  alpha
    shares: np.ndarray  # (H, L, S)  contribution shares (each row sums to 1)
    head_shares: np.ndarray  # (H, L)  each head's share of the block's output
    decoder: bool
    ablation: str  # how a head is switched off: "zero" or "mean"
    metric: str  # what an ablation effect measures, in words
    effects: np.ndarray | None = None  # (H,)  switching off each head of this layer
    mask: np.ndarray | None = None  # (L, S) True = may attend, outlined in the grid
    top_before: tuple[tuple[str, float], ...] = ()  # decoder: (token, log-prob) before switching ``head`` off
    top_after: tuple[tuple[str, float], ...] = ()  # and after
    next_title: str = ""
    direct: DirectParts | None = None  # decoder: direct logit attribution
    ablation_map: np.ndarray | None = None  # (layers, H)  every head switched off in turn (once computed)
    sum_check: dict = field(default_factory=dict)  # the view's "adds up" numbers, for the manifest

    @property
    def plain_tokens(self) -> list[str]:
        return plain_labels(self.tokens)

    def head_names(self, count: int) -> list[str]:
        return [f"head {h}" for h in range(count)]


def grid_panel(shown: ShownContributions, theme: str = "screen") -> Panel:
    """Every head's weights or contribution shares; the CSV holds the selected head's matrix."""
    fig = contribution_grid(
        shown.weights,
        shown.shares,
        shown.tokens,
        mode=shown.mode,
        layer=shown.layer,
        selected=shown.head,
        mask=shown.mask,
        theme=theme,
    )
    matrix = shown.weights[shown.head] if shown.mode == "weights" else shown.shares[shown.head]
    return fig, (matrix, shown.plain_tokens, shown.plain_tokens)


def row_panel(shown: ShownContributions, theme: str = "screen") -> Panel:
    """The selected head's row at the position: weight and contribution share per key."""
    weights, shares = shown.weights[shown.head, shown.position], shown.shares[shown.head, shown.position]
    fig = row_comparison(
        weights, shares, shown.tokens, query_index=shown.position, head=shown.head, layer=shown.layer, theme=theme
    )
    table = [[float(w), float(c)] for w, c in zip(weights, shares, strict=True)]
    return fig, (table, shown.plain_tokens, ["weight", "contribution_share"])


def head_shares_panel(shown: ShownContributions, theme: str = "screen") -> Panel:
    fig = head_share_figure(shown.head_shares, shown.tokens, layer=shown.layer, selected=shown.head, theme=theme)
    return fig, (shown.head_shares, shown.head_names(len(shown.head_shares)), shown.plain_tokens)


def ablation_panel(shown: ShownContributions, theme: str = "screen") -> Panel:
    effects = np.asarray(shown.effects)
    fig = ablation_bars(effects, metric=shown.metric, layer=shown.layer, decoder=shown.decoder, theme=theme)
    return fig, ([[e] for e in effects.tolist()], shown.head_names(len(effects)), ["effect"])


def next_token_panel(shown: ShownContributions, theme: str = "screen") -> Panel:
    fig = next_token_figure(shown.top_before, shown.top_after, title=shown.next_title, theme=theme)
    rows = [f"before: {visible_label(t)}" for t, _ in shown.top_before]
    rows += [f"after: {visible_label(t)}" for t, _ in shown.top_after]
    return fig, ([[lp] for _, lp in (*shown.top_before, *shown.top_after)], rows, ["log_prob"])


def direct_logits_panel(shown: ShownContributions, theme: str = "screen") -> Panel:
    d = shown.direct
    fig = direct_logit_figure(
        d.heads,
        bias=d.bias,
        rest=d.rest,
        constant=d.constant,
        logit=d.logit,
        token=d.token,
        layer=shown.layer,
        position=shown.position,
        theme=theme,
    )
    table = [[float(v)] for v in d.heads] + [[d.bias], [d.rest], [d.constant]]
    return fig, (table, [*shown.head_names(len(d.heads)), "b_O", "rest", "constant"], ["logit_part"])


def map_panel(shown: ShownContributions, theme: str = "screen") -> Panel:
    effects = shown.ablation_map
    fig = ablation_map_figure(
        effects, metric=shown.metric, decoder=shown.decoder, selected=(shown.layer, shown.head), theme=theme
    )
    return fig, (effects, [f"layer {i}" for i in range(effects.shape[0])], shown.head_names(effects.shape[1]))


PANELS: tuple[tuple[str, Callable[[ShownContributions, str], Panel], Callable[[ShownContributions], bool]], ...] = (
    ("contributions_grid", grid_panel, lambda s: True),
    ("contributions_row", row_panel, lambda s: True),
    ("contributions_head_shares", head_shares_panel, lambda s: True),
    ("contributions_ablation_layer", ablation_panel, lambda s: s.effects is not None),
    ("contributions_next_token", next_token_panel, lambda s: s.decoder and bool(s.top_before)),
    ("contributions_direct_logits", direct_logits_panel, lambda s: s.direct is not None),
    ("contributions_ablation_map", map_panel, lambda s: s.ablation_map is not None),
)


def shown_panels(shown: ShownContributions, theme: str = "screen") -> dict[str, Panel]:
    """Every panel whose numbers ``shown`` holds, by name, in the view's order."""
    return {name: draw(shown, theme) for name, draw, present in PANELS if present(shown)}


def contributions_zip(
    shown: ShownContributions,
    formats: str = ",".join(FORMATS),
    *,
    settings: dict | None = None,
    theme: str = "slides",
) -> bytes:
    """The view's panels (drawn in ``theme``) and their tables as CSV, zipped with a manifest.json of the
    settings, the sum check, the layer/head/position and versions (``viz.export.figures_zip``)."""
    panels = shown_panels(shown, theme)
    direct = shown.direct
    manifest = {
        "views": ["contributions"],
        "text_tokens": list(shown.tokens),
        "layer": shown.layer,
        "head": shown.head,
        "query": shown.position,
        "contribution_mode": shown.mode,
        "ablation": shown.ablation,
        "ablation_metric": shown.metric,
        "decoder": shown.decoder,
        "settings": settings or {},
        "sum_check": shown.sum_check,
        "direct_logit_check": None
        if direct is None
        else {"token": direct.token, "logit": direct.logit, "reconstruction_diff": direct.check},
    }
    return figures_zip(
        {name: fig for name, (fig, _) in panels.items()},
        {name: table for name, (_, table) in panels.items()},
        formats,
        theme=theme,
        manifest=manifest,
    )
