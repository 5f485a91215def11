"""The pitfalls lab's own computations, cached: the tiled walk of one head and its memory, the KV-cache decoding.

Each kept in the shared store (``ui.compute.store``) or Streamlit's cache, once per input; called by the lab's
sections (ui/views/tiled.py, ui/views/kvcache.py).
"""

from __future__ import annotations

import streamlit as st

from attention_core.request import TraceRequest

from .compute import load_model, numbers_key, store
from .policy import heavy


def tiled_walk(trace, request: TraceRequest, block: int):
    """The chosen head computed tile by tile with every step recorded (attention_core.tiled), once per key."""
    from attention_core.tiled import walk_head

    def walk():
        with heavy():
            return walk_head(trace.core.head(trace.head), block)

    def size(value) -> int:
        return sum(int(getattr(value, name).nbytes) for name in ("running_max", "running_sum", "rescale", "output"))

    return store().get(("tiled", numbers_key(request), trace.head, block), walk, size)


@st.cache_data(show_spinner=False, max_entries=32)
def tiled_memory(n: int, block: int, dim: int):
    """Peak bytes and seconds of the tiled call vs the full core at this size (one head), measured once."""
    from attention_core.tiled import compare_with_full

    with heavy():
        return compare_with_full(n, block, heads=1, dim=dim)


def _kv_key(request: TraceRequest, steps: int) -> tuple:
    return ("kvcache", request.model, request.text, request.max_tokens, int(steps))


def kv_run(request: TraceRequest, steps: int):
    """Greedy KV-cache decoding of the text (attention_core.kvcache), checked against the full pass; once."""
    from attention_core.kvcache import kv_cache_decode

    def run():
        loaded = load_model(request.model)
        with heavy():
            return kv_cache_decode(loaded, request.text, steps, max_tokens=request.max_tokens, time_full=False)

    return store().get(_kv_key(request, steps), run, lambda value: sum(s.weights.nbytes for s in value.steps))


def kv_run_if_done(request: TraceRequest, steps: int):
    """The run for these settings if one was made (never starts one)."""
    return store().peek(_kv_key(request, steps))
