"""A page for tests/test_chart.py: a lens chart (ui/chart.py) whose figure a radio picks, the same chart far
below it, out of view, and a button that reruns the page with nothing changed. ``?gap=1`` puts a tall gap above
the first chart too (every chart out of view when the page opens). The "Another chart" checkbox adds a chart just
under the first one (a new chart near the screen, as when a view opens). ``?hidden=1`` adds a chart in a box hidden as
app.py hides a view kept in the page (``ui.ahead.hiding_css``). Run by ``streamlit run tests/chart_page.py``."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # streamlit puts only tests/ on the path

import numpy as np  # noqa: E402
import plotly.graph_objects as go  # noqa: E402
import streamlit as st  # noqa: E402

from ui.ahead import hiding_css  # noqa: E402
from ui.chart import draw  # noqa: E402


@st.cache_resource
def figures() -> dict:
    """Two fixed figures, built once and shared by every run (as ui.compute's are)."""
    made = {}
    for seed, name in enumerate(("first", "second")):
        z = np.random.default_rng(seed).random((6, 6)).astype(np.float32)
        made[name] = go.Figure(go.Heatmap(z=z, name=f"weights-{name}"), layout={"height": 320})
    return made


pick = st.radio("Figure", ["first", "second"], horizontal=True)
st.button("Rerun")
another = st.checkbox("Another chart")
if st.query_params.get("gap"):
    st.markdown('<div style="height: 3000px">(a tall gap above)</div>', unsafe_allow_html=True)
draw(figures()[pick], key="fig_test")
if another:
    draw(figures()["second"], key="fig_new")  # a new chart near the screen
st.markdown('<div style="height: 3000px">(a tall gap)</div>', unsafe_allow_html=True)
draw(figures()[pick], key="fig_below")  # far out of view until scrolled to
if st.query_params.get("hidden"):
    st.html(f"<style>{hiding_css(['.st-key-hidden_box'])}</style>")
    with st.container(key="hidden_box"):
        draw(figures()[pick], key="fig_hidden")  # in a view kept hidden: drawn while the browser is idle
