"""Token labels: escaping, visible whitespace, repeated tokens on integer axes."""

from __future__ import annotations

import numpy as np

from viz.labels import escape_label, hover_labels, plain_labels, tick_labels, visible_label
from viz.scores import attention_heatmap


def test_escape_label_turns_markup_into_text():
    assert escape_label("<script>alert(1)</script>") == "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert escape_label("a & b") == "a &amp; b"
    assert escape_label("&lt;") == "&amp;lt;"  # already-escaped text stays literal


def test_visible_label_shows_whitespace_and_control_characters():
    assert visible_label(" ") == "␣"
    assert visible_label(" the") == "␣the"
    assert visible_label("\n") == "\\n"
    assert visible_label("\t") == "\\t"
    assert visible_label("") == "∅"
    assert visible_label("\u200b") == "\\u200b"
    assert visible_label("extraordinarily", 6) == "extra…"


def test_tick_labels_escape_after_cutting():
    labels = tick_labels(["<b>", " ", "\n", "Ġhello"], max_chars=14)
    assert labels == ["&lt;b&gt;", "␣", "\\n", "Ġhello"]
    assert tick_labels(["<" * 30], max_chars=5) == ["&lt;&lt;&lt;&lt;…"]


def test_hover_and_plain_labels():
    assert hover_labels(["a", "<"]) == ["0 'a'", "1 '&lt;'"]
    assert plain_labels(["<", " x"]) == ["<", "␣x"]


def test_figure_tick_text_is_escaped_and_repeated_tokens_keep_their_rows():
    tokens = ["the", "<script>", "the", " "]
    weights = np.full((4, 4), 0.25)
    fig = attention_heatmap(weights, tokens, tokens)
    assert list(fig.layout.yaxis.tickvals) == [0, 1, 2, 3]
    assert list(fig.layout.yaxis.ticktext) == ["the", "&lt;script&gt;", "the", "␣"]
    assert list(fig.layout.xaxis.ticktext) == ["the", "&lt;script&gt;", "the", "␣"]
    main = next(t for t in fig.data if t.name == "weights")
    assert np.asarray(main.z).shape == (4, 4)  # two "the" rows stay two rows
    assert list(main.y) == [0, 1, 2, 3]
    hover = np.asarray(main.customdata)
    assert hover[1, 0, 0] == "1 '&lt;script&gt;'"
    assert hover[0, 2, 1] == "2 'the'" and hover[0, 0, 1] == "0 'the'"
    assert "<script>" not in fig.to_json()
