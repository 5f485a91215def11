"""The app's views. Each module has ``render(trace, settings)``; this picks one."""

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
