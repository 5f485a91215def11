"""Positional encodings as pictures: the table itself, and how similar positions are to each other."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .checks import as_matrix
from .heatmaps import matrix_heatmap


def position_similarity(table) -> np.ndarray:
    """(n, n) cosine similarity of the rows of a positional table (n, d); a zero row gives 0."""
    table = as_matrix("table", table)
    norms = np.linalg.norm(table, axis=1)  # (n,)
    unit = table / np.where(norms > 0, norms, 1.0)[:, None]  # (n, d) unit rows (zero rows stay zero)
    return unit @ unit.T  # (n, n)


def positional_heatmap(
    table, *, name: str = "sinusoidal", title: str | None = None, theme: str = "screen"
) -> go.Figure:
    """The encoding table (n positions, d dims) added to X: rows = positions top to bottom."""
    table = as_matrix("table", table)
    n, d = table.shape
    return matrix_heatmap(
        table,
        None,
        None,
        title=title if title is not None else f"Positional encoding: {name}   ({n} positions × {d} dims)",
        row_title="position",
        col_title="dimension",
        scale="diverging",
        show_values=False,
        value_name="value",
        theme=theme,
    )


def position_similarity_figure(
    table, *, name: str = "sinusoidal", title: str | None = None, theme: str = "screen"
) -> go.Figure:
    """Cosine similarity of every position's encoding to every other (n, n), scale -1..1."""
    similarity = position_similarity(table)
    return matrix_heatmap(
        similarity,
        None,
        None,
        title=title if title is not None else f"Cosine similarity between positions: {name}",
        row_title="position",
        col_title="position",
        scale="diverging",
        zmin=-1.0,
        zmax=1.0,
        show_values=False,
        value_name="cosine",
        theme=theme,
    )
