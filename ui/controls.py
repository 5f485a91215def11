"""The recompute controls in the sidebar (what decides the numbers), each with help text, and what a change of
each asks for. app.py draws them in a fragment of their own (``controls_panel``)."""

from __future__ import annotations

import streamlit as st

from attention_core.device import available_devices
from attention_core.request import ENCODINGS, FILLS, LIMITS, MASKS, SCALINGS, SOURCES

from .settings import THEMES, UI_RANGES
from .sidebar import ENCODING_LABELS, MASK_LABELS, SCALING_LABELS, SOURCE_LABELS

# What a change of each control asks for (``draw``'s ``on``): "value" the numbers panel only; "layout" the controls
# too (they show other widgets or ranges after it: the temperature slider, a mask's sizes, the scratch sizes, the head
# count); "capture" a whole-script run (the capture is computed there).
LAYOUT_CONTROLS = ("scaling", "mask", "source", "heads")
CAPTURE_CONTROLS = ("max_tokens", "pad_to")
CONTROL_KEYS = (  # every widget ``draw`` draws (tests/test_app.py checks the list against the page)
    "layer", "scaling", "temperature", "mask", "window", "window_causal", "stride", "block", "blocked", "fill",
    "pad_to", "encoding", "source", "d_model", "d_k", "heads", "seed", "hide_special", "words", "fixed_range",
    "device", "show_values", "theme", "max_tokens",
)  # fmt: skip


def draw(facts, num_tokens: int, layer_slot, on: dict | None = None) -> None:
    """Every other control: the layer slider into ``layer_slot``, the rest where this is called.
    ``facts`` bound the layer slider. ``on``: the callback for each kind of change ("value", "layout",
    "capture"; see ``LAYOUT_CONTROLS``), None: none (a change reruns what drew the controls)."""
    on = on or {"value": None, "layout": None, "capture": None}
    if facts.num_layers > 1:
        layer_slot.slider(
            "Layer",
            0,
            facts.num_layers - 1,
            key="layer",
            help="Which transformer block to look at.",
            on_change=on["value"],
        )

    _scaling_controls(on)
    _masking_controls(num_tokens, on)
    _source_controls(on)
    _display_controls(on)
    _device_controls(on)


def _scaling_controls(on: dict) -> None:
    """Scaling: the divisor of the scores (and the temperature when it is custom)."""
    with st.expander("Scaling", expanded=True):
        st.radio(
            "Divide the scores by",
            list(SCALINGS),
            key="scaling",
            on_change=on["layout"],
            format_func=SCALING_LABELS.get,
            horizontal=True,
            help="The article's softmax(QKᵀ/√d_k). 'none' shows why the division matters; a temperature is any divisor.",
        )
        if st.session_state["scaling"] == "custom":
            st.slider(
                "Temperature",
                *UI_RANGES["temperature"],
                key="temperature",
                on_change=on["value"],
                step=0.1,
                help="Scores are divided by this.",
            )


def _masking_controls(num_tokens: int, on: dict) -> None:
    """Masking: which mask, its size, the fill for blocked scores, padding."""
    with st.expander("Masking", expanded=True):
        st.selectbox(
            "Mask",
            list(MASKS),
            key="mask",
            on_change=on["layout"],
            format_func=MASK_LABELS.get,
            help="Which keys each query may see.",
        )
        mask = st.session_state["mask"]
        if mask == "sliding_window":
            st.slider(
                "Window width",
                *UI_RANGES["window"],
                key="window",
                on_change=on["value"],
                help="Each query sees keys with |i - j| < width.",
            )
            st.checkbox(
                "Causal window",
                key="window_causal",
                on_change=on["value"],
                help="Only the width-1 tokens before the query.",
            )
        elif mask == "strided":
            st.slider(
                "Stride",
                *UI_RANGES["stride"],
                key="stride",
                on_change=on["value"],
                help="Keys whose distance from the query is a multiple of this.",
            )
        elif mask == "block_local":
            st.slider(
                "Block size",
                *UI_RANGES["block"],
                key="block",
                on_change=on["value"],
                help="Queries see only keys in their own block.",
            )
        elif mask == "blocked_keys":
            st.multiselect(
                "Blocked key positions",
                list(range(num_tokens)),
                key="blocked",
                on_change=on["value"],
                help="No query may attend to these tokens. Block all of them to see an empty row.",
            )
        st.radio(
            "Fill for blocked scores",
            list(FILLS),
            key="fill",
            on_change=on["value"],
            horizontal=True,
            help="-inf gives blocked keys exactly 0 weight and an empty row 0 everywhere. -1e9 is the common "
            "shortcut: a row with every key blocked becomes uniform, leaking attention to hidden keys.",
        )
        st.number_input(
            "Pad input to (tokens, 0 = off)",
            min_value=0,
            max_value=LIMITS["pad_to"][1],
            key="pad_to",
            on_change=on["capture"],
            help="Adds pad tokens; both the model and the core mask them out as keys (padding mask).",
        )


def _source_controls(on: dict) -> None:
    """Positional encoding and the source of X (with the scratch sizes)."""
    with st.expander("Positional encoding and source of X", expanded=False):
        st.selectbox(
            "Positional encoding (own core)",
            list(ENCODINGS),
            key="encoding",
            on_change=on["value"],
            format_func=ENCODING_LABELS.get,
            help="Without one, attention cannot tell word order: see the permutation demo in the pitfalls lab.",
        )
        st.radio(
            "Source of X and weights",
            list(SOURCES),
            key="source",
            on_change=on["layout"],
            format_func=SOURCE_LABELS.get,
            help="Replay: the layer's real input and W^Q/W^K/W^V, so the core must match the model. "
            "Scratch: seeded random token embeddings and weights at the sizes below.",
        )
        if st.session_state["source"] == "scratch":
            c1, c2, c3 = st.columns(3)
            c1.number_input(
                "d_model", 2, LIMITS["d_model"][1], key="d_model", on_change=on["value"], help="Embedding width."
            )
            c2.number_input(
                "d_k", 2, LIMITS["d_k"][1], key="d_k", on_change=on["value"], help="Query/key width per head."
            )
            c3.number_input(
                "heads", 1, LIMITS["heads"][1], key="heads", on_change=on["layout"], help="Number of heads."
            )
            st.number_input(
                "Seed", *LIMITS["seed"], key="seed", on_change=on["value"], help="Seed for embeddings and weights."
            )


def _display_controls(on: dict) -> None:
    """Display: special tokens, merged subwords, the colour range."""
    with st.expander("Display", expanded=False):
        st.checkbox(
            "Hide special tokens ([CLS], [SEP], BOS)",
            key="hide_special",
            on_change=on["value"],
            help="Removes their columns from the attention maps and renormalises each row over the keys left; "
            "the figure's title says so. The numbers computed do not change.",
        )
        st.checkbox(
            "Merge subwords into words",
            key="words",
            on_change=on["value"],
            help="One row and column per word: keys summed, queries averaged over the word's tokens, so rows "
            "still sum to 1. Said on the figure.",
        )
        st.checkbox(
            "Fixed colour range 0..1",
            key="fixed_range",
            on_change=on["value"],
            help="On: every attention map uses the same 0..1 colours, comparable across texts, layers and heads. "
            "Off: each map stretches to its own largest weight (more detail, not comparable).",
        )


def _device_controls(on: dict) -> None:
    """Display and device: device, values in cells, theme, max tokens."""
    with st.expander("Display and device", expanded=False):
        st.selectbox(
            "Device", available_devices(), key="device", on_change=on["value"], help="Where the own core computes."
        )
        st.checkbox(
            "Show values in cells",
            key="show_values",
            on_change=on["value"],
            help="Numbers on small heatmaps (up to 24 tokens).",
        )
        st.radio(
            "Figure theme",
            THEMES,
            key="theme",
            on_change=on["value"],
            horizontal=True,
            help="'slides': white, large fonts.",
        )
        st.number_input(
            "Max tokens",
            *UI_RANGES["max_tokens"],
            key="max_tokens",
            on_change=on["capture"],
            help="Longer text is cut here (and at the model's limit), with a notice.",
        )
