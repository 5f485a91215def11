"""Pitfalls lab, O(n²) cost: the key/value cache, decoding one token at a time (decoder models), with the
section's slides zip (the figure, its numbers, the steps and the checks) built on a click."""

from __future__ import annotations

from dataclasses import asdict

import streamlit as st

from attention_core.traces import ModelTrace
from viz.kvcache import kv_cache_figure, kv_cache_zip

from .. import lab_runs
from ..settings import UI_RANGES, Settings
from ..text import plain
from .common import figure, zip_button


def render(trace: ModelTrace, settings: Settings) -> None:
    st.markdown("#### Generating text: the key/value cache")
    facts = trace.facts
    if not facts.causal or settings.source != "replay":
        st.info(
            "A decoder writes one token at a time. Each new token's query needs every earlier key and value, "
            "which never change, so they are kept (the KV cache) and a step costs O(t) instead of recomputing "
            "the O(t²) prefix. Pick the decoder model (SmolLM2) with source 'replay' to step through it.",
            icon=":material/info:",
        )
        return
    st.markdown(
        "Each new token is one query row against the cached keys and values of every earlier position: the "
        "cache grows by one row per layer and step, and nothing before it is recomputed. With grouped-query "
        f"attention, {facts.num_heads} query heads read {facts.num_kv_heads} cached key/value heads."
    )
    st.latex(
        r"K_{1..t} = \begin{bmatrix} K_{1..t-1} \\ k_t \end{bmatrix},\; V_{1..t} = \begin{bmatrix} V_{1..t-1} \\ v_t "
        r"\end{bmatrix} \qquad o_t = \mathrm{softmax}\!\left(\frac{q_t K_{1..t}^T}{\sqrt{d_k}}\right) V_{1..t}"
    )
    st.latex(r"\text{work per step } O(t),\qquad \text{cache } 2 \cdot L \cdot H_{kv} \cdot d_k \cdot t")
    cols = st.columns(2)
    steps = cols[0].slider("Tokens to generate", *UI_RANGES["kv_steps"], key="kv_steps")
    try:
        run = lab_runs.kv_run(settings.request(), steps) if cols[1].button("Decode", key="kv_go") else None
    except ValueError as err:  # e.g. more steps than the model's context holds: say why, keep the view
        st.warning(f"Cannot decode: {plain(str(err), 400)}", icon=":material/warning:")
        return
    run = run or lab_runs.kv_run_if_done(settings.request(), steps)
    if run is None:
        st.caption("Press Decode: the model generates greedily, one cached step at a time (a few seconds).")
        return
    if not run.steps:
        st.info("The model ended the text at once (end-of-text token): nothing to step through.")
        return
    if not 1 <= st.session_state.get("kv_step", 0) <= len(run.steps):
        st.session_state["kv_step"] = len(run.steps)  # 0 (the default) or beyond this run: the last token
    step = st.slider("Step", 1, len(run.steps), key="kv_step") if len(run.steps) > 1 else 1
    figure(kv_cache_figure(run, step - 1, trace.layer, trace.head, theme=settings.theme), "kv_cache")
    current = run.steps[step - 1]
    groups = "; ".join(f"kv {j} ← q {', '.join(map(str, g))}" for j, g in enumerate(run.groups))
    st.caption(
        f"Generated: '{plain(run.new_text, 200)}'. Step {step}: {current.keys} cached positions, "
        f"{current.cache_bytes / 2**20:.2f} MiB of keys and values over {run.num_layers} layers "
        f"({current.cache_bytes_one_kv_per_head / 2**20:.2f} MiB with one per query head: {run.gqa_saving:g}× saved; "
        f"{groups}). Attention work this step {current.macs_step:,} multiply-adds vs {current.macs_full:,} to "
        f"recompute the prefix. Max |core − model| this step: cached run {current.diff_cached:.1e}, full causal "
        f"pass {current.diff_full:.1e} (float32: the model's own cached and full passes round apart by up to about "
        f"1e-5; `python -m attention_core kvcache` also checks on a float64 copy); tokens equal to transformers' "
        f"generate: {run.tokens_match_generate}."
    )
    _slides_button(run, step - 1, steps, trace, settings)


def _slides_button(run, step: int, steps: int, trace: ModelTrace, settings: Settings) -> None:
    """The step's figure in the 'slides' theme, its numbers as CSV and a manifest of the checks, on a click."""

    def build(formats: str) -> bytes:
        return kv_cache_zip(
            run,
            step,
            trace.layer,
            trace.head,
            formats,
            kv_steps=steps,
            settings={**asdict(settings.request()), "head": trace.head},
        )

    zip_button(
        build,
        what="section",
        file_name=f"attention-lens-kvcache-L{trace.layer}H{trace.head}-s{step + 1}.zip",
        key="export_zip_kvcache",
        help="The KV-cache step in the white 'slides' theme, the row and the cache growth as CSV, and a manifest "
        "of the steps and the max |core − model| differences.",
    )
