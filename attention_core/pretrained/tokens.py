"""Text -> token ids with readable labels and character offsets, cut to what the model can take.

Labels are the text each token stands for, one per position:
- WordPiece (BERT): "##ing" -> "·ing" (``CONTINUATION`` marks a piece glued to the one before);
- byte-level BPE (GPT-2, Llama 3, SmolLM): "Ġthe" -> " the", "Ċ" -> "\\n", bytes decoded as UTF-8;
- SentencePiece: "▁the" -> " the", "<0x0A>" -> "\\n";
- special tokens stay as written: "[CLS]", "[SEP]", "<s>", "<|im_start|>".
Labels keep their spaces and newlines; the figures decide how to show them. ``offsets`` map each
token back to ``text[start:end]`` ((0, 0) for special tokens).

Empty or whitespace-only text is refused with a ValueError for every model, even those that would
still produce special tokens ([CLS] [SEP]): a picture of special tokens alone teaches nothing.
Text the tokenizer drops entirely (control characters, lone combining marks) keeps its special tokens
and a notice that says so. Long text is cut to ``char_budget(limit)`` characters before tokenising
(so 100 kB costs no more than a few thousand characters), with a notice.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import torch

CONTINUATION = "·"  # shown before a WordPiece continuation ("##ing" -> "·ing")


@dataclass(frozen=True)
class Tokens:
    """One tokenised text, batch size 1."""

    text: str
    ids: torch.Tensor  # (1, L) int64 token ids
    attention_mask: torch.Tensor  # (1, L) int64, 1 = real token (tokenize gives all ones; 0 marks added padding)
    labels: tuple[str, ...]  # (L,) readable text of each token
    offsets: tuple[tuple[int, int], ...]  # (L,) character span of each token in ``text``
    special: tuple[bool, ...]  # (L,) True for [CLS], <s>, ...
    dropped: int = 0  # tokens cut off the end
    notice: str | None = None  # says what was cut and why

    @property
    def length(self) -> int:
        return int(self.ids.shape[1])

    @property
    def token_ids(self) -> tuple[int, ...]:
        return tuple(int(i) for i in self.ids[0].tolist())


@lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    """GPT-2's printable stand-ins for the 256 bytes ("Ġ" = space, "Ċ" = newline), reversed."""
    printable = (
        list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    )
    chars = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


def _scheme(tokenizer) -> str:
    """ "wordpiece", "bytelevel", "sentencepiece" or "plain", read from the fast tokenizer's parts."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return "plain"
    parts = f"{backend.model.__class__.__name__} {backend.decoder!r} {backend.pre_tokenizer!r}"
    if "ByteLevel" in parts:
        return "bytelevel"
    if "WordPiece" in parts:
        return "wordpiece"
    if "Metaspace" in parts or "▁" in parts:
        return "sentencepiece"
    return "plain"


def token_label(token: str, scheme: str, span_text: str = "") -> str:
    """Readable text for one non-special token string (see the module docstring)."""
    if scheme == "wordpiece" and token.startswith("##") and len(token) > 2:
        return CONTINUATION + token[2:]
    if scheme == "bytelevel":
        table = _byte_decoder()
        if all(ch in table for ch in token):
            try:
                return bytes(table[ch] for ch in token).decode("utf-8")
            except UnicodeDecodeError:  # part of a multi-byte character
                return span_text or token
        return token
    if scheme == "sentencepiece":
        if token.startswith("<0x") and token.endswith(">") and len(token) == 6:
            try:
                return bytes([int(token[3:5], 16)]).decode("utf-8")
            except (ValueError, UnicodeDecodeError):
                return span_text or token
        return token.replace("▁", " ")
    return token


def _encode(tokenizer, text: str, limit: int | None) -> dict:
    return tokenizer(
        text,
        add_special_tokens=True,
        return_offsets_mapping=bool(getattr(tokenizer, "is_fast", False)),
        truncation=limit is not None,
        max_length=limit,
        verbose=False,
    )


def char_budget(limit: int) -> int:
    """Characters read from a text for at most ``limit`` tokens (a token rarely covers 32 characters)."""
    return max(4096, 32 * limit)


def tokenize_text(tokenizer, text: str, *, max_tokens: int = 512, max_positions: int | None = None) -> Tokens:
    """Tokenise ``text`` for one model, keeping at most min(max_tokens, max_positions) tokens."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("The text is empty: type a sentence to see how its tokens attend to each other.")
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
    limit = max_tokens if not max_positions else min(max_tokens, max_positions)
    specials = tokenizer.num_special_tokens_to_add(pair=False)
    if limit <= specials:
        raise ValueError(f"a limit of {limit} tokens leaves no room for text next to {specials} special tokens")
    read = text[: char_budget(limit)]  # a long text is cut before tokenising: 100 kB never reaches the tokenizer
    encoded = _encode(tokenizer, read, None)
    total = len(encoded["input_ids"])
    dropped, notice = 0, None
    if total > limit:
        encoded = _encode(tokenizer, read, limit)
        dropped = total - len(encoded["input_ids"])
        reason = "the model's maximum length" if max_positions and limit == max_positions else "the token limit"
        if len(read) < len(text):
            notice = (
                f"The text has {len(text):,} characters, more than {limit} tokens; only the first {limit} tokens "
                f"are used ({reason})."
            )
        else:
            notice = f"The text has {total} tokens; only the first {limit} are used ({reason}), {dropped} were dropped."
    elif len(read) < len(text):
        notice = f"The text has {len(text):,} characters; only the first {len(read):,} were read ({total} tokens)."
    ids = list(encoded["input_ids"])
    if not ids:
        raise ValueError("The text produced no tokens for this model.")
    offsets = tuple((int(a), int(b)) for a, b in encoded.get("offset_mapping") or [(0, 0)] * len(ids))
    special_ids = set(tokenizer.all_special_ids)
    special = tuple(i in special_ids for i in ids)
    if all(special):
        notice = " ".join(
            filter(
                None,
                [notice, "This model's tokenizer drops every character of this text: only its special tokens remain."],
            )
        )
    scheme = _scheme(tokenizer)
    pieces = tokenizer.convert_ids_to_tokens(ids)
    labels = tuple(
        piece if is_special else (token_label(piece, scheme, text[a:b]) or piece)
        for piece, is_special, (a, b) in zip(pieces, special, offsets, strict=True)
    )
    return Tokens(
        text=read,
        ids=torch.tensor([ids], dtype=torch.long),  # (1, L)
        attention_mask=torch.ones(1, len(ids), dtype=torch.long),  # (1, L)
        labels=labels,
        offsets=offsets,
        special=special,
        dropped=dropped,
        notice=notice,
    )


def tokenize(loaded, text: str, *, max_tokens: int = 512) -> Tokens:
    """Tokenise ``text`` for a LoadedModel, cut at min(max_tokens, the model's maximum positions)."""
    return tokenize_text(
        loaded.tokenizer, text, max_tokens=max_tokens, max_positions=loaded.facts.max_positions or None
    )
