"""Attention Lens: type text, see attention computed step by step beside a real transformer.

Streamlit only: read widgets into one Settings, call cached pure functions, place figures.
Run: make run   (or: .venv/bin/python -m streamlit run app.py)
"""

from __future__ import annotations

import streamlit as st

from attention_core.device import configure_threads, pick_device
from attention_core.pretrained import ModelLoadError
from ui import compute, export, header, sidebar, views
from ui.settings import VIEW_LABELS, VIEWS, from_query_params, to_query_params

EXPORTABLE = {"derivation": "derivation", "compare": "compare", "heads": "heads,lines,rollout", "query": "query"}

st.set_page_config(page_title="Attention Lens", page_icon="🔍", layout="wide")


@st.cache_resource
def _threads() -> int:
    return configure_threads()


def main() -> None:
    _threads()
    if "_seeded" not in st.session_state:
        settings, notices = from_query_params(st.query_params)
        sidebar.seed_state(settings)
        st.session_state["_url_notices"] = notices
        st.session_state["_seeded"] = True
    sidebar.keep_state()
    for notice in st.session_state.pop("_url_notices", []):
        st.warning(f"Link setting fixed: {notice}", icon=":material/link:")

    st.title("Attention Lens")
    st.caption(
        "Attention derived step by step: your own from-scratch core beside a real transformer, number for number."
    )
    with st.sidebar:
        st.header("Controls")
        text, model = sidebar.text_and_model()

    good_model = st.session_state.get("_good_model", "minilm")
    try:
        with st.spinner(f"Loading {model} (the first load of a model can take a while)..."):
            loaded = compute.load_model(model)
        st.session_state["_good_model"] = model
    except ModelLoadError as err:
        st.error(f"Could not load that model. {err}\n\nStill showing **{good_model}**.", icon=":material/warning:")
        model = good_model
        loaded = compute.load_model(model)

    if not text.strip():
        st.info("Type some text in the sidebar (or pick an example) to see its attention.", icon=":material/edit:")
        return
    try:
        cap = compute.capture(
            model, text, int(st.session_state.get("max_tokens", 128)), int(st.session_state.get("pad_to", 0))
        )
    except ValueError as err:
        st.error(str(err), icon=":material/warning:")
        return
    with st.sidebar:
        sidebar.controls(loaded.facts, len(cap.tokens.labels))
    settings = sidebar.read_settings(model)
    st.query_params.from_dict(to_query_params(settings))

    try:
        device = pick_device(settings.device)
        trace = compute.trace_for(settings.request())
    except ValueError as err:
        st.error(str(err), icon=":material/warning:")
        return
    header.render(trace, str(device), settings)
    view = (
        st.segmented_control(
            "View",
            VIEWS,
            key="view",
            format_func=VIEW_LABELS.get,
            selection_mode="single",
            label_visibility="collapsed",
        )
        or "derivation"
    )
    views.render(view, trace, settings)
    if view in EXPORTABLE:
        export.slides_button(trace, settings, EXPORTABLE[view])


try:
    main()
except Exception as err:  # last line of defence: a message, never a traceback in the page
    st.error(f"Something went wrong ({type(err).__name__}). Change a control or reload the page. Details: {err}"[:600])
