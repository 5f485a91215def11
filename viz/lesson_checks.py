"""The lesson deck's last two steps: the head checked against the real model, and one pitfall.

The pitfall is dropping the 1/sqrt(d_k): this head's softmax entropy and gradient against the temperature
its scores are divided by, from an ``attention_core.lab.HeadTemperature`` the caller hands in.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .compare import compare_figure
from .lesson_page import FULL
from .lesson_slides import Deck, Slide, number
from .pitfalls import temperature_figure

MATCH = 1e-5  # a replay difference at or below this is a match (float32 rounding)


def _check_rows(trace) -> list[tuple[str, float]]:
    """(label, max |difference|) for this layer's own core and replays, and the worst over all layers."""
    rows = []
    if trace.core_vs_model is not None:
        rows.append(("this layer, own core vs model (weights, all heads)", trace.core_vs_model))
    for diff in trace.replay:
        if diff.layer == trace.layer:
            rows.append((f"layer {diff.layer}, replaying the model's q, k, v: weights", diff.weights))
            rows.append((f"layer {diff.layer}, replaying the model's q, k, v: output", diff.output))
    for diff in trace.replay_hidden:
        if diff.layer == trace.layer:
            rows.append(
                (
                    f"layer {diff.layer}, from X through W<sup>Q</sup>, W<sup>K</sup>, W<sup>V</sup>: weights",
                    diff.weights,
                )
            )
    worst_all = max((max(d.weights, d.output) for d in trace.replay), default=None)
    if worst_all is not None:
        rows.append((f"all {len(trace.replay)} layers, worst", worst_all))
    return rows


def check_slide(deck: Deck) -> Slide:
    trace, h, tokens = deck.trace, deck.h, deck.tokens
    rows = _check_rows(trace)
    table = "".join(
        f'<tr><td>{label}</td><td class="num">{value:.2e}</td><td>{"match" if value <= MATCH else "differs"}</td></tr>'
        for label, value in rows
    )
    if trace.model is None or h >= trace.model.num_heads:
        chart = '<p class="missing">No real model behind this trace: nothing to check against.</p>'
    else:
        model_head = trace.model.head(h)
        core_head = trace.core.head(h)
        fig = compare_figure(
            core_head.weights,
            model_head.weights,
            tokens,
            tokens,
            mask=core_head.mask,
            head=h,
            show_values=False,
            theme=deck.theme,
        )
        chart = deck.charts.add(fig, (FULL[0], 400))
    body = chart + (
        f'<table class="check"><tr><th>max |difference|</th><th></th><th></th></tr>{table}</table>'
        if rows
        else '<p class="missing">No replay numbers in this trace.</p>'
    )
    return Slide(
        "check",
        "Check: our head against the real model",
        body,
        "We rebuilt the head from the model's own weights with plain matrix maths. The table shows the largest "
        f"gap between our weights and the model's; anything at or below {MATCH:g} is float rounding, so the "
        "from-scratch version is the same computation."
        + (" " + " ".join(trace.departures) if trace.departures else ""),
    )


def pitfall_slide(deck: Deck, temperature: Any) -> Slide:
    trace, h = deck.trace, deck.h
    title = "Pitfall: forget the √d<sub>k</sub> and softmax saturates"
    notes = (
        "A common slip is to leave out the division by the square root of d_k. The scores are then larger, "
        "softmax puts almost all weight on one key, and the gradient that flows back through it shrinks, so the "
        "projections learn slowly. The curve shows this head's own scores divided by different temperatures: "
        "at t = 1 (no scaling) the entropy is lower and the gradient smaller than at t = √d_k."
    )
    if temperature is None:
        return Slide(
            "pitfall",
            title,
            '<p class="missing">The temperature sweep was not supplied (or every key is blocked).</p>',
            notes,
        )
    curve = temperature.curve
    fig = temperature_figure(
        curve.temperature,
        curve.entropy,
        curve.grad_norm,
        uniform_entropy=curve.uniform_entropy,
        marks=temperature.marks,
        name=f"layer {trace.layer}, head {h}",
        theme=deck.theme,
    )
    temps = [float(t) for t in curve.temperature]

    def at(values, t: float) -> str:
        index = int(np.argmin(np.abs(np.asarray(temps) - t)))
        return number(float(values[index]))

    numbers = (
        f'<p class="numbers">No scaling (t = 1): entropy <b>{at(curve.entropy, 1.0)}</b> nats, gradient '
        f"<b>{at(curve.grad_norm, 1.0)}</b>. With t = √d<sub>k</sub> = {temperature.sqrt_d_k:.3g}: entropy "
        f"<b>{at(curve.entropy, temperature.sqrt_d_k)}</b>, gradient <b>{at(curve.grad_norm, temperature.sqrt_d_k)}</b>.</p>"
    )
    return Slide("pitfall", title, deck.charts.add(fig, (FULL[0], 470)) + numbers, notes)
