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

import html
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


TABLE_CLASS = "lens-table"
_TABLE_STYLE = (
    f"<style>.{TABLE_CLASS} {{border-collapse: collapse; font-size: 0.875rem; font-variant-numeric: tabular-nums;}}"
    f" .{TABLE_CLASS} th, .{TABLE_CLASS} td {{border: 1px solid rgba(128, 128, 128, 0.35); padding: 0.25rem 0.6rem;"
    " text-align: right;}}"
    f" .{TABLE_CLASS} th {{font-weight: 600;}}</style>"
)


def html_table(rows: list[dict]) -> str:
    """``rows`` (one dict per row, the same keys) as a plain HTML table for ``st.html``, every cell escaped text.
    Lighter in the browser than ``st.table`` (a styled component per cell: a first switch to Core vs model at 64
    tokens kept the page's main thread about 0.1 s longer, report section 7 "twentieth"); prints and copies as
    text."""
    if not rows:
        return ""
    head = "".join(f"<th>{html.escape(str(key))}</th>" for key in rows[0])
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(row.get(key, '')))}</td>" for key in rows[0]) + "</tr>" for row in rows
    )
    return f'{_TABLE_STYLE}<table class="{TABLE_CLASS}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
