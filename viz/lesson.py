"""The lesson deck: one offline HTML file walking the derivation on one sentence, and its PDF.

``lesson_html(trace, ...)`` returns a self-contained page: plotly.js inlined once (from the installed
plotly package), every figure's JSON inline, a Content-Security-Policy that refuses any request outside
the file, one ``<section>`` per slide, arrow keys / PageUp / PageDown / Home / End to move, "n" to show
the speaker notes (``<aside class="notes">`` in each slide), and print CSS that gives one page per
slide. ``write_lesson(trace, out_dir)`` writes ``lesson.html`` and, through the headless Chromium
``viz.export.find_browser`` finds, ``lesson.pdf`` (one page per slide).

Slides: the sentence and its tokens (with what was cut), X, the projections, QK^T, scaling (with the
variance numbers), masking, softmax, O = AV, the head grid, the check against the model, one pitfall
(dropping the 1/sqrt(d_k): this head's softmax against the temperature), and a recap.

viz never imports attention_core at run time: the numbers that need torch (``readouts`` from
``attention_core.readouts.step_readouts`` and ``temperature`` from ``attention_core.lab.head_temperature_curve``)
are handed in by the caller (``python -m viz lesson``, the app's download button). Without them the
slides say the numbers were not supplied.
"""

from __future__ import annotations

import html
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import plotly
import plotly.graph_objects as go

from .compare import compare_figure
from .export import find_browser
from .heads import head_grid
from .labels import visible_label
from .pitfalls import temperature_figure
from .theme import LINE_COLOURS
from .views import figures_for_trace, heads_source, projection_names

if TYPE_CHECKING:
    from attention_core.traces import ModelTrace

SLIDE_WIDTH, SLIDE_HEIGHT = 1280, 720  # CSS pixels; the PDF page is the same size
FULL = (1220, 520)  # one figure across the slide
THIRD = (400, 470)  # three figures side by side
MATCH = 1e-5  # a replay difference at or below this is a match (float32 rounding)
PDF_TIMEOUT_S = 180
CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src data: blob:; font-src data:; connect-src 'none'"
)
BROWSER_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-extensions",
    "--no-pdf-header-footer",
    "--virtual-time-budget=20000",
)


@dataclass(frozen=True)
class Slide:
    """One slide: a title, HTML body (may hold ``{chart:N}`` placeholders already replaced), notes."""

    key: str
    title: str
    body: str
    notes: str


@dataclass(frozen=True)
class LessonFiles:
    html: Path
    pdf: Path | None  # None when no browser (or it failed): ``message`` says why
    slides: int
    message: str | None = None


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _g(value: float | None, digits: int = 3) -> str:
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


class _Charts:
    """Collects figures: each becomes a ``<div class="chart">`` and a JSON block, drawn once on load."""

    def __init__(self) -> None:
        self.figures: list[go.Figure] = []

    def add(self, fig: go.Figure, size: tuple[int, int] = FULL) -> str:
        width, height = size
        fig.update_layout(width=width, height=height, autosize=False)
        self.figures.append(fig)
        index = len(self.figures) - 1
        return f'<div class="chart" id="chart-{index}" data-figure="{index}" style="width:{width}px;height:{height}px"></div>'

    def scripts(self) -> str:
        blocks = []
        for index, fig in enumerate(self.figures):
            payload = fig.to_json().replace("</", "<\\/")  # never closes the script element early
            blocks.append(f'<script type="application/json" id="figure-{index}">{payload}</script>')
        return "\n".join(blocks)


def _fig(figures: dict, name: str, charts: _Charts, size=FULL) -> str:
    fig = figures.get(name)
    return charts.add(fig, size) if fig is not None else f'<p class="missing">This trace has no {_e(name)} step.</p>'


def _facts_line(trace: ModelTrace) -> str:
    f = trace.facts
    kind = "decoder (causal)" if f.causal else "encoder (sees both sides)"
    return (
        f"{_e(f.name)}: {f.num_layers} layers × {f.num_heads} heads, d<sub>model</sub> = {f.d_model}, "
        f"d<sub>k</sub> = {f.d_head}, {_e(f.positional)} positions, {kind}"
    )


def _list(items: Sequence[str], cls: str) -> str:
    return "" if not items else f'<ul class="{cls}">' + "".join(f"<li>{_e(i)}</li>" for i in items) + "</ul>"


def _readout(readouts: Mapping[str, float] | None, key: str, digits: int = 3) -> str:
    if readouts is None or key not in readouts:
        return "n/a"
    return _g(float(readouts[key]), digits)


def build_slides(
    trace: ModelTrace,
    *,
    text: str | None = None,
    head: int | None = None,
    readouts: Mapping[str, float] | None = None,
    temperature: Any = None,
    theme: str = "slides",
) -> tuple[list[Slide], list[go.Figure]]:
    """The deck's slides and their figures (in the order the charts appear)."""
    h = trace.head if head is None else head
    if not 0 <= h < trace.core.num_heads:
        raise ValueError(f"head {h} out of range 0..{trace.core.num_heads - 1}")
    core_head = trace.core.head(h)
    tokens = list(trace.tokens)
    n = len(tokens)
    d_k = core_head.q.shape[-1]
    charts = _Charts()
    derivation = figures_for_trace(trace, "derivation", head=h, theme=theme)
    where = f"layer {trace.layer}, head {h}"
    slides: list[Slide] = []

    # 1. the sentence and its tokens
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
    slides.append(
        Slide(
            "sentence",
            "One sentence, step by step",
            f"{sentence}{cut_note}<p>{n} tokens for {_facts_line(trace)}. This deck follows {where}.</p>"
            + _token_chips(tokens)
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
    )

    # 2. X
    x_shape = "" if core_head.x is None else f" ({core_head.x.shape[0]} × {core_head.x.shape[1]})"
    slides.append(
        Slide(
            "x",
            f"X: one row per token{x_shape}",
            '<p class="formula">X ∈ ℝ<sup>n × d<sub>model</sub></sup></p>' + _fig(derivation, "x", charts),
            f"Each token becomes a vector of {trace.facts.d_model} numbers. Stacked, they form X, one row per token. "
            f"For layer {trace.layer} this is the layer's real input: the word embedding plus position information, "
            "already mixed by the layers before it. Colour shows sign and size.",
        )
    )

    # 3. projections
    names = projection_names(core_head)
    formulas = " &nbsp; ".join(names[k] for k in ("q", "k", "v"))
    w_shape = "" if core_head.w_q is None else f"W<sup>Q</sup> is {core_head.w_q.shape[0]} × {core_head.w_q.shape[1]}. "
    for key in ("q", "k", "v"):  # the full formula is above the row: a short title fits a third of the slide
        if key in derivation:
            derivation[key].update_layout(title_text=f"{key.upper()}  ({n} × {d_k})", margin=dict(l=90, r=20))
    row = "".join(_fig(derivation, key, charts, THIRD) for key in ("q", "k", "v"))
    slides.append(
        Slide(
            "projections",
            "Projections: queries, keys, values",
            f'<p class="formula">{formulas}</p><div class="row">{row}</div>'
            f"<p>{w_shape}Each of the {n} tokens gets a query, a key and a value of {d_k} numbers.</p>",
            "Three learned matrices turn each token vector into three new vectors. The query says what this token "
            "is looking for, the key says what it offers, the value is what it hands over if chosen. "
            + ("This model adds a learned bias after each product. " if core_head.b_q is not None else "")
            + ("Queries and keys are then rotated by position (RoPE). " if core_head.rotary else ""),
        )
    )

    # 4. QK^T
    slides.append(
        Slide(
            "scores",
            "Scores: every query meets every key",
            '<p class="formula">e<sub>ij</sub> = q<sub>i</sub> · k<sub>j</sub> &nbsp; S = QK<sup>T</sup> '
            f"({n} × {n})</p>"
            + _fig(derivation, "scores", charts)
            + f"<p>Largest |score|: {_readout(readouts, 'score_absmax')}.</p>",
            "Row i, column j is the dot product of token i's query with token j's key: large when they point the "
            "same way. Every pair is computed, which is why the cost grows with the square of the length.",
        )
    )

    # 5. scaling
    scale = float(core_head.scale)
    slides.append(
        Slide(
            "scaling",
            "Scaling by 1/√d<sub>k</sub>",
            f'<p class="formula">S / √d<sub>k</sub> = S × {scale:.4g} &nbsp; (d<sub>k</sub> = {d_k}, '
            f"√d<sub>k</sub> = {np.sqrt(d_k):.4g})</p>"
            + _fig(derivation, "scaled", charts, (FULL[0], FULL[1] - 40))
            + f'<p class="numbers">Variance of the scores: <b>{_readout(readouts, "score_var")}</b> → after scaling: '
            f"<b>{_readout(readouts, 'scaled_var')}</b>. For unit-variance q and k it would be about d<sub>k</sub> = "
            f"{d_k} → 1.</p>",
            f"A dot product adds up {d_k} products, so its spread grows with d_k. Dividing by the square root of "
            "d_k brings the spread back to about one, whatever the head size. The numbers under the chart are "
            "this head's own variance before and after.",
        )
    )

    # 6. masking
    blocked = int((~core_head.mask).sum())
    slides.append(
        Slide(
            "masking",
            "Masking: who may see whom",
            '<p class="formula">S̃<sub>ij</sub> = −∞ where query i may not see key j</p>'
            + _fig(derivation, "masked", charts)
            + f"<p>{blocked} of {core_head.mask.size} cells blocked (grey).</p>",
            "A mask decides which keys each query may look at. Blocked scores become minus infinity so softmax "
            "gives them exactly zero. "
            + (
                "This model is a decoder: each token only sees itself and the past."
                if trace.facts.causal
                else "This model is an encoder: every token sees every token, so only padding would be blocked."
            ),
        )
    )

    # 7. softmax
    slides.append(
        Slide(
            "softmax",
            "Softmax: each row becomes weights",
            '<p class="formula">α<sub>ij</sub> = exp(S̃<sub>ij</sub>) / Σ<sub>j′</sub> exp(S̃<sub>ij′</sub>)</p>'
            + _fig(derivation, "weights", charts)
            + f"<p>Row sums {_readout(readouts, 'row_sum_min', 7)} to {_readout(readouts, 'row_sum_max', 7)}; "
            f"mean entropy {_readout(readouts, 'entropy')} nats (uniform: {_readout(readouts, 'max_entropy')}).</p>",
            "Softmax turns each row of scores into positive weights that add up to one: how much of each other "
            "token this token will take. Bright cells are where the attention goes.",
        )
    )

    # 8. O = AV
    slides.append(
        Slide(
            "output",
            "O = AV: a weighted mix of values",
            '<p class="formula">o<sub>i</sub> = Σ<sub>j</sub> α<sub>ij</sub> v<sub>j</sub> &nbsp; O = AV '
            f"({n} × {core_head.output.shape[1]})</p>" + _fig(derivation, "output", charts),
            "Each output row is the value vectors mixed by that row's weights. A token that puts most weight on "
            "one other token mostly copies that token's value.",
        )
    )

    # 9. head grid
    attentions, layer_index, source = heads_source(trace)
    grid = head_grid(
        attentions[layer_index], tokens, tokens, mask=source.mask, layer=trace.layer, selected=h, theme=theme
    )
    slides.append(
        Slide(
            "heads",
            f"All {attentions.shape[1]} heads of layer {trace.layer}",
            charts.add(grid, (FULL[0], FULL[1] + 40)),
            "A layer runs several heads side by side, each with its own projections, so each learns its own "
            f"pattern. The bold one, head {h}, is the one we followed. Their outputs are joined and mixed again "
            "by one more matrix.",
        )
    )

    # 10. the model check
    slides.append(_check_slide(trace, h, tokens, charts, theme))

    # 11. the pitfall
    slides.append(_pitfall_slide(trace, h, d_k, temperature, charts, theme))

    # 12. recap
    slides.append(
        Slide(
            "recap",
            "The whole head in one line",
            '<p class="formula big">Attention(Q, K, V) = softmax(QK<sup>T</sup> / √d<sub>k</sub> + M) V</p>'
            f"<ol><li>{names['q']}, {names['k']}, {names['v']}</li><li>S = QK<sup>T</sup>: every pair</li>"
            "<li>÷ √d<sub>k</sub>: keep the spread near 1</li><li>M: −∞ where a key may not be seen</li>"
            "<li>softmax per row: weights that sum to 1</li><li>O = AV: mix the values</li></ol>",
            "Everything on the previous slides fits in this one formula. Try another sentence, layer or head in "
            "the app and the same steps apply.",
        )
    )
    return slides, charts.figures


def _check_slide(trace: ModelTrace, h: int, tokens: list[str], charts: _Charts, theme: str) -> Slide:
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
            theme=theme,
        )
        chart = charts.add(fig, (FULL[0], 400))
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


def _pitfall_slide(trace: ModelTrace, h: int, d_k: int, temperature: Any, charts: _Charts, theme: str) -> Slide:
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
        name=f"layer {trace.layer}, head {h}",
        theme=theme,
    )
    temps = [float(t) for t in curve.temperature]
    _mark_temperatures(fig, temperature.marks, temps)

    def at(values, t: float) -> str:
        index = int(np.argmin(np.abs(np.asarray(temps) - t)))
        return _g(float(values[index]))

    numbers = (
        f'<p class="numbers">No scaling (t = 1): entropy <b>{at(curve.entropy, 1.0)}</b> nats, gradient '
        f"<b>{at(curve.grad_norm, 1.0)}</b>. With t = √d<sub>k</sub> = {temperature.sqrt_d_k:.3g}: entropy "
        f"<b>{at(curve.entropy, temperature.sqrt_d_k)}</b>, gradient <b>{at(curve.grad_norm, temperature.sqrt_d_k)}</b>.</p>"
    )
    return Slide("pitfall", title, charts.add(fig, (FULL[0], 470)) + numbers, notes)


def _mark_temperatures(fig: go.Figure, marks: Mapping[str, float], temps: list[float]) -> None:
    """A dashed line at each marked temperature (√d_k, the head's own) on both log-x panels, labelled once.

    An annotation on a log axis takes log10 of its position (a shape takes the value itself); ticks
    stay on the sweep's round temperatures so a mark's label never overlaps a neighbouring tick.
    """
    marked = [float(t) for t in marks.values()]
    for index, (label, t) in enumerate(marks.items()):
        colour = LINE_COLOURS[(index + 2) % len(LINE_COLOURS)]
        for col in (1, 2):
            fig.add_vline(x=t, line=dict(color=colour, dash="dash", width=1.5), row=1, col=col)
        fig.add_annotation(
            x=float(np.log10(t)),
            xref="x",
            y=0.03,
            yref="y domain",
            yanchor="bottom",
            xanchor="left",
            text=_e(label),
            showarrow=False,
            font=dict(color=colour),
        )
    ticks = [t for t in temps if not any(np.isclose(t, m) for m in marked) or float(t).is_integer()]
    fig.update_xaxes(tickmode="array", tickvals=ticks, ticktext=[f"{t:g}" for t in ticks])


STYLE = """
*{box-sizing:border-box}
html,body{margin:0;padding:0;background:#222;font-family:Helvetica Neue,Helvetica,Arial,sans-serif;color:#222}
.deck{position:absolute;left:0;top:0;width:1280px;height:720px;transform-origin:0 0}
section{position:absolute;left:0;top:0;width:1280px;height:720px;overflow:hidden;background:#fff;padding:24px 30px;
  visibility:hidden}
section.current{visibility:visible}
h2{margin:0 0 8px;font-size:32px}
p{margin:6px 0;font-size:20px}
.formula{font-family:Cambria Math,STIX Two Math,Times New Roman,serif;font-size:24px;color:#0b3d6b}
.formula.big{font-size:36px;margin:40px 0}
.sentence{font-size:30px;margin:20px 0}
.cut{text-decoration:line-through;color:#b00}
.warn{color:#8a4b00}
ul.warn li,ul.note li{font-size:18px}
.tokens{display:flex;flex-wrap:wrap;gap:6px;margin:14px 0}
.tok{border:1px solid #bbb;background:#f2f2f2;border-radius:4px;padding:3px 7px;font-size:19px;white-space:pre}
.tok small{color:#777;margin-right:5px;font-size:12px}
.row{display:flex;gap:10px}
.missing{color:#777;font-style:italic}
table.check{border-collapse:collapse;font-size:18px;margin-top:8px}
table.check td,table.check th{border-bottom:1px solid #ddd;padding:3px 12px;text-align:left}
td.num{font-family:monospace}
ol li{font-size:24px;margin:6px 0}
aside.notes{display:none}
body.show-notes section.current aside.notes{display:block;position:absolute;left:0;right:0;bottom:0;max-height:45%;
  overflow:auto;background:#fffbe6;border-top:3px solid #e0b000;padding:10px 30px;font-size:19px}
.counter{position:absolute;left:14px;bottom:8px;font-size:14px;color:#888}
#nav{position:fixed;right:10px;top:10px;display:flex;gap:6px;z-index:10;opacity:.6}
#nav button{font-size:16px}
@page{size:1280px 720px;margin:0}
@media print{
  html,body{background:#fff;width:1280px}
  .deck{position:static;transform:none!important;height:auto}
  section{position:relative;visibility:visible;break-after:page;page-break-after:always}
  section:last-of-type{break-after:auto;page-break-after:auto}
  aside.notes,#nav{display:none!important}
}
"""

SCRIPT = """
(function(){
  var slides = Array.prototype.slice.call(document.querySelectorAll('section'));
  var deck = document.querySelector('.deck');
  var current = 0;
  function fit(){
    var s = Math.min(window.innerWidth / 1280, window.innerHeight / 720);
    deck.style.transform = 'translate(' + Math.max(0, (window.innerWidth - 1280 * s) / 2) + 'px,' +
      Math.max(0, (window.innerHeight - 720 * s) / 2) + 'px) scale(' + s + ')';
  }
  function show(i){
    current = Math.max(0, Math.min(slides.length - 1, i));
    slides.forEach(function(s, k){
      s.classList.toggle('current', k === current);
      if (k === current) { s.setAttribute('aria-current', 'step'); } else { s.removeAttribute('aria-current'); }
    });
    document.body.setAttribute('data-slide', String(current));
    if (history.replaceState) { history.replaceState(null, '', '#' + (current + 1)); }
  }
  document.addEventListener('keydown', function(ev){
    var k = ev.key;
    if (k === 'ArrowRight' || k === 'ArrowDown' || k === 'PageDown' || k === ' ') { show(current + 1); }
    else if (k === 'ArrowLeft' || k === 'ArrowUp' || k === 'PageUp') { show(current - 1); }
    else if (k === 'Home') { show(0); }
    else if (k === 'End') { show(slides.length - 1); }
    else if (k === 'n' || k === 'N') { document.body.classList.toggle('show-notes'); }
    else { return; }
    ev.preventDefault();
  });
  document.getElementById('prev').onclick = function(){ show(current - 1); };
  document.getElementById('next').onclick = function(){ show(current + 1); };
  document.getElementById('notes').onclick = function(){ document.body.classList.toggle('show-notes'); };
  window.addEventListener('resize', fit);
  var drawn = 0;
  document.querySelectorAll('.chart').forEach(function(div){
    var fig = JSON.parse(document.getElementById('figure-' + div.getAttribute('data-figure')).textContent);
    Plotly.newPlot(div, fig.data, fig.layout, {displaylogo: false, responsive: false, staticPlot: false})
      .then(function(){ drawn += 1; document.body.setAttribute('data-charts-drawn', String(drawn)); });
  });
  var start = parseInt((location.hash || '#1').slice(1), 10);
  fit();
  show(isNaN(start) ? 0 : start - 1);
})();
"""


def lesson_html(
    trace: ModelTrace,
    *,
    text: str | None = None,
    head: int | None = None,
    readouts: Mapping[str, float] | None = None,
    temperature: Any = None,
    theme: str = "slides",
) -> str:
    """The whole deck as one self-contained HTML string (plotly.js inlined; no request leaves the file).

    ``text`` is the text the user typed (shown, with what the model cut struck out); ``readouts`` the
    numbers of ``attention_core.readouts.step_readouts`` for the head; ``temperature`` an
    ``attention_core.lab.HeadTemperature`` for the pitfall slide. ``head`` defaults to ``trace.head``.
    """
    slides, figures = build_slides(trace, text=text, head=head, readouts=readouts, temperature=temperature, theme=theme)
    charts = _Charts()
    charts.figures = figures
    total = len(slides)
    sections = "\n".join(
        f'<section id="slide-{i + 1}" data-key="{s.key}" aria-label="slide {i + 1} of {total}">'
        f"<h2>{s.title}</h2>{s.body}"
        f'<aside class="notes"><b>Notes.</b> {_e(s.notes)}</aside><div class="counter">{i + 1} / {total}</div></section>'
        for i, s in enumerate(slides)
    )
    h = trace.head if head is None else head
    title = f"Attention lesson: {trace.facts.name}, layer {trace.layer}, head {h}"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f"<title>{_e(title)}</title><style>{STYLE}</style>"
        f"<script>{plotly.offline.get_plotlyjs()}</script></head>\n"
        f'<body><div class="deck">{sections}</div>'
        '<div id="nav"><button id="prev" title="previous (←)">←</button>'
        '<button id="notes" title="speaker notes (n)">notes</button>'
        '<button id="next" title="next (→)">→</button></div>\n'
        f"{charts.scripts()}\n<script>{SCRIPT}</script></body></html>\n"
    )


def slide_count(page: str) -> int:
    """How many ``<section>`` slides a deck's HTML holds."""
    return page.count("<section ")


def print_pdf(html_path: str | Path, pdf_path: str | Path, *, browser: str | None = None) -> str | None:
    """Print ``html_path`` to ``pdf_path`` with headless Chromium; None when done, else a message why not."""
    browser = browser or find_browser()
    if browser is None:
        return "lesson.pdf skipped: no Chromium/Chrome found (apt-get install -y chromium, or set BROWSER_PATH)."
    pdf_path = Path(pdf_path).resolve()
    with tempfile.TemporaryDirectory(prefix="attention-lens-chromium-") as profile:
        command = [
            browser,
            *BROWSER_ARGS,
            f"--user-data-dir={profile}",
            f"--print-to-pdf={pdf_path}",
            Path(html_path).resolve().as_uri(),
        ]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=PDF_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"lesson.pdf failed: {type(error).__name__}: {error}"
    if not pdf_path.exists() or pdf_path.stat().st_size == 0:
        tail = (done.stderr or "").strip().splitlines()[-3:]
        return f"lesson.pdf failed: the browser exited with {done.returncode}. " + " ".join(tail)
    return None


def write_lesson(
    trace: ModelTrace,
    out_dir: str | Path,
    *,
    pdf: bool = True,
    text: str | None = None,
    head: int | None = None,
    readouts: Mapping[str, float] | None = None,
    temperature: Any = None,
    theme: str = "slides",
) -> LessonFiles:
    """Write ``out_dir/lesson.html`` and (``pdf=True`` and a browser) ``out_dir/lesson.pdf``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    page = lesson_html(trace, text=text, head=head, readouts=readouts, temperature=temperature, theme=theme)
    html_path = out / "lesson.html"
    html_path.write_text(page, encoding="utf-8")
    slides = slide_count(page)
    if not pdf:
        return LessonFiles(html_path, None, slides)
    pdf_path = out / "lesson.pdf"
    message = print_pdf(html_path, pdf_path)
    return LessonFiles(html_path, None if message else pdf_path, slides, message)


def lesson_problem(trace: ModelTrace | None) -> str | None:
    """A plain sentence when no deck can be built from ``trace`` (no trace, no tokens), else None."""
    if trace is None or not len(trace.tokens):
        return "No tokens to build a lesson from: type a sentence first."
    return None
