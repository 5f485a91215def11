"""The sidebar: the text and model controls, the layer and head slots, and reading the widgets back into one
Settings (the numbers' controls themselves: ui/controls.py). Widgets <-> Settings, nothing else."""

from __future__ import annotations

from dataclasses import fields

import streamlit as st

from attention_core.request import MAX_TEXT_CHARS

from .settings import UI_RANGES, VIEW_ONLY, Settings, clamp_to_ui

EXAMPLES = {
    "The animal didn't cross the street because it was too tired.": "coreference: what does 'it' attend to?",
    "The cat sat on the mat. The cat was happy.": "repeated words: rows stay separate",
    "Paris is the capital of France, and Berlin is the capital of Germany.": "parallel structure",
    "I saw a saw that could saw wood.": "one word, three meanings",
    "The keys to the cabinet are on the table.": "agreement across a phrase",
}
BUNDLED = {"minilm": "all-MiniLM-L6-v2 (encoder, learned positions)", "smollm2": "SmolLM2-135M (decoder, rotary, GQA)"}
OTHER = "other"


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


def layer_and_head_slots():
    """Two slots side by side: the layer slider's (``ui.controls``) and the head slider's (``head_slider``). Made by
    the whole-script run (app.py): a fragment may draw into a container made outside it only when that container
    outlives the fragment's own reruns."""
    col_layer, col_head = st.columns(2)
    return col_layer.empty(), col_head.empty()


def head_slider(slot, num_heads: int, on_change=None) -> None:
    """The head slider, drawn by main() (app.py ``head_control``) into ``slot`` (see ``layer_and_head_slots``); ``on_change`` reruns only
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
