"""The KV-cache step-through in the pitfalls lab: the figure and the app on a decoder and an encoder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attention_core.kvcache_model import kv_cache_decode
from attention_core.pretrained import load_model
from tests.export_zips import export_buttons, open_zip, read_csv, read_manifest
from tests.tiny_models import build_tiny_model
from ui.store import Store
from viz.kvcache import GROWTH_COLUMNS, cached_labels, kv_cache_figure, kv_cache_zip
from viz.labels import plain_labels

APP = str(Path(__file__).resolve().parents[1] / "app.py")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = build_tiny_model("llama", tmp_path_factory.mktemp("llama") / "llama")
    return kv_cache_decode(load_model(str(folder)), "the cat sat", 4, check_generate=False, time_full=False)


def test_figure_shows_the_row_over_the_cached_keys_and_the_growing_cache(run):
    for step in range(len(run.steps)):
        fig = kv_cache_figure(run, step, 1, 3)
        bars = np.asarray(fig.data[0].y)
        assert np.allclose(bars, run.steps[step].weights[1, 3])  # the core's row, as computed
        assert len(cached_labels(run, step)) == run.steps[step].keys == bars.shape[0]
        assert np.isclose(bars.sum(), 1.0, atol=1e-5)  # a softmax row over every cached key
    growth = np.asarray(fig.data[1].y)
    assert np.all(np.diff(growth) > 0)  # one more position per step
    assert np.allclose(np.asarray(fig.data[2].y) / growth, run.gqa_saving)
    with pytest.raises(ValueError, match="out of range"):
        kv_cache_figure(run, len(run.steps), 0, 0)


def test_slides_zip_holds_the_row_the_growth_and_the_checks(run):
    data = kv_cache_zip(run, 1, 1, 3, "html,csv", kv_steps=4, settings={"model": "tiny"})
    archive = open_zip(data)
    assert set(archive.namelist()) == {
        "kv_cache.html",
        "kv_cache_row.csv",
        "kv_cache_growth.csv",
        "plotly.min.js",
        "manifest.json",
    }
    shown = kv_cache_figure(run, 1, 1, 3)  # the step on screen
    cols, rows, row = read_csv(archive, "kv_cache_row")
    assert cols == ["weight"] and rows == plain_labels(cached_labels(run, 1))
    np.testing.assert_array_equal(row[:, 0].astype(np.float32), run.steps[1].weights[1, 3])  # exact round trip
    np.testing.assert_array_equal(row[:, 0].astype(np.float32), np.asarray(shown.data[0].y, dtype=np.float32))
    cols, rows, growth = read_csv(archive, "kv_cache_growth")
    assert cols == list(GROWTH_COLUMNS) and len(rows) == len(run.steps)
    np.testing.assert_array_equal(growth[:, 0], shown.data[1].x)  # cached positions t
    np.testing.assert_array_equal(growth[:, 1], [s.cache_bytes for s in run.steps])
    np.testing.assert_allclose(growth[:, 1] / 2**20, shown.data[1].y)  # the curve is drawn in MiB
    np.testing.assert_array_equal(growth[:, 2], [s.cache_bytes_one_kv_per_head for s in run.steps])
    np.testing.assert_array_equal(growth[:, 3], [s.diff_cached for s in run.steps])
    np.testing.assert_array_equal(growth[:, 4], [s.diff_full for s in run.steps])  # NaN where not measured
    manifest = read_manifest(archive)  # no NaN in it: what was not measured is null
    assert manifest["views"] == ["pitfalls"] and manifest["section"] == "kvcache"
    assert (manifest["layer"], manifest["head"], manifest["model"]) == (1, 3, run.model)
    assert (manifest["kv_steps"], manifest["kv_step"], manifest["steps"]) == (4, 2, len(run.steps))
    assert manifest["max_diff"]["step_cached"] == run.steps[1].diff_cached
    assert manifest["max_diff"]["run_cached"] == run.worst("cached") < 1e-4
    full = run.worst("full")
    assert manifest["max_diff"]["run_full"] == (None if np.isnan(full) else full)
    assert manifest["generated"] == run.new_text and manifest["settings"] == {"model": "tiny"}
    assert manifest["figures"] == ["kv_cache"] and manifest["matrices"] == ["kv_cache_row", "kv_cache_growth"]
    assert manifest["theme"] == "slides" and not manifest["warnings"]


def test_store_peek_never_computes():
    store = Store(100)
    assert store.peek("k") is None
    store.get("k", lambda: "v", lambda v: 1)
    assert store.peek("k") == "v"


def test_encoder_explains_and_decoder_steps_through():
    at = AppTest.from_file(APP, default_timeout=300)
    at.query_params.update({"text": "The cat sat.", "view": "pitfalls"})
    at.session_state["pitfall"] = "cost"
    at.run()
    assert not at.exception and not at.error
    assert any("KV cache" in i.value and "SmolLM2" in i.value for i in at.info)
    at = AppTest.from_file(APP, default_timeout=300)
    at.query_params.update({"text": "The capital of France is", "view": "pitfalls", "model": "smollm2"})
    at.session_state["pitfall"] = "cost"
    at.session_state["kv_steps"] = 3
    at.run()
    assert not at.exception and not at.error
    at.button(key="kv_go").click()
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("Generated:" in c.value and "cached positions" in c.value for c in at.caption)
    assert len(export_buttons(at)) == 2  # the tiled section's zip and the KV cache's
