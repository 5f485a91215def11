"""The Heads & layers view's figures for a trace: the head grid, the head flip, the overviews."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .checks import layer_stack
from .flip import head_flip
from .heads import head_grid, statistic_overview, statistic_switch
from .stats import STATISTICS, overview_matrix

if TYPE_CHECKING:
    from attention_core.traces import LayerTrace, ModelTrace


def _statistics(statistic: str | None) -> tuple[str, ...]:
    if statistic is None:
        return tuple(STATISTICS)
    if statistic not in STATISTICS:
        raise ValueError(f"unknown statistic {statistic!r}; choose one of {tuple(STATISTICS)}")
    return (statistic,)


def heads_source(trace: ModelTrace) -> tuple[np.ndarray, int, LayerTrace]:
    """(attentions (layers, H, L, S), index of the trace's layer in it, the layer trace for its mask)."""
    if trace.model_attentions is not None:
        return layer_stack("model_attentions", trace.model_attentions), trace.layer, trace.model or trace.core
    return np.asarray(trace.core.weights)[None], 0, trace.core


def heads_figures(
    trace: ModelTrace,
    h: int,
    tokens: list[str],
    statistic: str | None,
    precomputed: dict[str, np.ndarray],
    show_values: bool | None,
    theme: str,
    only: tuple[str, ...] | None = None,
) -> dict:
    attentions, layer, source = heads_source(trace)
    overviews = tuple(f"overview_{name}" for name in _statistics(statistic))
    wanted = ("head_grid", "head_flip", *overviews) if only is None else only

    def values(name: str) -> np.ndarray:
        given = precomputed.get(f"overview_{name}")
        return overview_matrix(attentions, name) if given is None else given

    figures: dict = {}
    for name in wanted:
        if name == "head_grid":
            figures[name] = head_grid(
                attentions[layer], tokens, tokens, mask=source.mask, layer=trace.layer, selected=h, theme=theme
            )
        elif name == "head_flip":
            start = min(h, attentions.shape[1] - 1)
            figures[name] = head_flip(
                attentions[layer], tokens, tokens, layer=trace.layer, start=start, mask=source.mask, theme=theme
            )
        elif name == "overview_switch":  # every statistic, switched by buttons in the browser
            figures[name] = statistic_switch(
                {stat: values(stat) for stat in STATISTICS},
                statistic or next(iter(STATISTICS)),
                selected=(layer, h),
                show_values=show_values,
                theme=theme,
            )
        elif name in overviews:
            stat = name.removeprefix("overview_")
            figures[name] = statistic_overview(
                values(stat), stat, selected=(layer, h), show_values=show_values, theme=theme
            )
        else:
            raise ValueError(
                f"unknown heads figure {name!r}; choose from head_grid, head_flip, overview_switch, {overviews}"
            )
    return figures
