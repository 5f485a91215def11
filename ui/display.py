"""The display options (hide special tokens, words, fixed colour range) and head roles, cached for the views.

Nothing here changes a number the core computed: ``viz.display`` reshapes the weights for the eye and the
figure's title says how. Figures and head roles live in the shared store, like every other figure.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attention_core.request import TraceRequest
from viz.display import DisplayMap, display_map, query_set_bars, query_set_row, special_positions
from viz.heads import head_grid
from viz.labels import escape_label, plain_labels
from viz.query_shown import QueryRowShown, query_row_as_shown, query_shown_figure
from viz.scores import attention_heatmap
from viz.views import heads_source

from . import compute
from .settings import Settings

FREE_RANGE_NOTE = "colours stretched to this map's largest weight (not comparable across maps)"


def active(settings: Settings) -> bool:
    """True when a display option changes what the weight maps look like."""
    return bool(settings.hide_special or settings.words or not settings.fixed_range)


def _key(settings: Settings) -> tuple:
    return (settings.hide_special, settings.words, settings.fixed_range, settings.theme, settings.show_values)


def _figure_bytes(fig: go.Figure) -> int:
    return sum(int(getattr(getattr(d, "z", None), "nbytes", 0) or 0) for d in fig.data) + 4096


def shown(trace, weights, mask, settings: Settings) -> DisplayMap:
    """``weights`` (..., L, L) of the trace's text as the display options show them."""
    return display_map(
        weights, trace.tokens, trace.offsets, mask=mask, hide_special=settings.hide_special, words=settings.words
    )


def notes(shown_map: DisplayMap, settings: Settings) -> str:
    """What the figure shows differently from the computed weights, one line ("" when nothing)."""
    said = [shown_map.note] if shown_map.note else []
    if settings.hide_special and "hiding" not in shown_map.note:
        said.append("no special tokens in this text to hide")
    if not settings.fixed_range:
        said.append(FREE_RANGE_NOTE)
    return "; ".join(said)


def _stretch(fig: go.Figure, values: np.ndarray, settings: Settings) -> None:
    if not settings.fixed_range:
        finite = np.asarray(values)[np.isfinite(values)]
        top = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
        fig.update_layout(coloraxis_cmin=0.0, coloraxis_cmax=top)


def _subtitle(title: str, note: str) -> str:
    return title + (f"<br><sup>{escape_label(note)}</sup>" if note else "")


def weights_view(trace, settings: Settings) -> tuple[go.Figure, tuple]:
    """(figure, CSV data) of the chosen head's softmax weights as shown (derivation step 6)."""
    head = trace.core.head(trace.head)
    view = shown(trace, head.weights, head.mask, settings)
    note = notes(view, settings)

    def build() -> go.Figure:
        rows, cols = view.weights.shape
        fig = attention_heatmap(
            view.weights,
            view.row_labels,
            view.col_labels,
            mask=view.mask,
            title=_subtitle(f"Attention weights  softmax(rows)   ({rows} queries × {cols} keys)", note),
            show_values=settings.show_values or None,
            theme=settings.theme,
        )
        _stretch(fig, view.weights, settings)
        return fig

    key = ("display_weights", compute.numbers_key(settings.request()), trace.head, _key(settings))
    fig = compute.store().get(key, build, _figure_bytes)
    return fig, (view.weights, plain_labels(view.row_labels), plain_labels(view.col_labels))


def grid_view(trace, settings: Settings) -> go.Figure:
    """Every head of the layer as shown (the heads view's grid)."""
    attentions, layer, source = heads_source(trace)
    view = shown(trace, attentions[layer], source.mask, settings)
    note = notes(view, settings)

    def build() -> go.Figure:
        heads, rows, cols = view.weights.shape
        fig = head_grid(
            view.weights,
            view.row_labels,
            view.col_labels,
            mask=view.mask,
            layer=trace.layer,
            selected=trace.head,
            title=_subtitle(f"layer {trace.layer}: all {heads} heads   ({rows} queries × {cols} keys)", note),
            theme=settings.theme,
        )
        _stretch(fig, view.weights, settings)
        return fig

    key = ("display_grid", compute.numbers_key(settings.request()), trace.head, _key(settings))
    return compute.store().get(key, build, _figure_bytes)


def query_row_view(trace, settings: Settings, queries: tuple[int, ...]) -> tuple[go.Figure, tuple, str]:
    """(figure, CSV data, note): the chosen head's rows of ``queries`` summed, over the keys as shown."""
    head = trace.core.head(trace.head)
    view = display_map(
        head.weights,
        trace.tokens,
        trace.offsets,
        hide_special=settings.hide_special,
        words=settings.words,
        merge_rows=False,
    )
    note = notes(view, settings).replace(f"; {FREE_RANGE_NOTE}", "").replace(FREE_RANGE_NOTE, "")
    row = query_set_row(view.weights, queries)  # (C,)
    labels = [trace.tokens[i] for i in queries]
    fig = query_set_bars(row, view.col_labels, labels, note=note, theme=settings.theme)
    what = "+".join(str(i) for i in queries)
    return fig, (row[None, :], [f"rows {what} summed"], plain_labels(view.col_labels)), note


def query_step(trace, settings: Settings, query: int) -> QueryRowShown:
    """The chosen head's step-through rows of ``query`` as the display options show them."""
    head = trace.core.head(trace.head)
    return query_row_as_shown(
        head.scores,
        head.scaled,
        head.weights,
        head.v,
        trace.tokens,
        trace.offsets,
        query,
        mask=head.mask,
        hide_special=settings.hide_special,
        words=settings.words,
    )


def query_step_view(trace, settings: Settings, query: int) -> tuple[go.Figure, tuple, QueryRowShown]:
    """(figure, CSV data, rows): the query view's step-through as shown; the figure kept in the store."""
    shown_rows = query_step(trace, settings, query)

    def build() -> go.Figure:
        return query_shown_figure(
            shown_rows,
            query_index=query,
            fixed_range=settings.fixed_range,
            show_values=settings.show_values or None,
            theme=settings.theme,
        )

    key = ("display_query", compute.numbers_key(settings.request()), trace.head, query, _key(settings))
    fig = compute.store().get(key, build, _figure_bytes)
    with_output = np.vstack([shown_rows.contributions, shown_rows.output[None, :]])  # (C + 1, Ev)
    dims = [str(d) for d in range(with_output.shape[1])]
    return fig, (with_output, [*plain_labels(shown_rows.key_labels), "output"], dims), shown_rows


def induction(model: str) -> np.ndarray:
    """(layers, H) induction scores of the model: one forward on a repeated random sequence, once per model."""
    from attention_core.head_roles import model_induction_scores

    def run() -> np.ndarray:
        loaded = compute.load_model(model)
        with compute.heavy():
            return model_induction_scores(loaded)

    return compute.store().get(("induction", model), run, lambda value: int(value.nbytes))


def roles(trace, request: TraceRequest):
    """Head roles of the attentions the heads view shows (the model's, every layer; or the core's layer)."""
    from attention_core.head_roles import head_roles

    attentions, _, _ = heads_source(trace)
    with_model = trace.model_attentions is not None
    key = (
        ("roles", request.model, request.text, request.max_tokens, request.pad_to)
        if with_model
        else ("roles", compute.numbers_key(request))
    )

    def run():
        scores = induction(request.model) if with_model else None
        if scores is not None and scores.shape != attentions.shape[:2]:
            scores = None  # a model whose returned maps do not match its heads: leave induction unmeasured
        return head_roles(attentions, sinks=special_positions(trace.tokens, trace.offsets), induction=scores)

    return compute.store().get(key, run, lambda value: 64 * value.labels.size)


def export_extras(trace, settings: Settings, views: str) -> dict:
    """What the slides zip adds for the display options and head roles: the options and what they changed
    (manifest "display"), the maps as shown ("<figure>_as_shown" figures and CSV), the head roles (heads)."""
    chosen = views.split(",")
    head = trace.core.head(trace.head)
    said = notes(shown(trace, head.weights, head.mask, settings), settings)
    info = {
        "hide_special": settings.hide_special,
        "words": settings.words,
        "fixed_range": settings.fixed_range,
        "query_set": list(settings.query_set),
        "note": said or "the weights as computed",
    }
    figures: dict = {}
    matrices: dict = {}
    if active(settings) and "derivation" in chosen:
        figures["weights_as_shown"], matrices["weights_as_shown"] = weights_view(trace, settings)
    if active(settings) and "heads" in chosen:
        figures["head_grid_as_shown"] = grid_view(trace, settings)
    queries = tuple(j for j in settings.query_set if j < len(trace.tokens))  # a link's set may outrun the text
    if active(settings) and "query" in chosen:
        query = min(settings.query, len(trace.tokens) - 1)
        figures["query_as_shown"], matrices["query_as_shown"], _ = query_step_view(trace, settings, query)
    if "query" in chosen and (queries or active(settings)):
        figures["query_set"], matrices["query_set"], _ = query_row_view(
            trace, settings, queries or (min(settings.query, len(trace.tokens) - 1),)
        )
    if "heads" in chosen:
        from viz.roles import role_map

        found = roles(trace, settings.request())
        _, layer, _ = heads_source(trace)
        figures["head_roles"] = role_map(found, selected=(layer, trace.head), theme="slides")
        matrices["head_roles"] = found.table()
    return {"display": info, "extra_figures": figures, "extra_matrices": matrices}
