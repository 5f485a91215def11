"""Three claims of the article made visible: the dot product as similarity, the recurrent bottleneck,
and which permutation symmetry attention has. Drawn under the pitfalls lab."""

from __future__ import annotations

import numpy as np
import streamlit as st

from attention_core import lab
from attention_core.bottleneck import measure_bottleneck
from attention_core.similarity import dot_decomposition, toy_pair
from attention_core.symmetry import demo_gaps, key_order_gap
from attention_core.traces import ModelTrace
from viz.bottleneck import survival_figure
from viz.labels import plain_labels
from viz.similarity import angle_figure, cosine_scatter_figure, dot_factors_figure

from ..settings import Settings
from ..text import plain
from .common import figure

BOTTLENECK_STEPS = 48  # sequence length of the recurrent demo (the slider reads one n off the curves)
BOTTLENECK_HIDDEN = 16
SCATTER_MAX_PAIRS = 16_384  # above this many (query, key) pairs only the bars are drawn


@st.cache_data(show_spinner="Measuring RNN, GRU and attention with autograd...", max_entries=8)
def _bottleneck(seed: int):
    """Small result (a few (N,) arrays): cached per seed."""
    return measure_bottleneck(BOTTLENECK_STEPS, BOTTLENECK_HIDDEN, seed=seed)


@st.cache_data(max_entries=16)
def _symmetry(token_ids: tuple[int, ...], encoding: str, order: tuple[int, ...], seed: int):
    """(gaps, max |output|) of the lab's permutation demo for one encoding: small (L, Dv) arrays inside."""
    demo = lab.permutation_demo_for_ids(token_ids, encoding, order, seed=seed)
    return demo_gaps(demo), float(np.abs(demo.output).max())


def _pick(key: str, count: int, default: int) -> None:
    """Start a token selectbox at ``default`` and keep its choice inside 0..count-1 (texts change length)."""
    if key not in st.session_state or not 0 <= int(st.session_state[key]) < count:
        st.session_state[key] = min(max(int(default), 0), count - 1)


def render(trace: ModelTrace, settings: Settings) -> None:
    st.divider()
    st.markdown("#### Three claims of the article, measured")
    _similarity(trace, settings)
    _bottleneck_section(settings)
    _permutation(trace, settings)


def _similarity(trace: ModelTrace, settings: Settings) -> None:
    st.subheader("The dot product measures similarity", anchor="claims-similarity")
    st.markdown(
        "A score q·k multiplies two things: how long the two vectors are, and how closely their directions "
        "agree. That agreement is the cosine of the angle between them: **1** when they point the same way, "
        "**0** when they are at a right angle (the score is then zero, however long they are), **−1** when "
        "they point apart."
    )
    st.latex(r"q_i\cdot k_j \;=\; \lvert q_i\rvert\,\lvert k_j\rvert\,\cos\theta_{ij}")
    c1, c2 = st.columns([1, 2])
    angle = c1.slider("Angle θ between a and b (degrees)", 0, 180, 45, step=5, key="claims_angle")
    length_b = c1.slider("Length of b", 0.25, 2.0, 1.0, step=0.25, key="claims_length")
    toy = toy_pair(angle, 1.0, length_b)
    c1.markdown(
        f"a·b = **{toy.dot:.3f}**, cos θ = **{toy.cosine:.3f}**. At 0° the dot product is the product of the "
        "lengths; at 90° it is 0; past 90° it turns negative."
    )
    with c2:
        figure(angle_figure(toy.a, toy.b, theme=settings.theme), "claims_angle")

    head = trace.core.head(trace.head)
    labels = plain_labels(trace.tokens)
    rows, cols = head.q.shape[0], head.k.shape[0]
    key_labels = [labels[j] if j < len(labels) else str(j) for j in range(cols)]
    parts = dot_decomposition(head.q, head.k)
    c1, c2 = st.columns(2)
    _pick("claims_query", rows, settings.query)
    _pick("claims_key", cols, 0)
    query = c1.selectbox(
        "Query token",
        range(rows),
        format_func=lambda i: f"{i} · {labels[i]}",
        key="claims_query",
    )
    key = c2.selectbox(
        "Key token",
        range(cols),
        format_func=lambda j: f"{j} · {key_labels[j]}",
        key="claims_key",
    )
    row = parts.row(query)
    st.markdown(
        f"**This head's real vectors** (layer {trace.layer}, head {trace.head}, d_k = {head.q.shape[1]}): "
        f"q·k = {row['dot'][key]:.4g} = |q| {row['query_norm']:.4g} × |k| {row['key_norms'][key]:.4g} × "
        f"cos θ {row['cosine'][key]:.3f} (θ = {row['angle_deg'][key]:.1f}°). The weight this pair gets after "
        f"scaling and softmax: {head.weights[query, key]:.3f}."
    )
    figure(
        dot_factors_figure(
            row["dot"],
            row["query_norm"],
            row["key_norms"],
            row["cosine"],
            key_labels,
            key=key,
            allowed=np.asarray(head.mask, dtype=bool)[query],
            title=f"Query {query} '{labels[query]}': score = lengths × cosine",
            theme=settings.theme,
        ),
        "claims_dot",
        (np.stack([row["dot"], row["lengths"], row["cosine"]]), ["q·k", "|q||k|", "cos θ"], key_labels),
        caption="Grey bars: keys this query may not attend (mask). The outlined bar is the chosen key.",
    )
    if rows * cols <= SCATTER_MAX_PAIRS:
        figure(
            cosine_scatter_figure(
                parts.dot, parts.cosine, query=query, key_tokens=key_labels, allowed=head.mask, theme=settings.theme
            ),
            "claims_cosine",
            (parts.cosine, labels[:rows], key_labels),
            caption="Points at the same cosine with different scores differ only in length. CSV: the cosine matrix.",
        )


def _bottleneck_section(settings: Settings) -> None:
    st.subheader("The recurrent bottleneck", anchor="claims-bottleneck")
    st.markdown(
        "A recurrent net keeps one state vector and rewrites it at every step, so the first token reaches "
        "step n only through n − 1 rewrites. Here that is measured: for a seeded tanh RNN, a GRU and one "
        "causal attention head (width 16, the same random inputs), autograd gives how strongly the output "
        "at position n still responds to a nudge of the first input, ‖∂out_n/∂x_1‖, relative to n = 1."
    )
    curves = _bottleneck(int(settings.seed))
    n = st.slider("Read off at n =", 1, BOTTLENECK_STEPS, 16, key="claims_steps")
    survival = curves.survival
    figure(
        survival_figure(curves.n, survival, mark=n, theme=settings.theme),
        "claims_bottleneck",
        (np.stack(list(survival.values())), list(survival), [str(int(v)) for v in curves.n]),
    )
    at = n - 1
    said = ", ".join(f"{name} {values[at]:.2g}" for name, values in survival.items())
    st.markdown(
        f"At n = {n}: {said}. Token 1 is {int(curves.hops['recurrent'][at])} recurrent step(s) away but "
        f"{int(curves.hops['attention'][at])} attention hop away; the head gives it weight α = "
        f"{curves.first_weight[at]:.3g}."
    )
    st.caption(
        "The recurrent curves fall by a roughly constant factor per step: each rewrite shrinks what is left "
        "of token 1. Attention's full curve moves with α(n,1), the weight the query chooses to give token 1 "
        "by content, not with the distance; divided by that weight, the direct path α(n,1)·v_1 is the same at "
        "every n. A trained model can make α(n,1) large at any n; no weight of a recurrent net skips the "
        "n − 1 rewrites."
    )


def _permutation(trace: ModelTrace, settings: Settings) -> None:
    st.subheader("Permutation: equivariant rows, invariant sums", anchor="claims-permutation")
    st.markdown(
        "The article says attention is *permutation invariant*. For the per-token outputs the exact word is "
        "**equivariant**: without positions, shuffling the input rows shuffles the output rows the same way, "
        "attn(PX) = P·attn(X), which is what pitfall 3's permutation demo shows. The rows themselves are not "
        "unchanged: each token's output row now sits at that token's new position. What *is* unchanged is anything that does not "
        "care about order: the average of the output rows, or one query's output as a function of the set of "
        "(key, value) pairs it reads. Both words lead to the article's point: without a positional encoding "
        "the layer cannot tell one order from another."
    )
    st.latex(
        r"\mathrm{attn}(PX) = P\,\mathrm{attn}(X) \qquad "
        r"\tfrac{1}{L}\textstyle\sum_i \mathrm{attn}(PX)_i = \tfrac{1}{L}\sum_i \mathrm{attn}(X)_i"
    )
    length = len(trace.token_ids)
    order = lab.shuffled_order(length, st.session_state.get("lab_perm_seed", 0))
    encodings = dict.fromkeys(["none", st.session_state.get("lab_encoding", "none")])
    lines = []
    for encoding in encodings:
        gaps, size = _symmetry(tuple(trace.token_ids), encoding, order, int(settings.seed))
        lines.append(
            f"| {encoding} | {gaps.rows_unchanged:.2e} | {gaps.rows_moved:.2e} | {gaps.pooled:.2e} | {size:.2g} |"
        )
    st.markdown(
        "Max |difference| on this text (the pitfalls demo's seeded embeddings and shuffled order):\n\n"
        "| encoding | rows unchanged? attn(PX) vs attn(X) | rows moved? attn(PX) vs P·attn(X) "
        "| pooled: mean over rows | largest output entry |\n|---|---|---|---|---|\n" + "\n".join(lines)
    )
    st.caption(
        "Near 0 means the property holds (float64 rounding is about 1e-16). With no encoding: the first "
        "column is large, the other two are ~0. Pick an encoding in pitfall 3 and a second row shows it "
        "breaking both equalities."
    )
    head = trace.core.head(trace.head)
    keys = head.k.shape[0]
    reorder = lab.shuffled_order(keys, st.session_state.get("lab_perm_seed", 0) + 1)
    gap = key_order_gap(head.q, head.k, head.v, reorder, mask=head.mask, scale=head.scale)
    st.markdown(
        f"**This head, key order**: reorder its {keys} (key, value) pairs together (mask columns too) and "
        f"recompute every query's output: max |difference| {gap:.1e}. Positions already folded into q and k "
        "travel with them; the sum over keys has no order of its own."
    )
    st.caption(plain(f"Shuffled key order: {' '.join(str(j) for j in reorder[:40])}{' …' if keys > 40 else ''}", 400))
