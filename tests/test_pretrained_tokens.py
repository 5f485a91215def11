"""Token labels, offsets, truncation and empty text, on tiny tokenizers of both kinds."""

from __future__ import annotations

import pytest

from attention_core.pretrained import load_model, tokenize
from attention_core.pretrained.tokens import CONTINUATION, token_label, tokenize_text
from tests.tiny_models import build_tiny_model, byte_level_tokenizer, wordpiece_tokenizer


def test_wordpiece_labels_and_offsets():
    text = "The dogs were sated."
    tokens = tokenize_text(wordpiece_tokenizer(), text)
    assert tokens.labels == (
        "[CLS]",
        "the",
        "dog",
        CONTINUATION + "s",
        "were",
        "sat",
        CONTINUATION + "ed",
        ".",
        "[SEP]",
    )
    assert tokens.special == (True, *[False] * 7, True)
    assert tokens.offsets[0] == (0, 0) and tokens.offsets[-1] == (0, 0)
    for label, (start, end), special in zip(tokens.labels, tokens.offsets, tokens.special, strict=True):
        if not special:
            assert text[start:end].lower() == label.removeprefix(CONTINUATION)
    assert tokens.ids.shape == (1, 9) and tokens.attention_mask.shape == (1, 9)
    assert tokens.attention_mask.sum() == 9 and tokens.dropped == 0 and tokens.notice is None
    assert len(tokens.token_ids) == tokens.length == 9


def test_byte_level_labels_show_spaces_newlines_and_accents():
    text = "The cat sat.\nCafé!"
    tokens = tokenize_text(byte_level_tokenizer(add_bos=True), text)
    assert tokens.labels[0] == "<s>" and tokens.special[0]
    assert "".join(tokens.labels[1:]).replace("éé", "é") == text  # pieces of é each show the whole character
    assert " cat" in tokens.labels and "\n" in tokens.labels
    assert not any("Ġ" in label or "Ċ" in label for label in tokens.labels)
    for (start, end), special in zip(tokens.offsets, tokens.special, strict=True):
        assert special or 0 <= start < end <= len(text)


def test_token_label_rules():
    assert token_label("##ing", "wordpiece") == CONTINUATION + "ing"
    assert token_label("##", "wordpiece") == "##"
    assert token_label("Ġthe", "bytelevel") == " the"
    assert token_label("Ċ", "bytelevel") == "\n"
    assert token_label("ĠcafÃ©", "bytelevel") == " café"
    assert token_label("Ã", "bytelevel", "é") == "é"  # half a character: the text it came from
    assert token_label("▁the", "sentencepiece") == " the"
    assert token_label("<0x0A>", "sentencepiece") == "\n"
    assert token_label("plain", "plain") == "plain"


def test_truncation_at_max_tokens_keeps_the_closing_special_token():
    tokenizer = wordpiece_tokenizer()
    text = "the cat sat on the mat " * 5
    full = tokenize_text(tokenizer, text)
    cut = tokenize_text(tokenizer, text, max_tokens=8)
    assert cut.length == 8 and cut.labels[-1] == "[SEP]" and cut.labels[:7] == full.labels[:7]
    assert cut.dropped == full.length - 8
    assert f"{full.length} tokens" in cut.notice and f"{cut.dropped} were dropped" in cut.notice
    assert "token limit" in cut.notice


def test_truncation_at_the_models_maximum_positions(tmp_path):
    loaded = load_model(build_tiny_model("llama", tmp_path / "llama"))
    tokens = tokenize(loaded, "the cat sat on the mat. " * 30, max_tokens=512)
    assert tokens.length == loaded.facts.max_positions == 64
    assert tokens.dropped > 0 and "maximum length" in tokens.notice


@pytest.mark.parametrize("text", ["", "   ", "\n\t "])
def test_empty_text_is_refused(text):
    with pytest.raises(ValueError, match="empty"):
        tokenize_text(wordpiece_tokenizer(), text)


def test_limits_that_leave_no_room_are_refused():
    with pytest.raises(ValueError, match="at least 1"):
        tokenize_text(wordpiece_tokenizer(), "the cat", max_tokens=0)
    with pytest.raises(ValueError, match="no room"):
        tokenize_text(wordpiece_tokenizer(), "the cat", max_tokens=2)  # [CLS] and [SEP] fill it
