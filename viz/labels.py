"""Token text made safe and visible for plotly labels.

Plotly renders a small subset of HTML in tick labels, titles and hover text, so a token such as
``<script>`` or ``a<b`` would be swallowed or mangled. Every token shown in a figure goes through
``escape_label`` (``&``, ``<``, ``>`` become HTML entities and show as text).

Tokenizers also produce tokens that print as nothing: a space, a newline, a tab. ``visible_label``
replaces those with visible stand-ins (``␣``, ``\\n``, ``\\t``) so a row is never blank.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

SPACE = "␣"
EMPTY = "∅"
ELLIPSIS = "…"

_WHITESPACE = {
    " ": SPACE,
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\f": "\\f",
}


def escape_label(text: str) -> str:
    """Escape ``&``, ``<`` and ``>`` as HTML entities so plotly shows the text literally."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _visible_char(ch: str) -> str:
    if ch in _WHITESPACE:
        return _WHITESPACE[ch]
    if ch.isspace() or unicodedata.category(ch) in {"Cc", "Cf", "Zl", "Zp"}:
        return f"\\u{ord(ch):04x}"
    return ch


def visible_label(token: str, max_chars: int | None = None) -> str:
    """The token with whitespace and control characters made visible, not HTML-escaped.

    Spaces become ``␣``, newlines ``\\n``, tabs ``\\t``, other invisible characters ``\\uXXXX``;
    an empty token becomes ``∅``. With ``max_chars`` the result is cut to that many characters,
    ending in ``…``. Use this for CSV and plain text; use ``tick_labels`` for figures.
    """
    text = "".join(_visible_char(ch) for ch in str(token))
    if not text:
        text = EMPTY
    if max_chars is not None and max_chars > 0 and len(text) > max_chars:
        text = text[: max(1, max_chars - 1)] + ELLIPSIS
    return text


def tick_labels(tokens: Sequence[str], *, max_chars: int | None = 14) -> list[str]:
    """Labels for axis ticks: visible whitespace, cut to ``max_chars``, HTML-escaped. One per token.

    Repeated tokens keep one label each; figures place them at integer positions, so two "the"
    stay two rows.
    """
    return [escape_label(visible_label(token, max_chars)) for token in tokens]


def hover_labels(tokens: Sequence[str]) -> list[str]:
    """Labels for hover text: position and the full visible, escaped token, e.g. ``3 'the'``."""
    return [f"{i} '{escape_label(visible_label(token))}'" for i, token in enumerate(tokens)]


def plain_labels(tokens: Sequence[str]) -> list[str]:
    """Labels for CSV headers: visible whitespace, not escaped, never cut."""
    return [visible_label(token) for token in tokens]
