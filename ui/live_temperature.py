"""Live temperature: the selected head's softmax redrawn in the browser while a slider moves (issue 16).

The component (``ui/components/live_temperature/``, plain JavaScript shipped with the app, no CDN)
gets the head's raw scores QK^T once and recomputes softmax(QK^T / t) with the same float32 steps
as the core on every frame of a drag: the heatmap, the row entropies and one query's weights, with
no server round trip. Only on release does it send t back: ``apply_release`` turns the scaling to
"divide by temperature" at that t, and the app reruns in full so the server's exact figures replace
the preview.

What the browser gets (``payload``): scores as float32 bytes (L*S), which keys each query may see as
one byte per cell, and, only when the head has one, the position bias added after masking (ALiBi) as
float32 bytes. About 5 bytes per cell: 330 KB at 256 tokens (9 with a bias). They travel as one packed blob
(``pack``) to a v2 component drawn in the page itself: as an iframe (a v1 component) it cost the first visit of a
view that shows it about 0.2 s of the browser's time at 64 tokens (a document to create and its scripts to run:
the Query inspector's first visit 0.44 -> 0.21 s without it, report section 7, "twentieth").
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping, MutableMapping
from pathlib import Path

import numpy as np
import plotly.colors
import streamlit as st
import streamlit.components.v1 as components

from attention_core.traces import HeadTrace
from viz.theme import MASK_COLOUR, SEQUENTIAL

from .chart import inline_js
from .settings import UI_RANGES

FOLDER = Path(__file__).resolve().parent / "components" / "live_temperature"
# a v1 component used only as a file server: the folder is served at component/<name>/<file> (live_temperature.js,
# and index.html, the widget on a page of its own for the tests and the benchmark)
_files = components.declare_component("live_temperature", path=str(FOLDER))
SOURCE = f"component/{_files.name}/live_temperature.js"
ROOT_CLASS = "lt-root"
CSS = (FOLDER / "live_temperature.css").read_text(encoding="utf-8")  # index.html links the same file
_component = st.components.v2.component(
    "attention_lens_live_temperature",
    html=f'<div class="{ROOT_CLASS}"></div>',
    css=CSS,
    js=inline_js(FOLDER / "loader.js", {"__LT_SOURCE__": SOURCE}),
    isolate_styles=False,  # in the page, under the app's own font and colours
)
MAGIC = b"LTP1"
APPLIED = "_applied"  # after the component's key: the nonce of the last release applied

RELEASED = "_live_temperature_released"  # set by the release callback: the next run of the view reruns the app
STEP = 0.1  # the sidebar's temperature slider step: a released t lands on it, so both show the same value
OPEN_UP_TO = 64  # tokens: the section starts open up to here, above it sends its matrix only once opened


def released_temperature(value) -> float | None:
    """The t a release sends back ({"temperature": t, ...} or a bare number), on the sidebar slider's
    step and inside its range; None when it holds no usable number."""
    if isinstance(value, dict):
        value = value.get("temperature")
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        t = float(value)
    except ValueError:
        return None
    if not math.isfinite(t):
        return None
    low, high = UI_RANGES["temperature"]
    t = round(round(t / STEP) * STEP, 10)  # 2.3000000000000003 -> 2.3
    return min(max(t, low), high)


def apply_release(state: MutableMapping, value) -> float | None:
    """Write a released t into the settings (``state`` is st.session_state): scaling "custom" at t.

    Returns t, or None (nothing changed) when ``value`` holds no number. Also marks the release so the
    view asks for a full rerun (the slider lives in the view's fragment; the trace is computed outside).
    """
    t = released_temperature(value)
    if t is None:
        return None
    state["scaling"] = "custom"
    state["temperature"] = t
    state[RELEASED] = True
    return t


def follow_release() -> None:
    """Call first in a view that shows the section: after a release, rerun the whole app at once
    (the view's fragment alone would keep the trace of the old temperature)."""
    if st.session_state.pop(RELEASED, False):
        st.rerun(scope="app")


def payload(head: HeadTrace, fill: str) -> dict:
    """The component's numeric arguments for one head: scores, allowed keys, and only where the head has
    them, a float mask's own values (``added``) and the position bias added after masking (``bias``, ALiBi)."""
    if head.scores is None or head.scaled is None or head.masked is None:
        raise ValueError("this head has no scores (the real model returns only its weights)")
    scores = np.ascontiguousarray(head.scores, dtype=np.float32)  # (L, S)  q_i . k_j
    num_queries, num_keys = scores.shape
    allowed = np.broadcast_to(head.mask, scores.shape)  # (L, S) True = may attend
    added = head.masked.astype(np.float64) - head.scaled.astype(
        np.float64
    )  # (L, S) the mask; -inf / -1e9 where blocked
    bias = getattr(head, "score_bias", None)  # (L, S) ALiBi's -slope * |i - j|, added after masking
    return {
        "n": int(num_queries),
        "s": int(num_keys),
        "scores": scores.tobytes(),
        "allowed": np.ascontiguousarray(allowed, dtype=np.uint8).tobytes(),
        # a float mask with values besides 0 where allowed (never from the app's pipeline: its mask is -inf or -1e9)
        "added": added.astype(np.float32).tobytes() if np.any(added[allowed] != 0.0) else None,
        "bias": None
        if bias is None or not np.any(bias)
        else np.ascontiguousarray(np.broadcast_to(bias, scores.shape), dtype=np.float32).tobytes(),
        "fill": "-1e9" if fill == "-1e9" else "-inf",
        "temperature": 1.0 / float(head.scale),  # the t the server's figures use now
        "d_k": int(head.q.shape[-1]),
    }


def pack(args: Mapping) -> bytes:
    """The component's arguments as one blob (live_temperature.js ``unpack``): MAGIC, the header's length (uint32,
    little-endian), the header (JSON: every argument that is not bytes, and ``buffers``: name -> [offset, length]
    from the start of the arrays, which begin at the next multiple of 4), then each bytes argument, 4-byte aligned
    (a float32 view of it needs no copy to line up)."""
    plain = {name: value for name, value in args.items() if not isinstance(value, bytes)}
    offsets, arrays = {}, bytearray()
    for name, value in args.items():
        if isinstance(value, bytes):
            arrays += bytes(-len(arrays) % 4)
            offsets[name] = [len(arrays), len(value)]
            arrays += value
    header = json.dumps({**plain, "buffers": offsets}, separators=(",", ":")).encode("utf-8")
    start = MAGIC + struct.pack("<I", len(header)) + header
    return start + bytes(-len(start) % 4) + bytes(arrays)


def unpack(blob: bytes) -> dict:
    """``pack``'s arguments back (the tests' check of the format; the browser has its own)."""
    if blob[:4] != MAGIC:
        raise ValueError("not a packed live-temperature payload")
    (length,) = struct.unpack("<I", blob[4:8])
    args = json.loads(blob[8 : 8 + length])
    base = 8 + length + -(8 + length) % 4
    for name, (offset, size) in args.pop("buffers").items():
        args[name] = blob[base + offset : base + offset + size]
    return args


def released_value(value):
    """The release a rerun brings (the component's "release" trigger in its session-state value), or None."""
    if isinstance(value, Mapping):
        return value.get("release")
    return getattr(value, "release", None)


def _on_release(key: str) -> None:
    value = released_value(st.session_state.get(key))
    if apply_release(st.session_state, value) is not None:
        # a trigger's value lasts one run: the nonce is kept to tell the widget its release was applied
        st.session_state[key + APPLIED] = value.get("nonce") if isinstance(value, Mapping) else None


def component_key(view: str) -> str:
    """The key of the component in ``view``'s section (ui/follow.py points the Query inspector's box at it)."""
    return f"live_temperature_{view}"


def section(head: HeadTrace, labels: list[str], query: int, *, fill: str, view: str) -> None:
    """A drawer "Live temperature (in your browser)" with the component, for the head on screen."""
    n = len(labels)
    box = st.expander(
        "Live temperature (in your browser)",
        expanded=n <= OPEN_UP_TO,
        key=f"open_live_temperature_{view}",
        on_change="rerun",
    )
    if not box.open:
        return
    with box:
        st.caption(
            "Drag to divide this head's scores QKᵀ by another temperature t: your browser redraws its softmax, "
            "the row entropies and one query's weights as the handle moves (click a row to pick the query). "
            "On release the scaling becomes ÷ temperature at that t and the page's exact numbers replace the preview."
        )
        if head.scores is None:
            st.caption("This head has no raw scores to rescale.")
            return
        key = component_key(view)
        low, high = UI_RANGES["temperature"]
        data = pack(
            {
                **payload(head, fill),
                "labels": [str(label) for label in labels],
                "query": int(min(max(query, 0), n - 1)),
                "t_min": low,
                "t_max": high,
                "step": STEP,
                "colorscale": plotly.colors.get_colorscale(SEQUENTIAL),
                "mask_colour": MASK_COLOUR,
                "applied": st.session_state.get(key + APPLIED),
            }
        )
        _component(key=key, data=data, on_release_change=lambda: _on_release(key))
