"""The KV-cache step-through in the pitfalls lab: the figure and the app on a decoder and an encoder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attention_core.kvcache_model import kv_cache_decode
from attention_core.pretrained import load_model
from tests.tiny_models import build_tiny_model
from ui.store import Store
from viz.kvcache import cached_labels, kv_cache_figure

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
