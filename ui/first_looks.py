"""Which entries of the shared store are first looks (``ui.compute.first_look``: a capture of the layers up to the
one shown, and the traces made from it), so that they are let go once the whole capture of their input is held.
Bookkeeping only: no Streamlit, no computation.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable

# (model, text, max_tokens, pad_to) -> the store keys of the first looks made for that input
_KEYS: dict[tuple, set] = {}
_LOCK = threading.Lock()


def remember(ident: tuple, key: Hashable) -> None:
    """``key`` (a store key) holds a first look at input ``ident``."""
    with _LOCK:
        _KEYS.setdefault(ident, set()).add(key)


def forget(held, ident: tuple) -> None:
    """The whole capture of ``ident`` is held: its first looks leave ``held`` (the store, or a session's view)."""
    with _LOCK:
        keys = _KEYS.pop(ident, ())
    for key in keys:
        held.discard(key)
