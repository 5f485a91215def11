"""Every option of every control, in every view, on both bundled models and on scratch weights.

Issue 13: picking "diagonal_distance" in the heads view's Statistic box replaced the page with
"Something went wrong (ValueError)", because two modules spelled one choice differently. Tests that
set a few chosen values cannot catch that; this one walks whatever the page offers.

For each (start, view) the page opens from its link (short text, max_tokens 16; start = MiniLM,
SmolLM2, or MiniLM with source=scratch), switches to the view, then finds every widget on the page
(sidebar and main area, wherever the layout puts them, fragments included) and tries:
- selectbox, radio, segmented control, pills, select_slider: every option, chosen by its label the
  way the browser sends it, so no option list is retyped here;
- multiselect: one option, all options, none;
- checkbox, toggle: the other state;
- slider, number_input: its lowest and its highest value (CHEAP_MAX caps a costly maximum).
After each choice it reruns and requires no exception, no error box and no "Something went wrong".
Widgets that only appear after a choice (the temperature slider, the window slider of a mask, the
scratch sizes, a pitfall's own controls) are walked in the state that shows them. Each widget is
put back before the next one is walked (the put-back rides along with the next run; a widget an
error took off the page is put back through its key). Buttons and download buttons start work
(train, measure, export) and are not pressed; text fields are left alone except the model id field.

Cost: the opening view walks everything; every other view walks its own widgets in full and a
rotating fifth of the opening page's (see shared_moves). ATTENTION_LENS_WALK=full walks every
widget in every view (all 18 cases; several times longer).

The "other" model choice with its field still empty quietly shows the bundled default (no message;
the field's placeholder says what to type): asserted as no error box plus the field appearing. A
bogus id there is the one place an error box is the intended outcome: "Could not load that model
..." while the page keeps the previous model.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from streamlit.proto.WidgetStates_pb2 import WidgetState
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1 import element_tree as et

from attention_core.pretrained import bundled
from ui.settings import VIEWS

APP = str(Path(__file__).resolve().parents[1] / "app.py")
TEXT = "The cat sat on the mat because it was tired."
START = {  # starting state, through the page's link (the same path a shared URL takes)
    "minilm": {"model": "minilm"},
    "smollm2": {"model": "smollm2"},
    "scratch": {"model": "minilm", "source": "scratch"},
}
OPTION_KINDS = ("selectbox", "radio", "segmented_control", "pills", "select_slider", "multiselect")
WALKED_KINDS = (*OPTION_KINDS, "checkbox", "toggle", "slider", "number_input", "text_input")
RESTORED_KINDS = (*WALKED_KINDS, "text_area")
NOT_WALKED = {"view"}  # the view is the test's parameter
BOGUS_MODEL = "/definitely/not/a/model"
BAD_MODEL_MESSAGE = "Could not load that model"
TIMEOUT = 300  # the first SmolLM2 use converts it once (about 25-60 s)
# Highest value tried where the widget's own maximum is not cheap: padding to the server's token
# budget builds that many tokens (SmolLM2: 2048 tokens through 30 layers, ~47 s per run).
CHEAP_MAX = {"pad_to": 64}


# --- choosing an option by its label, as the browser does -------------------------------------------


def _chosen_state(self) -> WidgetState:
    state = WidgetState()
    state.id = self.id
    if isinstance(self, (et.Selectbox, et.Radio)):
        state.string_value = self._chosen_labels[0]
    else:  # multiselect, select_slider, segmented control / pills: the labels of the selection
        state.string_array_value.data[:] = self._chosen_labels
    return state


_CHOSEN_CLASSES: dict[type, type] = {}


def choose_labels(widget, labels: list[str]) -> None:
    """Send ``labels`` (as shown) for this widget on the next run: what the frontend sends on a click.

    AppTest's own set_value needs the raw option values, which only the app knows; the labels are
    in the page. A per-instance subclass overrides the state this widget reports (a fresh tree is
    built on each run, so nothing lingers).
    """
    base = type(widget)
    if base not in _CHOSEN_CLASSES:
        _CHOSEN_CLASSES[base] = type(f"Chosen{base.__name__}", (base,), {"_widget_state": property(_chosen_state)})
    widget.__class__ = _CHOSEN_CLASSES[base]
    widget._chosen_labels = list(labels)


# --- the page -----------------------------------------------------------------------------------------


def ident(widget) -> tuple[str, str]:
    kind = getattr(widget, "type", type(widget).__name__)
    return kind, widget.key or f"label:{getattr(widget, 'label', '')}"


def widgets(at: AppTest) -> dict[tuple[str, str], object]:
    """Every widget in the page that the walk knows how to set, by identity, in page order."""
    found = {}
    for kind in RESTORED_KINDS:
        for widget in getattr(at, kind):
            found.setdefault(ident(widget), widget)
    return found


def texts(at: AppTest):
    for block in (at.main, at.sidebar):
        for node in block:
            value = getattr(node, "value", None) if not isinstance(node, et.Widget) else None
            if isinstance(value, str):
                yield value
            body = getattr(getattr(node, "proto", None), "body", None)
            if isinstance(body, str):
                yield body


def problems(at: AppTest, *, bad_model_ok: bool = False) -> list[str]:
    found = [f"exception: {e.message}" for e in at.exception]
    for box in at.error:
        if bad_model_ok and box.value.startswith(BAD_MODEL_MESSAGE):
            continue
        found.append(f"error box: {box.value[:300]}")
    boxes = " ".join(box.value for box in at.error)
    found += [f"text: {t[:300]}" for t in texts(at) if "Something went wrong" in t and t not in boxes]
    return list(dict.fromkeys(found))


# --- what to try on each widget ----------------------------------------------------------------------


def _number(widget, bound):
    value = widget.value
    return type(value)(bound) if isinstance(value, (int, float)) and not isinstance(value, bool) else bound


def moves(widget) -> list[tuple[str, object]]:
    """(description, how to apply) for each value to try, the current one left out."""
    kind = ident(widget)[0]
    out: list[tuple[str, object]] = []
    if kind in ("selectbox", "radio"):
        current = widget.index
        for i, label in enumerate(widget.options):
            if i != current:
                out.append((label, lambda w, label=label: choose_labels(w, [label])))
    elif kind == "button_group" or kind in ("segmented_control", "pills"):
        current = list(widget.indices)
        for i, label in enumerate(widget.options):
            if [i] != current:
                out.append((label, lambda w, label=label: choose_labels(w, [label])))
    elif kind == "select_slider":
        current = str(widget.format_func(widget.value))
        for label in widget.options:
            if label != current:
                out.append((label, lambda w, label=label: choose_labels(w, [label])))
    elif kind == "multiselect":
        opts = widget.options
        choices = {"one": opts[:1], "all": opts, "none": []}
        for name, labels in choices.items():
            if list(widget.values) != labels and (labels or name == "none"):
                out.append((f"{name} ({len(labels)})", lambda w, labels=labels: choose_labels(w, labels)))
    elif kind in ("checkbox", "toggle"):
        out.append((str(not widget.value), lambda w: w.set_value(not w.value)))
    elif kind in ("slider", "number_input"):
        low, high = widget.min, widget.max
        if high is not None and widget.key in CHEAP_MAX:
            high = min(high, CHEAP_MAX[widget.key])
        if isinstance(widget.value, (list, tuple)):  # a range slider: the widest and the narrowest range
            out.append((f"({low}, {high})", lambda w: w.set_value((_number(w, low), _number(w, high)))))
        else:
            for bound in (low, high):
                if bound is not None and bound != widget.value:
                    out.append((f"{bound:g}", lambda w, bound=bound: w.set_value(_number(w, bound))))
    elif kind == "text_input" and widget.key == "model_custom":
        out.append((repr(BOGUS_MODEL), lambda w: w.input(BOGUS_MODEL)))
    return out


# --- the walk ----------------------------------------------------------------------------------------


def _offers(widget, value) -> bool:
    """Whether an option widget offers ``value`` now (a browser cannot send an option the list lacks)."""
    values = value if isinstance(value, list | tuple) else [value]
    name = getattr(type(widget), "format_func", None)
    if name is None or not hasattr(widget, "options"):
        return True  # a kind that does not say: set it as before
    try:
        return all(widget.format_func(v) in widget.options for v in values)
    except Exception:  # noqa: BLE001 - the widget's format_func cannot even name it: not offered
        return False


@dataclass
class Walk:
    at: AppTest
    visited: set = field(default_factory=set)
    counts: dict = field(default_factory=dict)  # widget -> options tried
    failures: list = field(default_factory=list)
    seconds: dict = field(default_factory=dict)  # slowest moves
    pending: list = field(default_factory=list)  # widgets put back, riding along with the next run

    def run(self, path: str, *, bad_model_ok: bool = False) -> None:
        if self.pending:  # a widget walked before was put back in this same run: say so
            path = f"{path} (with {', '.join(dict.fromkeys(self.pending))} put back)"
            self.pending = []
        start = time.perf_counter()
        self.at.run()
        self.seconds[path] = time.perf_counter() - start
        for problem in problems(self.at, bad_model_ok=bad_model_ok):
            self.failures.append(f"{path}: {problem}")

    def snapshot(self) -> dict:
        return {key: w.value for key, w in widgets(self.at).items()}

    def put_back(self, before: dict) -> list[str]:
        """Set every widget on the page whose value differs from ``before`` back to it (sent with
        the next run); the names of those set."""
        now = widgets(self.at)
        differ = [key for key, w in now.items() if key in before and w.value != before[key]]
        for key, value in before.items():  # not on the page (an error replaced it): through its key
            if key not in now and not key[1].startswith("label:"):
                self.at.session_state[key[1]] = value
        for key in differ:
            widget, value = now[key], before[key]
            if key[0] in ("text_area", "text_input"):
                widget.input(value)
            elif key[0] in OPTION_KINDS and not _offers(widget, value):
                continue  # e.g. a query position the shorter text does not have yet: the next pass, once it does
            else:
                widget.set_value(value)
        self.pending += [key[1] for key in differ]
        return [key[1] for key in differ]

    def restore(self, before: dict, path: str) -> None:
        """Put everything back and check it took (a few passes: one value can move another, e.g.
        a model switch clamps the head)."""
        for _ in range(3):
            if not self.put_back(before) and not self.pending:
                return
            self.run(f"{path}restore")
        left = [k for k, w in widgets(self.at).items() if k in before and w.value != before[k]]
        if left:
            self.failures.append(f"{path}: could not restore {left}")

    def walk(self, keys, path: str = "", only=None) -> None:
        """Try every move of each widget in ``keys`` (for a key in ``only``: just the moves it
        lists), and, in the state each move leads to, every widget that move brought up."""
        for key in keys:
            if key in self.visited or key[1] in NOT_WALKED:
                continue
            widget = widgets(self.at).get(key)
            if widget is None:  # gone after an earlier choice; walked where it shows, if anywhere
                continue
            tried = moves(widget)
            if only is not None and key in only:
                tried = [(name, apply) for name, apply in tried if name in only[key]]
            if not tried:
                continue
            self.visited.add(key)
            before = self.snapshot()
            here = f"{path}{key[1]}"
            for name, apply in tried:
                widget = widgets(self.at).get(key)
                if widget is None:  # the last choice took the page down: put it back and go on
                    self.put_back(before)
                    self.run(f"{here}: put back after a failure")
                    widget = widgets(self.at).get(key)
                if widget is None:
                    self.failures.append(f"{here}: vanished before trying {name}")
                    break
                shown = set(widgets(self.at))
                apply(widget)
                step = f"{here} = {name}"
                self.run(step, bad_model_ok=key[1] == "model_custom")
                self.counts[key] = self.counts.get(key, 0) + 1
                if key[1] == "model_custom" and not any(e.value.startswith(BAD_MODEL_MESSAGE) for e in self.at.error):
                    self.failures.append(f"{step}: no '{BAD_MODEL_MESSAGE}' message")
                revealed = [k for k in widgets(self.at) if k not in shown and k not in self.visited]
                if revealed:
                    self.walk(revealed, f"{step} > ")
            self.put_back(before)  # no run of its own: it rides with the next widget's first option


@pytest.fixture(scope="module")
def model_cache(pytestconfig, tmp_path_factory):
    """SmolLM2 is converted once into a cache: $ATTENTION_LENS_CACHE if set, else pytest's own cache
    folder, so a second test session does not convert again (and nothing is written to $HOME);
    a temporary folder when pytest runs without its cache (-p no:cacheprovider)."""
    if os.environ.get(bundled.CACHE_ENV):
        yield os.environ[bundled.CACHE_ENV]
        return
    with pytest.MonkeyPatch.context() as patch:
        cache = getattr(pytestconfig, "cache", None)
        folder = str(cache.mkdir("attention-lens-models") if cache else tmp_path_factory.mktemp("models"))
        patch.setenv(bundled.CACHE_ENV, folder)
        yield folder


def shared_moves(at: AppTest, view: str, start: str) -> dict | None:
    """Which moves of the widgets already on the opening page (the sidebar, today) to try in ``view``.

    The opening view tries them all. Each other view tries its own widgets in full and a share of
    the opening page's moves: move k of that page goes to other view (k + start's number) mod the
    number of other views, so each move meets a different view on each start and the three starts
    together cross most of them with most views, at a fifth of the full cost. ATTENTION_LENS_WALK=full
    tries every move in every view (about five times longer). None: no filter.
    """
    opening = at.segmented_control(key="view").value
    if os.environ.get("ATTENTION_LENS_WALK") == "full" or view == opening:
        return None
    plan = [(key, name) for key, w in widgets(at).items() if key[1] not in NOT_WALKED for name, _ in moves(w)]
    others = [v for v in VIEWS if v != opening]
    mine, shift = others.index(view), list(START).index(start)
    only: dict = {key: set() for key, _ in plan}
    for k, (key, name) in enumerate(plan):
        if (k + shift) % len(others) == mine:
            only[key].add(name)
    return only


@pytest.mark.slow
@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("start", list(START))
def test_every_option_of_every_control(model_cache, start, view):
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"text": TEXT, "max_tokens": "16", **START[start]})
    walk = Walk(at)
    walk.run("start")
    only = shared_moves(at, view, start)
    if view != at.segmented_control(key="view").value:
        at.segmented_control(key="view").set_value(view)
        walk.run(f"view {view}")
    if walk.failures:
        pytest.fail("\n".join(walk.failures), pytrace=False)
    start_values = walk.snapshot()
    walk.walk(list(widgets(at)), only=only)
    walk.restore(start_values, "end: ")

    slow = sorted(walk.seconds.items(), key=lambda kv: -kv[1])[: int(os.environ.get("WALK_SLOWEST", 3))]
    print(
        f"\n{start}/{view}: {len(walk.counts)} widgets, {sum(walk.counts.values())} options, "
        f"{len(walk.seconds)} runs, {sum(walk.seconds.values()):.1f} s; slowest {[(p, round(s, 2)) for p, s in slow]}"
    )
    for key, n in walk.counts.items():
        print(f"  {key[0]:<17} {key[1]:<22} {n}")
    if walk.failures:
        pytest.fail(f"{len(walk.failures)} problem(s) in {start}/{view}:\n" + "\n".join(walk.failures), pytrace=False)
    assert walk.counts, "the walk found no widget to try"
    if only is None and ("selectbox", "model_choice") in walk.counts:  # every model option was tried
        assert ("text_input", "model_custom") in walk.counts, "choosing 'other' did not bring up the model id field"
