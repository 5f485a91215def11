"""Show user or model text as text: never as markdown or HTML."""

from __future__ import annotations

_MARKDOWN = str.maketrans({c: "\\" + c for c in "\\`*_{}[]()#+-.!|<>~$"})


def plain(text: str, limit: int = 300) -> str:
    """Escape markdown/HTML specials so token text shows literally inside st.markdown strings."""
    text = str(text).replace("\x00", "␀")
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.translate(_MARKDOWN)
