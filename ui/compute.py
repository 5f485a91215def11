"""Cached calls into attention_core. Models: cache_resource (shared, read-only); traces: cache_data.

Resources, for a server shared by many sessions:
- ``heavy()``: at most ATTENTION_LENS_MAX_HEAVY (default 2) model loads, forwards or trace builds run
  at once in the whole server; others queue. A thread that already holds a slot never waits for a
  second one (no self-deadlock, even with a limit of 1), and a queue longer than
  ATTENTION_LENS_HEAVY_WAIT_S (default 120 s) ends in ``ServerBusy`` with a message, not a hang.
- ``token_budget(facts)``: the most tokens a trace of this model may hold on this server, so one
  trace stays under ATTENTION_LENS_MAX_TRACE_MB (default 128 MB): the app caps longer inputs with a notice.
- the caches hold a bounded number of captures and traces.
- local model folders are refused unless ATTENTION_LENS_MODELS_DIR names the folder they must be in.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
from dataclasses import astuple

import streamlit as st

from attention_core import lab, pipeline
from attention_core.request import TraceRequest


def _env_number(name: str, default: float, low: float) -> float:
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return max(low, value) if math.isfinite(value) else default


MAX_HEAVY = int(_env_number("ATTENTION_LENS_MAX_HEAVY", 2, 1))
HEAVY_WAIT_S = _env_number("ATTENTION_LENS_HEAVY_WAIT_S", 120.0, 1.0)
MAX_TRACE_MB = _env_number("ATTENTION_LENS_MAX_TRACE_MB", 128.0, 1.0)
HEAVY_RUNS = threading.BoundedSemaphore(MAX_HEAVY)
_held = threading.local()


class ServerBusy(RuntimeError):
    """Every heavy slot stayed taken for HEAVY_WAIT_S seconds."""


@contextlib.contextmanager
def heavy():
    """Hold one of the server's MAX_HEAVY slots for a model load, a forward or a trace build.

    Re-entrant per thread: a thread that holds a slot goes straight through (so nested heavy calls
    never wait for themselves). Waits at most HEAVY_WAIT_S, then raises ServerBusy.
    """
    depth = getattr(_held, "depth", 0)
    if depth:
        _held.depth = depth + 1
        try:
            yield
        finally:
            _held.depth = depth
        return
    if not HEAVY_RUNS.acquire(timeout=HEAVY_WAIT_S):
        raise ServerBusy(
            f"The server is busy with other people's runs (waited {HEAVY_WAIT_S:.0f} s). Try again in a moment."
        )
    _held.depth = 1
    try:
        yield
    finally:
        _held.depth = 0
        HEAVY_RUNS.release()


_PREPARE = threading.Lock()  # one conversion of a bundled model at a time in the whole server


def prepare_bundled(name: str, progress) -> None:
    """Make a bundled model ready (SmolLM2: the one-time conversion) outside the cached loader, so the
    page can show each step in a progress bar (a cached function may not draw into the page)."""
    from attention_core.pretrained.bundled import bundled_name, prepare

    bundled = bundled_name(name)
    if bundled is None:
        return
    with _PREPARE, heavy():
        prepare((bundled,), progress=progress)


def models_dir() -> str | None:
    """Folder that local model paths must live in (ATTENTION_LENS_MODELS_DIR), if configured.

    Unset, the app accepts bundled models and Hugging Face ids only: a public server never reads
    arbitrary folders. (The command line accepts any folder.)
    """
    return os.environ.get("ATTENTION_LENS_MODELS_DIR") or None


def token_budget_for(num_layers: int, num_heads: int) -> int:
    """The most tokens one trace may hold so it stays under MAX_TRACE_MB (at least 16).

    A trace keeps float64 (L, L) maps: the model's attentions for every layer and head, and about
    eight per head of the chosen layer (scores, scaled, masked, weights of the core and the model).
    """
    maps = max(1, num_layers * num_heads + 8 * num_heads)
    return max(16, math.isqrt(int(MAX_TRACE_MB * 2**20 / 8 / maps)))


def token_budget(facts) -> int:
    """token_budget_for this model's layers and heads."""
    return token_budget_for(facts.num_layers, facts.num_heads)


@st.cache_resource(max_entries=3, show_spinner=False)
def load_model(name: str):
    folder = models_dir()
    with heavy():
        return pipeline.load(TraceRequest(model=name), models_dir=folder, allow_local=folder is not None)


@st.cache_resource(max_entries=16, show_spinner=False)
def capture(name: str, text: str, max_tokens: int, pad_to: int):
    loaded = load_model(name)
    with heavy():
        return pipeline.capture_text(loaded, TraceRequest(model=name, text=text, max_tokens=max_tokens, pad_to=pad_to))


@st.cache_data(max_entries=16, show_spinner=False)
def trace(key: tuple, _request: TraceRequest, _notices: tuple = ()):
    """``key`` (the request as a tuple) is what is hashed; the request object itself is not."""
    request = _request
    loaded = load_model(request.model)
    cap = capture(request.model, request.text, request.max_tokens, request.pad_to)
    with heavy():
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
    with heavy():
        return lab.cost_table(ns, device=device)
