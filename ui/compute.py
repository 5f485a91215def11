"""Cached calls into attention_core. Models: cache_resource (shared, read-only); traces: cache_data.

A small semaphore keeps simultaneous heavy runs (model loads, forwards) from exhausting memory:
extra sessions wait their turn instead of all running at once.
"""

from __future__ import annotations

import os
import threading
from dataclasses import astuple

import streamlit as st

from attention_core import lab, pipeline
from attention_core.request import TraceRequest

HEAVY_RUNS = threading.BoundedSemaphore(int(os.environ.get("ATTENTION_LENS_MAX_HEAVY", "2")))


def models_dir() -> str | None:
    """Folder that local model paths must live in (ATTENTION_LENS_MODELS_DIR), if configured."""
    return os.environ.get("ATTENTION_LENS_MODELS_DIR") or None


@st.cache_resource(max_entries=3, show_spinner=False)
def load_model(name: str):
    with HEAVY_RUNS:
        return pipeline.load(TraceRequest(model=name), models_dir=models_dir())


@st.cache_resource(max_entries=24, show_spinner=False)
def capture(name: str, text: str, max_tokens: int, pad_to: int):
    loaded = load_model(name)
    with HEAVY_RUNS:
        return pipeline.capture_text(loaded, TraceRequest(model=name, text=text, max_tokens=max_tokens, pad_to=pad_to))


@st.cache_data(max_entries=48, show_spinner=False)
def trace(key: tuple, _request: TraceRequest, _notices: tuple = ()):
    """``key`` (the request as a tuple) is what is hashed; the request object itself is not."""
    request = _request
    loaded = load_model(request.model)
    cap = capture(request.model, request.text, request.max_tokens, request.pad_to)
    return pipeline.build_trace(request, loaded.facts, cap, _notices)


def trace_for(request: TraceRequest, notices=()):
    return trace(astuple(request), request, tuple(notices))


@st.cache_data(show_spinner=False)
def variance_curve(max_power: int = 10, samples: int = 20000, seed: int = 0):
    from attention_core import analysis

    return analysis.dot_product_variance(tuple(2**p for p in range(max_power + 1)), samples=samples, seed=seed)


@st.cache_data(show_spinner=False)
def saturation_curve(num_keys: int = 16, seed: int = 0):
    from attention_core import analysis

    return analysis.saturation_vs_dk(tuple(2**p for p in range(10)), num_keys=num_keys, seed=seed)


@st.cache_data(show_spinner=False)
def sparse_entries(window: int, stride: int):
    return lab.sparse_mask_entries(window=window, stride=stride)


def cost_table(ns: tuple[int, ...], device: str):
    with HEAVY_RUNS:
        return lab.cost_table(ns, device=device)
