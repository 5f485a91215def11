"""Minimal pairs: token alignment, the two rows against the traces' own weights, the view in the app."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attention_core.pairs import PAIRS, align_tokens, find_token, most_changed_query, pair_rows
from tests.export_zips import export_buttons, open_zip, read_csv, read_manifest
from viz.pairs import pair_figure, pairs_zip

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def test_alignment_by_hand():
    first = ["the", "trophy", "was", "too", "big", "."]
    second = ["the", "trophy", "was", "too", "small", "."]
    assert align_tokens(first, second) == [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 5)]  # big/small replaced
    assert align_tokens(["a", "big", "."], ["a", "very", "small", "."]) == [
        (0, 0),
        (1, None),
        (None, 1),
        (None, 2),
        (2, 3),
    ]
    assert align_tokens(["a", "b"], ["x", "a", "y", "b"]) == [(None, 0), (0, 1), (None, 2), (1, 3)]


def test_rows_are_the_traces_own_weights_and_the_difference_is_on_shared_keys():
    rng = np.random.default_rng(0)
    first, second = ["a", "it", "big", "."], ["a", "it", "very", "small", "."]
    w1, w2 = rng.random((4, 4)), rng.random((5, 5))
    rows = pair_rows(first, w1, second, w2, 1)
    assert rows.labels == ("a", "it", "big", "very", "small", ".")
    assert np.allclose(rows.first, [w1[1, 0], w1[1, 1], w1[1, 2], np.nan, np.nan, w1[1, 3]], equal_nan=True)
    assert np.allclose(rows.second, [w2[1, 0], w2[1, 1], np.nan, w2[1, 2], w2[1, 3], w2[1, 4]], equal_nan=True)
    assert np.isnan(rows.difference[2:5]).all()
    assert np.isclose(rows.difference[0], w2[1, 0] - w1[1, 0])
    shared = abs(w2[1, 0] - w1[1, 0]) + abs(w2[1, 1] - w1[1, 1]) + abs(w2[1, 4] - w1[1, 3])
    assert np.isclose(rows.changed_mass, 0.5 * (shared + w1[1, 2] + w2[1, 2] + w2[1, 3]))
    assert rows.query_second == 1
    assert pair_rows(first, w1, second, w2, 2).query_second is None  # "big" is not in the second text
    with pytest.raises(ValueError, match="out of range"):
        pair_rows(first, w1, second, w2, 9)


def test_most_changed_query_finds_the_row_that_moves():
    first, second = ["[CLS]", "a", "b", "c", "[SEP]"], ["[CLS]", "a", "b", "d", "[SEP]"]
    w1, w2 = np.eye(5), np.eye(5)
    w2[2] = [0.5, 0.5, 0, 0, 0]  # row "b" moves
    w2[4] = [1.0, 0, 0, 0, 0]  # [SEP] moves more, but markers are not a good place to start
    assert most_changed_query(first, w1, second, w2) == 2


def test_figure_shapes():
    rows = pair_rows(["a", "<b>"], np.eye(2), ["a", "<b>"], np.eye(2)[::-1], 0)
    fig = pair_figure(rows, query_label="a")
    assert [t.name for t in fig.data] == ["text 1", "text 2", "difference"]
    assert all("<b>" not in str(t) for t in fig.layout.xaxis2.ticktext)  # token text is escaped


def test_slides_zip_holds_the_figure_the_table_and_the_changed_mass():
    rng = np.random.default_rng(0)
    first, second = ["a", "it", "big", "."], ["a", "it", "very", "small", "."]
    w1, w2 = rng.random((4, 4)), rng.random((5, 5))
    rows = pair_rows(first, w1, second, w2, 1)
    texts = ("a it big.", "a it very small.")
    data = pairs_zip(rows, "html,csv", texts=texts, query_label="it", layer=2, head=3, settings={"model": "minilm"})
    archive = open_zip(data)
    assert set(archive.namelist()) == {"pairs.html", "pairs.csv", "plotly.min.js", "manifest.json"}
    cols, labels, numbers = read_csv(archive, "pairs")
    assert cols == ["first text", "second text", "second - first"] and labels == list(rows.labels)
    shown = pair_figure(rows, query_label="it", names=("first text", "second text"))  # the bars on screen
    for column, trace in enumerate(shown.data):
        np.testing.assert_array_equal(numbers[:, column], np.asarray(trace.y, dtype=float))  # NaN where unshared
    np.testing.assert_array_equal(numbers[:, 0], [w1[1, 0], w1[1, 1], w1[1, 2], np.nan, np.nan, w1[1, 3]])
    manifest = read_manifest(archive)
    assert manifest["views"] == ["pairs"] and manifest["texts"] == {"first": texts[0], "second": texts[1]}
    assert (manifest["layer"], manifest["head"], manifest["query"], manifest["query_second"]) == (2, 3, 1, 1)
    assert manifest["query_token"] == "it" and manifest["settings"] == {"model": "minilm"}
    assert manifest["changed_mass"] == rows.changed_mass
    j = rows.largest_change()
    assert manifest["largest_change"] == {"key": rows.labels[j], "first": rows.first[j], "second": rows.second[j]}
    assert manifest["figures"] == manifest["matrices"] == ["pairs"] and manifest["theme"] == "slides"
    assert manifest["versions"]["numpy"] == np.__version__ and not manifest["warnings"]
    assert '"size":26' in archive.read("pairs.html").decode("utf-8")  # the slides theme's titles
    unshared = pair_rows(first, w1, second, w2, 2)  # "big" is not in the second text: no largest change
    archive = open_zip(pairs_zip(unshared, "csv", texts=texts, query_label="big", layer=0, head=0))
    assert set(archive.namelist()) == {"pairs.csv", "manifest.json"}
    assert read_manifest(archive)["largest_change"] is None and read_manifest(archive)["query_second"] is None


def test_at_least_five_classic_pairs():
    assert len(PAIRS) >= 5 and all(len(p) == 4 and p[0] != p[1] for p in PAIRS.values())
    for first, _, _, focus in PAIRS.values():
        assert find_token(first.replace(".", " .").split(), focus) is not None


def test_view_picks_a_pair_and_keeps_both_texts_in_the_link():
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params.update({"view": "pairs", "max_tokens": "32"})
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    at.selectbox(key="pair_pick").set_value("trophy")
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.session_state["text"] == PAIRS["trophy"][0]
    assert at.query_params["pair_text"] == PAIRS["trophy"][1] and at.query_params["text"] == PAIRS["trophy"][0]
    chosen = at.selectbox(key="query")
    assert chosen.options[chosen.index].endswith(": it")  # a classic pair starts at its key word
    assert any("Attention that moved" in c.value for c in at.caption)
    assert len(export_buttons(at)) == 1  # the view's zip, built on a click (tested above without Streamlit)
    at.text_area(key="pair_text").set_value("")
    at.run()
    assert not at.error and any("Type a second text" in i.value for i in at.info)
