"""What step 2 of the derivation shows is what the model computes: Q = XW^Q + b^Q, then RoPE(Q).

The shown Q, K, V are recomputed from the exported CSV files alone (x, w_*, b_*, *_before_rotary)
with numpy, and the rotation from the standard RoPE formula (rotate_half convention, base from the
model's config), independently of the app's code. Families: BERT (biases, no rotation), Qwen2
(biases and rotation, grouped-query), Llama (rotation, no biases), and the bundled MiniLM.
"""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from attention_core.pipeline import run_trace
from attention_core.request import TraceRequest
from tests.tiny_models import build_tiny_model
from viz.export import export_trace
from viz.views import figures_for_trace

TEXT = "the cat sat on the mat and the dog sat too"


def read_matrix(path) -> np.ndarray:
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    return np.array([[float(v) for v in row[1:]] for row in rows[1:]], dtype=np.float64)  # drop labels


def rope(x: np.ndarray, base: float) -> np.ndarray:
    """(L, E) rotated by position m: x cos(m θ) + rotate_half(x) sin(m θ), θ_d = base^(-2d/E)."""
    length, dim = x.shape
    inv_freq = 1.0 / base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)  # (E/2,)
    angles = np.arange(length, dtype=np.float64)[:, None] * inv_freq[None, :]  # (L, E/2)
    cos, sin = np.cos(np.concatenate([angles, angles], 1)), np.sin(np.concatenate([angles, angles], 1))  # (L, E)
    half = dim // 2
    rotated_half = np.concatenate([-x[:, half:], x[:, :half]], axis=1)  # (L, E)
    return x * cos + rotated_half * sin


def rope_base(folder) -> float:
    config = json.loads((folder / "config.json").read_text())
    parameters = config.get("rope_parameters") or {}
    return float(parameters.get("rope_theta", config.get("rope_theta", 10000.0)))


def check_export(trace, out, *, bias: bool, rotary: bool, base: float = 10000.0) -> None:
    export_trace(trace, out, "csv", view="derivation", theme="screen")
    x = read_matrix(out / "x.csv")  # (L, D)
    assert (out / "b_q.csv").exists() == bias
    assert (out / "q_before_rotary.csv").exists() == rotary
    for letter in "qkv":
        linear = x @ read_matrix(out / f"w_{letter}.csv")  # (L, E)
        if bias:
            linear = linear + read_matrix(out / f"b_{letter}.csv")  # (1, E) broadcast over tokens
        shown = read_matrix(out / f"{letter}.csv")
        if rotary and letter != "v":
            before = read_matrix(out / f"{letter}_before_rotary.csv")
            assert np.abs(linear - before).max() < 1e-5, letter
            linear = rope(before, base)
        assert np.abs(linear - shown).max() < 1e-5, letter
    names = {k: figures_for_trace(trace, "derivation", only=(k,))[k].layout.title.text for k in ("q", "k", "v")}
    assert ("+ b<sup>Q</sup>" in names["q"]) == bias
    assert ("RoPE" in names["q"]) == rotary and ("RoPE" in names["k"]) == rotary
    assert "RoPE" not in names["v"]


@pytest.mark.parametrize("family, bias, rotary", [("bert", True, False), ("qwen2", True, True), ("llama", False, True)])
def test_shown_projections_follow_from_the_exported_numbers(tmp_path, family, bias, rotary):
    folder = build_tiny_model(family, tmp_path / family)
    trace = run_trace(TraceRequest(model=str(folder), text=TEXT, layer=1, head=3))
    check_export(trace, tmp_path / "out", bias=bias, rotary=rotary, base=rope_base(folder))


def test_minilm_layer_2_projection_includes_its_bias(tmp_path):
    trace = run_trace(TraceRequest(model="minilm", text="The cat sat on the mat because it was tired.", layer=2))
    check_export(trace, tmp_path / "out", bias=True, rotary=False)


def test_scratch_rotary_shows_the_rotation_as_its_own_step(tmp_path):
    folder = build_tiny_model("bert", tmp_path / "bert")
    request = TraceRequest(model=str(folder), text=TEXT, source="scratch", encoding="rotary", d_model=16, d_k=8)
    check_export(run_trace(request), tmp_path / "out", bias=False, rotary=True)
