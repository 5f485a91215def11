"""Hover labels said once per row and column: a heatmap's per-cell ``customdata`` that only repeats its row and
column token names, taken out of a figure before it is sent and built again where it is drawn.

Part of what ``ui.plotly_spec.pack`` sends (meta ``grids``); the browser builds the same cells again
(``ui/components/lens_chart/chart.js`` ``labelGrid``), and so does ``ui.plotly_spec.unpack``. No Streamlit.
"""

from __future__ import annotations

import numpy as np


def take_label_grids(spec: dict) -> list:
    """Take out each trace's hover ``customdata`` that only repeats the row or column labels (a heatmap's token
    names per cell, ``viz.matrix_traces``: rows x cols x layers of strings, each layer the same along a row or
    a column) and say it in a few words instead: ``[trace index, rows, cols, [["rows" | "cols", labels], ...]]``.
    The browser (chart.js ``unpack``) and ``unpack`` build exactly the same customdata again; the 12 heads of a
    64-token grid were 1.2 MB of repeated names, now 2 KB."""
    grids = []
    for index, trace in enumerate(spec.get("data") or ()):
        layers = _label_layers(trace.get("customdata")) if isinstance(trace, dict) else None
        if layers is not None:
            rows, cols, _ = np.shape(trace.pop("customdata"))
            grids.append([index, rows, cols, layers])
    return grids


def _label_layers(custom) -> list | None:
    """[["rows" | "cols", labels], ...] when ``custom`` (rows, cols, layers) holds strings only and each layer is
    the same along a row ("rows": one label per row) or along a column; else None."""
    if not isinstance(custom, np.ndarray | list) or not len(custom):
        return None
    cells = np.asarray(custom, dtype=object)
    if cells.ndim != 3 or not all(isinstance(value, str) for value in cells.flat):
        return None
    layers = []
    for layer in np.moveaxis(cells, -1, 0):
        if (layer == layer[:, :1]).all():
            layers.append(["rows", layer[:, 0].tolist()])
        elif (layer == layer[:1, :]).all():
            layers.append(["cols", layer[0, :].tolist()])
        else:
            return None
    return layers


def label_grid(rows: int, cols: int, layers: list) -> list:
    """The customdata ``take_label_grids`` took out, built again: rows x cols x layers of labels."""
    return [
        [[labels[r] if axis == "rows" else labels[c] for axis, labels in layers] for c in range(cols)]
        for r in range(rows)
    ]


def put_label_grids(figure: dict, grids: list) -> None:
    for index, rows, cols, layers in grids:
        figure["data"][index]["customdata"] = label_grid(rows, cols, layers)
