"""Issue 8, text: any text goes through the whole pipeline without an exception, and token text stays text.

Hypothesis drives generated texts (mostly short; emoji with joiners, right-to-left scripts, combining
marks, control characters, NUL, markup and LaTeX specials, enormous words) through tokenise ->
capture (the real model's forward with hooks) -> build_trace (own core + replay of every layer) ->
figures, on the bundled MiniLM loaded once. Independent checks: the tokenizer's own count of ids,
rows that sum to 1, and html.unescape (not the code under test) to read labels back.
"""

from __future__ import annotations

import html
import json
import re
import time

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attention_core.pipeline import build_trace, capture_text
from attention_core.request import TraceRequest
from viz.labels import escape_label, hover_labels, plain_labels, tick_labels, visible_label
from viz.views import figures_for_trace

MAX_TOKENS = 16
NASTY = [
    "a",
    "👩‍👩‍👧‍👦 and 🏳️‍🌈",
    "שלום עולם مرحبا بالعالم",
    "e\u0301\u0301\u0301 a\u0308\u0323",
    "\u0301\u0301",
    "\x00\x01\x07\x1b\x7f",
    "NUL\x00in the middle",
    "\u202eRTL override\u202c \u200b\u200d\ufeff",
    "x" * 3000,
    "supercalifragilisticexpialidocious" * 40,
    "<script>alert(1)</script><img src=x onerror=alert(2)>",
    "<b>bold</b> &amp; &lt;tag&gt; &#58;",
    "**bold** _it_ ~~s~~ `code` # head > quote - item 1. one | a | b |",
    "$x^2$ $$\\frac{a}{b}$$ \\(x\\) \\[y\\]",
    ":smile: :red[red] :material/home: [link](http://x) ![i](y)",
    "=SUM(A1) +1 -1 @x",
    "\t\n\r\v\f mixed whitespace \n\n",
    "🙂" * 200,
    "中文字符和日本語のテキスト",
]
ALLOWED_TAGS = {"br", "b", "i", "em", "sup", "sub", "span", "extra"}  # what viz itself writes into figures
_TAG = re.compile(r"<\s*/?\s*([A-Za-z][A-Za-z0-9]*)")

texts = st.one_of(
    st.sampled_from(NASTY),
    st.text(max_size=24),
    st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=12),
    st.text(alphabet="<>&\"'`*_[](){}#$\\|~:!-+=.\x00\u200d\u0301 ab", max_size=30),
    st.builds(lambda word, n: word * n, st.text(min_size=1, max_size=3), st.integers(1, 400)),
)


@pytest.fixture(scope="module")
def minilm():
    from attention_core.pretrained import load_model

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: one thread is fastest, and polite on a shared machine
    yield load_model("minilm")
    torch.set_num_threads(threads)


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _assert_no_markup_from_tokens(fig) -> None:
    for text in _strings(json.loads(fig.to_json())):
        tags = {m.group(1).lower() for m in _TAG.finditer(text)}
        assert tags <= ALLOWED_TAGS, (tags - ALLOWED_TAGS, text[:200])


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts)
def test_any_text_goes_through_the_whole_pipeline(minilm, text):
    request = TraceRequest(text=text, max_tokens=MAX_TOKENS)
    if not text.strip():
        with pytest.raises(ValueError, match="empty"):
            capture_text(minilm, request)
        return
    cap = capture_text(minilm, request)
    expected = len(minilm.tokenizer(text[:4096], truncation=True, max_length=MAX_TOKENS)["input_ids"])
    assert len(cap.tokens.labels) == expected  # the tokenizer's own count (the cap cuts 100 kB first)
    trace = build_trace(request, minilm.facts, cap)
    weights = trace.core.weights  # (H, L, S)
    assert np.isfinite(weights).all() and np.allclose(weights.sum(-1), 1, atol=1e-5)
    assert all(r.weights < 1e-4 for r in trace.replay)  # replay still matches the model
    figures = figures_for_trace(trace, "lines", head=trace.head)  # token ticks both sides, hover text per pair
    if len(text) % 4 == 0:  # a quarter of the texts also draw a heatmap (kept to a quarter for speed)
        figures.update(figures_for_trace(trace, "rollout"))
    for fig in figures.values():
        _assert_no_markup_from_tokens(fig)


@settings(max_examples=1000, deadline=None)
@given(token=st.text(max_size=40))
def test_labels_read_back_as_the_token(token):
    """Whatever a token holds, its figure label unescapes to its visible text and holds no markup."""
    for label in (*tick_labels([token], max_chars=None), escape_label(visible_label(token))):
        assert "<" not in label and ">" not in label
        assert html.unescape(label) == visible_label(token)
    assert html.unescape(hover_labels([token])[0]) == f"0 '{visible_label(token)}'"
    shown = plain_labels([token])[0]
    assert shown and not any(ch in shown for ch in "\x00\n\r\t")  # never blank, never a raw control


def test_100_kb_of_text_is_answered_fast_with_a_notice(minilm):
    text = ("Attention lets every token look at every other token. " * 2000)[:100_000]
    started = time.perf_counter()
    request = TraceRequest(text=text, max_tokens=128)
    cap = capture_text(minilm, request)
    trace = build_trace(request, minilm.facts, cap)
    figures_for_trace(trace, "derivation", head=0)
    seconds = time.perf_counter() - started
    print(f"\n100 kB text -> 128-token trace and derivation figures: {seconds:.2f} s")
    assert len(trace.tokens) == 128
    assert any("100,000 characters" in n and "first 128 tokens" in n for n in trace.notices)


@pytest.mark.parametrize("text", ["a", "\x00\x07", "\u0301", "👩‍👩‍👧‍👦"])
def test_tiny_and_dropped_texts_give_a_view_or_a_notice(minilm, text):
    request = TraceRequest(text=text, max_tokens=MAX_TOKENS)
    trace = build_trace(request, minilm.facts, capture_text(minilm, request))
    assert trace.tokens[0] == "[CLS]" and trace.tokens[-1] == "[SEP]"
    if len(trace.tokens) == 2:
        assert any("only its special tokens remain" in n for n in trace.notices)
