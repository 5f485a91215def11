"""A figure's CSV download looks its numbers up when it is clicked (ui.views.common.lazy_matrices).

Streamlit keeps a download button's callable until the next script run has ended. One that held the
matrices (views into the trace's arrays) kept the old trace alive while a recompute built the new one,
so the callables hold only what names the numbers (the request, the view, the head, the name)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import plotly.graph_objects as go

from attention_core.request import TraceRequest
from attention_core.traces import ModelTrace
from ui import compute
from ui.views import common
from viz.views import matrices_for_trace

REQUEST = TraceRequest(text="The cat sat on the mat.", head=2)


def test_lazy_matrices_give_the_same_numbers_and_hold_no_arrays():
    for view in ("derivation", "compare", "lines"):
        lazy = common.lazy_matrices(REQUEST, view, 2)
        eager = matrices_for_trace(compute.trace_for(REQUEST), view, head=2)
        assert set(lazy) == set(eager) and lazy
        for name, make in lazy.items():
            matrix, rows, cols = make()
            assert np.array_equal(matrix, eager[name][0]) and rows == eager[name][1] and cols == eager[name][2]
            held = [cell.cell_contents for cell in make.__closure__ or ()]
            assert not any(isinstance(value, (np.ndarray, ModelTrace, tuple, dict)) for value in held), name


class _Column:
    open = True  # a popover the person opened

    def __init__(self, calls: list) -> None:
        self.calls = calls

    def download_button(self, label, data, **kwargs) -> None:
        self.calls.append((label, data))

    def caption(self, *args, **kwargs) -> None:
        pass


class _Streamlit:
    """Just what ``common.figure`` calls."""

    def __init__(self) -> None:
        self.calls: list = []
        self.session_state: dict = {}

    def caption(self, *args, **kwargs) -> None:
        pass

    def columns(self, spec):
        return [_Column(self.calls) for _ in spec]

    def popover(self, label, **kwargs):
        return _Column(self.calls)


def test_figure_resolves_a_callable_only_when_the_csv_is_asked_for(monkeypatch):
    fake = _Streamlit()
    monkeypatch.setattr(common, "st", fake)
    monkeypatch.setattr(common, "draw", lambda fig, key, **_: None)
    asked = []
    numbers = (np.array([[0.25, 0.75], [1.0, 0.0]]), ["a", "b"], ["a", "b"])

    def later():
        asked.append(1)
        return numbers

    common.figure(go.Figure(), "weights", later)
    csv = dict(fake.calls)["CSV"]
    assert asked == []  # nothing looked up while the page is drawn
    assert csv() == common.csv_bytes(*numbers) and asked == [1]
    common.figure(go.Figure(), "weights", numbers)  # a plain (matrix, rows, cols) still works
    assert [data for label, data in fake.calls if label == "CSV"][-1]() == common.csv_bytes(*numbers)


def test_the_views_download_callables_hold_no_trace_and_still_build(monkeypatch):
    """The slides zip and the lesson deck look the trace up when clicked, and what they build is whole."""
    from pathlib import Path

    from streamlit.delta_generator import DeltaGenerator
    from streamlit.testing.v1 import AppTest

    from tests.export_zips import open_zip, read_manifest

    made: dict = {}
    original = DeltaGenerator.download_button

    def record(self, label, data, *args, **kwargs):
        if callable(data):
            made[kwargs.get("file_name", label)] = data
        return original(self, label, data, *args, **kwargs)

    monkeypatch.setattr(DeltaGenerator, "download_button", record)
    import streamlit

    plain = streamlit.download_button  # bound to the main area's DeltaGenerator when streamlit was imported

    def record_main(label, data, *args, **kwargs):
        if callable(data):
            made[kwargs.get("file_name", label)] = data
        return plain(label, data, *args, **kwargs)

    monkeypatch.setattr(streamlit, "download_button", record_main)
    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app.py"), default_timeout=180)
    at.query_params.update({"text": "The cat sat on the mat.", "head": "3"})
    at.run()
    assert not at.exception and not at.error
    (zip_name,) = [name for name in made if name.endswith(".zip")]
    (deck_name,) = [name for name in made if name.startswith("attention-lens-lesson")]
    for name, make in made.items():
        held = [cell.cell_contents for cell in make.__closure__ or ()]
        assert not any(isinstance(value, ModelTrace) for value in held), name
    manifest = read_manifest(open_zip(made[zip_name]()))
    assert manifest["settings"]["head"] == 3
    deck = made[deck_name]()
    assert b"<html" in deck[:500].lower() and b"head 3" in deck.lower()


NAMES = ("q", "k", "v", "scores", "weights", "output")


def _downloads_by_figure(opened: tuple[str, ...]) -> tuple[dict, int]:
    """({figure: [(its popover's label, button label), ...]}, popovers on the page) with ``opened``'s popovers open."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app.py"), default_timeout=180)
    at.session_state["text"] = "The cat sat on the mat."
    for name in opened:
        at.session_state[f"{common.EXPORT_KEY}{name}"] = True
    at.run()
    assert not at.exception
    found: dict[str, list] = {}
    popovers = []

    def walk(node, popover):
        children = getattr(node, "children", None)
        for child in children.values() if isinstance(children, dict) else ():
            if child.type == "popover":
                popovers.append(child)
                walk(child, child.proto.popover.label)
            else:
                if child.type == "download_button" and child.proto.label in ("SVG", "PNG", "CSV"):
                    found.setdefault(child.key.split("_", 1)[1], []).append((popover, child.proto.label))
                walk(child, popover)

    walk(at.main, None)
    return found, len(popovers)


def test_every_chart_of_the_derivation_has_its_downloads_in_one_popover():
    """SVG, PNG and CSV of each figure sit in a popover labelled ``EXPORT_LABEL`` (the browser renders its content
    only while it is open), one popover per figure, keyed by the figure's name; the buttons are made only while
    their popover is open (each is a message every rerun would send)."""
    found, popovers = _downloads_by_figure(NAMES)
    assert set(NAMES) <= set(found)
    closed, same = _downloads_by_figure(())
    assert closed == {} and same == popovers >= len(NAMES)  # every popover still there, none holding buttons
    for name, buttons in found.items():
        assert buttons == [(common.EXPORT_LABEL, "SVG"), (common.EXPORT_LABEL, "PNG"), (common.EXPORT_LABEL, "CSV")], (
            name
        )
