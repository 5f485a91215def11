"""Show user or model text as text: never as markdown, HTML, LaTeX, emoji codes or icons.

Streamlit renders every body string (st.markdown, st.caption, st.info/warning/error, subheaders)
as GitHub-flavoured markdown with extras: ``$...$`` is LaTeX, ``:smile:`` an emoji,
``:red[...]`` coloured text, ``:material/home:`` an icon, ``&lt;`` an entity. ``plain`` makes a
string show literally inside such bodies (checked in a real browser: tests/test_hardening_browser.py):

- every ASCII punctuation character gets a backslash (CommonMark allows escaping all of them);
- ``:`` becomes the entity ``&#58;``, because Streamlit finds emoji and icon codes after the
  backslashes are gone (an escaped colon still turns ``:material/home:`` into an icon);
- NUL (which browsers drop) shows as ``␀``.

What plain text still gets: web addresses and e-mail addresses become links (the text itself is
unchanged), and runs of spaces or newlines fold the way HTML folds them.
"""

from __future__ import annotations

import string

_ESCAPES = {c: "\\" + c for c in string.punctuation}
_ESCAPES[":"] = "&#58;"
_ESCAPES["\x00"] = "␀"
_MARKDOWN = str.maketrans(_ESCAPES)


def plain(text: str, limit: int = 300) -> str:
    """Escape ``text`` so it shows literally inside a markdown string (cut to ``limit`` characters)."""
    text = str(text)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.translate(_MARKDOWN)
