"""Figures and matrices for a whole ModelTrace: the one path shared by the app and the export.

Views and the names of what they return (figure names are stable; the export uses them as file
names):

- ``derivation``  x, w_q, w_k, w_v, [q_before_rotary, k_before_rotary], q, k, v, scores, scaled, masked,
                  [biased], weights, output (one head of the own core; x and w_* only when the trace has
                  them, the *_before_rotary pair only when q and k are rotated, biased (masked + the
                  ALiBi bias, what softmax sees) only with a score bias; CSV also b_q, b_k, b_v for a bias)
- ``compare``     compare (own core vs real model for the head); nothing when trace.model is None
- ``heads``       head_grid, head_flip (every head in one chart, a slider switches them in the browser),
                  overview_<statistic> for each chosen statistic; overview_switch (every statistic, buttons
                  switch it in the browser) only when named in ``only``
- ``query``       query (step-through for one query row of the head)
- ``lines``       lines (attention lines: every head with a slider in the browser, or one query of the head)
- ``rollout``     rollout (needs trace.model_attentions)

viz never imports attention_core at run time (its package imports torch): a trace is read by
attribute (tokens, core, model, model_attentions, layer, head), so any object of that shape works.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go

from .compare import compare_figure
from .fingerprint import fingerprint
from .heads_figures import _statistics, heads_source
from .heads_figures import heads_figures as _heads_figures
from .heatmaps import token_matrix_heatmap, weight_matrix_heatmap
from .labels import plain_labels
from .lines import attention_lines, attention_lines_flip
from .query import query_contributions, query_step_figure, row_title, writes_values
from .query_flip import head_rows, with_flip
from .query_frames import TRACES, fill
from .rollout import attention_rollout, rollout_heatmap
from .scores import attention_heatmap, score_heatmap
from .stats import overview_matrix

if TYPE_CHECKING:  # attention_core imports torch at package level; viz only duck-types its traces
    from attention_core.traces import HeadTrace, ModelTrace

VIEWS = ("derivation", "compare", "heads", "query", "lines", "rollout")

Matrix = tuple[np.ndarray, list[str], list[str]]


def _check_view(view: str) -> None:
    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r}; choose one of {VIEWS}")


def _head_index(trace: ModelTrace, head: int | None) -> int:
    index = trace.head if head is None else head
    if not 0 <= index < trace.core.num_heads:
        raise ValueError(f"head {index} out of range 0..{trace.core.num_heads - 1}")
    return index


def _query_index(trace: ModelTrace, query: int | None) -> int:
    count = len(trace.tokens)
    index = count - 1 if query is None else query
    if not 0 <= index < count:
        raise ValueError(f"query {index} out of range 0..{count - 1}")
    return index


def _dims(count: int) -> list[str]:
    return [str(i) for i in range(count)]


DERIVATION_FIGURES = (
    "x",
    "w_q",
    "w_k",
    "w_v",
    "q_before_rotary",
    "k_before_rotary",
    "q",
    "k",
    "v",
    "scores",
    "scaled",
    "masked",
    "biased",
    "weights",
    "output",
)


def projection_names(head: HeadTrace) -> dict[str, str]:
    """What each projection figure holds, as the model computes it (plotly markup).

    ``XW^Q + b^Q`` when the layer has a bias; ``RoPE(...)`` for q and k when they are rotated after
    projecting (the unrotated ones are their own figures, ``q_before_rotary`` / ``k_before_rotary``).
    """
    names = {}
    for key, letter in (("q", "Q"), ("k", "K"), ("v", "V")):
        linear = f"XW<sup>{letter}</sup>" + (
            f" + b<sup>{letter}</sup>" if getattr(head, f"b_{key}") is not None else ""
        )
        names[f"{key}_before_rotary"] = f"{linear}  (before rotation)"
        names[key] = f"{letter} = RoPE({linear})" if key != "v" and head.rotary else f"{letter} = {linear}"
    return names


def derivation_builders(
    head: HeadTrace, tokens: list[str], h: int, theme: str, show_values: bool | None
) -> dict[str, functools.partial]:
    """How each derivation figure the head has is built: a ``functools.partial`` holding the function and every
    argument, so ``viz.fingerprint`` can name a figure by what it is made of (``derivation_key``)."""
    common = dict(theme=theme, show_values=show_values)
    scale_title = f"Scaled scores  QK<sup>T</sup> × {head.scale:.4g}   ({head.scaled.shape[0]} queries × {head.scaled.shape[1]} keys)"
    names = projection_names(head)
    matrix, scores = token_matrix_heatmap, score_heatmap
    builders = {
        "x": None if head.x is None else functools.partial(matrix, head.x, tokens, name="X  (input)", **common),
        "q": functools.partial(matrix, head.q, tokens, name=names["q"], **common),
        "k": functools.partial(matrix, head.k, tokens, name=names["k"], **common),
        "v": functools.partial(matrix, head.v, tokens, name=names["v"], **common),
        "scores": functools.partial(scores, head.scores, tokens, tokens, stage="scores", **common),
        "scaled": functools.partial(scores, head.scaled, tokens, tokens, stage="scaled", title=scale_title, **common),
        "masked": functools.partial(scores, head.masked, tokens, tokens, mask=head.mask, stage="masked", **common),
        "biased": None
        if getattr(head, "score_bias", None) is None
        else functools.partial(scores, head.logits, tokens, tokens, mask=head.mask, stage="biased", **common),
        "weights": functools.partial(attention_heatmap, head.weights, tokens, tokens, mask=head.mask, **common),
        "output": functools.partial(matrix, head.output, tokens, name="Output  O = AV", **common),
    }
    for key in ("q_before_rotary", "k_before_rotary"):
        values = getattr(head, key)
        builders[key] = None if values is None else functools.partial(matrix, values, tokens, name=names[key], **common)
    for key, letter in (("w_q", "Q"), ("w_k", "K"), ("w_v", "V")):
        weights = getattr(head, key)
        builders[key] = (
            None
            if weights is None
            else functools.partial(weight_matrix_heatmap, weights, name=f"W<sup>{letter}</sup>  head {h}", **common)
        )
    return {name: builders[name] for name in DERIVATION_FIGURES if builders[name] is not None}


def _derivation_figures(
    head: HeadTrace, tokens: list[str], h: int, theme: str, show_values: bool | None, only: tuple[str, ...] | None
) -> dict:
    """The derivation's figures by name, in order; ``only`` builds just those names (None: all)."""
    builders = derivation_builders(head, tokens, h, theme, show_values)
    return {name: build() for name, build in builders.items() if only is None or name in only}


def derivation_key(
    trace: ModelTrace,
    *,
    head: int | None = None,
    theme: str = "screen",
    show_values: bool | None = None,
    only: tuple[str, ...] | None = None,
) -> str:
    """A digest of exactly what ``figures_for_trace(trace, "derivation", ...)`` builds from: equal digests, equal
    figures. Turning scaling off leaves X, W, Q, K, V and the raw scores with the digest they had."""
    h = _head_index(trace, head)
    builders = derivation_builders(trace.core.head(h), list(trace.tokens), h, theme, show_values)
    return fingerprint([(name, build) for name, build in builders.items() if only is None or name in only])


def _compare_figures(trace: ModelTrace, h: int, tokens: list[str], show_values: bool | None, theme: str) -> dict:
    if trace.model is None or h >= trace.model.num_heads:  # no model, or a scratch head the model lacks
        return {}
    core_head = trace.core.head(h)
    model_head = trace.model.head(h)
    return {
        "compare": compare_figure(
            core_head.weights,
            model_head.weights,
            tokens,
            tokens,
            mask=core_head.mask,
            head=h,
            show_values=show_values,
            theme=theme,
        )
    }


def _query_figures(
    head: HeadTrace, tokens: list[str], i: int, show_values: bool | None, theme: str, flip_queries: bool = True
) -> dict:
    def step(q: int):  # query q's step-through, as the box picks it
        return query_step_figure(
            head.scores[q],
            head.scaled[q],
            head.weights[q],
            head.v,
            tokens,
            query_token=tokens[q],
            query_index=q,
            mask_row=head.mask[q],
            show_values=show_values,
            theme=theme,
        )

    fig = step(i)
    if not flip_queries:
        return {"query": fig}
    show = writes_values(len(tokens), show_values)
    kept = head_rows(head, tokens, lambda: [row_title(token, q) for q, token in enumerate(tokens)], show)
    if kept is None:
        return {"query": fig}  # too long to send every row: picked in the box alone
    rows, sent = kept
    framed = i  # the query whose frame the figure is drawn in
    if rows.blocked.any() and not any(trace.name == TRACES["masked"] for trace in fig.data):
        # query i blocks no key but others do: i's numbers in the frame of one that does (its "×" trace empty)
        framed = int(np.flatnonzero(rows.blocked.any(axis=1))[0])
        fig = fill(step(framed).to_dict(), rows.row(i, show))
    return {"query": with_flip(fig, rows, i, sent, frame=rows.row(framed, show).frame_key(tokens, theme))}


def _rollout_figures(trace: ModelTrace, tokens: list[str], rollout, show_values: bool | None, theme: str) -> dict:
    if trace.model_attentions is None:
        return {}
    attentions = trace.model_attentions
    return {
        "rollout": rollout_heatmap(
            attention_rollout(attentions) if rollout is None else rollout,
            tokens,
            layers=attentions.shape[0],
            show_values=show_values,
            theme=theme,
        )
    }


def figures_for_trace(
    trace: ModelTrace,
    view: str,
    *,
    head: int | None = None,
    query: int | None = None,
    theme: str = "screen",
    show_values: bool | None = None,
    statistic: str | None = None,
    threshold: float = 0.05,
    precomputed: dict[str, np.ndarray] | None = None,
    only: tuple[str, ...] | None = None,
    flip_queries: bool = True,
) -> dict[str, go.Figure]:
    """Every figure of ``view`` for ``trace``, by stable name (see the module docstring).

    ``head`` defaults to trace.head, ``query`` to the last token; ``statistic`` (a key of
    ``viz.stats.STATISTICS``) limits the heads view to one overview (default: all five);
    ``threshold`` is the smallest weight drawn in the lines view. ``show_values`` forces cell
    values on or off (default: on for small matrices). ``precomputed`` may hold summaries a caller
    keeps once per capture ("overview_<statistic>" (layers, H), "rollout" (L, L)): they are used as is.
    ``only`` (derivation, heads) builds just the named figures, for a page that draws steps when opened; the
    heads view also has ``overview_switch`` (every statistic in one chart, buttons switch it in the browser,
    starting at ``statistic``), built only when named. ``flip_queries`` (query view): the step-through with its query slider
    and every row for the page to fill (``viz.query_flip``); False: the chosen query's alone (an export, where
    nothing would fill them).
    """
    precomputed = precomputed or {}
    _check_view(view)
    tokens = list(trace.tokens)
    h = _head_index(trace, head)
    core_head = trace.core.head(h)
    if view == "derivation":
        return _derivation_figures(core_head, tokens, h, theme, show_values, only)
    if view == "compare":
        return _compare_figures(trace, h, tokens, show_values, theme)
    if view == "heads":
        return _heads_figures(trace, h, tokens, statistic, precomputed, show_values, theme, only)
    if view == "query":
        return _query_figures(core_head, tokens, _query_index(trace, query), show_values, theme, flip_queries)
    if view == "lines":
        if query is None:  # every head of the layer, flipped by a slider in the browser
            flip = attention_lines_flip(
                np.stack([np.asarray(trace.core.head(i).weights) for i in range(trace.core.num_heads)]),  # (H, L, S)
                tokens,
                tokens,
                layer=trace.layer,
                start=h,
                threshold=threshold,
                theme=theme,
            )
            return {"lines": flip}
        lines = attention_lines(core_head.weights, tokens, tokens, threshold=threshold, query=query, theme=theme)
        return {"lines": lines}
    return _rollout_figures(trace, tokens, precomputed.get("rollout"), show_values, theme)


def _derivation_matrices(head: HeadTrace, tokens: list[str]) -> dict[str, Matrix]:
    """The derivation's numbers in the figures' order, w_* and b_* after x (b_* only with a bias)."""
    matrices: dict[str, Matrix] = {}
    if head.x is not None:
        matrices["x"] = (np.asarray(head.x), tokens, _dims(head.x.shape[1]))
    for key in ("w_q", "w_k", "w_v"):
        weights = getattr(head, key)
        if weights is not None:
            matrices[key] = (np.asarray(weights), _dims(weights.shape[0]), _dims(weights.shape[1]))
    for key in ("b_q", "b_k", "b_v"):
        bias = getattr(head, key)
        if bias is not None:
            matrices[key] = (np.asarray(bias)[None, :], ["bias"], _dims(bias.shape[0]))  # (1, E)
    for key in ("q_before_rotary", "k_before_rotary", "q", "k", "v", "output"):
        values = getattr(head, key)
        if values is not None:
            matrices[key] = (np.asarray(values), tokens, _dims(values.shape[1]))
    for key in ("scores", "scaled", "masked", "weights"):
        matrices[key] = (np.asarray(getattr(head, key)), tokens, tokens)
    if getattr(head, "score_bias", None) is not None:
        matrices["biased"] = (np.asarray(head.logits), tokens, tokens)  # masked + ALiBi: softmax's input
    order = [
        "x",
        "w_q",
        "w_k",
        "w_v",
        "b_q",
        "b_k",
        "b_v",
        "q_before_rotary",
        "k_before_rotary",
        *DERIVATION_FIGURES[4:],
    ]
    return {key: matrices[key] for key in order if key in matrices}


def _compare_matrices(trace: ModelTrace, h: int, tokens: list[str]) -> dict[str, Matrix]:
    if trace.model is None or h >= trace.model.num_heads:
        return {}
    core = np.asarray(trace.core.head(h).weights)
    model = np.asarray(trace.model.head(h).weights)
    return {
        "core_weights": (core, tokens, tokens),
        "model_weights": (model, tokens, tokens),
        "difference": (core - model, tokens, tokens),
    }


def _heads_matrices(trace: ModelTrace, tokens: list[str], statistic: str | None) -> dict[str, Matrix]:
    attentions, layer, _ = heads_source(trace)
    matrices = {f"head_{i}_weights": (attentions[layer, i], tokens, tokens) for i in range(attentions.shape[1])}
    for name in _statistics(statistic):
        matrices[f"overview_{name}"] = (
            overview_matrix(attentions, name),
            _dims(attentions.shape[0]),
            _dims(attentions.shape[1]),
        )
    return matrices


def _query_matrices(head: HeadTrace, tokens: list[str], i: int) -> dict[str, Matrix]:
    bars = np.stack([head.scores[i], head.scaled[i], head.weights[i]], axis=1)  # (S, 3)
    contributions = query_contributions(head.weights[i], head.v)  # (S, Ev)
    with_output = np.vstack([contributions, contributions.sum(axis=0, keepdims=True)])  # (S + 1, Ev)
    return {
        "query_bars": (bars, tokens, ["score", "scaled", "weight"]),
        "query_contributions": (with_output, [*tokens, "output"], _dims(head.v.shape[1])),
    }


def matrices_for_trace(
    trace: ModelTrace,
    view: str,
    *,
    head: int | None = None,
    query: int | None = None,
    statistic: str | None = None,
) -> dict[str, Matrix]:
    """The numbers behind ``view``'s figures as (matrix, row_labels, col_labels), for CSV.

    Labels are plain text (whitespace made visible, not HTML-escaped). Names: derivation as the
    figures; compare: core_weights, model_weights, difference; heads: head_<h>_weights,
    overview_<statistic>; query: query_bars (keys × [score, scaled, weight]),
    query_contributions (keys + "output" × value dims); lines: lines_weights; rollout: rollout.
    """
    _check_view(view)
    tokens = plain_labels(trace.tokens)
    h = _head_index(trace, head)
    core_head = trace.core.head(h)
    if view == "derivation":
        return _derivation_matrices(core_head, tokens)
    if view == "compare":
        return _compare_matrices(trace, h, tokens)
    if view == "heads":
        return _heads_matrices(trace, tokens, statistic)
    if view == "query":
        return _query_matrices(core_head, tokens, _query_index(trace, query))
    if view == "lines":
        return {"lines_weights": (np.asarray(core_head.weights), tokens, tokens)}
    if trace.model_attentions is None:
        return {}
    return {"rollout": (attention_rollout(trace.model_attentions), tokens, tokens)}
