"""The app's views. Each module has ``render(trace, settings)``; this picks one. ``ahead`` queues the main figure
of the views one switch away (those with an ``ahead(trace, settings)``) for the background builder."""

from __future__ import annotations

from attention_core.traces import ModelTrace

from ..settings import Settings


def render(view: str, trace: ModelTrace, settings: Settings) -> None:
    if view == "training":
        from ui.training_lab import render_training_lab

        render_training_lab()
        return
    from . import compare, contributions, derivation, heads, pairs, pitfalls, query

    {
        "derivation": derivation.render,
        "compare": compare.render,
        "heads": heads.render,
        "query": query.render,
        "pairs": pairs.render,
        "contributions": contributions.render,
        "pitfalls": pitfalls.render,
    }.get(view, derivation.render)(trace, settings)


# views whose figures for the head shown are built in the background (ui.prefetch)
AHEAD = ("compare", "query", "heads")


def ahead(view: str, trace: ModelTrace, settings: Settings) -> None:
    """After ``view`` is drawn: queue the figures of the other views of ``AHEAD``, so a switch finds them built."""
    from . import compare, heads, query

    modules = {"compare": compare, "query": query, "heads": heads}
    for name in AHEAD:
        if name != view:
            modules[name].ahead(trace, settings)
