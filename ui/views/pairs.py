"""View: minimal pairs. The sidebar's text and a second text through the same model, layer, head and
settings; one token's attention row in both, aligned by token, and the difference; the slides zip at the end."""

from __future__ import annotations

from dataclasses import asdict, replace

import streamlit as st

from attention_core.pairs import PAIRS, find_token, most_changed_query, pair_rows
from attention_core.request import MAX_TEXT_CHARS
from attention_core.traces import ModelTrace
from viz.labels import plain_labels
from viz.pairs import pair_figure, pairs_zip

from .. import compute
from ..settings import Settings
from ..sidebar import as_position
from ..text import plain
from .common import figure, zip_button

KEEP = "(keep the texts below)"


def _apply_pair() -> None:
    """Picker callback: both texts from the chosen pair (the first one is the sidebar's text)."""
    choice = st.session_state.get("pair_pick")
    if choice in PAIRS:
        st.session_state["text"], st.session_state["pair_text"] = PAIRS[choice][:2]
        st.session_state["_pair_fresh"] = True


def render(trace: ModelTrace, settings: Settings) -> None:
    if st.session_state.pop("_pair_fresh", False):
        st.session_state["_pair_start"] = True
        st.rerun()  # the first text changed: the whole page (and its trace) follows
    st.subheader(f"Minimal pairs: layer {trace.layer}, head {trace.head}")
    st.caption(
        "Two texts that differ in a word or two, through the same model, layer, head and settings. Tokens are "
        "aligned where both texts have them; watch how one token's attention moves."
    )
    st.selectbox(
        "Classic pair",
        [KEEP, *PAIRS],
        key="pair_pick",
        on_change=_apply_pair,
        format_func=lambda k: k if k not in PAIRS else f"{PAIRS[k][2]}",
        help="Sets both texts (the first one is the sidebar's text).",
    )
    st.text_area(
        "Second text",
        key="pair_text",
        height=70,
        max_chars=MAX_TEXT_CHARS,
        help="The first text is the one in the sidebar.",
    )
    second = str(st.session_state.get("pair_text", ""))
    if not second.strip():
        st.info(
            "Type a second text (or pick a classic pair) to compare with the sidebar's text.", icon=":material/edit:"
        )
        return
    other = compute.with_head(compute.trace_for(replace(settings.request(), text=second)), trace.head)
    for notice in other.notices:
        st.info(f"Second text: {plain(notice)}", icon=":material/info:")
    first_labels = plain_labels(trace.tokens)
    first_w = trace.core.head(trace.head).weights  # (L, S)
    second_w = other.core.head(other.head).weights  # (L', S')
    st.session_state["query"] = as_position(st.session_state.get("query", 0))
    first_visit = not st.session_state.get("_pairs_seen") and st.session_state["query"] == 0
    st.session_state["_pairs_seen"] = True
    if first_visit or st.session_state.pop("_pair_start", False) or st.session_state["query"] >= len(first_labels):
        picked = next((p for p in PAIRS.values() if p[:2] == (settings.text, second)), None)  # a classic pair?
        focus = None if picked is None else find_token(trace.tokens, picked[3])
        st.session_state["query"] = (
            focus if focus is not None else most_changed_query(trace.tokens, first_w, other.tokens, second_w)
        )
    query = st.selectbox(
        "Query token (first text)",
        list(range(len(first_labels))),
        key="query",
        format_func=lambda i: f"{i}: {first_labels[i]}",
        help="Whose attention row to compare. A classic pair starts at its key word; your own texts at the token "
        "whose row changes most.",
    )
    rows = pair_rows(trace.tokens, first_w, other.tokens, second_w, int(query))
    if rows.query_second is None:
        st.info(
            f"'{plain(first_labels[query], 40)}' is not in the second text, so it has no row there: pick a token "
            "both texts share.",
            icon=":material/link_off:",
        )
    fig = pair_figure(rows, query_label=trace.tokens[query], names=("first text", "second text"), theme=settings.theme)
    figure(fig, "pairs", rows.table())
    j = rows.largest_change()
    if j is not None:
        st.caption(
            f"Attention that moved: {rows.changed_mass:.3f} of the row (half the L1 distance, counting keys only "
            f"one text has). Largest change on a shared key: '{plain(rows.labels[j], 40)}' "
            f"{rows.first[j]:.3f} → {rows.second[j]:.3f}. Weights of the own core with these settings (the "
            "model's own when nothing departs from it)."
        )
    _slides_button(rows, trace, settings, second)


def _slides_button(rows, trace: ModelTrace, settings: Settings, second: str) -> None:
    """The figure in the 'slides' theme, its table as CSV and a manifest (both texts, query, changed mass)."""
    st.divider()
    query_label = trace.tokens[rows.query_first]

    def build(formats: str) -> bytes:
        return pairs_zip(
            rows,
            formats,
            texts=(settings.text, second),
            query_label=query_label,
            layer=trace.layer,
            head=trace.head,
            names=("first text", "second text"),
            settings={**asdict(settings.request()), "head": trace.head, "query": rows.query_first},
        )

    zip_button(
        build,
        what="view",
        file_name=f"attention-lens-pairs-L{trace.layer}H{trace.head}-q{rows.query_first}.zip",
        key="export_zip_pairs",
        help="The pair figure in the white 'slides' theme, both rows and their difference as CSV, and a manifest "
        "of both texts, the query and the attention that moved.",
    )
