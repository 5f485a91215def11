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

The slides are built in ``lesson_slides`` (the derivation's steps) and ``lesson_checks`` (the model
check and the pitfall); the page around them (style, keys, CSP) in ``lesson_page``.

viz never imports attention_core at run time: the numbers that need torch (``readouts`` from
``attention_core.readouts.step_readouts`` and ``temperature`` from ``attention_core.lab.head_temperature_curve``)
are handed in by the caller (``python -m viz lesson``, the app's download button). Without them the
slides say the numbers were not supplied.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import plotly.graph_objects as go

from .export import find_browser
from .lesson_checks import check_slide, pitfall_slide
from .lesson_page import Charts, deck_page
from .lesson_slides import (
    Deck,
    heads_slide,
    masking_slide,
    output_slide,
    projections_slide,
    recap_slide,
    scaling_slide,
    scores_slide,
    sentence_slide,
    softmax_slide,
    x_slide,
)
from .lesson_slides import Slide as Slide
from .views import figures_for_trace

if TYPE_CHECKING:
    from attention_core.traces import ModelTrace

SLIDE_WIDTH, SLIDE_HEIGHT = 1280, 720  # CSS pixels; the PDF page is the same size
PDF_TIMEOUT_S = 180
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
class LessonFiles:
    html: Path
    pdf: Path | None  # None when no browser (or it failed): ``message`` says why
    slides: int
    message: str | None = None


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
    derivation = figures_for_trace(trace, "derivation", head=h, theme=theme)
    deck = Deck(trace, h, trace.core.head(h), list(trace.tokens), derivation, Charts(), readouts, theme)
    slides = [sentence_slide(deck, text)]
    for step in (x_slide, projections_slide, scores_slide, scaling_slide, masking_slide, softmax_slide, output_slide):
        slides.append(step(deck))
    slides += [heads_slide(deck), check_slide(deck), pitfall_slide(deck, temperature), recap_slide(deck)]
    return slides, deck.charts.figures


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
    h = trace.head if head is None else head
    return deck_page(slides, figures, f"Attention lesson: {trace.facts.name}, layer {trace.layer}, head {h}")


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
