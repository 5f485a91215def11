"""Protocol-level load test: many Streamlit sessions, no browser, each changing one control every 2 s.

    .venv/bin/python -m benchmarks.load_protocol --sessions 30 --seconds 60 [--app-dir DIR] [--json out.json]

Each client speaks Streamlit's own websocket protocol, as the browser frontend does:

1. connect to ``ws://127.0.0.1:PORT/_stcore/stream`` (subprotocol ``streamlit``; no Origin header, so the
   server's same-origin/XSRF checks do not apply, as for any non-browser client);
2. send a ``BackMsg`` ``rerun_script`` whose ``ClientState.query_string`` is the link's query string
   (``text=...&max_tokens=...``: the app seeds its settings from ``st.query_params``), then read
   ``ForwardMsg``s until ``script_finished``;
3. from that run's deltas, learn every widget by its label (each widget proto has ``id``, ``label``
   and, for choices, the formatted ``options``), so no widget id is hard-coded;
4. every ``interval`` seconds change one control (a rotation of view-only and recomputing changes,
   below) by sending ``rerun_script`` with that one ``WidgetState`` (the server keeps the other
   widgets' last values), and time the change until the server's ``script_finished``. A control that a
   fragment drew (each widget's delta says which: Head and View, in the view's fragment) reruns that
   fragment only, as the browser asks (the BackMsg carries the fragment's id); the fragment's run does
   not echo the control's value, so the link it sets (``page_info_changed``: ``head=3&view=heads``) is
   checked instead. Before the tenth session every change was a whole-script rerun
   (ATTENTION_LENS_LOAD_FULL_RERUNS=1 measures that way).

The changes rotate through: Head +1 (slider), scaling (radio), view (segmented control, Derivation
<-> Heads & layers), mask (selectbox), positional encoding (selectbox); each session starts at a
different point of the rotation and on its own text. A change whose control is not on the page is
counted as ``skipped``; an error is an exception element, an error box (``st.error``), a run that did
not finish within the timeout, or a dropped connection. A "server busy" warning is counted apart.

Memory: the server's resident set (psutil, the streamlit process and its children) with one warm
session open (the baseline), its peak during the run, and ``settle`` seconds after every session closed.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import hashlib
import json
import math
import os
import statistics
import sys
import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

# (label of the widget, kind of change, what the change is)
ROTATION = (
    ("Head", "view-only", "next"),
    ("Divide the scores by", "recompute", "next"),
    ("View", "view-only", ("Heads & layers", "Derivation")),
    ("Mask", "recompute", ("causal: no future keys", "none: every key", "what the model uses")),
    (
        "Positional encoding (own core)",
        "recompute",
        ("none (bag of words)", "sinusoidal (added to X)", "the model's own"),
    ),
)
TEXTS = (
    "The animal didn't cross the street because it was too tired.",
    "The cat sat on the mat. The cat was happy.",
    "Paris is the capital of France, and Berlin is the capital of Germany.",
    "I saw a saw that could saw wood.",
    "The keys to the cabinet are on the table.",
    "Attention lets every token look at every other token.",
    "A small model can still show how attention spreads over a sentence.",
    "Queries meet keys, and the softmax decides how much of each value flows.",
    "Scaling by the square root of the key width keeps the softmax soft.",
    "Long inputs make the score matrix grow with the square of their length.",
    "Positional encodings tell attention where each word stands.",
    "Masks decide which keys a query may see at all.",
)
BUSY_WORDS = ("busy", "too many")
# A change of a widget that a fragment drew reruns that fragment only, as the browser asks for it (its BackMsg
# carries the fragment's id): Head and View here. The first nine sessions' runs sent every change as a whole-script
# rerun, which no browser does for such a widget; ATTENTION_LENS_LOAD_FULL_RERUNS=1 measures that way again.
FRAGMENTS = os.environ.get("ATTENTION_LENS_LOAD_FULL_RERUNS", "") != "1"


# ---------------------------------------------------------------- statistics (pure)


def percentile(values: Sequence[float], fraction: float) -> float:
    """Linear-interpolated percentile (numpy's default), ``fraction`` in [0, 1]; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summarize(values: Sequence[float]) -> dict[str, float | int]:
    """count, p50, p95, max of seconds (NaN when empty)."""
    return {
        "count": len(values),
        "p50_s": statistics.median(values) if values else float("nan"),
        "p95_s": percentile(values, 0.95),
        "max_s": max(values, default=float("nan")),
    }


def session_text(index: int) -> str:
    """A distinct text per session (so the server holds distinct captures and traces)."""
    return f"{TEXTS[index % len(TEXTS)]} Session {index} reads it."


# ---------------------------------------------------------------- protocol messages (pure)

VALUE_FIELD = {  # widget element type -> WidgetState field its value travels in (streamlit 1.67)
    "slider": "double_array_value",
    "radio": "string_value",
    "selectbox": "string_value",
    "button_group": "string_array_value",
    "number_input": "double_value",
    "checkbox": "bool_value",
    "text_area": "string_value",
    "text_input": "string_value",
}


@dataclass
class Widget:
    kind: str  # element type: slider, radio, selectbox, button_group, ...
    id: str
    label: str
    options: list[str] = field(default_factory=list)
    value: Any = None  # the current value as it travels (slider: list of floats, choices: formatted label)
    low: float | None = None
    high: float | None = None
    step: float | None = None
    fragment_id: str = ""  # the fragment whose run drew it ("": the whole script): a change reruns that fragment
    told: bool = True  # the element carried its value (else only its default: the page keeps what it was set to)


def widget_state(widget: Widget, value: Any):
    """The WidgetState proto that sets ``widget`` to ``value`` (in its wire form)."""
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    state = WidgetState(id=widget.id)
    name = VALUE_FIELD[widget.kind]
    if name == "double_array_value":
        state.double_array_value.data.extend(float(v) for v in (value if isinstance(value, list | tuple) else [value]))
    elif name == "string_array_value":
        state.string_array_value.data.extend(value if isinstance(value, list | tuple) else [value])
    else:
        setattr(state, name, value)
    return state


def trigger_state(component_id: str, event: str, value: Any):
    """The WidgetState proto of a custom component's trigger ``event`` (``setTriggerValue(event, value)`` in the
    page): Streamlit 1.67 sends every trigger of a component as one JSON list on its "events" widget."""
    from streamlit.components.v2.bidi_component.main import _make_trigger_id
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    state = WidgetState(id=_make_trigger_id(component_id, "events"))
    state.json_trigger_value = json.dumps([{"event": event, "value": value}])
    return state


def rerun_message(query_string: str, states: Sequence = (), page_script_hash: str = "", fragment_id: str = "") -> bytes:
    """A serialized BackMsg asking for a rerun with ``states`` (WidgetState protos); of one fragment only when
    ``fragment_id`` is given, as the browser asks when a widget drawn by that fragment changes."""
    from streamlit.proto.BackMsg_pb2 import BackMsg

    msg = BackMsg()
    msg.rerun_script.query_string = query_string
    msg.rerun_script.page_script_hash = page_script_hash
    if fragment_id:
        msg.rerun_script.fragment_id = fragment_id
    msg.rerun_script.widget_states.widgets.extend(states)
    return msg.SerializeToString()


def widget_from_element(element) -> Widget | None:
    """A Widget from a delta's Element proto, or None when the element is no widget we can set."""
    kind = element.WhichOneof("type")
    if kind not in VALUE_FIELD:
        return None
    proto = getattr(element, kind)
    widget = Widget(kind=kind, id=proto.id, label=proto.label)
    if kind in ("radio", "selectbox"):
        widget.options = list(proto.options)
        widget.told = proto.HasField("raw_value")
        if proto.HasField("raw_value"):
            widget.value = proto.raw_value
        elif proto.HasField("default") and 0 <= proto.default < len(widget.options):
            widget.value = widget.options[proto.default]
    elif kind == "button_group":
        widget.options = [o.content for o in proto.options]
        widget.told = bool(proto.set_value)
        if proto.set_value and proto.raw_values:
            widget.value = list(proto.raw_values)
        else:
            widget.value = [widget.options[i] for i in proto.default if 0 <= i < len(widget.options)]
    elif kind == "slider":
        widget.low, widget.high, widget.step = proto.min, proto.max, proto.step
        widget.told = bool(proto.set_value)
        widget.value = list(proto.value) if proto.set_value and len(proto.value) else list(proto.default)
    elif kind == "number_input":
        widget.low = proto.min if proto.has_min else None
        widget.high = proto.max if proto.has_max else None
        widget.step = proto.step
        widget.value = proto.value if proto.set_value else proto.default
    return widget


def next_value(widget: Widget, how) -> Any | None:
    """The wire value of the change ``how`` ('next', or a tuple of option labels to cycle), or None."""
    if widget.kind == "slider":
        current = float(widget.value[0]) if widget.value else float(widget.low or 0)
        step = widget.step or 1.0
        target = current + step if current + step <= (widget.high or current) else (widget.low or 0.0)
        return [target]
    current = widget.value[0] if isinstance(widget.value, list) and widget.value else widget.value
    choices = list(how) if isinstance(how, tuple) else list(widget.options)
    choices = [c for c in choices if c in widget.options]
    if not choices:
        return None
    target = choices[(choices.index(current) + 1) % len(choices)] if current in choices else choices[0]
    if target == current:
        return None
    return [target] if widget.kind == "button_group" else target


@dataclass
class RunResult:
    finished: str | None = None  # script_finished status name, None: no finish seen
    widgets: dict[str, Widget] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    busy: int = 0
    bytes: int = 0
    messages: int = 0
    page_script_hash: str = ""
    query_string: str | None = None  # the page's link as the run set it (st.query_params), if it did
    kinds: collections.Counter = field(default_factory=collections.Counter)  # elements sent, by type
    # custom components (st.components.v2) sent, by element id (its key at the end): (name, fragment id, JSON data)
    components: dict[str, tuple[str, str, Any]] = field(default_factory=dict)
    # ... and a digest of each one's data (JSON, Arrow, bytes or mixed): two runs that drew the same numbers agree
    payloads: dict[str, str] = field(default_factory=dict)


def read_forward(data: bytes, run: RunResult) -> bool:
    """Fold one serialized ForwardMsg into ``run``; True when it is ``script_finished``."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    msg = ForwardMsg()
    msg.ParseFromString(data)
    run.bytes += len(data)
    run.messages += 1
    kind = msg.WhichOneof("type")
    if kind == "new_session":
        run.page_script_hash = msg.new_session.page_script_hash or run.page_script_hash
    elif kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
        element = msg.delta.new_element
        which = element.WhichOneof("type")
        run.kinds[which] += 1
        if which == "bidi_component":
            proto = element.bidi_component
            data = json.loads(proto.json) if proto.WhichOneof("data") == "json" else None
            run.components[proto.id] = (proto.component_name, msg.delta.fragment_id, data)
            which_data = proto.WhichOneof("data")
            payload = getattr(proto, which_data) if which_data else b""
            payload = payload.SerializeToString() if hasattr(payload, "SerializeToString") else payload
            run.payloads[proto.id] = hashlib.sha1(payload.encode() if isinstance(payload, str) else payload).hexdigest()
            run.kinds[f"{which}:{proto.component_name.rsplit('.', 1)[-1]}"] += 1  # which component, too
        elif which == "exception":
            run.errors.append(f"exception: {element.exception.type}: {element.exception.message[:160]}")
        elif which == "alert":
            body = element.alert.body
            if element.alert.format == element.alert.ERROR:
                run.errors.append(f"error box: {body[:160]}")
            elif any(w in body.lower() for w in BUSY_WORDS):
                run.busy += 1
        else:
            widget = widget_from_element(element)
            if widget is not None:
                widget.fragment_id = msg.delta.fragment_id
            if widget is not None and widget.label:
                run.widgets[widget.label] = widget
    elif kind == "page_info_changed":
        run.query_string = msg.page_info_changed.query_string
    elif kind == "script_finished":
        run.finished = ForwardMsg.ScriptFinishedStatus.Name(msg.script_finished)
        return True
    return False


# ---------------------------------------------------------------- the clients


class Client:
    """One Streamlit session over a websocket."""

    def __init__(self, ws_url: str, query_string: str, timeout_s: float):
        self.ws_url, self.query_string, self.timeout_s = ws_url, query_string, timeout_s
        self.widgets: dict[str, Widget] = {}
        self.page_script_hash = ""
        self.ws = None

    async def connect(self) -> None:
        from websockets.asyncio.client import connect

        self.ws = await connect(
            self.ws_url, subprotocols=["streamlit"], max_size=None, open_timeout=self.timeout_s, ping_interval=None
        )

    async def run(self, states: Sequence = (), fragment_id: str = "") -> tuple[RunResult, float]:
        """Send a rerun (of one fragment, given its id), read until script_finished (a rerun that was cut short by a
        newer one goes on)."""
        run = RunResult(page_script_hash=self.page_script_hash)
        started = time.perf_counter()
        await self.ws.send(rerun_message(self.query_string, states, self.page_script_hash, fragment_id))
        deadline = time.monotonic() + self.timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                run.errors.append(f"no script_finished within {self.timeout_s:.0f} s")
                break
            try:
                data = await asyncio.wait_for(self.ws.recv(), timeout=left)
            except TimeoutError:
                run.errors.append(f"no script_finished within {self.timeout_s:.0f} s")
                break
            if isinstance(data, str):
                continue
            if read_forward(data, run) and run.finished != "FINISHED_EARLY_FOR_RERUN":
                break
        elapsed = time.perf_counter() - started
        self.page_script_hash = run.page_script_hash
        for label, widget in run.widgets.items():
            self.widgets[label] = widget
        return run, elapsed

    async def change(self, label: str, how) -> tuple[RunResult | None, float, Any]:
        widget = self.widgets.get(label)
        if widget is None:
            return None, 0.0, None
        value = next_value(widget, how)
        if value is None:
            return None, 0.0, None
        run, elapsed = await self.run([widget_state(widget, value)], widget.fragment_id if FRAGMENTS else "")
        drawn = run.widgets.get(label)
        if drawn is None or not drawn.told:  # not redrawn, or drawn without its value: remember what we set
            self.widgets[label].value = value
        if drawn is not None and not drawn.told and not run.errors:  # a fragment's run: its link says what it took
            said = link_value(label, run.query_string)
            if said is not None and said != link_form(label, value):
                run.errors.append(f"the server did not take {label} = {value!r} (its link says {said!r})")
        elif drawn is not None and drawn.value is not None and drawn.value != value and not run.errors:
            run.errors.append(f"the server did not take {label} = {value!r} (it shows {drawn.value!r})")
        return run, elapsed, value

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()


LINK_PARAMS = {"Head": "head", "View": "view"}  # the fragment's controls, as the page's link names them


def link_form(label: str, value) -> str | None:
    """How the page's link writes ``value`` of the control ``label`` (ui.settings.to_query_params)."""
    from ui.settings import VIEW_LABELS

    if label == "Head":
        return str(int(value[0]))
    if label == "View":
        return {shown: view for view, shown in VIEW_LABELS.items()}.get(value[0])
    return None


def link_value(label: str, query: str | None) -> str | None:
    """The value of ``label``'s parameter in the link a run set, or None (not set by that run, or left out)."""
    if query is None or label not in LINK_PARAMS:
        return None
    return urllib.parse.parse_qs(query).get(LINK_PARAMS[label], [None])[0]


def query_string(text: str, **extra) -> str:
    return urllib.parse.urlencode({"text": text, **{k: v for k, v in extra.items() if v is not None}})


async def _session(index: int, ws_url: str, stop_at: float, interval: float, state: dict, timeout_s: float, extra):
    client = Client(ws_url, query_string(session_text(index), **extra), timeout_s)
    try:
        await client.connect()
        run, elapsed = await client.run()
        state["opens"].append(elapsed)
        state["errors"] += [f"session {index} open: {e}" for e in run.errors]
        state["busy"] += run.busy
        step = index
        while time.monotonic() < stop_at:
            tick = time.monotonic()
            label, kind, how = ROTATION[step % len(ROTATION)]
            step += 1
            run, elapsed, value = await client.change(label, how)
            if run is None:
                state["skipped"].append(label)
            else:
                state["busy"] += run.busy
                if run.errors:
                    state["errors"] += [f"session {index} {label} -> {value}: {e}" for e in run.errors]
                else:
                    state["latencies"][kind].append(elapsed)
                    state["per_label"].setdefault(label, []).append(elapsed)
            await asyncio.sleep(max(0.0, interval - (time.monotonic() - tick)))
    except Exception as err:  # noqa: BLE001 - every failure is counted, the run goes on
        state["errors"].append(f"session {index}: {type(err).__name__}: {str(err)[:200]}")
    finally:
        try:
            await client.close()
        except Exception:  # noqa: BLE001
            pass


async def _warm(ws_url: str, timeout_s: float, extra) -> dict:
    """One session: open (loads the model), a few changes; stays open while the baseline is read."""
    client = Client(ws_url, query_string(TEXTS[0], **extra), timeout_s)
    await client.connect()
    run, open_s = await client.run()
    changes = []
    for label, _, how in ROTATION:
        result, elapsed, _ = await client.change(label, how)
        if result is not None:
            changes.append({"label": label, "s": elapsed, "errors": result.errors})
    return {
        "client": client,
        "open_s": open_s,
        "errors": run.errors,
        "widgets": sorted(client.widgets),
        "changes": changes,
    }


def drive(
    server,
    sessions: int = 30,
    seconds: float = 60.0,
    interval: float = 2.0,
    settle_s: float = 10.0,
    timeout_s: float = 60.0,
    extra: dict | None = None,
) -> dict:
    """Run the test against a started ``benchmarks.appserver.Server``; returns the numbers (see module doc)."""
    from .appserver import RssSampler

    extra = extra or {}

    async def main() -> dict:
        numbers: dict = {}
        with RssSampler(server.proc.pid, every=0.5) as rss:
            numbers["rss_start_mb"] = rss.now() / 2**20
            warm = await _warm(server.ws_url, 300.0, extra)
            await asyncio.sleep(2)
            numbers["rss_single_warm_mb"] = rss.now() / 2**20
            numbers["warm_open_s"] = warm["open_s"]
            numbers["warm_changes"] = warm["changes"]
            numbers["widgets_seen"] = warm["widgets"]
            await warm["client"].close()
            state = {
                "errors": list(warm["errors"]),
                "latencies": {"view-only": [], "recompute": []},
                "per_label": {},
                "skipped": [],
                "busy": 0,
                "opens": [],
            }
            mark = time.monotonic()
            stop_at = mark + seconds
            await asyncio.gather(
                *(_session(i, server.ws_url, stop_at, interval, state, timeout_s, extra) for i in range(sessions))
            )
            numbers["run_s"] = time.monotonic() - mark
            numbers["rss_peak_mb"] = rss.peak_since(mark) / 2**20
            await asyncio.sleep(settle_s)
            numbers["rss_after_mb"] = rss.now() / 2**20
        every = state["latencies"]["view-only"] + state["latencies"]["recompute"]
        numbers.update(
            sessions=sessions,
            seconds=seconds,
            interval_s=interval,
            settle_s=settle_s,
            changes=len(every),
            errors=len(state["errors"]),
            error_samples=state["errors"][:10],
            busy_notices=state["busy"],
            skipped=len(state["skipped"]),
            skipped_labels=sorted(set(state["skipped"])),
            all=summarize(every),
            view_only=summarize(state["latencies"]["view-only"]),
            recompute=summarize(state["latencies"]["recompute"]),
            per_label={k: summarize(v) for k, v in state["per_label"].items()},
            open=summarize(state["opens"]),
        )
        numbers["rss_after_minus_single_mb"] = numbers["rss_after_mb"] - numbers["rss_single_warm_mb"]
        return numbers

    return asyncio.run(main())


def run(
    app_dir=None,
    sessions: int = 30,
    seconds: float = 60.0,
    interval: float = 2.0,
    settle_s: float = 10.0,
    timeout_s: float = 60.0,
    env: dict | None = None,
    extra: dict | None = None,
) -> dict:
    """Start the app (``app_dir``: which checkout), drive it, stop it; returns the numbers."""
    from .appserver import app_server

    server_env = {"STREAMLIT_SERVER_DISCONNECTED_SESSION_TTL": "5", **(env or {})}
    with app_server(app_dir, env=server_env) as server:
        numbers = drive(server, sessions, seconds, interval, settle_s, timeout_s, extra)
    return {**numbers, "app_dir": str(server.app_dir)}


def summary(n: dict) -> str:
    return (
        f"{n['sessions']} protocol sessions x {n['seconds']:.0f} s (a change every {n['interval_s']:.0f} s): "
        f"{n['changes']} changes, {n['errors']} errors, {n['busy_notices']} busy notices, {n['skipped']} skipped; "
        f"change->script_finished p50 {n['all']['p50_s']:.2f} s, p95 {n['all']['p95_s']:.2f} s "
        f"(view-only p95 {n['view_only']['p95_s']:.2f} s, recompute p95 {n['recompute']['p95_s']:.2f} s); "
        f"server RSS single warm {n['rss_single_warm_mb']:.0f} MiB, peak {n['rss_peak_mb']:.0f} MiB, "
        f"{n['settle_s']:.0f} s after close {n['rss_after_mb']:.0f} MiB ({n['rss_after_minus_single_mb']:+.0f})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.load_protocol", description=__doc__.split("\n")[0])
    parser.add_argument("--app-dir", help="checkout whose app.py runs (default: $ATTENTION_LENS_APP_DIR or this repo)")
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--interval", type=float, default=2.0)
    parser.add_argument("--settle", type=float, default=10.0)
    parser.add_argument("--server-env", action="append", help="KEY=VALUE for the server (repeatable)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    from .appserver import parse_env

    numbers = run(args.app_dir, args.sessions, args.seconds, args.interval, args.settle, env=parse_env(args.server_env))
    print(summary(numbers))
    for sample in numbers["error_samples"]:
        print("  error:", sample)
    if args.json:
        args.json.write_text(json.dumps(numbers, indent=1))
    return 1 if numbers["errors"] else 0


if __name__ == "__main__":
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
