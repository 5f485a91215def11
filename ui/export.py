"""The "export for slides" button: a zip of the view's figures (PNG, SVG, HTML) and matrices (CSV)."""

from __future__ import annotations

from dataclasses import asdict

import streamlit as st

from attention_core import lab
from attention_core.readouts import step_readouts
from attention_core.traces import ModelTrace
from viz.export import export_zip
from viz.lesson import lesson_html, lesson_problem

from . import compute, display
from .settings import Settings
from .text import plain
from .views.common import current, guarded, image_export_problem

# A download button's callable lives until the next script run has ended; one that held the trace
# kept it alive while a recompute built its replacement (about 160 MB at SmolLM2's 1,024 tokens), so the
# callables below look the trace up from the settings when clicked (a cache hit: the same trace).


def slides_button(trace: ModelTrace, settings: Settings, views: str, suffix: str = "") -> None:
    """``suffix``: of the two buttons' keys, one per view (app.py keeps several views in the page at once)."""
    st.divider()
    left, right = st.columns(2)

    def make() -> bytes:  # deferred: rendered only when clicked (about half a second per image)
        trace = compute.trace_for(settings.request())  # looked up when clicked (see the comment above slides_button)
        return export_zip(
            compute.with_replay(trace, settings.request()),  # the manifest records every layer's check
            "png,svg,html,csv",
            view=views,
            theme="slides",
            head=trace.head,
            query=settings.query,
            statistic=settings.statistic,
            settings=asdict(settings.request()),
            **display.export_extras(trace, settings, views),  # display options, maps as shown, head roles
        )

    left.download_button(
        "⬇ Export this view for slides (PNG, SVG, HTML, CSV as a zip)",
        make,
        file_name=f"attention-lens-{settings.view}-L{trace.layer}H{trace.head}.zip",
        mime="application/zip",
        key="export_zip" + suffix,
        on_click="ignore",
        help="Every figure of this view in the white 'slides' theme, its numbers as CSV, and a manifest of the settings."
        + (" No Chromium on the server: the zip holds HTML and CSV only." if image_export_problem() else ""),
    )
    with right:
        lesson_button(trace, settings, suffix)


def lesson_button(trace: ModelTrace, settings: Settings, suffix: str = "") -> None:
    """The lesson deck (``viz.lesson``): one offline HTML file walking this sentence, layer and head."""
    problem = lesson_problem(trace)
    if problem:
        st.caption(plain(problem))
        return

    def make() -> bytes:  # deferred like the zip: built only when clicked
        trace = compute.trace_for(settings.request())  # looked up when clicked (see the comment above slides_button)
        full = compute.with_replay(trace, settings.request())  # the model-check slide lists every layer
        head = full.core.head(full.head)
        return lesson_html(
            full,
            text=settings.text,
            readouts=step_readouts(head),
            temperature=lab.head_temperature_curve(head) if head.mask.any() else None,
        ).encode("utf-8")

    st.download_button(
        "⬇ Lesson deck (offline HTML)",
        make,
        file_name=f"attention-lens-lesson-L{trace.layer}H{trace.head}.html",
        mime="text/html",
        key="export_lesson" + suffix,
        on_click="ignore",
        help="One self-contained page, one slide per step on this sentence (arrow keys to move, n for speaker "
        "notes); print it for a PDF. `python -m viz lesson` writes the PDF too.",
    )


SLIDES_KEY = "lens-slides-"  # + the view: the fragment of its "export for slides" buttons


def slides_fragment(view: str, views: str):
    """The fragment of ``view``'s slides buttons (``views``: what its zip holds), drawn after the view by
    app.py. A fragment of its own: the scaling's partial run (app.py ``_control_changed``) draws it again, for the
    settings as they are now (the zip is made when clicked, from the settings the buttons were drawn with)."""

    def slides(model: str, text: str) -> None:
        with guarded():  # a fragment's own rerun is not inside the app's guard
            trace, settings = current(model, text, view)  # (its buttons make the zip from the settings)
            slides_button(trace, settings, views, suffix=f"_{view}")

    slides.__qualname__ = f"slides_{view}"
    return st.fragment(key=SLIDES_KEY + view)(slides)
