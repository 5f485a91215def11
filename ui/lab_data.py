"""The pitfalls tab's cached lab curves and tables (attention_core.lab and .analysis): small, shared by every
session, kept by ``st.cache_data``; the timed cost table runs inside the server's ``heavy()`` policy."""

from __future__ import annotations

import streamlit as st

from attention_core import analysis, lab
from attention_core.analysis import VARIANCE_SAMPLES

from .policy import heavy


@st.cache_data(show_spinner=False)
def variance_curve(max_power: int = 10, samples: int = VARIANCE_SAMPLES, seed: int = 0):
    return analysis.dot_product_variance(tuple(2**p for p in range(max_power + 1)), samples=samples, seed=seed)


@st.cache_data(show_spinner=False)
def saturation_curve(num_keys: int = 16, seed: int = 0):
    return analysis.saturation_vs_dk(tuple(2**p for p in range(10)), num_keys=num_keys, seed=seed)


@st.cache_data(show_spinner=False)
def sparse_entries(window: int, stride: int):
    return lab.sparse_mask_entries(window=window, stride=stride)


@st.cache_data(show_spinner=False)
def sparse_reach(window: int, stride: int, n: int = 2048):
    return lab.sparse_reach(n, window=window, stride=stride)


def cost_table(ns: tuple[int, ...], device: str):
    with heavy():
        return lab.cost_table(ns, device=device)
