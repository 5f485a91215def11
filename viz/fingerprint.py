"""A figure's fingerprint: a digest of exactly what it is built from, so equal inputs find the figure built before.

A derivation step's figure depends on a few arrays of one head (Q, the scores, the weights ...), the
tokens and a few options, not on every setting of the page: turning scaling off changes the scaled
scores, the weights and the output, while X, W, Q, K, V and the raw scores stay what they were. A
builder is written as a ``functools.partial`` (the function and every argument it will be called
with), and ``fingerprint`` digests it: the function's name, and each argument by value (an array by
its dtype, shape and bytes, text by its characters). Two builders with the same fingerprint build the
same figure, so the app keeps one and the browser, sent the same bytes, redraws nothing.

An argument of a type not listed in ``_feed`` raises TypeError: a new kind of input must be added here
rather than silently left out of the key.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping

import numpy as np


def fingerprint(value) -> str:
    """A 32-hex-digit digest (blake2b, 128 bits) of ``value``: equal for equal content, whatever the objects."""
    digest = hashlib.blake2b(digest_size=16)
    _feed(digest, value)
    return digest.hexdigest()


def _feed(digest, value) -> None:
    if isinstance(value, functools.partial):
        _feed_text(digest, b"p", f"{value.func.__module__}.{value.func.__qualname__}")
        _feed(digest, value.args)
        _feed(digest, value.keywords)
    elif value is None or isinstance(value, bool | int | float | complex):
        _feed_text(digest, b"n", f"{type(value).__name__}:{value!r}")
    elif isinstance(value, str):
        _feed_text(digest, b"s", value)
    elif isinstance(value, bytes):
        digest.update(b"b" + len(value).to_bytes(8, "little") + value)
    elif isinstance(value, Mapping):
        digest.update(b"{" + len(value).to_bytes(8, "little"))
        for key in sorted(value, key=repr):
            _feed(digest, key)
            _feed(digest, value[key])
    elif isinstance(value, list | tuple) and value and all(type(item) is str for item in value):
        _feed_texts(digest, value)  # tokens: one update, not one per token
    elif isinstance(value, list | tuple):
        digest.update(b"[" + len(value).to_bytes(8, "little"))
        for item in value:
            _feed(digest, item)
    elif isinstance(value, np.ndarray | np.generic) or hasattr(value, "__array__"):
        array = np.ascontiguousarray(np.asarray(value))
        if array.dtype == object:
            _feed(digest, array.tolist())
            return
        _feed_text(digest, b"a", f"{array.dtype.str}{array.shape}")
        digest.update(array.data)
    else:
        raise TypeError(f"fingerprint: no rule for {type(value).__name__}; add one to viz.fingerprint")


def _feed_texts(digest, texts) -> None:
    """A list of strings as its length, each string's length (characters) and their characters: unambiguous."""
    data = "".join(texts).encode("utf-8", "surrogatepass")
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    digest.update(b"T" + len(texts).to_bytes(8, "little") + lengths.tobytes() + len(data).to_bytes(8, "little") + data)


def _feed_text(digest, tag: bytes, text: str) -> None:
    data = text.encode("utf-8")
    digest.update(tag + len(data).to_bytes(8, "little") + data)
