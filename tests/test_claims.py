"""Three claims of the article: dot product as similarity, the recurrent bottleneck, permutation symmetry.

References are independent of the code under test: torch's cosine_similarity, coordinates of
hand-placed 2-D vectors, a linear RNN whose Jacobian is a^(n-1) U by hand, torch's own
autograd.functional.jacobian, and a plain softmax attention written out in the test.
"""

from __future__ import annotations

import base64
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from attention_core import lab
from attention_core.bottleneck import first_token_jacobian_norms, measure_bottleneck
from attention_core.similarity import dot_decomposition, toy_pair
from attention_core.symmetry import demo_gaps, key_order_gap, symmetry_gaps
from tests.charts import figure
from viz.bottleneck import hops_figure, survival_figure
from viz.similarity import angle_figure, cosine_scatter_figure, dot_factors_figure

APP = str(Path(__file__).resolve().parents[1] / "app.py")


# ---------------------------------------------------------------- (a) dot product as similarity


def test_cosine_matches_torch_and_dot_is_lengths_times_cosine():
    generator = torch.Generator().manual_seed(1)
    q = torch.randn(5, 8, generator=generator, dtype=torch.float64)
    k = torch.randn(7, 8, generator=generator, dtype=torch.float64)
    parts = dot_decomposition(q.numpy(), k)
    reference = torch.nn.functional.cosine_similarity(q[:, None, :], k[None, :, :], dim=-1).numpy()  # (5, 7)
    np.testing.assert_allclose(parts.cosine, reference, atol=1e-12)
    np.testing.assert_allclose(parts.dot, q.numpy() @ k.numpy().T, atol=1e-12)
    lengths = np.linalg.norm(q.numpy(), axis=1)[:, None] * np.linalg.norm(k.numpy(), axis=1)[None, :]
    np.testing.assert_allclose(parts.dot, lengths * parts.cosine, atol=1e-12)
    np.testing.assert_allclose(np.cos(np.radians(parts.angle_deg)), reference, atol=1e-9)
    row = parts.row(2)
    np.testing.assert_allclose(row["lengths"], lengths[2], atol=1e-12)
    np.testing.assert_allclose(row["dot"], q.numpy()[2] @ k.numpy().T, atol=1e-12)
    with pytest.raises(ValueError):
        parts.row(5)


def test_zero_vector_has_cosine_zero_and_shapes_are_checked():
    q = np.array([[0.0, 0.0], [1.0, 0.0]])
    k = np.array([[0.0, 3.0], [2.0, 0.0]])
    parts = dot_decomposition(q, k)
    assert np.all(np.isfinite(parts.cosine))
    np.testing.assert_allclose(parts.cosine, [[0.0, 0.0], [0.0, 1.0]], atol=1e-15)  # orthogonal -> 0, aligned -> 1
    np.testing.assert_allclose(parts.dot, [[0.0, 0.0], [0.0, 2.0]])
    with pytest.raises(ValueError):
        dot_decomposition(np.ones((2, 3)), np.ones((2, 4)))
    with pytest.raises(ValueError):
        dot_decomposition(np.ones(3), np.ones((2, 3)))


@pytest.mark.parametrize(
    "angle, expected",
    [(0, 1.5 * 2.0), (90, 0.0), (180, -1.5 * 2.0), (60, 1.5 * 2.0 * 0.5)],
)
def test_toy_pair_right_angle_scores_zero_aligned_scores_lengths(angle, expected):
    toy = toy_pair(angle, 1.5, 2.0)
    assert toy.dot == pytest.approx(expected, abs=1e-12)
    assert np.linalg.norm(toy.a) == pytest.approx(1.5) and np.linalg.norm(toy.b) == pytest.approx(2.0)
    assert toy.cosine == pytest.approx(math.cos(math.radians(angle)), abs=1e-12)
    with pytest.raises(ValueError):
        toy_pair(30, 0.0, 1.0)


# ---------------------------------------------------------------- (b) the recurrent bottleneck


def _linear_rnn(decay: float, u: torch.Tensor):
    """h_t = decay * h_{t-1} + U x_t, h_0 = 0: by hand, dh_n/dx_1 = decay^(n-1) U."""

    def run(batch: torch.Tensor) -> torch.Tensor:  # (B, N, D) -> (B, N, H)
        state = torch.zeros(batch.shape[0], u.shape[0], dtype=batch.dtype)
        states = []
        for t in range(batch.shape[1]):
            state = decay * state + batch[:, t] @ u.T
            states.append(state)
        return torch.stack(states, dim=1)

    return run


@pytest.mark.parametrize("decay", [0.5, -0.8, 1.0])
def test_linear_rnn_jacobian_is_a_power_of_the_decay(decay):
    generator = torch.Generator().manual_seed(2)
    u = torch.randn(5, 3, generator=generator, dtype=torch.float64)  # H = 5, D = 3
    x = torch.randn(12, 3, generator=generator, dtype=torch.float64)
    norms = first_token_jacobian_norms(_linear_rnn(decay, u), x)
    n = np.arange(1, 13)
    expected = np.abs(decay) ** (n - 1) * torch.linalg.norm(u).item()
    np.testing.assert_allclose(norms, expected, rtol=1e-12)


def test_jacobian_norms_match_torch_autograd_jacobian_for_a_gru():
    torch.manual_seed(3)
    gru = torch.nn.GRU(4, 6, batch_first=True).double()
    x = torch.randn(9, 4, dtype=torch.float64)

    def states_from_first(first: torch.Tensor) -> torch.Tensor:  # (D,) -> (N, H)
        return gru(torch.cat([first[None], x[1:]])[None])[0][0]

    full = torch.autograd.functional.jacobian(states_from_first, x[0])  # (N, H, D)
    reference = full.flatten(1).norm(dim=-1).numpy()
    np.testing.assert_allclose(first_token_jacobian_norms(lambda b: gru(b)[0], x), reference, rtol=1e-10)


def test_uniform_attention_reaches_the_first_token_in_one_hop():
    """Zero queries: every score 0, alpha_{n,1} = 1/n, so do_n/dx_1 = W^V^T / n and n * norm is constant."""
    generator = torch.Generator().manual_seed(4)
    w_v = torch.randn(3, 4, generator=generator, dtype=torch.float64)

    def attend(batch: torch.Tensor) -> torch.Tensor:
        steps = batch.shape[1]
        weights = torch.tril(torch.ones(steps, steps, dtype=batch.dtype))
        weights = weights / weights.sum(dim=-1, keepdim=True)  # (N, N) causal uniform
        return weights @ (batch @ w_v)  # (B, N, Ev)

    x = torch.randn(20, 3, generator=generator, dtype=torch.float64)
    norms = first_token_jacobian_norms(attend, x)
    np.testing.assert_allclose(norms * np.arange(1, 21), torch.linalg.norm(w_v).item(), rtol=1e-12)


def test_measured_bottleneck_recurrent_decays_attention_direct_path_stays():
    result = measure_bottleneck(24, 8, seed=0)
    survival = result.survival
    assert set(survival) == {"RNN (tanh)", "GRU", "attention", "attention, direct path ÷ α(n,1)"}
    for name in ("RNN (tanh)", "GRU"):
        assert survival[name][0] == pytest.approx(1.0)
        assert survival[name][-1] < 1e-3, name  # measured: a default-initialised net forgets geometrically
    np.testing.assert_allclose(survival["attention, direct path ÷ α(n,1)"], 1.0, rtol=1e-9)
    np.testing.assert_allclose(result.first_weight[0], 1.0)  # position 1 reads only itself
    assert np.all((result.first_weight > 0) & (result.first_weight <= 1))
    np.testing.assert_array_equal(result.hops["recurrent"], np.arange(24))
    np.testing.assert_array_equal(result.hops["attention"], [0] + [1] * 23)
    with pytest.raises(ValueError):
        measure_bottleneck(0, 8)


# ---------------------------------------------------------------- (c) equivariance and invariance


def _plain_attention(x: torch.Tensor, w: tuple[torch.Tensor, ...], position: torch.Tensor | None = None) -> np.ndarray:
    if position is not None:
        x = x + position
    q, k, v = (x @ m for m in w)
    return (torch.softmax(q @ k.T / math.sqrt(q.shape[-1]), dim=-1) @ v).numpy()


def test_rows_are_equivariant_pooled_output_is_invariant():
    generator = torch.Generator().manual_seed(5)
    x = torch.randn(6, 4, generator=generator, dtype=torch.float64)
    w = tuple(torch.randn(4, 4, generator=generator, dtype=torch.float64) for _ in range(3))
    order = [3, 0, 5, 1, 4, 2]
    gaps = symmetry_gaps(_plain_attention(x, w), _plain_attention(x[order], w), order)
    assert gaps.rows_moved < 1e-12 and gaps.equivariant
    assert gaps.pooled < 1e-12 and gaps.pooled_invariant
    assert gaps.rows_unchanged > 1e-2 and not gaps.rows_invariant
    position = torch.randn(6, 4, generator=generator, dtype=torch.float64)  # attached after shuffling
    broken = symmetry_gaps(_plain_attention(x, w, position), _plain_attention(x[order], w, position), order)
    assert broken.rows_moved > 1e-3 and broken.pooled > 1e-3
    with pytest.raises(ValueError):
        symmetry_gaps(np.zeros((3, 2)), np.zeros((3, 2)), [0, 0, 1])


def test_lab_demo_gaps_without_and_with_positions():
    embeddings = torch.randn(7, 32, generator=torch.Generator().manual_seed(6))
    order = lab.shuffled_order(7, 0)
    plain = demo_gaps(lab.permutation_demo(embeddings, "none", order))
    assert plain.equivariant and plain.pooled_invariant and not plain.rows_invariant
    sinusoidal = demo_gaps(lab.permutation_demo(embeddings, "sinusoidal", order))
    assert not sinusoidal.equivariant and not sinusoidal.pooled_invariant


def test_one_query_output_ignores_key_order_when_the_mask_moves_with_the_keys():
    generator = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(5, 3, generator=generator, dtype=torch.float64).numpy() for _ in range(3))
    causal = np.tril(np.ones((5, 5), dtype=bool))
    order = [4, 2, 0, 3, 1]
    assert key_order_gap(q, k, v, order, mask=causal) < 1e-12
    assert key_order_gap(q, k, v, order) < 1e-12
    # The reference output, by hand, with the mask NOT moved: the keys a query may read change.
    scores = np.where(causal, q @ k[order].T / math.sqrt(3), -np.inf)
    wrong = np.exp(scores - scores.max(1, keepdims=True))
    wrong = (wrong / wrong.sum(1, keepdims=True)) @ v[order]
    right = np.exp(np.where(causal, q @ k.T / math.sqrt(3), -np.inf))
    right = (right / right.sum(1, keepdims=True)) @ v
    assert np.abs(wrong - right).max() > 1e-3  # so moving the mask columns is what the gap relies on
    with pytest.raises(ValueError):
        key_order_gap(q, k, v, [0, 1, 2])


# ---------------------------------------------------------------- figures


def test_dot_factors_figure_rows_multiply_and_labels_are_escaped():
    dot, cosine = np.array([2.0, -1.0, 0.0]), np.array([0.5, -0.25, 0.0])
    key_norms = np.array([2.0, 2.0, 3.0])
    fig = dot_factors_figure(dot, 2.0, key_norms, cosine, ["a", "<b>", "c"], key=1, allowed=[True, False, True])
    assert [t.name for t in fig.data] == ["q·k", "|q||k|", "cos θ"]
    np.testing.assert_allclose(fig.data[1].y, [4.0, 4.0, 6.0])
    np.testing.assert_allclose(np.asarray(fig.data[1].y) * np.asarray(fig.data[2].y), fig.data[0].y)
    assert fig.data[0].marker.color[1] != fig.data[0].marker.color[0]  # blocked key greyed
    assert fig.data[0].marker.line.width[1] > 0 and fig.data[0].marker.line.width[0] == 0
    ticks = fig.layout.xaxis3.ticktext
    assert "&lt;b&gt;" in ticks and "<b>" not in ticks
    with pytest.raises(ValueError):
        dot_factors_figure(dot, 2.0, key_norms[:2], cosine)
    with pytest.raises(ValueError):
        dot_factors_figure(dot, 2.0, key_norms, cosine, ["a", "b"])
    with pytest.raises(ValueError):
        dot_factors_figure(dot, 2.0, key_norms, cosine, key=3)


def test_cosine_scatter_and_angle_figures():
    dot, cosine = np.arange(6.0).reshape(2, 3), np.linspace(-1, 1, 6).reshape(2, 3)
    fig = cosine_scatter_figure(
        dot, cosine, query=1, key_tokens=["x", "y", "<z"], allowed=np.array([[1, 1, 0], [1, 1, 1]])
    )
    assert len(fig.data) == 2 and len(fig.data[0].x) == 5 and len(fig.data[1].x) == 3
    np.testing.assert_allclose(fig.data[1].y, dot[1])
    assert all("<z" not in c for c in fig.data[1].customdata)
    with pytest.raises(ValueError):
        cosine_scatter_figure(dot, cosine[:, :2])
    toy = toy_pair(90, 1.0, 1.0)
    fig = angle_figure(toy.a, toy.b)
    assert "a·b = 0.000" in fig.layout.title.text and "θ = 90°" in fig.layout.title.text
    assert [t.name for t in fig.data] == ["a", "b", "projection of b on a"]
    with pytest.raises(ValueError):
        angle_figure([0.0, 0.0], [1.0, 0.0])
    with pytest.raises(ValueError):
        angle_figure([1.0, 0.0, 0.0], [1.0, 0.0])


def test_survival_and_hops_figures():
    n = np.arange(1, 6.0)
    fig = survival_figure(n, {"RNN": 0.5 ** (n - 1), "attention": np.ones(5)}, mark=3, theme="slides")
    assert [t.name for t in fig.data] == ["RNN", "attention"]
    assert fig.layout.yaxis.type == "log"
    np.testing.assert_allclose(fig.data[0].y, 0.5 ** (n - 1))
    assert fig.layout.meta["theme"] == "slides"
    with pytest.raises(ValueError):
        survival_figure(n, {"bad": -np.ones(5)})
    with pytest.raises(ValueError):
        survival_figure(n, {"short": np.ones(4)})
    with pytest.raises(ValueError):
        survival_figure(n, {})
    fig = hops_figure(n, {"recurrent": n - 1, "attention": np.minimum(1, n - 1)})
    np.testing.assert_allclose(fig.data[0].y, n - 1)


# ---------------------------------------------------------------- the app


def _decode(value) -> np.ndarray:
    if isinstance(value, dict) and "bdata" in value:
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"])).astype(float)
    return np.asarray(value, dtype=float)


def _figure(at: AppTest, key: str) -> dict:
    return figure(at, key)


def _ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def test_pitfalls_view_draws_the_three_claims():
    at = AppTest.from_file(APP, default_timeout=240)
    at.session_state["text"] = "The cat sat on the mat."
    at.session_state["view"] = "pitfalls"
    at.session_state["pitfall"] = "order"  # the permutation demo the third claim refers to
    _ok(at.run())
    titles = [s.value for s in at.subheader]
    for expected in ("dot product", "bottleneck", "Permutation"):
        assert any(expected in t for t in titles), titles
    bars = _figure(at, "fig_claims_dot")["data"]
    dot, lengths, cosine = (_decode(b["y"]) for b in bars)
    np.testing.assert_allclose(lengths * cosine, dot, rtol=1e-6, atol=1e-9)
    assert np.all(np.abs(cosine) <= 1 + 1e-12)
    curves = {t["name"]: _decode(t["y"]) for t in _figure(at, "fig_claims_bottleneck")["data"]}
    assert curves["RNN (tanh)"][-1] < 1e-3 < curves["attention, direct path ÷ α(n,1)"][-1]
    table = next(m.value for m in at.markdown if "| none |" in m.value)
    cells = [float(c) for c in table.split("| none |")[1].split("\n")[0].strip(" |").split("|")]
    assert cells[0] > 1e-3 and cells[1] < 1e-9 and cells[2] < 1e-9  # rows move; rows-moved and pooled gaps ~0

    at.slider(key="claims_angle").set_value(90)
    _ok(at.run())
    assert "a·b = 0.000" in _figure(at, "fig_claims_angle")["layout"]["title"]["text"]
    at.selectbox(key="claims_query").set_value(2)
    _ok(at.run())
    said = next(m.value for m in at.markdown if "This head's real vectors" in m.value)
    assert "q·k =" in said and "cos θ" in said
