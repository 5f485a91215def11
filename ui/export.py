"""The "export for slides" button: a zip of the view's figures (PNG, SVG, HTML) and matrices (CSV)."""

from __future__ import annotations

from dataclasses import asdict

import streamlit as st

from attention_core.traces import ModelTrace
from viz.export import export_zip

from . import compute
from .settings import Settings
from .views.common import image_export_problem


def slides_button(trace: ModelTrace, settings: Settings, views: str) -> None:
    st.divider()

    def make() -> bytes:  # deferred: rendered only when clicked (about half a second per image)
        return export_zip(
            compute.with_replay(trace, settings.request()),  # the manifest records every layer's check
            "png,svg,html,csv",
            view=views,
            theme="slides",
            head=trace.head,
            query=settings.query,
            statistic=settings.statistic,
            settings=asdict(settings.request()),
        )

    st.download_button(
        "⬇ Export this view for slides (PNG, SVG, HTML, CSV as a zip)",
        make,
        file_name=f"attention-lens-{settings.view}-L{trace.layer}H{trace.head}.zip",
        mime="application/zip",
        key="export_zip",
        on_click="ignore",
        help="Every figure of this view in the white 'slides' theme, its numbers as CSV, and a manifest of the settings."
        + (" No Chromium on the server: the zip holds HTML and CSV only." if image_export_problem() else ""),
    )
