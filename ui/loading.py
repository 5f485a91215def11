"""Loading the chosen model (with a fallback that says why) and fitting the text to what this server computes."""

from __future__ import annotations

import streamlit as st

from attention_core.pretrained import DEFAULT_MODEL, ModelLoadError
from attention_core.request import MAX_TEXT_CHARS

from . import compute
from .text import plain


def prepare(name: str, bar) -> None:
    """Once per session and bundled model: the one-time conversion, with a progress bar drawn into ``bar`` (a
    placeholder every run makes, so that what follows keeps its place from the first run to the next)."""
    key = f"_prepared_{name}"
    if st.session_state.get(key):
        return

    def progress(message: str, fraction: float) -> None:
        bar.progress(min(max(float(fraction), 0.0), 1.0), text=plain(f"{name}: {message}", 200))

    try:
        compute.prepare_bundled(name, progress)
    finally:
        bar.empty()
    st.session_state[key] = True


def load(model: str):
    """(loaded model, its name): the chosen one, else the last one that loaded, else the default.

    A model that fails says why in one clear message; the app goes on with the next that loads.
    """
    fallbacks = dict.fromkeys([model, st.session_state.get("_good_model", DEFAULT_MODEL), DEFAULT_MODEL])
    failed = []
    bar = st.empty()  # every run, drawn into or not: a first run's extra element moved the whole page in the next
    for name in fallbacks:
        try:
            prepare(name, bar)
            with st.spinner(f"Loading {plain(name, 80)} (the first load of a model can take a while)..."):
                loaded = compute.load_model(name)
        except compute.ServerBusy:
            raise
        except Exception as err:  # ModelLoadError, or anything a half-finished load threw: say it, go on
            failed.append(str(err) if isinstance(err, ModelLoadError) else f"{type(err).__name__}: {err}")
            continue
        st.session_state["_good_model"] = name
        if failed:
            st.error(
                f"Could not load that model. {plain(failed[0], 600)}\n\nStill showing **{plain(name, 80)}**.",
                icon=":material/warning:",
            )
        return loaded, name
    raise ModelLoadError(model, "neither it nor the bundled default could be loaded: " + " / ".join(failed)[:600])


def fit_resources(loaded, text: str) -> tuple[str, list[str]]:
    """Cut the text and the token settings to what this server allows; notices say what changed."""
    said = []
    if len(text) > MAX_TEXT_CHARS:
        said.append(f"The text has {len(text):,} characters; only the first {MAX_TEXT_CHARS:,} are used.")
        text = text[:MAX_TEXT_CHARS]
    budget = compute.token_budget(loaded.facts)
    for key, what in (("max_tokens", "Max tokens"), ("pad_to", "Pad input to")):
        value = int(st.session_state.get(key, 0))
        if value > budget:
            st.session_state[key] = budget
            said.append(f"{what} {value} is more than this server computes for {loaded.facts.name}; using {budget}.")
    return text, said


def show_fixes(fixes: list[str]) -> None:
    if fixes:
        st.warning("\n".join(f"- {plain(fix)}" for fix in fixes), icon=":material/tune:")
