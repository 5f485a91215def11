"""Write a trace's figures and matrices to files for slides: PNG, SVG, HTML, CSV, plus manifest.json.

Static images go through kaleido and a system Chromium (found on PATH or via BROWSER_PATH); one
kaleido server is started per process and reused (~0.3 s per image). Without a browser, PNG and
SVG are skipped with a message saying what to install, and HTML/CSV are still written. HTML works
offline: every page loads one shared ``plotly.min.js`` written next to it, never a CDN.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import io
import json
import os
import platform
import shutil
import tempfile
import zipfile
from collections.abc import Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import plotly
import plotly.graph_objects as go

from .theme import export_size
from .views import VIEWS, figures_for_trace, matrices_for_trace

if TYPE_CHECKING:
    from attention_core.traces import ModelTrace

FORMATS = ("png", "svg", "html", "csv")
IMAGE_FORMATS = ("png", "svg")
BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
PLOTLY_JS = "plotly.min.js"
NO_BROWSER_MESSAGE = (
    "PNG/SVG skipped: no Chromium/Chrome browser found for kaleido. Install one "
    "(Debian/Ubuntu: `apt-get install -y chromium`) or set BROWSER_PATH to a Chrome/Chromium executable. "
    "HTML and CSV were still written."
)

_server_started = False


def parse_formats(formats: str | Iterable[str]) -> tuple[str, ...]:
    """ "png,svg" or ["png", "svg"] -> ("png", "svg"); ValueError for an unknown format."""
    items = formats.split(",") if isinstance(formats, str) else list(formats)
    chosen = tuple(dict.fromkeys(item.strip().lower() for item in items if item.strip()))
    unknown = [item for item in chosen if item not in FORMATS]
    if unknown or not chosen:
        raise ValueError(f"unknown format(s) {unknown or formats!r}; choose from {FORMATS}")
    return chosen


def parse_views(view: str | Iterable[str]) -> tuple[str, ...]:
    """ "all", "heads" or "derivation,query" -> a tuple of view names; ValueError for an unknown view."""
    items = view.split(",") if isinstance(view, str) else list(view)
    chosen: list[str] = []
    for item in (i.strip() for i in items if i.strip()):
        chosen.extend(VIEWS if item == "all" else [item])
    unknown = [item for item in chosen if item not in VIEWS]
    if unknown or not chosen:
        raise ValueError(f"unknown view(s) {unknown or view!r}; choose from {VIEWS} or 'all'")
    return tuple(dict.fromkeys(chosen))


def find_browser() -> str | None:
    """The Chrome/Chromium kaleido will use: BROWSER_PATH if it is set, else the first on PATH."""
    override = os.environ.get("BROWSER_PATH")
    if override:
        return override if Path(override).exists() else None
    for name in BROWSER_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def start_image_server() -> str | None:
    """Start kaleido's sync server once per process. Returns None when ready, else a message."""
    global _server_started
    if _server_started:
        return None
    if find_browser() is None:
        return NO_BROWSER_MESSAGE
    try:
        import kaleido
    except ImportError:
        return "PNG/SVG skipped: kaleido is not installed (pip install kaleido==1.5.0)."
    kaleido.start_sync_server(mathjax=False, silence_warnings=True)
    _server_started = True
    return None


def figure_image(fig: go.Figure, fmt: str, *, theme: str = "slides", scale: float = 1.0) -> bytes:
    """PNG or SVG bytes of ``fig`` at its export size (layout size, else the theme's default)."""
    import kaleido

    message = start_image_server()
    if message:
        raise RuntimeError(message)
    width, height = export_size(fig, theme)
    return kaleido.calc_fig_sync(fig.to_dict(), opts=dict(format=fmt, width=width, height=height, scale=scale))


def matrix_csv(matrix: np.ndarray, row_labels: Sequence[str], col_labels: Sequence[str]) -> str:
    """A labelled matrix as CSV text: the one writer behind every CSV (slides zip and per-figure button).

    A header of column labels, then one labelled row per matrix row. Labels go through ``csv_safe``
    (token text a spreadsheet must never run as a formula); the numbers are written as numbers, in
    the shortest form that reads back to the same value of their dtype (so -0.5 stays -0.5, a
    parseable float, and float32 values are exact).
    """
    values = np.asarray(matrix)
    if values.ndim != 2:
        raise ValueError(f"a CSV needs a 2-D matrix, got shape {values.shape}")
    if not np.issubdtype(values.dtype, np.floating):
        values = values.astype(np.float64)
    if values.shape != (len(row_labels), len(col_labels)):
        raise ValueError(
            f"matrix {values.shape} does not match {len(row_labels)} row and {len(col_labels)} column labels"
        )
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["", *(csv_safe(c) for c in col_labels)])
    for label, row in zip(row_labels, values, strict=True):
        writer.writerow([csv_safe(label), *(str(v) for v in row)])  # numpy's shortest round-trip repr
    return buffer.getvalue()


def write_matrix_csv(path: Path, matrix: np.ndarray, row_labels: Sequence[str], col_labels: Sequence[str]) -> None:
    """``matrix_csv`` written to ``path`` (UTF-8)."""
    Path(path).write_text(matrix_csv(matrix, row_labels, col_labels), encoding="utf-8", newline="")


def csv_safe(label) -> str:
    """A label as a CSV cell that a spreadsheet shows as text, never runs as a formula.

    Text starting with = + - @ (or a tab or carriage return, which OWASP lists too) gets a leading
    apostrophe, the usual guard against CSV formula injection: "=SUM(A1)" is written "'=SUM(A1)".
    A label that is a number (an int or float, not text) is written as it is: it cannot be a formula.
    """
    if isinstance(label, int | float | np.integer | np.floating) and not isinstance(label, bool):
        return str(label)
    text = str(label)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: _jsonable(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float | int | str | bool) or value is None:
        return value
    return str(value)


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def versions() -> dict[str, str | None]:
    """Versions of what drew the figures, for the manifest."""
    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "plotly": plotly.__version__,
        "kaleido": _version("kaleido"),
        "attention-lens": _version("attention-lens"),
        "torch": _version("torch"),
        "transformers": _version("transformers"),
    }


def _collect(
    trace: ModelTrace, views: tuple[str, ...], formats: tuple[str, ...], warnings: list[str], theme: str, **options
) -> tuple[dict[str, go.Figure], dict]:
    """(figures, matrices) of every view by name (matrices only for CSV); a skipped view adds a warning.

    ``options`` (head, query, statistic) go to both ``figures_for_trace`` and ``matrices_for_trace``.
    """
    figures: dict[str, go.Figure] = {}
    matrices: dict = {}
    for name in views:
        figures.update(figures_for_trace(trace, name, theme=theme, flip_queries=False, **options))
        if "csv" in formats:
            matrices.update(matrices_for_trace(trace, name, **options))
        if name == "compare" and trace.model is None:
            warnings.append("compare view skipped: the trace has no real model")
        if name == "rollout" and trace.model_attentions is None:
            warnings.append("rollout view skipped: the trace has no model attentions")
    return figures, matrices


def _write_figures(
    out: Path, figures: dict[str, go.Figure], images: list[str], html: bool, theme: str, scale: float, warnings: list
) -> list[dict]:
    """Each figure as ``<name>.<format>`` (images through kaleido, HTML with a shared plotly.min.js)."""
    files: list[dict] = []

    def record(path: Path, kind: str, name: str) -> None:
        files.append({"file": path.name, "kind": kind, "name": name, "bytes": path.stat().st_size})

    for name, fig in figures.items():
        for fmt in images:
            path = out / f"{name}.{fmt}"
            try:
                path.write_bytes(figure_image(fig, fmt, theme=theme, scale=scale))
            except Exception as error:  # noqa: BLE001 - one failed image must not lose the rest
                warnings.append(f"{path.name} failed: {type(error).__name__}: {error}")
                continue
            record(path, "figure", name)
        if html:
            path = out / f"{name}.html"
            fig.write_html(
                path,
                include_plotlyjs="directory",
                full_html=True,
                config={"displaylogo": False, "responsive": True},
            )
            record(path, "figure", name)
    if html and figures:
        script = out / PLOTLY_JS
        if not script.exists():
            script.write_text(plotly.offline.get_plotlyjs(), encoding="utf-8")
        record(script, "script", "plotly.js")
    return files


def _images_to_draw(formats: tuple[str, ...], warnings: list[str]) -> list[str]:
    """The image formats asked for, or none (with a warning saying what to install) without a browser."""
    images = [fmt for fmt in formats if fmt in IMAGE_FORMATS]
    message = start_image_server() if images else None
    if message:
        warnings.append(message)
        return []
    return images


def _write_matrices(out: Path, matrices: dict) -> list[dict]:
    files = []
    for name, (matrix, rows, cols) in matrices.items():
        path = out / f"{name}.csv"
        write_matrix_csv(path, matrix, rows, cols)
        files.append({"file": path.name, "kind": "matrix", "name": name, "bytes": path.stat().st_size})
    return files


def export_trace(
    trace: ModelTrace,
    out_dir: str | Path,
    formats: str | Iterable[str] = FORMATS,
    *,
    view: str | Iterable[str] = "all",
    theme: str = "slides",
    head: int | None = None,
    query: int | None = None,
    statistic: str | None = None,
    settings: dict | None = None,
    scale: float = 1.0,
    display: dict | None = None,
    extra_figures: dict[str, go.Figure] | None = None,
    extra_matrices: dict | None = None,
) -> dict:
    """Write every figure of ``view`` (and its matrices as CSV) into ``out_dir``; return the manifest.

    Files are named ``<figure>.<format>`` and ``<matrix>.csv`` (names from ``viz.views``); HTML
    pages share ``plotly.min.js`` in the same folder. ``manifest.json`` lists the files, the
    settings, the model facts, the layer/head/query, versions, the date, and any warnings (e.g. no
    browser for PNG/SVG). Figures are drawn with ``theme`` ("slides" by default).
    ``display`` (the app's display options and what they changed) goes into the manifest as is;
    ``extra_figures`` / ``extra_matrices`` (e.g. the maps as shown, head roles) are written beside the rest.
    """
    chosen_formats = parse_formats(formats)
    chosen_views = parse_views(view)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    warnings: list[str] = []
    figures, matrices = _collect(
        trace, chosen_views, chosen_formats, warnings, theme, head=head, query=query, statistic=statistic
    )
    figures.update(extra_figures or {})
    if "csv" in chosen_formats:
        matrices.update(extra_matrices or {})

    browser = find_browser()
    images = _images_to_draw(chosen_formats, warnings)
    files = _write_figures(out, figures, images, "html" in chosen_formats, theme, scale, warnings)
    files += _write_matrices(out, matrices)

    facts = getattr(trace, "facts", None)
    manifest = {
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "views": list(chosen_views),
        "formats": list(chosen_formats),
        "theme": theme,
        "model": _jsonable(facts),
        "text_tokens": list(trace.tokens),
        "layer": trace.layer,
        "head": trace.head if head is None else head,
        "query": query if query is not None else len(trace.tokens) - 1,
        "settings": _jsonable(settings or {}),
        "display": _jsonable(display or {}),
        "replay": _jsonable(getattr(trace, "replay", ())),
        "notices": list(getattr(trace, "notices", ())),
        "departures": list(getattr(trace, "departures", ())),
        "figures": list(figures),
        "matrices": list(matrices),
        "files": files,
        "browser": browser,
        "versions": versions(),
        "warnings": warnings,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False), encoding="utf-8")
    return manifest


def export_zip(
    trace: ModelTrace,
    formats: str | Iterable[str] = FORMATS,
    *,
    view: str | Iterable[str] = "all",
    theme: str = "slides",
    head: int | None = None,
    query: int | None = None,
    statistic: str | None = None,
    settings: dict | None = None,
    **extras,
) -> bytes:
    """``export_trace`` into a temporary folder, returned as the bytes of a zip (for a download button)."""
    with tempfile.TemporaryDirectory(prefix="attention-lens-") as folder:
        export_trace(
            trace,
            folder,
            formats,
            view=view,
            theme=theme,
            head=head,
            query=query,
            statistic=statistic,
            settings=settings,
            **extras,  # display, extra_figures, extra_matrices
        )
        return _zip_folder(Path(folder))


def _zip_folder(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.iterdir()):
            archive.write(path, arcname=path.name)
    return buffer.getvalue()


def figures_zip(
    figures: dict[str, go.Figure],
    matrices: dict,
    formats: str | Iterable[str] = FORMATS,
    *,
    theme: str = "slides",
    manifest: dict | None = None,
) -> bytes:
    """A view's own figures and (matrix, row_labels, col_labels) tables zipped as ``export_zip`` does, with
    ``manifest`` (settings, checks) in manifest.json: for a view a trace alone cannot draw (contributions)."""
    chosen = parse_formats(formats)
    warnings: list[str] = []
    with tempfile.TemporaryDirectory(prefix="attention-lens-") as folder:
        out = Path(folder)
        images = _images_to_draw(chosen, warnings)
        files = _write_figures(out, figures, images, "html" in chosen, theme, 1.0, warnings)
        files += _write_matrices(out, matrices if "csv" in chosen else {})
        record = {
            "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "formats": list(chosen),
            "theme": theme,
            **_jsonable(manifest or {}),
            "figures": list(figures),
            "matrices": list(matrices) if "csv" in chosen else [],
            "files": files,
            "browser": find_browser(),
            "versions": versions(),
            "warnings": warnings,
        }
        (out / "manifest.json").write_text(json.dumps(record, indent=2, ensure_ascii=False), encoding="utf-8")
        return _zip_folder(out)
