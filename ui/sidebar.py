"""The sidebar: every control, each with help text. Widgets <-> Settings, nothing else."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, fields

import streamlit as st

from attention_core.device import available_devices
from attention_core.request import ENCODINGS, FILLS, LIMITS, MASKS, MAX_TEXT_CHARS, SCALINGS, SOURCES

from .settings import THEMES, UI_RANGES, VIEW_ONLY, Settings, clamp_to_ui

EXAMPLES = {
    "The animal didn't cross the street because it was too tired.": "coreference: what does 'it' attend to?",
    "The cat sat on the mat. The cat was happy.": "repeated words: rows stay separate",
    "Paris is the capital of France, and Berlin is the capital of Germany.": "parallel structure",
    "I saw a saw that could saw wood.": "one word, three meanings",
    "The keys to the cabinet are on the table.": "agreement across a phrase",
}
BUNDLED = {"minilm": "all-MiniLM-L6-v2 (encoder, learned positions)", "smollm2": "SmolLM2-135M (decoder, rotary, GQA)"}
OTHER = "other"
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


def seed_state(settings: Settings) -> None:
    """First run of a session: put the URL's settings into the widgets' state."""
    for f in fields(Settings):
        st.session_state.setdefault(f.name, getattr(settings, f.name))
    model = settings.model
    st.session_state.setdefault("model_choice", model if model in BUNDLED else OTHER)
    st.session_state.setdefault("model_custom", "" if model in BUNDLED else model)
    st.session_state["blocked"] = list(st.session_state.get("blocked", ()))
    st.session_state["query_set"] = list(st.session_state.get("query_set", ()))


# the controls main() draws before the numbers panel (app.py): a panel's own run must not touch them
TEXT_AND_MODEL = ("text", "model", "model_choice", "model_custom")


def keep_state(*, skip: tuple[str, ...] = (), only: tuple[str, ...] | None = None) -> None:
    """Streamlit forgets a widget's value on a run where it is not drawn (a hidden control, another
    view). Re-assigning every setting each run keeps them all, so the URL and the views stay in step.
    ``skip``: controls already drawn in this run (their state may no longer be assigned); ``only``: just these."""
    for name in [f.name for f in fields(Settings)] + ["model_choice", "model_custom", "pitfall", "lab_encoding"]:
        if name in st.session_state and name not in skip and (only is None or name in only):
            st.session_state[name] = st.session_state[name]


def _pick_example() -> None:
    choice = st.session_state.get("example")
    if choice in EXAMPLES:
        st.session_state["text"] = choice


def text_and_model() -> tuple[str, str]:
    """The two controls that decide which model runs on what; rendered before the model loads."""
    st.selectbox(
        "Example sentence",
        ["(type your own below)", *EXAMPLES],
        key="example",
        on_change=_pick_example,
        format_func=lambda s: s if s not in EXAMPLES else f"{s}  ({EXAMPLES[s]})",
        help="Pick a sentence that shows something about attention, or write your own text.",
    )
    st.text_area(
        "Text",
        key="text",
        height=90,
        max_chars=MAX_TEXT_CHARS,
        help="Any text. It is tokenised by the chosen model's tokenizer and capped at 'max tokens'.",
    )
    st.selectbox(
        "Model",
        [*BUNDLED, OTHER],
        key="model_choice",
        format_func=lambda m: BUNDLED.get(m, "another model: Hugging Face id or local folder"),
        help="Bundled models work offline. 'Another model' loads any Hugging Face id (needs network) or a local folder.",
    )
    if st.session_state["model_choice"] == OTHER:
        st.text_input(
            "Hugging Face id or local folder",
            key="model_custom",
            placeholder="e.g. bert-base-uncased or /models/my-model",
            help="Loaded with eager attention and safetensors only; remote code is never run.",
        )
        model = st.session_state.get("model_custom", "").strip() or "minilm"
    else:
        model = st.session_state["model_choice"]
    return st.session_state.get("text", ""), model


def _clamp(key: str, high: int, why: str) -> str | None:
    """Lower ``key`` to ``high`` when it is above; returns a notice saying so, else None."""
    value = st.session_state.get(key, 0)
    if value > high:
        st.session_state[key] = high
        return f"{key} {value} does not exist {why}; showing {key} {high}"
    return None


def as_position(value) -> int:
    """A widget's position as an int. A selectbox whose options changed between two runs (a new text
    while its old labels were on screen) can hand back its shown label, "3: cat": keep the number."""
    if isinstance(value, bool):
        return int(value)
    try:
        return max(int(str(value).split(":", 1)[0].strip()), 0)
    except ValueError:
        return 0


def positions(values) -> tuple[int, ...]:
    """A multiselect's positions as a sorted tuple of ints (labels such as "3: cat" read as 3)."""
    return tuple(sorted({as_position(v) for v in values or ()}))


def fit_to_model(facts, num_tokens: int) -> list[str]:
    """Bring every setting within what this model, this text and the widgets allow; one notice per change.

    Run before the widgets are drawn (a slider handed a value beyond its end refuses to draw).
    """
    for name in ("layer", "head", "query"):
        _set(name, as_position(st.session_state.get(name, 0)))
    notices = [
        _clamp("layer", facts.num_layers - 1, f"in {facts.name} ({facts.num_layers} layers)"),
    ]
    if st.session_state.get("source", "replay") == "replay":
        heads, where = facts.num_heads, f"in {facts.name} ({facts.num_heads} heads)"
    else:
        heads = int(st.session_state.get("heads", 4))
        where = f"with {heads} scratch heads"
    notices.append(_clamp("head", heads - 1, where))
    notices.append(_clamp("query", max(num_tokens - 1, 0), f"in this text ({num_tokens} tokens)"))
    blocked = list(st.session_state.get("blocked", []))
    kept = [j for j in blocked if 0 <= j < num_tokens]
    if len(kept) != len(blocked):
        gone = sorted(set(blocked) - set(kept))
        notices.append(f"blocked key positions {gone[:8]} are beyond this text's {num_tokens} tokens; dropped")
    _set("blocked", kept)
    values = {name: st.session_state[name] for name in UI_RANGES if name in st.session_state}
    fixes: list[str] = []
    clamp_to_ui(values, fixes)
    for name, value in values.items():
        _set(name, value)
    return [n for n in notices if n] + fixes


def _set(name: str, value) -> None:
    """Assign a setting only when it changes: ``fit_to_model`` runs again after some of the widgets are drawn in the
    same run (app.py: each group of controls fits first), and a drawn widget's state may not be assigned."""
    if name not in st.session_state or st.session_state[name] != value:
        st.session_state[name] = value


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


def layer_and_head_slots():
    """Two slots side by side: the layer slider's (``controls``) and the head slider's (``head_slider``). Made by
    the whole-script run (app.py): a fragment may draw into a container made outside it only when that container
    outlives the fragment's own reruns."""
    col_layer, col_head = st.columns(2)
    return col_layer.empty(), col_head.empty()


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
    """One group of the numbers' controls (drawn by a fragment of its own, app.py ``controls_panel``): ``draw(facts,
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


def head_slider(slot, num_heads: int, on_change=None) -> None:
    """The head slider, drawn by the numbers panel into ``slot`` (see ``controls``); ``on_change`` reruns only
    the view shown (app.py)."""
    if num_heads > 1:
        slot.slider(
            "Head", 0, num_heads - 1, key="head", help="Which attention head of that layer.", on_change=on_change
        )
    else:  # drawn into every run all the same: a fragment run may fill only a slot it filled in the last full run
        slot.empty()


def view_only() -> dict:
    """The view-only settings as the widgets hold them now (read inside the view's fragment)."""
    values = {name: st.session_state[name] for name in VIEW_ONLY if name in st.session_state}
    for name in ("head", "query", "tiled_block", "tiled_step", "kv_steps", "kv_step"):
        if name in values:
            values[name] = int(values[name])
    if "query_set" in values:
        values["query_set"] = positions(values["query_set"])
    if not values.get("view"):
        values["view"] = "derivation"
    return values


def read_settings(model: str) -> Settings:
    """Current widget values as one Settings object."""
    values = {}
    for f in fields(Settings):
        if f.name in st.session_state:
            values[f.name] = st.session_state[f.name]
    values["model"] = model
    values["blocked"] = tuple(sorted(int(j) for j in values.get("blocked", ())))
    values["query_set"] = positions(values.get("query_set", ()))
    for name in ("layer", "head", "query", "window", "stride", "block", "pad_to", "d_model", "d_k", "heads", "seed"):
        if name in values:
            values[name] = int(values[name])
    for name in ("tiled_block", "tiled_step", "kv_steps", "kv_step"):  # the pitfalls lab's sliders
        if name in values:
            values[name] = int(values[name])
    values["max_tokens"] = int(values.get("max_tokens", 128))
    values["temperature"] = float(values.get("temperature", 8.0))
    return Settings(**values)
