"""The lesson deck's slides, one builder per step (``viz.lesson.build_slides`` runs them in order).

Here: the sentence and its tokens (with what was cut), X, the projections, QK^T, scaling (with the
variance numbers), masking, softmax, O = AV, the head grid and the recap; the check against the model
and the pitfall are in ``lesson_checks``. Each builder adds its figures to the deck's ``Charts`` as it
goes, so the charts keep the order of the slides.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go

from .heads import head_grid
from .labels import visible_label
from .lesson_page import FULL, Charts
from .lesson_page import escape as _e
from .views import heads_source, projection_names

if TYPE_CHECKING:
    from attention_core.traces import HeadTrace, ModelTrace

THIRD = (400, 470)  # three figures side by side


@dataclass(frozen=True)
class Slide:
    """One slide: a title, HTML body (may hold ``{chart:N}`` placeholders already replaced), notes."""

    key: str
    title: str
    body: str
    notes: str


@dataclass(frozen=True)
class Deck:
    """What every slide builder reads: the trace, the head followed, its derivation figures, the charts."""

    trace: ModelTrace
    h: int
    core_head: HeadTrace
    tokens: list[str]
    derivation: dict[str, go.Figure]
    charts: Charts
    readouts: Mapping[str, float] | None
    theme: str

    @property
    def n(self) -> int:
        return len(self.tokens)

    @property
    def d_k(self) -> int:
        return self.core_head.q.shape[-1]

    def fig(self, name: str, size: tuple[int, int] = FULL) -> str:
        """The derivation figure ``name`` as a chart on the slide, or a line saying the trace lacks it."""
        fig = self.derivation.get(name)
        if fig is None:
            return f'<p class="missing">This trace has no {_e(name)} step.</p>'
        return self.charts.add(fig, size)

    def readout(self, key: str, digits: int = 3) -> str:
        if self.readouts is None or key not in self.readouts:
            return "n/a"
        return number(float(self.readouts[key]), digits)


def number(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None or not np.isfinite(value) else f"{value:.{digits}g}"


def _token_chips(tokens: Sequence[str]) -> str:
    chips = "".join(
        f'<span class="tok"><small>{i}</small>{_e(visible_label(token, 18))}</span>' for i, token in enumerate(tokens)
    )
    return f'<div class="tokens">{chips}</div>'


def _cut_text(text: str | None, trace: ModelTrace) -> tuple[str, str]:
    """(the part of ``text`` the model read, the part it did not): from the tokens' character offsets."""
    if not text:
        return "", ""
    ends = [b for a, b in trace.offsets if b > a]
    kept = max(ends) if ends else len(text)
    rest = text[kept:]
    return text[:kept], rest if rest.strip() else ""


def _facts_line(trace: ModelTrace) -> str:
    f = trace.facts
    kind = "decoder (causal)" if f.causal else "encoder (sees both sides)"
    return (
        f"{_e(f.name)}: {f.num_layers} layers × {f.num_heads} heads, d<sub>model</sub> = {f.d_model}, "
        f"d<sub>k</sub> = {f.d_head}, {_e(f.positional)} positions, {kind}"
    )


def _list(items: Sequence[str], cls: str) -> str:
    return "" if not items else f'<ul class="{cls}">' + "".join(f"<li>{_e(i)}</li>" for i in items) + "</ul>"


def sentence_slide(deck: Deck, text: str | None) -> Slide:
    trace, n = deck.trace, deck.n
    kept, cut = _cut_text(text, trace)
    sentence = (
        f'<p class="sentence">“{_e(kept)}<span class="cut">{_e(cut)}</span>”</p>'
        if text
        else '<p class="sentence">(text not given)</p>'
    )
    cut_note = (
        f'<p class="warn">Cut: the model read only the first {n} tokens. Struck out above: the '
        f"{len(cut):,} characters it never saw.</p>"
        if cut
        else ""
    )
    where = f"layer {trace.layer}, head {deck.h}"
    return Slide(
        "sentence",
        "One sentence, step by step",
        f"{sentence}{cut_note}<p>{n} tokens for {_facts_line(trace)}. This deck follows {where}.</p>"
        + _token_chips(deck.tokens)
        + _list(trace.notices, "warn")
        + _list(trace.departures, "note"),
        "We take one sentence and follow it through one attention head, from the raw token vectors to the "
        "head's output, and check our hand-built version against the real model. Each grey box is one token; "
        "the small number is its position. Repeated words keep separate positions."
        + (
            " The text was longer than the model's limit, so the end was cut; the deck only uses what was read."
            if cut
            else ""
        ),
    )


def x_slide(deck: Deck) -> Slide:
    x = deck.core_head.x
    x_shape = "" if x is None else f" ({x.shape[0]} × {x.shape[1]})"
    return Slide(
        "x",
        f"X: one row per token{x_shape}",
        '<p class="formula">X ∈ ℝ<sup>n × d<sub>model</sub></sup></p>' + deck.fig("x"),
        f"Each token becomes a vector of {deck.trace.facts.d_model} numbers. Stacked, they form X, one row per token. "
        f"For layer {deck.trace.layer} this is the layer's real input: the word embedding plus position information, "
        "already mixed by the layers before it. Colour shows sign and size.",
    )


def projections_slide(deck: Deck) -> Slide:
    core_head, n, d_k = deck.core_head, deck.n, deck.d_k
    names = projection_names(core_head)
    formulas = " &nbsp; ".join(names[k] for k in ("q", "k", "v"))
    w_shape = "" if core_head.w_q is None else f"W<sup>Q</sup> is {core_head.w_q.shape[0]} × {core_head.w_q.shape[1]}. "
    for key in ("q", "k", "v"):  # the full formula is above the row: a short title fits a third of the slide
        if key in deck.derivation:
            deck.derivation[key].update_layout(title_text=f"{key.upper()}  ({n} × {d_k})", margin=dict(l=90, r=20))
    row = "".join(deck.fig(key, THIRD) for key in ("q", "k", "v"))
    return Slide(
        "projections",
        "Projections: queries, keys, values",
        f'<p class="formula">{formulas}</p><div class="row">{row}</div>'
        f"<p>{w_shape}Each of the {n} tokens gets a query, a key and a value of {d_k} numbers.</p>",
        "Three learned matrices turn each token vector into three new vectors. The query says what this token "
        "is looking for, the key says what it offers, the value is what it hands over if chosen. "
        + ("This model adds a learned bias after each product. " if core_head.b_q is not None else "")
        + ("Queries and keys are then rotated by position (RoPE). " if core_head.rotary else ""),
    )


def scores_slide(deck: Deck) -> Slide:
    return Slide(
        "scores",
        "Scores: every query meets every key",
        '<p class="formula">e<sub>ij</sub> = q<sub>i</sub> · k<sub>j</sub> &nbsp; S = QK<sup>T</sup> '
        f"({deck.n} × {deck.n})</p>" + deck.fig("scores") + f"<p>Largest |score|: {deck.readout('score_absmax')}.</p>",
        "Row i, column j is the dot product of token i's query with token j's key: large when they point the "
        "same way. Every pair is computed, which is why the cost grows with the square of the length.",
    )


def scaling_slide(deck: Deck) -> Slide:
    d_k = deck.d_k
    scale = float(deck.core_head.scale)
    return Slide(
        "scaling",
        "Scaling by 1/√d<sub>k</sub>",
        f'<p class="formula">S / √d<sub>k</sub> = S × {scale:.4g} &nbsp; (d<sub>k</sub> = {d_k}, '
        f"√d<sub>k</sub> = {np.sqrt(d_k):.4g})</p>"
        + deck.fig("scaled", (FULL[0], FULL[1] - 40))
        + f'<p class="numbers">Variance of the scores: <b>{deck.readout("score_var")}</b> → after scaling: '
        f"<b>{deck.readout('scaled_var')}</b>. For unit-variance q and k it would be about d<sub>k</sub> = "
        f"{d_k} → 1.</p>",
        f"A dot product adds up {d_k} products, so its spread grows with d_k. Dividing by the square root of "
        "d_k brings the spread back to about one, whatever the head size. The numbers under the chart are "
        "this head's own variance before and after.",
    )


def masking_slide(deck: Deck) -> Slide:
    mask = deck.core_head.mask
    blocked = int((~mask).sum())
    return Slide(
        "masking",
        "Masking: who may see whom",
        '<p class="formula">S̃<sub>ij</sub> = −∞ where query i may not see key j</p>'
        + deck.fig("masked")
        + f"<p>{blocked} of {mask.size} cells blocked (grey).</p>",
        "A mask decides which keys each query may look at. Blocked scores become minus infinity so softmax "
        "gives them exactly zero. "
        + (
            "This model is a decoder: each token only sees itself and the past."
            if deck.trace.facts.causal
            else "This model is an encoder: every token sees every token, so only padding would be blocked."
        ),
    )


def softmax_slide(deck: Deck) -> Slide:
    return Slide(
        "softmax",
        "Softmax: each row becomes weights",
        '<p class="formula">α<sub>ij</sub> = exp(S̃<sub>ij</sub>) / Σ<sub>j′</sub> exp(S̃<sub>ij′</sub>)</p>'
        + deck.fig("weights")
        + f"<p>Row sums {deck.readout('row_sum_min', 7)} to {deck.readout('row_sum_max', 7)}; "
        f"mean entropy {deck.readout('entropy')} nats (uniform: {deck.readout('max_entropy')}).</p>",
        "Softmax turns each row of scores into positive weights that add up to one: how much of each other "
        "token this token will take. Bright cells are where the attention goes.",
    )


def output_slide(deck: Deck) -> Slide:
    return Slide(
        "output",
        "O = AV: a weighted mix of values",
        '<p class="formula">o<sub>i</sub> = Σ<sub>j</sub> α<sub>ij</sub> v<sub>j</sub> &nbsp; O = AV '
        f"({deck.n} × {deck.core_head.output.shape[1]})</p>" + deck.fig("output"),
        "Each output row is the value vectors mixed by that row's weights. A token that puts most weight on "
        "one other token mostly copies that token's value.",
    )


def heads_slide(deck: Deck) -> Slide:
    trace, tokens = deck.trace, deck.tokens
    attentions, layer_index, source = heads_source(trace)
    grid = head_grid(
        attentions[layer_index], tokens, tokens, mask=source.mask, layer=trace.layer, selected=deck.h, theme=deck.theme
    )
    return Slide(
        "heads",
        f"All {attentions.shape[1]} heads of layer {trace.layer}",
        deck.charts.add(grid, (FULL[0], FULL[1] + 40)),
        "A layer runs several heads side by side, each with its own projections, so each learns its own "
        f"pattern. The bold one, head {deck.h}, is the one we followed. Their outputs are joined and mixed again "
        "by one more matrix.",
    )


def recap_slide(deck: Deck) -> Slide:
    names = projection_names(deck.core_head)
    return Slide(
        "recap",
        "The whole head in one line",
        '<p class="formula big">Attention(Q, K, V) = softmax(QK<sup>T</sup> / √d<sub>k</sub> + M) V</p>'
        f"<ol><li>{names['q']}, {names['k']}, {names['v']}</li><li>S = QK<sup>T</sup>: every pair</li>"
        "<li>÷ √d<sub>k</sub>: keep the spread near 1</li><li>M: −∞ where a key may not be seen</li>"
        "<li>softmax per row: weights that sum to 1</li><li>O = AV: mix the values</li></ol>",
        "Everything on the previous slides fits in this one formula. Try another sentence, layer or head in "
        "the app and the same steps apply.",
    )
