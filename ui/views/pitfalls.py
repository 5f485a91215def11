"""View 4: the article's pitfalls as experiments: scaling, O(n^2) cost, positions and order, sparse masks."""

from __future__ import annotations

import streamlit as st

from attention_core import lab
from attention_core.positional import ENCODINGS
from attention_core.traces import ModelTrace
from viz.labels import plain_labels
from viz.pitfalls import cost_figure, permutation_figure, saturation_figure, temperature_figure, variance_figure
from viz.positional import position_similarity_figure, positional_heatmap
from viz.sparse import mask_patterns_figure, sparse_cost_figure

from .. import lab_data
from ..settings import PITFALL_TABS, Settings
from ..text import plain
from . import claims, kvcache, tiled
from .common import figure

LABELS = (
    "1 · Scaling and vanishing gradients",
    "2 · O(n²) cost",
    "3 · Positional encoding and permutation",
    "4 · Local and sparse masks",
)
PITFALLS = dict(zip(PITFALL_TABS, LABELS, strict=True))  # the tabs' keys are Settings' choices (in the link)


def render(trace: ModelTrace, settings: Settings) -> None:
    choice = st.radio("Pitfall", list(PITFALLS), format_func=PITFALLS.get, horizontal=True, key="pitfall")
    {"scaling": _scaling, "cost": _cost, "order": _order, "sparse": _sparse}[choice](trace, settings)
    claims.render(trace, settings)


def _scaling(trace: ModelTrace, settings: Settings) -> None:
    theme = settings.theme
    st.markdown(
        "For query and key vectors with independent unit-variance entries, the dot product sums d_k terms, so its "
        "variance grows like **d_k**. Dividing by **√d_k** brings it back to about 1."
    )
    st.latex(r"\mathrm{Var}(q\cdot k) = d_k \qquad \mathrm{Var}\!\left(\frac{q\cdot k}{\sqrt{d_k}}\right) = 1")
    v = lab_data.variance_curve()
    figure(variance_figure(v.d_k, v.unscaled, v.scaled, theme=theme), "variance")
    st.markdown(
        "Large scores push softmax to a one-hot row. Its Jacobian **diag(p) − ppᵀ** then goes to zero, so the "
        "gradient that reaches the scores (and W^Q, W^K) vanishes: the unscaled curves below fall as d_k grows."
    )
    s = lab_data.saturation_curve()
    figure(
        saturation_figure(
            s.x,
            s.entropy_unscaled,
            s.entropy_scaled,
            s.grad_norm_unscaled,
            s.grad_norm_scaled,
            max_entropy=s.max_entropy,
            theme=theme,
        ),
        "saturation",
    )
    head = trace.core.head(trace.head)
    if not head.mask.any():
        st.info(
            "Every key is blocked for every query under the current mask, so this head has no softmax to sweep "
            "over temperatures. Unblock at least one key (Masking in the sidebar) to see its curve.",
            icon=":material/block:",
        )
        return
    sweep = lab.head_temperature_curve(head)
    curve = sweep.curve
    st.markdown(
        f"**This head's own scores** (layer {trace.layer}, head {trace.head}, d_k = {sweep.d_k}): its raw QKᵀ "
        f"divided by a temperature t, each row's softmax over the keys this head may attend to (its mask), so the "
        f"uniform line is the mean of ln(allowed keys) per row. t = √d_k = {sweep.sqrt_d_k:.3g} is the article's "
        f"choice; this head now runs at t = {sweep.own:.3g}, where its mean row entropy is "
        f"{sweep.own_entropy:.3g} nats."
    )
    figure(
        temperature_figure(
            curve.temperature,
            curve.entropy,
            curve.grad_norm,
            uniform_entropy=curve.uniform_entropy,
            marks=sweep.marks,
            name=f"layer {trace.layer}, head {trace.head}",
            theme=theme,
        ),
        "head_temperature",
    )
    st.info(
        "Try it: set **Scaling → none** in the sidebar and watch the softmax rows in the Derivation view sharpen. "
        "The **Training lab** shows what that does to learning.",
        icon=":material/science:",
    )


def _cost(trace: ModelTrace, settings: Settings) -> None:
    st.markdown(
        "Every query meets every key: the score matrix has **n × n** entries per head, so time and memory grow "
        "with the square of the sequence length. Doubling n makes each matrix four times bigger."
    )
    st.latex(r"\text{time} \sim O(n^2 d_k) \qquad \text{memory} \sim O(n^2) \text{ per head}")
    top = st.select_slider(
        "Measure up to n =",
        [256, 512, 1024, 2048],
        value=512,
        key="cost_top",
        help="Times the from-scratch core (12 heads, d_k = 64) on the current device.",
    )
    ns = tuple(n for n in (32, 64, 128, 256, 512, 1024, 2048) if n <= top)
    device = settings.device if settings.device != "auto" else None
    if st.button("Measure now", key="cost_run", help="Runs the core at each n on this device and plots the result."):
        st.session_state["cost_table"] = lab_data.cost_table(ns, device or "cpu")
    table = st.session_state.get("cost_table")
    if table is None:  # a first small measurement, once per session (not on every rerun of the view)
        table = st.session_state["cost_table"] = lab_data.cost_table(tuple(n for n in ns if n <= 256), device or "cpu")
    figure(
        cost_figure(
            table.n,
            table.peak_bytes,
            table.seconds,
            memory_name=f"measured {table.memory_method}",
            time_name="measured time (median)",
            theme=settings.theme,
        ),
        "cost",
    )
    st.caption(
        f"Measured on {table.device}. At n = {int(table.n[-1])}: {table.seconds[-1] * 1e3:.1f} ms, "
        f"{table.peak_bytes[-1] / 2**20:.1f} MiB {table.memory_method}; by the formula "
        f"{table.flops[-1] / 1e9:.2f} GFLOP (computed, not measured). Your text has {len(trace.tokens)} tokens."
    )
    tiled.render(trace, settings)
    kvcache.render(trace, settings)


def _order(trace: ModelTrace, settings: Settings) -> None:
    theme = settings.theme
    st.markdown(
        "Self-attention only compares vectors; it never sees where a token stands. Shuffle the tokens and, "
        "**without a positional encoding**, every output row simply moves with its token. Any encoding breaks that."
    )
    labels = plain_labels(trace.tokens)
    cols = st.columns([2, 1])
    encoding = cols[0].selectbox(
        "Encoding for this demo",
        list(ENCODINGS),
        key="lab_encoding",
        help="Where position enters: added to X (sinusoidal, learned), rotating q and k (rotary), or a bias (ALiBi).",
    )
    if cols[1].button("Shuffle again", key="lab_shuffle", help="A new random order of the tokens."):
        st.session_state["lab_perm_seed"] = st.session_state.get("lab_perm_seed", 0) + 1
    order = lab.shuffled_order(len(labels), st.session_state.get("lab_perm_seed", 0))
    demo = lab.permutation_demo_for_ids(trace.token_ids, encoding, order, seed=settings.seed)
    st.caption("Shuffled order: " + plain(" ".join(labels[i] for i in order), 400))
    verdict = (
        f"**Equivariant**: rows only moved (max |difference| {demo.max_difference:.1e})."
        if demo.equivariant
        else f"**Order matters**: rows changed, not just moved (max |difference| {demo.max_difference:.3g})."
    )
    (st.success if demo.equivariant else st.warning)(verdict)
    figure(
        permutation_figure(
            demo.output, demo.output_shuffled, demo.permutation, trace.tokens, encoding=encoding, theme=theme
        ),
        "permutation",
    )
    shown = lab.demo_encoding_table(encoding, max(len(labels), 16), seed=settings.seed)
    if shown is not None:
        table, name = shown
        c1, c2 = st.columns(2)
        with c1:
            figure(positional_heatmap(table, name=name, theme=theme), "position_table")
        with c2:
            figure(position_similarity_figure(table, name=name, theme=theme), "position_similarity")
    elif encoding == "alibi":
        st.caption("ALiBi adds −slope·|i − j| to the scores instead of changing X: nearby keys are preferred.")


def _sparse(trace: ModelTrace, settings: Settings) -> None:
    st.markdown(
        "Long inputs make n² prohibitive. Local and sparse patterns keep only some (query, key) pairs: a causal "
        "sliding window keeps about n·w, a causal strided pattern about n²/(2s). Stacked layers pass information "
        "along chains of allowed pairs. Pick them in **Masking** in the sidebar to see their effect on this text."
    )
    c1, c2 = st.columns(2)
    window = c1.slider("Window w", 2, 128, 32, key="sparse_window")
    stride = c2.slider("Stride s", 2, 128, 32, key="sparse_stride")
    cost = lab_data.sparse_entries(window, stride)
    reach = lab_data.sparse_reach(window, stride)
    layers = (
        f"**{reach.layers_to_all} stacked layers** connect every query to every earlier token"
        if reach.layers_to_all is not None
        else "even 64 stacked layers do not connect every query to every earlier token"
    )
    rule = (
        "Two layers reach every earlier token because the window is at least the stride (w ≥ s): every distance "
        "is a multiple of s plus a step inside the window."
        if reach.layers_to_all is not None and reach.layers_to_all <= 2
        else "Two layers do not reach every earlier token because the window is shorter than the stride (w < s): "
        "a distance just short of a multiple of s needs several window steps."
    )
    st.markdown(
        f"Window {window} + stride {stride} at n = {reach.n}: one layer links {reach.one_layer:.1%} of the "
        f"(query, earlier key) pairs, two layers {reach.two_layers:.1%}; {layers}. {rule}"
    )
    figure(sparse_cost_figure(cost.n, cost.entries, theme=settings.theme), "sparse_cost")
    small_window, small_stride = max(2, window // 8), max(2, stride // 8)
    patterns = lab.mask_patterns(32, window=small_window, stride=small_stride)
    figure(mask_patterns_figure(patterns, theme=settings.theme), "mask_patterns")
    st.caption(f"Shapes drawn at n = 32 with window {small_window} and stride {small_stride} (w/8 and s/8).")
