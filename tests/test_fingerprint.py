"""viz.fingerprint and the derivation's figures kept by what they are made of (ui.compute.figures).

A change that leaves a step's numbers alone (scaling, for X, W, Q, K, V and the raw scores) must find the
figure built before; a change of anything the figure shows (one number, the head, the theme) must not."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from attention_core.request import TraceRequest
from ui import compute, prefetch
from viz.fingerprint import fingerprint
from viz.views import DERIVATION_FIGURES, derivation_key

TEXT = "The cat sat on the mat because it was warm, and the dog watched it from the door."


def test_equal_content_equal_digest_whatever_the_objects():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert fingerprint(a) == fingerprint(a.copy())
    assert fingerprint(a.T) == fingerprint(np.ascontiguousarray(a.T))  # a strided view reads as its values
    assert fingerprint({"b": 1, "a": [a, "x"]}) == fingerprint({"a": [a.copy(), "x"], "b": 1})  # key order


@pytest.mark.parametrize(
    "other",
    [
        lambda a: np.where(np.arange(12).reshape(3, 4) == 7, np.float32(7.000001), a),  # one number
        lambda a: a.astype(np.float64),  # same values, other dtype
        lambda a: a.reshape(4, 3),  # same bytes, other shape
        lambda a: a.T,  # transposed
        lambda a: a[:2],
    ],
)
def test_any_difference_in_an_array_changes_the_digest(other):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert fingerprint(a) != fingerprint(other(a))


def test_types_are_told_apart_and_unknown_ones_refused():
    assert len({fingerprint(v) for v in (1, 1.0, True, "1", b"1", None, [1], np.array(1))}) == 8
    assert fingerprint(["ab", "c"]) != fingerprint(["a", "bc"])  # lengths are part of the digest
    assert fingerprint(functools.partial(max, 1, 2)) != fingerprint(functools.partial(min, 1, 2))
    assert fingerprint(functools.partial(max, 1, default=2)) != fingerprint(functools.partial(max, 1, default=3))
    with pytest.raises(TypeError, match="no rule for object"):
        fingerprint([object()])


@pytest.fixture(scope="module")
def traces():
    compute.store().clear()
    base = compute.trace_for(TraceRequest(text=TEXT))
    unscaled = compute.trace_for(TraceRequest(text=TEXT, scaling="none"))
    masked = compute.trace_for(TraceRequest(text=TEXT, mask="causal"))
    return base, unscaled, masked


def _keys(trace, **options):
    return {name: derivation_key(trace, only=(name,), **options) for name in DERIVATION_FIGURES}


def test_scaling_keeps_the_steps_before_it_and_changes_the_rest(traces):
    base, unscaled, masked = traces
    a, b, c = _keys(base), _keys(unscaled), _keys(masked)
    assert a.keys() == b.keys()
    same = {name for name in a if a[name] == b[name]}
    assert same >= {"x", "w_q", "w_k", "w_v", "q", "k", "v", "scores"}
    assert same.isdisjoint({"scaled", "masked", "weights", "output"})
    # a mask leaves the scaled scores alone too
    assert {name for name in a if a[name] == c[name]} >= {"q", "scores", "scaled"}
    assert a["masked"] != c["masked"] and a["weights"] != c["weights"]


def test_head_theme_and_values_are_part_of_the_key(traces):
    base = traces[0]
    q = derivation_key(base, only=("q",))
    assert derivation_key(base, head=1, only=("q",)) != q
    assert derivation_key(base, theme="slides", only=("q",)) != q
    assert derivation_key(base, show_values=True, only=("q",)) != q
    assert derivation_key(base, only=("q", "k")) != q
    assert derivation_key(base, head=base.head, only=("q",)) == q


def test_a_scaling_change_finds_the_projection_figures_built_before(traces, monkeypatch):
    monkeypatch.setattr(prefetch, "NEIGHBOURS", 0)  # only this call's figures are built
    base, unscaled, _ = traces
    request, other = TraceRequest(text=TEXT), TraceRequest(text=TEXT, scaling="none")
    options = dict(head=base.head, theme="screen", show_values=None)
    qkv = compute.figures(base, request, "derivation", only=("q", "k", "v"), **options)
    assert compute.figures(unscaled, other, "derivation", only=("q", "k", "v"), **options) is qkv
    weights = compute.figures(base, request, "derivation", only=("weights",), **options)
    changed = compute.figures(unscaled, other, "derivation", only=("weights",), **options)
    assert changed is not weights
    assert not np.array_equal(
        changed["weights"].figure().data[0].z, weights["weights"].figure().data[0].z, equal_nan=True
    )


def test_a_list_of_strings_is_digested_by_its_split_as_well_as_its_characters():
    """Tokens go in as one update (each string's length, then the characters): a different split, a different
    digest; the same strings, the same digest; and never the digest of the same strings nested another way."""
    assert fingerprint(["ab", "c"]) == fingerprint(["ab", "c"]) == fingerprint(("ab", "c"))
    assert (
        len({fingerprint(v) for v in (["ab", "c"], ["a", "bc"], ["abc"], ["ab", "c", ""], [["ab", "c"]], "abc")}) == 6
    )
    assert fingerprint(["x", 1]) != fingerprint(["x", "1"])  # a mixed list takes the general path
