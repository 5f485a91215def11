"""Above the views: device badge, model facts, notices (truncation, fixed settings) and departures."""

from __future__ import annotations

import streamlit as st

from attention_core.traces import ModelTrace

from . import all_layers
from .settings import Settings
from .text import plain


def replay_metric(slot, captured: tuple, hidden: tuple) -> None:
    """The largest core-vs-model difference over every layer (``pipeline.replay_summary``'s two tuples), into
    ``slot`` (filled after the view is drawn: replaying every layer is the slowest part of opening a text, and the
    view should not wait for it)."""
    worst = max((max(r.weights, r.output) for r in (*captured, *hidden)), default=float("nan"))
    slot.metric(
        "Own core vs model, all layers",
        f"max |Δ| {worst:.1e}" if captured else "n/a",
        help="Every layer replayed through the from-scratch core, from the model's captured q, k, v and from "
        "the layer's input X and its W^Q/W^K/W^V: the largest difference of attention weights or outputs. "
        "Float32 rounding is about 1e-7. The 'Core vs model' view shows each layer.",
    )


def render(trace: ModelTrace, device: str, settings: Settings):
    """Draw the header; returns the empty slot for ``replay_metric``."""
    facts = trace.facts
    cols = st.columns([1.2, 1, 1, 1.4])
    cols[0].metric(
        "Model",
        plain(facts.name.split("/")[-1], 28),
        help=f"{facts.family} family, {facts.num_parameters:,} parameters",
    )
    cols[1].metric("Tokens", len(trace.tokens), help="After the tokenizer (and any cap).")
    cols[2].metric("Device", device.upper(), help="Where the own core computes (auto: CUDA, then MPS, then CPU).")
    slot = cols[3].empty()
    slot.metric("Own core vs model, all layers", "…", help="Replaying every layer through the core…")
    with st.expander(
        f"Model facts: {facts.num_layers} layers × {facts.num_heads} heads, d_head {facts.d_head}, "
        f"{facts.positional} positions{', causal' if facts.causal else ''}",
        expanded=False,
    ):
        st.markdown(
            f"- **{plain(facts.name)}** ({facts.family} family), {facts.num_parameters:,} parameters\n"
            f"- d_model {facts.d_model}, {facts.num_heads} query heads, {facts.num_kv_heads} key/value heads"
            f"{' (grouped-query attention)' if facts.num_kv_heads != facts.num_heads else ''}, d_head {facts.d_head}\n"
            f"- positions: {facts.positional}; {'causal decoder' if facts.causal else 'bidirectional encoder'}; "
            f"max {facts.max_positions} positions"
        )
    for notice in trace.notices:
        st.info(plain(notice), icon=":material/info:")
    if trace.departures:
        st.warning(
            "**The own core departs from the model here**, so its pattern may differ:\n"
            + "\n".join(f"- {plain(d)}" for d in trace.departures),
            icon=":material/call_split:",
        )
    return slot


def replay_check(slot, request) -> bool:
    """Fill the header's all-layers check; True when shown. A long input's check runs in the background
    (the view is usable meanwhile) and ``replay_poll`` looks for it every second."""
    summary = all_layers.replay_if_ready(request)
    if summary is None:
        slot.metric("Own core vs model, all layers", "checking…", help="Replaying every layer through the core.")
        return False
    replay_metric(slot, *summary)  # (no trace needed: a capture that failed in the check says n/a)
    return True


def replay_poll(slot, request) -> None:
    """Once the background check is done, one full rerun shows it and ends the polling."""
    if all_layers.replay_if_ready(request) is not None:
        st.rerun()
