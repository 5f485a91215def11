"""The query step-through follows the display options (issue 17, items 3 and 4): hidden special keys with the
weights renormalised, subwords merged into words (keys summed, the query word's rows averaged), the weight
axis's range.

References, none of them the code under test:
- a five-token example worked out by hand below;
- on MiniLM: softmax of the scaled scores over the kept keys, and torch's own SDPA with the hidden keys masked
  (renormalising is masking); the core's own output rows averaged; the merged row summed by hand from the
  trace's weights; ``viz.display.display_map``'s merged matrix (tested by hand in test_display.py);
- the app: an AppTest that switches each display option on and off in the query view and reads the figure.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from tests.charts import charts
from tests.test_display import BERT_OFFSETS as OFFSETS  # the five-token example, defined once
from tests.test_display import BERT_TOKENS as TOKENS
from tests.test_display import WEIGHTS
from viz.display import display_map, special_positions, word_groups
from viz.query import query_contributions
from viz.query_shown import STRETCHED_NOTE, query_row_as_shown, query_shown_figure

SCORES = np.arange(25.0).reshape(5, 5)  # only averaged and sliced, never softmaxed here
VALUES = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 0.0], [0.0, 2.0]])  # (S, Ev)


def _shown(query: int, **options):
    return query_row_as_shown(SCORES, SCORES / 2, WEIGHTS, VALUES, TOKENS, OFFSETS, query, **options)


# --- by hand ---------------------------------------------------------------------------------------------
# Query 2 ("·ization") belongs to the word "tokenization" = tokens 1, 2; its rows are
#   row 1 = [.4, .2, .2, .1, .1],  row 2 = [.2, .3, .1, .2, .2],  mean = [.3, .25, .15, .15, .15].
# words:  [CLS] .3 | tokenization .25 + .15 = .4 | works .15 | [SEP] .15
#         contributions: [CLS] .3 [1, 0]; tokenization .25 [0, 1] + .15 [1, 1] = [.15, .4];
#         works .15 [2, 0] = [.3, 0]; [SEP] .15 [0, 2] = [0, .3];  output = [.75, .7]
# hide [CLS], [SEP]:  row 1 over tokens 1-3 = [.2, .2, .1] / .5 = [.4, .4, .2]
#                     row 2 over tokens 1-3 = [.3, .1, .2] / .6 = [.5, 1/6, 1/3]
# both:   mean = [.45, 1/3 * (.4 + .5) ... ] = [.45, (.4 + 1/6) / 2, (.2 + 1/3) / 2] = [.45, .28333, .26667]
#         tokenization .45 + .28333 = .73333, works .26667
#         contributions: tokenization .45 [0, 1] + .28333 [1, 1] = [.28333, .73333]; works .26667 [2, 0]


def test_no_option_is_the_row_itself():
    shown = _shown(2)
    assert shown.query_tokens == [2] and shown.key_labels == TOKENS and not shown.notes()
    np.testing.assert_array_equal(shown.weights, WEIGHTS[2])
    np.testing.assert_array_equal(shown.scores, SCORES[2])
    np.testing.assert_array_equal(shown.contributions, query_contributions(WEIGHTS[2], VALUES))


def test_words_by_hand():
    shown = _shown(2, words=True)
    assert shown.query_tokens == [1, 2] and shown.query_label == "tokenization"
    assert shown.key_labels == ["[CLS]", "tokenization", "works", "[SEP]"]
    assert shown.key_groups == [[0], [1, 2], [3], [4]]
    np.testing.assert_allclose(shown.weights, [0.3, 0.4, 0.15, 0.15])
    np.testing.assert_allclose(shown.contributions, [[0.3, 0.0], [0.15, 0.4], [0.3, 0.0], [0.0, 0.3]])
    np.testing.assert_allclose(shown.output, [0.75, 0.7])
    assert shown.score_labels == TOKENS  # scores stay per token key ...
    np.testing.assert_allclose(shown.scores, (SCORES[1] + SCORES[2]) / 2)  # ... averaged over the word's rows
    assert shown.notes() == [
        "query word 'tokenization' = tokens 1-2, rows averaged",
        "keys merged into words: weights and α v summed, scores per token (merging applies to weights only)",
    ]
    assert _shown(1, words=True).weights.tolist() == shown.weights.tolist()  # either token picks the word


def test_hidden_specials_by_hand():
    shown = _shown(1, hide_special=True)
    assert shown.key_labels == shown.score_labels == ["token", "·ization", "works"]
    np.testing.assert_allclose(shown.weights, [0.4, 0.4, 0.2])
    np.testing.assert_allclose(shown.scores, SCORES[1, 1:4])  # scores as computed, hidden keys left out
    np.testing.assert_allclose(shown.output, 0.4 * VALUES[1] + 0.4 * VALUES[2] + 0.2 * VALUES[3])
    assert shown.notes() == [
        "weights renormalised after hiding [CLS], [SEP] (= softmax without them; scores as computed)"
    ]


def test_both_by_hand():
    shown = _shown(2, hide_special=True, words=True)
    assert shown.key_labels == ["tokenization", "works"]
    np.testing.assert_allclose(shown.weights, [0.45 + (0.4 + 1 / 6) / 2, (0.2 + 1 / 3) / 2])
    np.testing.assert_allclose(shown.contributions, [[(0.4 + 1 / 6) / 2, 0.45 + (0.4 + 1 / 6) / 2], [0.2 + 1 / 3, 0.0]])
    np.testing.assert_allclose(shown.scores, (SCORES[1, 1:4] + SCORES[2, 1:4]) / 2)
    assert len(shown.notes()) == 3


def test_a_mask_blocks_a_merged_key_only_when_every_cell_is_blocked():
    causal = np.tril(np.ones((5, 5), dtype=bool))
    shown = _shown(2, words=True, mask=causal)  # rows 1 and 2: row 1 cannot see token 2, row 2 can
    assert shown.score_blocked.tolist() == [False, False, False, True, True]
    assert shown.blocked.tolist() == [False, False, True, True]


def test_nothing_to_hide_and_a_bad_query():
    plain = ["the", "cat"]
    shown = query_row_as_shown(
        np.zeros((2, 2)), np.zeros((2, 2)), np.eye(2), np.eye(2), plain, None, 0, hide_special=True
    )
    assert shown.key_labels == plain and shown.notes() == ["no special tokens in this text to hide"]
    with pytest.raises(ValueError, match="out of range"):
        _shown(5)
    with pytest.raises(ValueError, match="must match"):
        query_row_as_shown(SCORES[:4], SCORES, WEIGHTS, VALUES, TOKENS, OFFSETS, 0)


# --- the figure ------------------------------------------------------------------------------------------


def _trace(fig, name: str):
    return next(d for d in fig.data if d.name == name)


def test_the_figure_draws_what_it_is_given_and_says_it():
    shown = _shown(2, hide_special=True, words=True)
    fig = query_shown_figure(shown, query_index=2)
    layout = fig.layout
    assert list(layout.xaxis4.ticktext) == ["tokenization", "works"]  # the keys as shown (words) ...
    assert list(layout.xaxis2.ticktext) == ["token", "·ization", "works"]  # ... scores on their token keys
    assert layout.xaxis.matches == "x2" and layout.xaxis3.matches == "x4"
    np.testing.assert_allclose(_trace(fig, "weight").y, shown.weights)
    np.testing.assert_allclose(_trace(fig, "q·k").y, shown.scores)
    np.testing.assert_allclose(np.asarray(_trace(fig, "contributions").z), shown.contributions.T)
    np.testing.assert_allclose(np.asarray(_trace(fig, "output").z)[:, 0], shown.output)
    title = layout.title.text
    assert title.startswith("Query word 'tokenization' (token 2)")
    assert "rows averaged" in title and "hiding [CLS], [SEP]" in title and "merging applies to weights only" in title
    subtitles = [a.text for a in layout.annotations]
    assert any(
        s.startswith("1. raw score") and "per token key, mean of the word's 2 query rows" in s for s in subtitles
    )
    assert any(
        s.startswith("3. weight") and "renormalised" in s and "summed over each word's keys" in s for s in subtitles
    )
    assert list(layout.yaxis3.range) == [0, 1.15]


def test_the_weight_axis_follows_the_colour_range_option():
    shown = _shown(1, hide_special=True)
    stretched = query_shown_figure(shown, fixed_range=False)
    assert list(stretched.layout.yaxis3.range) == pytest.approx([0, 1.15 * 0.4])
    assert STRETCHED_NOTE in stretched.layout.title.text
    fixed = query_shown_figure(shown, fixed_range=True)
    assert list(fixed.layout.yaxis3.range) == [0, 1.15] and STRETCHED_NOTE not in fixed.layout.title.text
    assert fixed.layout.xaxis.matches == fixed.layout.xaxis2.matches == "x4"  # not split: one shared key axis
    assert list(fixed.layout.xaxis4.ticktext) == ["token", "·ization", "works"]


# --- a real head: MiniLM -----------------------------------------------------------------------------------

TEXT = "Tokenization works unbelievably well."


@pytest.fixture(scope="module")
def head_trace():
    from attention_core import pipeline
    from attention_core.request import TraceRequest

    trace = pipeline.run_trace(TraceRequest(model="minilm", text=TEXT, layer=2, head=3))
    return trace, trace.core.head(3)


def test_renormalising_is_softmax_over_the_keys_left_and_sdpa_with_them_masked(head_trace):
    trace, head = head_trace
    special = special_positions(trace.tokens, trace.offsets)
    assert special.tolist() == [True] + [False] * (len(trace.tokens) - 2) + [True]  # [CLS] ... [SEP]
    kept = np.flatnonzero(~special)
    q, k, v = (torch.from_numpy(np.asarray(t, dtype=np.float64)) for t in (head.q, head.k, head.v))
    allowed = torch.from_numpy(np.broadcast_to(~special, (len(special), len(special))).copy())  # (L, S)
    masked = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=head.scale)
    for query in (0, 2, 5):
        shown = query_row_as_shown(
            head.scores, head.scaled, head.weights, head.v, trace.tokens, trace.offsets, query, hide_special=True
        )
        softmax = torch.softmax(torch.from_numpy(np.asarray(head.scaled[query, kept], dtype=np.float64)), dim=-1)
        np.testing.assert_allclose(shown.weights, softmax.numpy(), atol=1e-6)
        np.testing.assert_allclose(shown.output, masked[query].numpy(), atol=1e-5)  # as if the keys were masked
        np.testing.assert_array_equal(shown.scores, head.scores[query, kept])


def test_words_on_a_real_head_by_hand(head_trace):
    trace, head = head_trace
    groups = word_groups(trace.tokens, trace.offsets)
    word = next(g for g in groups if len(g) > 2)  # "unbelievably": un ·bel ·ie ·va ·bly
    query = word[1]
    shown = query_row_as_shown(
        head.scores, head.scaled, head.weights, head.v, trace.tokens, trace.offsets, query, words=True
    )
    assert shown.query_tokens == word and shown.query_label == "unbelievably"
    by_hand = [float(np.mean([head.weights[i, g].sum() for i in word])) for g in groups]  # keys summed, rows averaged
    np.testing.assert_allclose(shown.weights, by_hand, atol=1e-12)
    np.testing.assert_allclose(shown.output, head.output[word].mean(axis=0), atol=1e-5)  # the core's own outputs
    merged = display_map(head.weights, trace.tokens, trace.offsets, words=True)
    np.testing.assert_allclose(shown.weights, merged.weights[groups.index(word)], atol=1e-12)
    both = query_row_as_shown(
        head.scores,
        head.scaled,
        head.weights,
        head.v,
        trace.tokens,
        trace.offsets,
        query,
        words=True,
        hide_special=True,
    )
    merged = display_map(head.weights, trace.tokens, trace.offsets, words=True, hide_special=True)
    np.testing.assert_allclose(both.weights, merged.weights[groups.index(word)], atol=1e-12)
    assert both.key_labels == merged.col_labels and sum(both.weights) == pytest.approx(1.0)


def test_the_slides_zip_gets_the_step_through_as_shown(head_trace):
    from ui import compute, display
    from ui.settings import Settings

    trace, _ = head_trace
    compute.store().clear()
    settings = Settings(model="minilm", text=TEXT, layer=2, head=3, view="query", query=5, words=True)
    extras = display.export_extras(trace, settings, "query")
    fig = extras["extra_figures"]["query_as_shown"]
    values, rows, cols = extras["extra_matrices"]["query_as_shown"]
    assert rows[-1] == "output" and "unbelievably" in rows and len(cols) == values.shape[1]
    assert fig.layout.title.text.startswith("Query word 'unbelievably' (token 5)")
    np.testing.assert_allclose(values[-1], values[:-1].sum(axis=0))
    plain = display.export_extras(trace, Settings(model="minilm", text=TEXT, view="query"), "query")
    assert "query_as_shown" not in plain["extra_figures"]  # no option on: the view's own figure is the one


# --- the app: each option switched on and off in the query view ---------------------------------------------


def _step_figure(at) -> dict:
    specs = [c.figure for c in charts(at)]
    return next(s for s in specs if "scores → weights" in s["layout"]["title"]["text"])


def test_the_query_view_follows_each_display_option():
    from streamlit.testing.v1 import AppTest

    app = str(Path(__file__).resolve().parents[1] / "app.py")
    at = AppTest.from_file(app, default_timeout=300)
    at.query_params.update({"view": "query", "text": "Tokenization works.", "max_tokens": "16", "query": "2"})
    at.run()
    assert not at.exception and not at.error
    tokens = ["[CLS]", "token", "·ization", "works", ".", "[SEP]"]

    def step() -> tuple[str, dict]:
        assert not at.exception and not at.error, ([e.message for e in at.exception], [e.value for e in at.error])
        layout = _step_figure(at)["layout"]
        return layout["title"]["text"], layout

    title, layout = step()  # as computed
    assert title.startswith("Query 2 '·ization'") and layout["xaxis4"]["ticktext"] == tokens

    at.checkbox(key="hide_special").check().run()
    title, layout = step()
    assert title.startswith("Query token '·ization' (token 2)") and "renormalised after hiding [CLS], [SEP]" in title
    assert layout["xaxis4"]["ticktext"] == tokens[1:-1]
    assert any("Largest weights (keys as shown)" in c.value for c in at.caption)

    at.checkbox(key="words").check().run()
    title, layout = step()
    assert title.startswith("Query word 'tokenization' (token 2)") and "rows averaged" in title
    assert layout["xaxis4"]["ticktext"] == ["tokenization", "works", "."]
    assert layout["xaxis2"]["ticktext"] == tokens[1:-1]  # scores stay per token key
    assert at.subheader[0].value.startswith("Query word 'tokenization' (token 2)")

    at.checkbox(key="hide_special").uncheck().run()
    title, layout = step()
    assert "hiding" not in title and layout["xaxis4"]["ticktext"] == ["[CLS]", "tokenization", "works", ".", "[SEP]"]

    at.checkbox(key="fixed_range").uncheck().run()
    title, layout = step()
    assert STRETCHED_NOTE in title and layout["yaxis3"]["range"][1] < 1.15

    at.checkbox(key="words").uncheck().run()
    at.checkbox(key="fixed_range").check().run()
    title, layout = step()  # every option off again: the figure as computed
    assert title.startswith("Query 2 '·ization'") and layout["xaxis4"]["ticktext"] == tokens
