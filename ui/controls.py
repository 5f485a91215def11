"""The numbers' controls of the sidebar, one group each (scaling, masking, source, display, device, layer): their
labels, widgets and the groups app.py draws in fragments of their own. Widgets <-> session state, nothing else."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass

import streamlit as st

from attention_core.device import available_devices
from attention_core.request import ENCODINGS, FILLS, LIMITS, MASKS, SCALINGS, SOURCES

from .settings import THEMES, UI_RANGES

SCALING_LABELS = {"sqrt_dk": "÷ √d_k (the article)", "none": "none (raw QKᵀ)", "custom": "÷ temperature"}
MASK_LABELS = {
    "model": "what the model uses",
    "none": "none: every key",
    "causal": "causal: no future keys",
    "sliding_window": "sliding window",
    "strided": "strided / dilated",
    "block_local": "block-local",
    "blocked_keys": "hand-picked blocked keys",
}
ENCODING_LABELS = {
    "model": "the model's own",
    "none": "none (bag of words)",
    "sinusoidal": "sinusoidal (added to X)",
    "learned": "learned table (added to X)",
    "rotary": "rotary (rotates q, k)",
    "alibi": "ALiBi (bias on scores)",
}
SOURCE_LABELS = {
    "replay": "replay the model's layer",
    "scratch": "from scratch (random weights)",
}


def _scaling_controls(on_change=None) -> None:
    """Scaling: the divisor of the scores (and the temperature when it is custom)."""
    with st.expander("Scaling", expanded=True):
        st.radio(
            "Divide the scores by",
            list(SCALINGS),
            key="scaling",
            on_change=on_change,
            format_func=SCALING_LABELS.get,
            horizontal=True,
            help="The article's softmax(QKᵀ/√d_k). 'none' shows why the division matters; a temperature is any divisor.",
        )
        if st.session_state["scaling"] == "custom":
            st.slider(
                "Temperature",
                *UI_RANGES["temperature"],
                key="temperature",
                on_change=on_change,
                step=0.1,
                help="Scores are divided by this.",
            )


def _masking_controls(num_tokens: int, on_change=None) -> None:
    """Masking: which mask, its size, the fill for blocked scores, padding."""
    with st.expander("Masking", expanded=True):
        st.selectbox(
            "Mask",
            list(MASKS),
            key="mask",
            on_change=on_change,
            format_func=MASK_LABELS.get,
            help="Which keys each query may see.",
        )
        mask = st.session_state["mask"]
        if mask == "sliding_window":
            st.slider(
                "Window width",
                *UI_RANGES["window"],
                key="window",
                on_change=on_change,
                help="Each query sees keys with |i - j| < width.",
            )
            st.checkbox(
                "Causal window",
                key="window_causal",
                on_change=on_change,
                help="Only the width-1 tokens before the query.",
            )
        elif mask == "strided":
            st.slider(
                "Stride",
                *UI_RANGES["stride"],
                key="stride",
                on_change=on_change,
                help="Keys whose distance from the query is a multiple of this.",
            )
        elif mask == "block_local":
            st.slider(
                "Block size",
                *UI_RANGES["block"],
                key="block",
                on_change=on_change,
                help="Queries see only keys in their own block.",
            )
        elif mask == "blocked_keys":
            st.multiselect(
                "Blocked key positions",
                list(range(num_tokens)),
                key="blocked",
                on_change=on_change,
                help="No query may attend to these tokens. Block all of them to see an empty row.",
            )
        st.radio(
            "Fill for blocked scores",
            list(FILLS),
            key="fill",
            on_change=on_change,
            horizontal=True,
            help="-inf gives blocked keys exactly 0 weight and an empty row 0 everywhere. -1e9 is the common "
            "shortcut: a row with every key blocked becomes uniform, leaking attention to hidden keys.",
        )
        st.number_input(
            "Pad input to (tokens, 0 = off)",
            min_value=0,
            max_value=LIMITS["pad_to"][1],
            key="pad_to",
            on_change=on_change,
            help="Adds pad tokens; both the model and the core mask them out as keys (padding mask).",
        )


def _source_controls(on_change=None) -> None:
    """Positional encoding and the source of X (with the scratch sizes)."""
    with st.expander("Positional encoding and source of X", expanded=False):
        st.selectbox(
            "Positional encoding (own core)",
            list(ENCODINGS),
            key="encoding",
            on_change=on_change,
            format_func=ENCODING_LABELS.get,
            help="Without one, attention cannot tell word order: see the permutation demo in the pitfalls lab.",
        )
        st.radio(
            "Source of X and weights",
            list(SOURCES),
            key="source",
            on_change=on_change,
            format_func=SOURCE_LABELS.get,
            help="Replay: the layer's real input and W^Q/W^K/W^V, so the core must match the model. "
            "Scratch: seeded random token embeddings and weights at the sizes below.",
        )
        if st.session_state["source"] == "scratch":
            c1, c2, c3 = st.columns(3)
            c1.number_input(
                "d_model", 2, LIMITS["d_model"][1], key="d_model", on_change=on_change, help="Embedding width."
            )
            c2.number_input(
                "d_k", 2, LIMITS["d_k"][1], key="d_k", on_change=on_change, help="Query/key width per head."
            )
            c3.number_input("heads", 1, LIMITS["heads"][1], key="heads", on_change=on_change, help="Number of heads.")
            st.number_input(
                "Seed", *LIMITS["seed"], key="seed", on_change=on_change, help="Seed for embeddings and weights."
            )


def _display_controls(on_change=None) -> None:
    """Display: special tokens, merged subwords, the colour range."""
    with st.expander("Display", expanded=False):
        st.checkbox(
            "Hide special tokens ([CLS], [SEP], BOS)",
            key="hide_special",
            on_change=on_change,
            help="Removes their columns from the attention maps and renormalises each row over the keys left; "
            "the figure's title says so. The numbers computed do not change.",
        )
        st.checkbox(
            "Merge subwords into words",
            key="words",
            on_change=on_change,
            help="One row and column per word: keys summed, queries averaged over the word's tokens, so rows "
            "still sum to 1. Said on the figure.",
        )
        st.checkbox(
            "Fixed colour range 0..1",
            key="fixed_range",
            on_change=on_change,
            help="On: every attention map uses the same 0..1 colours, comparable across texts, layers and heads. "
            "Off: each map stretches to its own largest weight (more detail, not comparable).",
        )


def _device_controls(on_change=None) -> None:
    """Display and device: device, values in cells, theme, max tokens."""
    with st.expander("Display and device", expanded=False):
        st.selectbox(
            "Device", available_devices(), key="device", on_change=on_change, help="Where the own core computes."
        )
        st.checkbox(
            "Show values in cells",
            key="show_values",
            on_change=on_change,
            help="Numbers on small heatmaps (up to 24 tokens).",
        )
        st.radio(
            "Figure theme",
            THEMES,
            key="theme",
            on_change=on_change,
            horizontal=True,
            help="'slides': white, large fonts.",
        )
        st.number_input(
            "Max tokens",
            *UI_RANGES["max_tokens"],
            key="max_tokens",
            on_change=on_change,
            help="Longer text is cut here (and at the model's limit), with a notice.",
        )


def _layer_control(facts, num_tokens: int, layer_slot, on_change=None) -> None:
    """The layer slider, into ``layer_slot`` (beside the head slider); ``facts`` bound it."""
    if facts.num_layers > 1:
        layer_slot.slider(
            "Layer",
            0,
            facts.num_layers - 1,
            key="layer",
            on_change=on_change,
            help="Which transformer block to look at.",
        )


@dataclass(frozen=True)
class ControlGroup:
    """One group of the numbers' controls (drawn by a fragment of its own, app.py ``CONTROL_PANELS``): ``draw(facts,
    num_tokens, layer_slot, on_change)``, the keys of every widget it may draw, and ``shape()``: which of them it
    draws now (a change of it draws the group again; None: always the same)."""

    draw: Callable[..., None]
    keys: tuple[str, ...]
    shape: Callable[[], Hashable] = lambda: None


CONTROL_GROUPS = {  # in the sidebar's order
    "layer": ControlGroup(_layer_control, ("layer",)),
    "scaling": ControlGroup(
        lambda facts, n, slot, on_change=None: _scaling_controls(on_change),
        ("scaling", "temperature"),
        lambda: st.session_state.get("scaling") == "custom",  # the temperature slider
    ),
    "masking": ControlGroup(
        lambda facts, n, slot, on_change=None: _masking_controls(n, on_change),
        ("mask", "window", "window_causal", "stride", "block", "blocked", "fill", "pad_to"),
        lambda: st.session_state.get("mask"),  # the mask's own controls
    ),
    "source": ControlGroup(
        lambda facts, n, slot, on_change=None: _source_controls(on_change),
        ("encoding", "source", "d_model", "d_k", "heads", "seed"),
        lambda: st.session_state.get("source") == "scratch",  # the scratch sizes
    ),
    "display": ControlGroup(
        lambda facts, n, slot, on_change=None: _display_controls(on_change),
        ("hide_special", "words", "fixed_range"),
    ),
    "device": ControlGroup(
        lambda facts, n, slot, on_change=None: _device_controls(on_change),
        ("device", "show_values", "theme", "max_tokens"),
    ),
}
# every widget key of the groups: the numbers panel must not assign them (in a whole-script run they are drawn before
# it); tests/test_app.py checks them against the widgets the sidebar draws
CONTROL_KEYS = tuple(key for group in CONTROL_GROUPS.values() for key in group.keys)
