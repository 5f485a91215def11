"""The pitfalls lab (attention_core/lab.py and the analysis behind it) against independent references.

References: torch's own scaled_dot_product_attention, hand-written masks and closed-form counts,
boolean matrix powers for reachability, torch's allocator profiler for memory, and numpy formulas
for entropy and positional tables. The last tests drive app.py's pitfalls view through AppTest.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attention_core import analysis, lab, masks
from attention_core.multihead import init_weights
from attention_core.sdpa import scaled_dot_product_attention
from attention_core.traces import HeadTrace


def entropy_np(weights: np.ndarray) -> np.ndarray:
    """(L, S) -> (L,) -sum p ln p in nats, written out in numpy (0 ln 0 = 0)."""
    logs = np.log(np.where(weights > 0, weights, 1.0))
    return -(weights * logs).sum(axis=-1)


def head_from_core(length=13, d_k=16, *, causal=True, bias=None, scale=None, seed=3) -> HeadTrace:
    """A HeadTrace built the way the pipeline builds one: the core's intermediates for one head."""
    generator = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, length, d_k, generator=generator, dtype=torch.float64) * 2 for _ in range(3))
    allowed = masks.causal(length) if causal else masks.full(length)  # (L, S)
    trace = scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=scale, score_bias=bias)
    pick = {name: getattr(trace, name)[0].numpy() for name in ("scores", "scaled", "masked", "weights", "output")}
    pick["score_bias"] = None if bias is None else bias.numpy()  # (L, S) as the pipeline keeps it
    return HeadTrace(q=q[0].numpy(), k=k[0].numpy(), v=v[0].numpy(), mask=allowed.numpy(), scale=trace.scale, **pick)


def sdpa_weights(head: HeadTrace, t: float, bias=None) -> np.ndarray:
    """torch's SDPA at scale 1/t with value = identity, so its output IS the (L, S) weight matrix."""
    q, k = torch.as_tensor(head.q), torch.as_tensor(head.k)
    allowed = torch.as_tensor(head.mask)
    attn_mask = allowed if bias is None else bias.masked_fill(~allowed, float("-inf"))
    eye = torch.eye(k.shape[0], dtype=q.dtype)  # (S, S)
    return F.scaled_dot_product_attention(q[None], k[None], eye[None], attn_mask=attn_mask, scale=1 / t)[0].numpy()


# ---------------------------------------------------------------- item 3: this head's own scores vs temperature


def test_head_curve_at_sqrt_dk_is_the_heads_real_entropy():
    head = head_from_core(length=13, d_k=16, causal=True)
    sweep = lab.head_temperature_curve(head)
    real = entropy_np(head.weights).mean()  # the head's own softmax rows
    assert sweep.sqrt_d_k == 4.0 and sweep.own == pytest.approx(4.0)
    at_sqrt = sweep.curve.entropy[list(sweep.curve.temperature).index(4.0)]
    assert at_sqrt == pytest.approx(real, abs=1e-9)
    assert sweep.own_entropy == pytest.approx(real, abs=1e-9)
    # the softmax over all 13 keys (future included) is a different number: the test can tell them apart
    unmasked = entropy_np(sdpa_weights(head_from_core(length=13, d_k=16, causal=False), 4.0)).mean()
    assert abs(unmasked - real) > 0.05
    # uniform over the allowed keys: row i may see i + 1 keys
    assert sweep.curve.uniform_entropy == pytest.approx(np.log(np.arange(1, 14)).mean())
    assert sweep.curve.uniform_entropy < math.log(13) - 0.5
    assert sweep.marks == {"√d_k": 4.0}


@pytest.mark.parametrize("with_bias", [False, True])
def test_head_curve_matches_torch_sdpa_at_every_temperature(with_bias):
    length = 9
    bias = -0.3 * (torch.arange(length)[:, None] - torch.arange(length)[None, :]).abs().double() if with_bias else None
    head = head_from_core(length=length, d_k=8, causal=True, bias=bias, scale=1.0)  # scaling off: t = 1
    temps = (0.5, 1.0, 3.0, 10.0)
    sweep = lab.head_temperature_curve(head, temps)
    assert sweep.own == 1.0 and set(sweep.marks) == {"√d_k", "this head"}
    for t, entropy, max_weight in zip(
        sweep.curve.temperature, sweep.curve.entropy, sweep.curve.max_weight, strict=True
    ):
        reference = sdpa_weights(head, t, bias)  # (L, S)
        assert entropy == pytest.approx(entropy_np(reference).mean(), abs=1e-9), t
        assert max_weight == pytest.approx(reference.max(axis=-1).mean(), abs=1e-9), t
    assert sweep.own_entropy == pytest.approx(entropy_np(head.weights).mean(), abs=1e-9)
    assert np.all(np.diff(sweep.curve.entropy) > 0)  # hotter softmax, flatter rows


def test_temperature_sweep_by_hand():
    scores = torch.tensor([[0.0, math.log(3.0)], [5.0, -1.0]], dtype=torch.float64)
    allowed = torch.tensor([[True, True], [True, False]])
    curve = analysis.temperature_sweep(scores, [1.0], allowed=allowed)
    # row 0: weights (1/4, 3/4); row 1: one allowed key, weight 1, entropy 0, no gradient
    row0 = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    assert curve.entropy[0] == pytest.approx(row0 / 2)
    assert curve.max_weight[0] == pytest.approx((0.75 + 1.0) / 2)
    assert curve.uniform_entropy == pytest.approx(math.log(2) / 2)
    one_key = analysis.temperature_sweep(scores, [0.5, 2.0], allowed=torch.eye(2, dtype=torch.bool))
    assert np.all(one_key.entropy == 0) and np.all(one_key.grad_norm == 0) and one_key.uniform_entropy == 0
    blocked_row = analysis.temperature_sweep(scores, [1.0], allowed=torch.tensor([[True, True], [False, False]]))
    assert blocked_row.rows == 1 and blocked_row.entropy[0] == pytest.approx(row0)
    with pytest.raises(ValueError, match="positive"):
        analysis.temperature_sweep(scores, [0.0])
    with pytest.raises(ValueError, match="every key is blocked"):
        analysis.temperature_sweep(scores, [1.0], allowed=torch.zeros(2, 2, dtype=torch.bool))


# ---------------------------------------------------------------- item 4: sparse masks and what they reach


def reach_by_matrix_powers(mask: np.ndarray, layers: int) -> np.ndarray:
    """(n, n) bool: query i reaches key j through ``layers`` stacked layers, by boolean matrix powers."""
    step = mask.astype(np.int64)
    reach = step.copy()
    for _ in range(layers - 1):
        reach = ((reach @ step) > 0).astype(np.int64)
    return reach.astype(bool)


@pytest.mark.parametrize("window, stride", [(4, 4), (5, 3), (3, 5), (2, 7), (6, 9), (1, 4)])
def test_sparse_reach_matches_matrix_powers(window, stride):
    n = 40
    mask = np.zeros((n, n), bool)
    for i in range(n):  # written out: the window's keys and the strided keys, both causal
        for j in range(i + 1):
            mask[i, j] = (i - j < window) or ((i - j) % stride == 0)
    assert np.array_equal(lab.local_strided(n, window=window, stride=stride).numpy(), mask)
    reach = lab.sparse_reach(n, window=window, stride=stride)
    earlier = np.tril(np.ones((n, n), bool))
    fraction = [reach_by_matrix_powers(mask, h)[earlier].mean() for h in (1, 2)]
    assert reach.one_layer == pytest.approx(fraction[0]) and reach.two_layers == pytest.approx(fraction[1])
    needed = next((h for h in range(1, n + 1) if reach_by_matrix_powers(mask, h)[earlier].all()), None)
    assert reach.layers_to_all == needed  # window 1: only multiples of the stride, never everything (None)


@pytest.mark.parametrize("window, stride", [(32, 32), (40, 32), (128, 2), (31, 32), (16, 32), (2, 128), (100, 128)])
def test_two_layers_reach_everything_exactly_when_window_covers_stride(window, stride):
    reach = lab.sparse_reach(1024, window=window, stride=stride)
    assert (reach.two_layers == 1.0) == (window >= stride)
    if window < stride:
        assert reach.layers_to_all is None or reach.layers_to_all > 2


def test_sparse_reach_says_when_it_gives_up():
    reach = lab.sparse_reach(512, window=2, stride=128, max_layers=8)
    assert reach.layers_to_all is None  # 1 + 127 window steps would be needed
    with pytest.raises(ValueError, match="window"):
        lab.sparse_reach(64, window=0, stride=4)


def test_sparse_entries_match_closed_forms():
    ns, w, s = (64, 100, 256), 8, 5
    cost = lab.sparse_mask_entries(ns, window=w, stride=s)
    rows = [np.arange(n) for n in ns]
    expected = {
        "full": [n * n for n in ns],
        "causal": [n * (n + 1) // 2 for n in ns],
        f"sliding window {w} (causal)": [int(np.minimum(i + 1, w).sum()) for i in rows],
        f"strided {s} (causal)": [int((i // s + 1).sum()) for i in rows],
        # window keys plus the strided keys at distances a*s >= w
        f"local + strided {w}/{s}": [
            int((np.minimum(i + 1, w) + np.maximum(0, i // s - math.ceil(w / s) + 1)).sum()) for i in rows
        ],
    }
    assert list(cost.entries) == list(expected)
    for name, values in expected.items():
        assert cost.entries[name].tolist() == values, name


def test_mask_patterns_by_hand():
    patterns = lab.mask_patterns(5, window=2, stride=3)

    def drawn(rows):
        return np.array([[c == "x" for c in row] for row in rows])

    assert np.array_equal(patterns["window 2"], drawn(["x....", "xx...", ".xx..", "..xx.", "...xx"]))
    assert np.array_equal(patterns["strided 3"], drawn(["x....", ".x...", "..x..", "x..x.", ".x..x"]))
    assert np.array_equal(patterns["window 2 + strided 3"], drawn(["x....", "xx...", ".xx..", "x.xx.", ".x.xx"]))
    assert np.array_equal(patterns["block 2"], drawn(["xx...", "xx...", "..xx.", "..xx.", "....x"]))
    assert np.array_equal(patterns["causal"], np.tril(np.ones((5, 5), bool)))
    with pytest.raises(ValueError, match="stride"):
        lab.mask_patterns(5, window=2, stride=0)


# ---------------------------------------------------------------- item 7: measured time and memory


def test_allocation_meter_by_hand():
    with analysis.AllocationMeter() as meter:
        a = torch.empty(1000)  # 4000 bytes
        b = torch.ones(500)  # 2000 bytes: 6000 live
        view = b[:10]  # a view: no new memory
        b.add_(1)  # in place: no new memory
        del a  # 2000 live
        c = torch.empty(250)  # 1000 bytes: 3000 live, peak still 6000
    assert meter.peak == 6000 and meter.live == 3000
    del b, view, c


def test_allocation_meter_agrees_with_torch_allocator_profiler():
    from torch.profiler import ProfilerActivity, profile

    q, k, v = (torch.randn(1, 2, 96, 16) for _ in range(3))
    mask = masks.causal(96)
    with analysis.AllocationMeter() as meter:
        trace = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    del trace
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        kept = scaled_dot_product_attention(q, k, v, attn_mask=mask)  # held, as the meter's call was
    del kept
    events = getattr(prof.profiler, "kineto_results", None)
    if events is None:
        pytest.skip("this torch's profiler does not expose its allocation events")
    live = peak = 0
    for event in sorted((e for e in events.events() if e.name() == "[memory]"), key=lambda e: e.start_ns()):
        live += event.nbytes()
        peak = max(peak, live)
    matrix = 2 * 96 * 96 * 4  # one (H, L, S) float32 matrix
    assert meter.peak >= 4 * matrix  # scores, scaled, masked and weights are all held by the trace
    assert meter.peak == peak


def slope(n, values) -> float:
    return float(np.polyfit(np.log(n), np.log(values), 1)[0])


def test_measured_time_and_memory_grow_as_n_squared():
    """Fit log(cost) against log(n) where the n^2 terms dominate: the slope is about 2.

    Time: d_k = 512, so the two (n, n, d_k) matrix products dominate and every matrix stays in cache
    (a size that falls out of cache adds a step that is not attention's n^2). The sizes are timed in
    turns, median of 7, one thread (a shared 2-core machine); a linear (slope 1) or cubic (slope 3)
    quantity falls outside [1.5, 2.5]. Memory: d_k = 8, so the (n, n) matrices dominate the (n, d_k)
    ones; the measurement is exact, so [1.9, 2.1].
    """
    ns = (512, 724, 1024, 1448)
    timed = lab.cost_table(ns, heads=1, d_k=512, repeats=7, threads=1)
    assert 1.5 <= slope(timed.n, timed.seconds) <= 2.5, timed.seconds
    sized = lab.cost_table(ns, heads=1, d_k=8, repeats=1)
    assert 1.9 <= slope(sized.n, sized.peak_bytes) <= 2.1, sized.peak_bytes
    held = 3 * sized.n.astype(float) ** 2 * 4  # scores, scaled, weights: (1, 1, n, n) float32, held by the trace
    assert np.all(sized.peak_bytes >= held) and np.all(sized.peak_bytes <= 2 * held)
    assert "TorchDispatchMode" in sized.memory_method
    assert sized.flops.tolist() == [analysis.attention_cost(n, 8, 1).flops for n in ns]


def test_cost_table_refuses_bad_sizes():
    with pytest.raises(ValueError, match="n"):
        lab.cost_table(())
    with pytest.raises(ValueError, match=r"n\[1\]"):
        lab.cost_table((16, 0))


# ---------------------------------------------------------------- permutation demo and positional tables


def reference_attention(x: torch.Tensor, heads: int, d_k: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Multi-head self-attention through torch's SDPA: merged output (L, H*E) and head 0's weights (L, S)."""
    weights = init_weights(x.shape[-1], d_k, heads, seed=seed, dtype=torch.float64, with_output=False)
    length = x.shape[0]

    def heads_of(w):  # (L, H*E) -> (H, L, E)
        return (x @ w).reshape(length, heads, d_k).transpose(0, 1)

    q, k, v = heads_of(weights.w_q), heads_of(weights.w_k), heads_of(weights.w_v)
    output = F.scaled_dot_product_attention(q, k, v)  # (H, L, E)
    eye = torch.eye(length, dtype=x.dtype)
    head0 = F.scaled_dot_product_attention(q[:1], k[:1], eye[None])[0]  # (L, S) = weights of head 0
    return output.transpose(0, 1).reshape(length, heads * d_k), head0


def test_permutation_demo_without_position_only_moves_rows():
    x = torch.randn(7, 12, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    order = (3, 0, 6, 1, 5, 2, 4)
    demo = lab.permutation_demo(x, "none", order, d_k=4, heads=2, seed=5)
    output, head0 = reference_attention(x, heads=2, d_k=4, seed=5)
    assert np.allclose(demo.output, output.numpy(), atol=1e-12)
    assert np.allclose(demo.weights, head0.numpy(), atol=1e-12)
    shuffled_output, _ = reference_attention(x[list(order)], heads=2, d_k=4, seed=5)
    assert np.allclose(demo.output_shuffled, shuffled_output.numpy(), atol=1e-12)
    assert np.allclose(demo.output_shuffled, demo.output[list(order)], atol=1e-12)  # rows only moved
    assert demo.equivariant and demo.max_difference < 1e-12 and demo.permutation == order


def test_permutation_demo_with_sinusoidal_positions_matches_reference():
    x = torch.randn(6, 8, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    order = (5, 4, 3, 2, 1, 0)
    demo = lab.permutation_demo(x, "sinusoidal", order, d_k=4, heads=2, seed=0)
    pos = np.arange(6)[:, None] / 10000 ** (np.arange(0, 8, 2)[None, :] / 8)  # (n, d/2) p / 10000^(2i/d)
    table = np.zeros((6, 8))
    table[:, 0::2], table[:, 1::2] = np.sin(pos), np.cos(pos)
    table = torch.as_tensor(table)  # (n, d) float64, as the demo computes in float64
    output, _ = reference_attention(x + table, heads=2, d_k=4, seed=0)
    shuffled, _ = reference_attention(x[list(order)] + table, heads=2, d_k=4, seed=0)
    assert np.allclose(demo.output, output.numpy(), atol=1e-10)
    assert np.allclose(demo.output_shuffled, shuffled.numpy(), atol=1e-10)
    moved = np.abs(shuffled.numpy() - output.numpy()[list(order)]).max()
    assert demo.max_difference == pytest.approx(moved, rel=1e-9) and not demo.equivariant


@pytest.mark.parametrize("encoding", ["learned", "rotary", "alibi"])
def test_every_encoding_breaks_the_symmetry(encoding):
    x = torch.randn(6, 8, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    demo = lab.permutation_demo(x, encoding, (1, 0, 3, 2, 5, 4), d_k=4, heads=2)
    assert not demo.equivariant and demo.max_difference > 1e-3


def test_permutation_demo_refuses_bad_input():
    x = torch.zeros(3, 8)
    with pytest.raises(ValueError, match="not a permutation"):
        lab.permutation_demo(x, "none", (0, 0, 1))
    with pytest.raises(ValueError, match="unknown encoding 'spiral'"):
        lab.permutation_demo(x, "spiral", (0, 1, 2))
    with pytest.raises(ValueError, match="unknown encoding"):
        lab.encoding_table("spiral", 4)


def test_shuffled_order_is_a_seeded_permutation_that_moves_something():
    for length in range(2, 12):
        for seed in range(12):
            order = lab.shuffled_order(length, seed)
            assert sorted(order) == list(range(length)) and order != tuple(range(length))
            assert order == lab.shuffled_order(length, seed)
    assert lab.shuffled_order(1, 0) == (0,)


def test_encoding_tables_against_formulas():
    n, d = 10, 6
    pos = np.arange(n)[:, None] / 10000 ** (np.arange(0, d, 2)[None, :] / d)  # (n, d/2)
    sinusoidal = np.zeros((n, d))
    sinusoidal[:, 0::2], sinusoidal[:, 1::2] = np.sin(pos), np.cos(pos)
    assert np.allclose(lab.encoding_table("sinusoidal", n, d), sinusoidal, atol=1e-6)
    assert np.allclose(lab.encoding_table("rotary", n, d), np.cos(np.concatenate([pos, pos], axis=1)), atol=1e-6)
    distance = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])
    assert np.allclose(lab.encoding_table("alibi", n, d), -(2.0**-8) * distance)  # one head: slope 2^-8
    assert lab.encoding_table("learned", n, d).shape == (n, d)
    assert lab.encoding_table("none", n, d) is None


# ---------------------------------------------------------------- through the app: the pitfalls view


@pytest.fixture(scope="module")
def pitfalls_app():
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app.py"), default_timeout=180)
    at.session_state["text"] = "The cat sat on the mat because it was tired."
    return ok(at.run())


def show(at, pitfall: str):
    """Open the pitfalls view at ``pitfall`` (each widget exists only once its view has run)."""
    at.segmented_control(key="view").set_value("pitfalls")
    ok(at.run())
    at.radio(key="pitfall").set_value(pitfall)
    return ok(at.run())


def ok(at):
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def spec(at, key: str) -> dict:
    from tests.charts import figure

    return figure(at, f"fig_{key}")


def decode(value) -> np.ndarray:
    import base64

    if isinstance(value, dict) and "bdata" in value:
        array = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        if value.get("shape"):
            array = array.reshape([int(s) for s in str(value["shape"]).split(",")])
        return array.astype(float)
    return np.array(value, dtype=float)


def test_app_head_curve_uses_the_heads_mask(pitfalls_app):
    at = pitfalls_app
    at.segmented_control(key="view").set_value("derivation")
    at.selectbox(key="mask").set_value("causal")
    ok(at.run())
    weights = np.nan_to_num(decode(spec(at, "weights")["data"][0]["z"]), nan=0.0)  # the derivation view's head
    length = weights.shape[0]
    show(at, "scaling")
    fig = spec(at, "head_temperature")
    t, entropy = decode(fig["data"][0]["x"]), decode(fig["data"][0]["y"])
    d_k = 32  # MiniLM: 384 / 12 heads
    assert entropy[np.argmin(np.abs(t - math.sqrt(d_k)))] == pytest.approx(entropy_np(weights).mean(), abs=1e-5)
    uniform = [s["y0"] for s in fig["layout"]["shapes"] if s.get("y0") == s.get("y1") and s.get("type") == "line"]
    assert uniform == [pytest.approx(np.log(np.arange(1, length + 1)).mean())]
    assert len([d for d in fig["data"] if d.get("xaxis", "x") == "x"]) == 1  # one curve, not two identical ones


def test_app_permutation_demo(pitfalls_app):
    at = pitfalls_app
    show(at, "order")
    at.selectbox(key="lab_encoding").set_value("none")
    ok(at.run())
    assert any("Equivariant" in s.value for s in at.success)
    difference = decode(next(d for d in spec(at, "permutation")["data"] if d["name"] == "difference")["z"])
    assert np.abs(difference).max() < 1e-9
    at.selectbox(key="lab_encoding").set_value("sinusoidal")
    ok(at.run())
    assert any("Order matters" in w.value for w in at.warning)
    difference = decode(next(d for d in spec(at, "permutation")["data"] if d["name"] == "difference")["z"])
    assert np.abs(difference).max() > 1e-3


def test_app_sparse_view_states_the_reach(pitfalls_app):
    at = pitfalls_app
    show(at, "sparse")
    at.slider(key="sparse_window").set_value(16)
    at.slider(key="sparse_stride").set_value(32)
    ok(at.run())
    text = " ".join(m.value for m in at.markdown)
    assert "**4 stacked layers**" in text and "do not reach every earlier token" in text
    at.slider(key="sparse_window").set_value(32)
    ok(at.run())
    text = " ".join(m.value for m in at.markdown)
    assert "**2 stacked layers**" in text and "two layers 100.0%" in text


def test_app_cost_view_says_what_it_measured(pitfalls_app):
    at = pitfalls_app
    show(at, "cost")
    names = [d.get("name") for d in spec(at, "cost")["data"]]
    assert "measured peak allocated (every tensor torch allocates, traced by a TorchDispatchMode)" in names
    assert "measured time (median)" in names


def test_demo_tables_are_the_ones_the_demo_adds():
    """The tables drawn beside the permutation demo are the ones it used: adding the shown sinusoidal or
    learned table to the same embeddings reproduces the demo's output with no further positions."""
    x = torch.randn(6, lab.DEMO_D_MODEL, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    for encoding in ("sinusoidal", "learned"):
        table, name = lab.demo_encoding_table(encoding, 6, seed=7)
        assert name == encoding and table.shape == (6, lab.DEMO_D_MODEL)
        demo = lab.permutation_demo(x, encoding, (1, 0, 2, 3, 4, 5), seed=7)
        plain = lab.permutation_demo(
            x + torch.as_tensor(table, dtype=torch.float64), "none", (1, 0, 2, 3, 4, 5), seed=7
        )
        assert np.allclose(demo.output, plain.output, atol=1e-6), encoding
    table, name = lab.demo_encoding_table("rotary", 6)
    assert table.shape == (6, lab.DEMO_D_K) and "cos" in name
    assert lab.demo_encoding_table("alibi", 6) is None and lab.demo_encoding_table("none", 6) is None
