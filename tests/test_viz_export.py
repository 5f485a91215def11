"""The shared path: figures and matrices for a ModelTrace, the export, the zip, the CLI wiring."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import types
import zipfile
from dataclasses import dataclass, replace

import numpy as np
import pytest

from attention_core.traces import LayerTrace, ModelFacts, ModelTrace, ReplayDiff
from viz import export as export_module
from viz.__main__ import load_settings, main
from viz.export import export_trace, export_zip, find_browser, parse_formats, parse_views
from viz.views import VIEWS, figures_for_trace, matrices_for_trace

TOKENS = ("The", " cat", "<b>", " the", " cat", "\n")
HAVE_BROWSER = find_browser() is not None
NO_BROWSER = "no Chromium/Chrome found (apt-get install -y chromium, or set BROWSER_PATH): PNG/SVG cannot be rendered"


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - np.max(np.where(np.isfinite(x), x, -np.inf), axis=-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def make_layer(x: np.ndarray, rng: np.random.Generator, heads: int = 3, d_head: int = 4) -> LayerTrace:
    """Every step of a causal multi-head layer in numpy, from X (L, D)."""
    length, d_model = x.shape
    w_q, w_k, w_v = (rng.normal(size=(heads, d_model, d_head)) / np.sqrt(d_model) for _ in range(3))
    q = np.einsum("ld,hde->hle", x, w_q)  # (H, L, E)
    k = np.einsum("ld,hde->hle", x, w_k)
    v = np.einsum("ld,hde->hle", x, w_v)
    scores = q @ k.transpose(0, 2, 1)  # (H, L, L)
    scale = 1 / np.sqrt(d_head)
    mask = np.tril(np.ones((length, length), dtype=bool))
    masked = np.where(mask, scores * scale, -np.inf)
    weights = softmax(masked)
    return LayerTrace(
        q=q,
        k=k,
        v=v,
        scores=scores,
        scaled=scores * scale,
        masked=masked,
        weights=weights,
        output=weights @ v,
        mask=mask,
        scale=scale,
        x=x,
        w_q=w_q,
        w_k=w_k,
        w_v=w_v,
    )


def make_trace(*, with_model: bool = True) -> ModelTrace:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(len(TOKENS), 8))
    core = make_layer(x, np.random.default_rng(1))
    model = make_layer(x, np.random.default_rng(1))
    attentions = np.stack([make_layer(rng.normal(size=x.shape), rng).weights for _ in range(2)])  # (2, H, L, L)
    attentions[1] = model.weights
    facts = ModelFacts(
        name="hand-made",
        family="scratch",
        num_layers=2,
        num_heads=3,
        num_kv_heads=3,
        d_model=8,
        d_head=4,
        positional="none",
        causal=True,
        max_positions=64,
        num_parameters=0,
    )
    return ModelTrace(
        tokens=TOKENS,
        token_ids=tuple(range(len(TOKENS))),
        offsets=tuple((i, i + 1) for i in range(len(TOKENS))),
        core=core,
        model=model if with_model else None,
        model_attentions=attentions if with_model else None,
        replay=(ReplayDiff(1, 0.0, 0.0),),
        facts=facts,
        layer=1,
        head=2,
    )


@pytest.fixture(scope="module")
def trace() -> ModelTrace:
    return make_trace()


def test_views_return_the_trace_numbers(trace):
    head = trace.core.head(2)
    figures = figures_for_trace(trace, "derivation")
    assert list(figures) == ["x", "w_q", "w_k", "w_v", "q", "k", "v", "scores", "scaled", "masked", "weights", "output"]
    assert np.array_equal(np.asarray(figures["q"].data[0].z, float), head.q)
    assert np.array_equal(np.asarray(figures["w_v"].data[0].z, float), head.w_v)
    weights = np.asarray(figures["weights"].data[0].z, float)
    assert np.array_equal(weights[head.mask], head.weights[head.mask])
    assert set(figures_for_trace(trace, "compare")) == {"compare"}
    heads = figures_for_trace(trace, "heads", statistic="entropy")
    assert set(heads) == {"head_grid", "head_flip", "overview_entropy"}
    assert len(figures_for_trace(trace, "heads")) == 7
    query = figures_for_trace(trace, "query", query=3)["query"]
    assert np.array_equal(np.asarray(query.data[0].y, float), head.scores[3])
    assert set(figures_for_trace(trace, "lines")) == {"lines"}
    assert set(figures_for_trace(trace, "rollout")) == {"rollout"}
    assert figures_for_trace(make_trace(with_model=False), "compare") == {}
    assert set(figures_for_trace(make_trace(with_model=False), "heads")) >= {"head_grid"}
    with pytest.raises(ValueError, match="unknown view"):
        figures_for_trace(trace, "nope")
    with pytest.raises(ValueError, match="head 7"):
        figures_for_trace(trace, "derivation", head=7)


def test_matrices_for_trace(trace):
    head = trace.core.head(2)
    matrices = matrices_for_trace(trace, "derivation")
    values, rows, cols = matrices["weights"]
    assert np.array_equal(values, head.weights)
    assert rows == ["The", "␣cat", "<b>", "␣the", "␣cat", "\\n"]  # plain text in CSV, not HTML
    query = matrices_for_trace(trace, "query", query=4)
    bars, _, columns = query["query_bars"]
    assert columns == ["score", "scaled", "weight"] and np.array_equal(bars[:, 2], head.weights[4])
    contributions, rows, _ = query["query_contributions"]
    assert rows[-1] == "output" and np.allclose(contributions[-1], head.output[4])
    assert set(matrices_for_trace(trace, "compare")) == {"core_weights", "model_weights", "difference"}


def test_parse_formats_and_views():
    assert parse_formats("png, svg,png") == ("png", "svg")
    assert parse_views("all") == VIEWS
    with pytest.raises(ValueError, match="unknown format"):
        parse_formats("gif")
    with pytest.raises(ValueError, match="unknown view"):
        parse_views("derivation,bogus")


def test_export_writes_html_and_csv_with_a_manifest(trace, tmp_path):
    manifest = export_trace(trace, tmp_path, "html,csv", view="derivation,heads", settings={"text": "x"})
    names = {f["file"] for f in manifest["files"]}
    assert {"weights.html", "weights.csv", "head_grid.html", "overview_entropy.csv", "plotly.min.js"} <= names
    html = (tmp_path / "weights.html").read_text(encoding="utf-8")
    assert 'src="plotly.min.js"' in html and "cdn.plot.ly" not in html
    assert (tmp_path / "plotly.min.js").stat().st_size > 1_000_000
    with open(tmp_path / "weights.csv", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    assert rows[0][1:] == ["The", "␣cat", "<b>", "␣the", "␣cat", "\\n"]
    assert np.allclose(np.array([[float(v) for v in r[1:]] for r in rows[1:]]), trace.core.head(2).weights)
    saved = json.loads((tmp_path / "manifest.json").read_text(encoding="utf-8"))
    assert saved["settings"] == {"text": "x"} and saved["model"]["name"] == "hand-made"
    assert saved["versions"]["plotly"] and saved["created"] and saved["head"] == 2


def test_export_without_a_browser_still_writes_html_and_csv(trace, tmp_path, monkeypatch):
    monkeypatch.setattr(export_module, "_server_started", False)
    monkeypatch.setattr(export_module, "find_browser", lambda: None)
    manifest = export_trace(trace, tmp_path, "png,html,csv", view="compare")
    assert any("apt-get install" in w and "BROWSER_PATH" in w for w in manifest["warnings"])
    assert (tmp_path / "compare.html").exists() and (tmp_path / "core_weights.csv").exists()
    assert not (tmp_path / "compare.png").exists()


@pytest.mark.skipif(not HAVE_BROWSER, reason=NO_BROWSER)
def test_export_writes_png_and_svg(trace, tmp_path):
    manifest = export_trace(trace, tmp_path, "png,svg,csv", view="compare,query")
    assert manifest["warnings"] == []
    for name in ("compare", "query"):
        png = (tmp_path / f"{name}.png").read_bytes()
        assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 20_000
        svg = (tmp_path / f"{name}.svg").read_text(encoding="utf-8")
        assert "<svg" in svg[:500] and len(svg) > 5_000
    assert (tmp_path / "query_contributions.csv").stat().st_size > 0


def test_export_zip_holds_the_files(trace):
    data = export_zip(trace, "html,csv", view="lines")
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        names = set(archive.namelist())
        assert {"lines.html", "lines_weights.csv", "manifest.json", "plotly.min.js"} <= names
        assert json.loads(archive.read("manifest.json"))["views"] == ["lines"]


def test_cli_builds_the_request_and_exports(tmp_path, monkeypatch):
    seen = {}

    @dataclass(frozen=True)
    class TraceRequest:
        text: str = ""
        model: str = "minilm"
        layer: int = 0
        head: int = 0
        mask: str = "model"

    def run_trace(request):
        seen["request"] = request
        return make_trace()

    fake = types.ModuleType("attention_core.pipeline")
    fake.TraceRequest, fake.run_trace = TraceRequest, run_trace
    monkeypatch.setitem(sys.modules, "attention_core.pipeline", fake)
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"mask": "causal", "layer": 5}), encoding="utf-8")
    assert load_settings('{"mask": "none"}') == {"mask": "none"}
    code = main(
        [
            "export",
            "--text",
            "a b",
            "--layer",
            "1",
            "--head",
            "2",
            "--settings",
            str(settings),
            "--out",
            str(tmp_path / "out"),
            "--format",
            "csv",
            "--view",
            "compare",
        ]
    )
    assert code == 0
    assert seen["request"] == TraceRequest(text="a b", model="minilm", layer=1, head=2, mask="causal")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["settings"]["mask"] == "causal" and manifest["formats"] == ["csv"]


def test_viz_never_imports_torch_or_streamlit():
    code = (
        "import sys, viz, viz.export, viz.views, viz.__main__\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'streamlit', 'attention_core')]\n"
        "print(bad); raise SystemExit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


# --- CSV: one writer for the slides zip and the per-figure button, labels guarded against formulas ------

FORMULA_TOKENS = ("=SUM(A1)", "-cmd", "@x", "+1", "plain", "-0.5")  # token text that a spreadsheet could run


def test_csv_safe_guards_text_and_leaves_numbers():
    for text in ("=SUM(A1)", "-cmd", "@x", "+1", "-0.5", "\tx", "\rx"):
        assert export_module.csv_safe(text) == "'" + text  # text: shown as text, never run
    assert export_module.csv_safe("plain") == "plain" and export_module.csv_safe("a=b") == "a=b"
    for number in (-0.5, -3, np.float32(-0.25), np.int64(-2)):
        assert float(export_module.csv_safe(number)) == float(number)  # a number label stays a number


def test_matrix_csv_writes_numbers_that_read_back_exactly():
    values = np.array([[-0.5, 0.1], [np.float32(1) / 3, -1e-8]], dtype=np.float32)
    rows = list(csv.reader(io.StringIO(export_module.matrix_csv(values, ["-cmd", "=x"], ["@a", "b"]))))
    assert rows == [["", "'@a", "b"], ["'-cmd", "-0.5", "0.1"], ["'=x", rows[2][1], rows[2][2]]]
    assert np.array_equal(np.array([[float(v) for v in r[1:]] for r in rows[1:]], dtype=np.float32), values)
    with pytest.raises(ValueError, match="labels"):
        export_module.matrix_csv(values, ["a"], ["b", "c"])


def _cells(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def _check_guarded(name: str, table: list[list[str]]) -> int:
    """Every label cell guarded, every value cell a parseable float; returns how many values were negative."""
    header, body = table[0], table[1:]
    labels = [*header[1:], *(row[0] for row in body)]
    for label in labels:
        assert label[:1] not in ("=", "+", "-", "@"), f"{name}: unguarded label {label!r}"
    negatives = 0
    for row in body:
        for cell in row[1:]:
            value = float(cell)  # a number, not text: -0.5 stays -0.5
            negatives += value < 0 and cell.startswith("-")
    return negatives


def test_every_csv_guards_formula_tokens_in_the_zip_and_per_figure(monkeypatch):
    from ui.views.common import csv_bytes  # the per-figure download button's CSV

    trace = replace(make_trace(), tokens=FORMULA_TOKENS)
    monkeypatch.setattr(export_module, "find_browser", lambda: None)
    data = export_zip(trace, "csv", view="all")
    matrices = {}
    for view in VIEWS:
        matrices.update(matrices_for_trace(trace, view))
    guarded_tokens = {"'" + t for t in FORMULA_TOKENS if t[0] in "=+-@"}
    negatives = 0
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        csv_names = sorted(n for n in archive.namelist() if n.endswith(".csv"))
        assert csv_names == sorted(f"{name}.csv" for name in matrices)  # every matrix, one CSV each
        seen_guarded: set[str] = set()
        for file_name in csv_names:
            text = archive.read(file_name).decode("utf-8")
            table = _cells(text)
            negatives += _check_guarded(file_name, table)
            seen_guarded |= {cell for row in table for cell in row} & guarded_tokens
            per_figure = csv_bytes(*matrices[file_name.removesuffix(".csv")]).decode("utf-8")
            assert per_figure == text, file_name  # the same writer: byte for byte the same CSV
    assert seen_guarded == guarded_tokens  # "'=SUM(A1)", "'-cmd", "'@x", "'+1", "'-0.5" all written guarded
    assert negatives > 0  # negative scores really were written, and as plain numbers
