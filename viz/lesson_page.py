"""The lesson deck's HTML shell: its charts, style, keyboard script and Content-Security-Policy.

``Charts`` collects the figures a deck draws (each a ``<div class="chart">`` placeholder in a slide and
one inline JSON block); ``deck_page`` puts the slides, plotly.js (inlined once) and those blocks into
one self-contained page that refuses any request outside the file.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

import plotly
import plotly.graph_objects as go

FULL = (1220, 520)  # one figure across the slide
CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src data: blob:; font-src data:; connect-src 'none'"
)


def escape(text: Any) -> str:
    return html.escape(str(text), quote=True)


class Charts:
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


def deck_page(slides: Sequence[Any], figures: list[go.Figure], title: str) -> str:
    """One self-contained HTML page: each slide (``key``, ``title``, ``body``, ``notes``) a ``<section>``."""
    charts = Charts()
    charts.figures = figures
    total = len(slides)
    sections = "\n".join(
        f'<section id="slide-{i + 1}" data-key="{s.key}" aria-label="slide {i + 1} of {total}">'
        f"<h2>{s.title}</h2>{s.body}"
        f'<aside class="notes"><b>Notes.</b> {escape(s.notes)}</aside><div class="counter">{i + 1} / {total}</div></section>'
        for i, s in enumerate(slides)
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f"<title>{escape(title)}</title><style>{STYLE}</style>"
        f"<script>{plotly.offline.get_plotlyjs()}</script></head>\n"
        f'<body><div class="deck">{sections}</div>'
        '<div id="nav"><button id="prev" title="previous (←)">←</button>'
        '<button id="notes" title="speaker notes (n)">notes</button>'
        '<button id="next" title="next (→)">→</button></div>\n'
        f"{charts.scripts()}\n<script>{SCRIPT}</script></body></html>\n"
    )
