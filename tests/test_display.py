"""Display options against hand-computed maps: special columns hidden and rows renormalised, subwords merged
into words (keys summed, queries averaged), a query set's rows summed; the settings round-trip in the link."""

from __future__ import annotations

import numpy as np
import pytest

from tests.charts import charts
from viz.display import (
    HIDDEN_NOTE,
    WORDS_NOTE,
    display_map,
    merge_groups,
    query_set_row,
    renormalise_without,
    special_positions,
    word_groups,
)

# "[CLS] token ·ization works [SEP]" as MiniLM labels it, with the tokenizer's character offsets
BERT_TOKENS = ["[CLS]", "token", "·ization", "works", "[SEP]"]
BERT_OFFSETS = [(0, 0), (0, 5), (5, 12), (13, 18), (0, 0)]
WEIGHTS = np.array(
    [
        [0.5, 0.1, 0.1, 0.1, 0.2],
        [0.4, 0.2, 0.2, 0.1, 0.1],
        [0.2, 0.3, 0.1, 0.2, 0.2],
        [0.6, 0.0, 0.1, 0.1, 0.2],
        [0.1, 0.1, 0.1, 0.1, 0.6],
    ]
)


def test_special_positions_from_empty_spans_and_from_spellings():
    assert special_positions(BERT_TOKENS, BERT_OFFSETS).tolist() == [True, False, False, False, True]
    no_offsets = [(0, 0)] * 5  # a tokenizer without offsets: the usual spellings decide
    assert special_positions(BERT_TOKENS, no_offsets).tolist() == [True, False, False, False, True]
    assert special_positions(["<|im_start|>", " hi", "<s>"]).tolist() == [True, False, True]


def test_hidden_columns_renormalise_rows_by_hand():
    shown, kept = renormalise_without(WEIGHTS, np.array([True, False, False, False, True]))
    assert kept.tolist() == [1, 2, 3]
    np.testing.assert_allclose(shown.sum(axis=1), 1.0)
    np.testing.assert_allclose(shown[0], [0.1 / 0.3, 0.1 / 0.3, 0.1 / 0.3])
    np.testing.assert_allclose(shown[1], [0.4, 0.4, 0.2])  # 0.2, 0.2, 0.1 of 0.5
    np.testing.assert_allclose(shown[3], [0.0, 0.5, 0.5])  # 0, 0.1, 0.1 of 0.2
    empty, _ = renormalise_without(np.array([[1.0, 0.0]]), np.array([True, False]))
    assert empty.tolist() == [[0.0]]  # no weight left: 0, never NaN


def test_word_groups_for_wordpiece_and_byte_level():
    assert word_groups(BERT_TOKENS, BERT_OFFSETS) == [[0], [1, 2], [3], [4]]
    text = "tokenization didn't"
    pieces = ["token", "ization", " didn", "'t"]
    spans = [(0, 5), (5, 12), (12, 17), (17, 19)]
    assert "".join(pieces) == text
    assert word_groups(pieces, spans) == [[0, 1], [2], [3]]  # the apostrophe starts its own word
    assert word_groups(["a", "b"], [(0, 1), (2, 3)]) == [[0], [1]]  # a gap in the text: two words


def test_word_merge_by_hand_sums_keys_and_averages_queries():
    merged = merge_groups(WEIGHTS, [[0], [1, 2], [3], [4]], [[0], [1, 2], [3], [4]])
    expected_row_1 = [(0.4 + 0.2) / 2, (0.2 + 0.2 + 0.3 + 0.1) / 2, (0.1 + 0.2) / 2, (0.1 + 0.2) / 2]
    np.testing.assert_allclose(merged[1], expected_row_1)
    np.testing.assert_allclose(merged[0], [0.5, 0.2, 0.1, 0.2])  # keys 1 and 2 summed
    np.testing.assert_allclose(merged.sum(axis=1), 1.0)


def test_display_map_says_what_it_did():
    plain = display_map(WEIGHTS, BERT_TOKENS, BERT_OFFSETS)
    assert not plain.changed and plain.weights is WEIGHTS and plain.col_labels == BERT_TOKENS

    hidden = display_map(WEIGHTS, BERT_TOKENS, BERT_OFFSETS, hide_special=True)
    assert hidden.note == HIDDEN_NOTE.format(names="[CLS], [SEP]")
    assert hidden.weights.shape == (5, 3) and hidden.col_labels == ["token", "·ization", "works"]
    np.testing.assert_allclose(hidden.weights.sum(axis=1), 1.0)

    both = display_map(WEIGHTS, BERT_TOKENS, BERT_OFFSETS, hide_special=True, words=True)
    assert both.note.endswith(WORDS_NOTE) and both.row_labels == ["[CLS]", "tokenization", "works", "[SEP]"]
    assert both.col_labels == ["tokenization", "works"] and both.weights.shape == (4, 2)
    np.testing.assert_allclose(both.weights.sum(axis=1), 1.0)
    # row "tokenization": mean of token rows 1 and 2 after renormalising over keys 1..3
    row_1 = np.array([0.2, 0.2, 0.1]) / 0.5
    row_2 = np.array([0.3, 0.1, 0.2]) / 0.6
    np.testing.assert_allclose(both.weights[1], [(row_1[:2].sum() + row_2[:2].sum()) / 2, (row_1[2] + row_2[2]) / 2])


def test_display_map_of_every_head_and_the_mask():
    stack = np.stack([WEIGHTS, WEIGHTS[::-1]])  # (H, L, S)
    causal = np.tril(np.ones((5, 5), bool))
    shown = display_map(stack, BERT_TOKENS, BERT_OFFSETS, mask=causal, words=True)
    assert shown.weights.shape == (2, 4, 4) and shown.mask.shape == (4, 4)
    assert shown.mask[0].tolist() == [True, False, False, False] and shown.mask[1, 1]  # word 1 sees itself


def test_query_set_rows_are_summed():
    np.testing.assert_allclose(query_set_row(WEIGHTS, [1, 3]), WEIGHTS[1] + WEIGHTS[3])
    assert query_set_row(WEIGHTS, [3, 1, 1]).sum() == pytest.approx(2.0)
    with pytest.raises(ValueError):
        query_set_row(WEIGHTS, [])
    with pytest.raises(ValueError):
        query_set_row(WEIGHTS, [7])


def test_display_settings_round_trip_through_the_link():
    from ui.settings import VIEW_ONLY, Settings, from_query_params, to_query_params

    settings = Settings(hide_special=True, words=True, query_set=(1, 3, 4), fixed_range=False, view="query")
    params = to_query_params(settings)
    assert params["hide_special"] == "1" and params["words"] == "1" and params["query_set"] == "1,3,4"
    assert params["fixed_range"] == "0"
    back, notices = from_query_params(params)
    assert back == settings and not notices
    assert {"hide_special", "words", "query_set", "fixed_range"} <= set(VIEW_ONLY)
    assert settings.request() == Settings().request()  # display only: the numbers' request is unchanged
    loose, notices = from_query_params({"query_set": "4,1,x", "words": "maybe"})
    assert loose.query_set == () and loose.words is False and len(notices) == 2


def test_signed_maps_use_one_colour_blind_safe_diverging_scale():
    from viz import theme
    from viz.heatmaps import colour_axis

    assert theme.DIVERGING in {"RdBu_r", "RdBu", "PuOr", "PuOr_r"}  # ColorBrewer's colour-blind safe pairs
    assert colour_axis("diverging", title="difference")["colorscale"] == theme.DIVERGING


def test_role_map_colours_each_head_by_its_label():
    from attention_core.head_roles import head_roles
    from viz.roles import ROLE_ORDER, role_map

    n = 6
    heads = np.stack([np.eye(n)[[0] * n], np.eye(n)])[None]  # (1, 2, n, n): a sink head, a "self" head
    roles = head_roles(heads)
    fig = role_map(roles, selected=(0, 1))
    z = np.asarray(fig.data[0].z)
    assert z.tolist() == [[ROLE_ORDER.index("sink"), ROLE_ORDER.index("positional")]]
    assert "sink 1.00" in fig.data[0].customdata[0][0] and "induction n/a" in fig.data[0].customdata[0][0]


def test_export_writes_the_display_options_and_the_extra_maps(tmp_path):
    from types import SimpleNamespace

    from viz.export import export_trace

    core = SimpleNamespace(num_heads=1, head=lambda h: SimpleNamespace(weights=WEIGHTS))
    trace = SimpleNamespace(tokens=BERT_TOKENS, layer=0, head=0, facts=None, core=core, model=None)
    shown = display_map(WEIGHTS, BERT_TOKENS, BERT_OFFSETS, hide_special=True)
    bars = query_set_row(shown.weights, [1, 2])
    manifest = export_trace(
        trace,
        tmp_path,
        "csv",
        view="lines",
        display={"hide_special": True, "note": shown.note},
        extra_matrices={"query_set": (bars[None, :], ["rows 1+2 summed"], shown.col_labels)},
    )
    assert manifest["display"]["note"] == HIDDEN_NOTE.format(names="[CLS], [SEP]")
    assert manifest["matrices"] == ["lines_weights", "query_set"]
    assert (tmp_path / "query_set.csv").read_text().splitlines()[0].endswith("token,·ization,works")


def test_the_app_shows_display_notes_and_head_roles():
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    app = str(Path(__file__).resolve().parents[1] / "app.py")
    params = {"view": "heads", "text": "Tokenization works.", "max_tokens": "16", "hide_special": "1", "words": "1"}
    at = AppTest.from_file(app, default_timeout=300)
    at.query_params.update(params)
    at.run()
    at.session_state["open_roles"] = True
    at.run()
    assert not at.exception and not at.error
    titles = [c.title for c in charts(at)]
    grid = next(t for t in titles if "all 12 heads" in t)
    assert "rows renormalised after hiding [CLS], [SEP]" in grid and "keys summed, queries averaged" in grid
    assert any(t.startswith("Head roles") for t in titles)
    # the flip chart shows every token, and says the display options apply to the grid only
    assert any("display options apply to the grid above" in c.value for c in at.caption)
