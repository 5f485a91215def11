"""Placing a figure with its downloads, the same way in every view.

PNG comes from the plotly modebar (camera icon) in the browser; SVG, a slide-sized PNG and the CSV of
the numbers are made only when their button is clicked (deferred), so reruns stay fast.
"""

from __future__ import annotations

import csv
import io

import numpy as np
import streamlit as st

from viz.export import figure_image
from viz.theme import apply_theme

PLOT_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}}


def csv_bytes(matrix: np.ndarray, rows, cols) -> bytes:
    """A labelled matrix as CSV (token labels as plain text; no spreadsheet formulas)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["", *(_safe(c) for c in cols)])
    for label, row in zip(rows, np.asarray(matrix), strict=True):
        writer.writerow([_safe(label), *(f"{float(v):.9g}" for v in row)])
    return buffer.getvalue().encode("utf-8")


def _safe(text) -> str:
    text = str(text)
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def _image(fig, fmt: str):
    def make() -> bytes:
        try:
            return figure_image(apply_theme(fig, "slides"), fmt)
        except Exception as err:  # no browser, kaleido failure: a readable file, never a crash
            return f"Could not render {fmt.upper()}: {err}".encode()

    return make


def figure(fig, key: str, data=None, *, caption: str | None = None) -> None:
    """Show ``fig``; offer SVG / PNG (slides) / CSV of ``data`` = (matrix, row_labels, col_labels)."""
    st.plotly_chart(fig, width="stretch", theme=None, config=PLOT_CONFIG, key=f"fig_{key}")
    if caption:
        st.caption(caption)
    cols = st.columns([1, 1, 1, 3])
    cols[0].download_button(
        "SVG",
        _image(fig, "svg"),
        file_name=f"{key}.svg",
        mime="image/svg+xml",
        key=f"svg_{key}",
        on_click="ignore",
        help="Vector image for slides (rendered on the server by kaleido).",
    )
    cols[1].download_button(
        "PNG",
        _image(fig, "png"),
        file_name=f"{key}.png",
        mime="image/png",
        key=f"png_{key}",
        on_click="ignore",
        help="Slide-sized PNG with the white 'slides' theme.",
    )
    if data is not None:
        cols[2].download_button(
            "CSV",
            lambda: csv_bytes(*data),
            file_name=f"{key}.csv",
            mime="text/csv",
            key=f"csv_{key}",
            on_click="ignore",
            help="The numbers behind this figure.",
        )
