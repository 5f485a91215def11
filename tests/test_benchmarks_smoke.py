"""The benchmark code keeps working: ``python -m benchmarks --smoke`` at tiny sizes, one repeat.

It runs in a child process (it sets torch's thread count and starts Chromium) and writes into a
temporary folder, never over benchmarks/REPORT.md. About 25 s, or 40 s with the browser section
(n=16, run when chromium is installed; BENCH_SMOKE_BROWSER=0 leaves it out). No test here asserts a
time: the numbers of a smoke run mean nothing; only that every section ran and the report has its parts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.browser import ROOT, chromium_path

slow = pytest.mark.slow  # the smoke run below; the pure tests at the end are fast


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    sections = "core,models,app,peer,limit"
    if chromium_path() and os.environ.get("BENCH_SMOKE_BROWSER", "1") != "0":  # about +15 s; 0 leaves it out
        sections += ",browser"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks",
            "--smoke",
            "--out",
            str(out),
            "--sections",
            sections,
            "--threads",
            "1",
            "--no-install",
            "--no-png",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return out, done, sections.split(",")


@slow
def test_every_section_runs_and_the_report_is_written(smoke_run):
    out, done, sections = smoke_run
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = (out / "REPORT.md").read_text(encoding="utf-8")
    for heading in ("## Machine and versions", "## Targets", "## 1. ", "## 2. ", "## 3. ", "## 5. ", "## 6. "):
        assert heading in report
    assert "The section failed" not in report
    run = json.loads((out / "results" / "run.json").read_text())
    assert run["smoke"] is True and run["versions"]["torch"]
    for key in sections:
        result = json.loads((out / "results" / f"{key}.json").read_text())
        assert result["error"] is None, result["error"]


@slow
def test_sections_hold_their_numbers(smoke_run):
    out, _, sections = smoke_run
    core = json.loads((out / "results" / "core.json").read_text())
    rows = core["data"]["rows"]
    assert [r["n"] for r in rows] == [16, 64]
    assert all(r["max_abs_diff_core_math"] < 1e-4 for r in rows)  # the core computes the same attention
    memory = core["data"]["memory"]
    if isinstance(memory, dict):  # Linux: the core keeps scores, scaled and weights (3 x H x n x n floats)
        assert memory["64"]["core"]["tensor_bytes"] >= 3 * 12 * 64 * 64 * 4
    models = json.loads((out / "results" / "models.json").read_text())
    assert models["data"]["rows"][0]["model"] == "minilm"
    app = json.loads((out / "results" / "app.json").read_text())
    assert {r["control"] for r in app["data"]["reruns"]} >= {"text", "layer", "scaling", "view"}
    assert not app["data"]["starts"][0]["problems"]
    assert app["data"]["figures"][0]["derivation"]["bytes"]["weights"] > 0
    if "browser" in sections:
        browser = json.loads((out / "results" / "browser.json").read_text())
        assert browser["data"]["rows"][0]["clicks"][0]["changed_s"] > 0
    peer = json.loads((out / "results" / "peer.json").read_text())
    if peer["skipped"] is None:
        assert {r["view"] for r in peer["data"]["rows"]} == {"bertviz_head", "bertviz_model", "app_head", "app_model"}


# ---------------------------------------------------------------- issue 12 harness: pure parts, no browser


def test_percentiles_and_summaries():
    from benchmarks.load_protocol import percentile, summarize

    values = [float(v) for v in range(1, 101)]  # 1..100
    assert percentile(values, 0.5) == pytest.approx(50.5)
    assert percentile(values, 0.95) == pytest.approx(95.05)  # numpy's linear interpolation
    assert percentile([3.0], 0.95) == 3.0
    assert percentile([], 0.5) != percentile([], 0.5)  # NaN
    numbers = summarize([0.2, 0.1, 0.4])
    assert numbers["count"] == 3 and numbers["p50_s"] == pytest.approx(0.2) and numbers["max_s"] == 0.4


def test_protocol_messages_round_trip():
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    from benchmarks.load_protocol import RunResult, Widget, next_value, read_forward, rerun_message, widget_state

    head = Widget(kind="slider", id="$$ID-abc-head", label="Head", value=[2.0], low=0, high=11, step=1)
    mask = Widget(kind="selectbox", id="$$ID-def-mask", label="Mask", options=["a", "b", "c"], value="a")
    view = Widget(kind="button_group", id="$$ID-ghi-view", label="View", options=["D", "H"], value=["D"])
    assert next_value(head, "next") == [3.0]
    assert next_value(mask, ("b", "c")) == "b"
    assert next_value(view, ("H", "D")) == ["H"]
    raw = rerun_message(
        "text=hi&max_tokens=8",
        [widget_state(head, [3.0]), widget_state(mask, "b"), widget_state(view, ["H"])],
        "page-hash",
    )
    msg = BackMsg()
    msg.ParseFromString(raw)
    assert msg.WhichOneof("type") == "rerun_script"
    assert msg.rerun_script.query_string == "text=hi&max_tokens=8"
    assert msg.rerun_script.page_script_hash == "page-hash"
    states = {w.id: w for w in msg.rerun_script.widget_states.widgets}
    assert list(states["$$ID-abc-head"].double_array_value.data) == [3.0]
    assert states["$$ID-def-mask"].string_value == "b"
    assert list(states["$$ID-ghi-view"].string_array_value.data) == ["H"]

    run = RunResult()
    delta = ForwardMsg()
    delta.delta.new_element.radio.id = "$$ID-r-scaling"
    delta.delta.new_element.radio.label = "Divide the scores by"
    delta.delta.new_element.radio.options.extend(["x", "y"])
    delta.delta.new_element.radio.default = 1
    assert read_forward(delta.SerializeToString(), run) is False
    assert run.widgets["Divide the scores by"].value == "y"
    finished = ForwardMsg()
    finished.script_finished = ForwardMsg.FINISHED_SUCCESSFULLY
    assert read_forward(finished.SerializeToString(), run) is True and run.finished == "FINISHED_SUCCESSFULLY"


def test_protocol_fragment_changes_rerun_their_fragment_as_the_browser_does():
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    from benchmarks.load_protocol import RunResult, link_form, link_value, read_forward, rerun_message

    msg = BackMsg()
    msg.ParseFromString(rerun_message("text=hi", [], "page", "frag-1"))
    assert msg.rerun_script.fragment_id == "frag-1"
    msg.ParseFromString(rerun_message("text=hi", [], "page"))
    assert msg.rerun_script.fragment_id == ""

    run = RunResult()
    drawn = ForwardMsg()
    drawn.delta.fragment_id = "frag-1"
    drawn.delta.new_element.slider.id = "$$ID-head"
    drawn.delta.new_element.slider.label = "Head"
    drawn.delta.new_element.slider.default.extend([0.0])
    read_forward(drawn.SerializeToString(), run)
    head = run.widgets["Head"]
    assert head.fragment_id == "frag-1" and not head.told  # only its default: the page keeps the value it was set to
    link = ForwardMsg()
    link.page_info_changed.query_string = "text=hi&head=3&view=heads"
    read_forward(link.SerializeToString(), run)
    assert link_value("Head", run.query_string) == link_form("Head", [3.0]) == "3"
    assert link_value("View", run.query_string) == link_form("View", ["Heads & layers"]) == "heads"
    assert link_value("Head", None) is None and link_value("Mask", run.query_string) is None


def test_interactivity_pure_parts():
    import base64

    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    from benchmarks import interactivity as it

    assert it.text_for(16) != it.text_for(64) and len(it.text_for(1024)) <= 2000
    assert all(len(it.text_for(n)) <= 2000 for n in (16, 64, 256, 512, 1024))
    assert "max_tokens=512" in it.link("http://x", "minilm", 512) and "model=" not in it.link("http://x", "minilm", 8)
    assert "model=smollm2" in it.link("http://x", "smollm2", 8)
    finished = ForwardMsg()
    finished.script_finished = ForwardMsg.FINISHED_SUCCESSFULLY
    payload = base64.b64encode(finished.SerializeToString()).decode()
    assert it.is_script_finished(payload, 2) and not it.is_script_finished(payload, 1)
    finished.script_finished = ForwardMsg.FINISHED_EARLY_FOR_RERUN  # a callback's run before the fragments it names
    assert not it.is_script_finished(base64.b64encode(finished.SerializeToString()).decode(), 2)
    assert it.frame_bytes(base64.b64encode(b"12345").decode(), 2) == 5
    assert it.budget_for(it.VIEW_ONLY, 512, "minilm") == 0.6 and it.budget_for(it.RECOMPUTE, 64, "smollm2") == 0.8
    assert it.budget_for(it.VIEW_ONLY, 256, "minilm") is None
    assert it.med([None, 3.0, 1.0, 2.0]) == 2.0 and it.med([]) is None
    row = {
        "clicks": {
            "head": [
                {"painted_s": 0.3, "chart_s": 0.25, "bytes": 10, "errors": 0},
                {"painted_s": 0.1, "chart_s": None, "bytes": 30, "errors": 0},  # no chart drawn by this click
            ]
        }
    }
    summary = it.summarize_row(row)
    assert summary["head"]["painted_s"] == pytest.approx(0.2) and summary["head"]["bytes"] == 20
    assert summary["head"]["chart_s"] == pytest.approx(0.25)
    assert summary["query"]["count"] == 0 and summary["query"]["painted_s"] is None
    merged = it.merge(
        {"models": {"minilm": {"rows": []}}, "load": {}}, {"models": {"smollm2": {"rows": []}}, "env": {}}
    )
    assert set(merged["models"]) == {"minilm", "smollm2"}
    opens = [
        {"first_chart_s": t, "settled_s": t + 0.5, "plots": 1, "errors": e, "tokens": "512"}
        for t, e in ((3.0, 0), (2.0, 1), (2.5, 0))
    ]
    summary = it.open_summary(opens)
    assert summary["first_chart_s"] == 2.5 and summary["settled_s"] == 3.0 and summary["errors"] == 1
    assert summary["first_chart_samples_s"] == [3.0, 2.0, 2.5] and summary["tokens"] == "512"
    row = {"n": 512, "open": summary, "summary": it.summarize_row({"clicks": {}})}  # no clicks measured
    data = {"models": {"minilm": {"rows": [row]}}, "load": {}}
    (target,) = it.targets(data)
    assert target.name == "minilm n=512: open a link to first chart (median of 3)" and target.met


def test_page_trace_sums_a_js_profile_s_self_time_by_function_and_by_file():
    from benchmarks.page_trace import self_time

    profile = {
        "nodes": [
            {"id": 1, "callFrame": {"functionName": "(idle)", "url": "", "lineNumber": -1}},
            {"id": 2, "callFrame": {"functionName": "draw", "url": "http://h/c/chart.js", "lineNumber": 9}},
            {"id": 3, "callFrame": {"functionName": "", "url": "http://h/c/chart.js", "lineNumber": 1}},
        ],
        "samples": [2, 1, 2, 3],
        "timeDeltas": [1000, 5000, 2000, 500],
    }
    assert self_time(profile) == [(5.0, "(idle) :0"), (3.0, "draw chart.js:10"), (0.5, "(anonymous) chart.js:2")]
    assert self_time(profile, by="file") == [(5.0, "(idle)"), (3.5, "chart.js")]


def test_plotly_calls_sums_each_call_per_chart_costliest_first():
    from benchmarks.plotly_calls import per_chart

    calls = [["react", "fig_lines", 60.0], ["update", "fig_lines", 70.5], ["react", "fig_lines", 39.0],
             ["update", "fig_head_grid", 18.0]]  # fmt: skip
    assert list(per_chart(calls).items()) == [
        ("react fig_lines", 99.0),
        ("update fig_lines", 70.5),
        ("update fig_head_grid", 18.0),
    ]
    assert per_chart([]) == {}


def test_open_link_gives_every_open_a_text_of_its_own_at_the_size_asked():
    from urllib.parse import parse_qs, urlparse

    from benchmarks.open_link import open_link

    links = [parse_qs(urlparse(open_link("http://h", "smollm2", 512, i)).query) for i in range(12)]
    assert len({q["text"][0] for q in links}) == 12
    assert all(q["max_tokens"] == ["512"] and q["model"] == ["smollm2"] for q in links)
    assert "model" not in parse_qs(urlparse(open_link("http://h", "minilm", 64, 0)).query)


def test_page_trace_attributes_each_main_thread_task_to_its_first_event():
    from benchmarks.page_trace import by_first_event

    main, other = (1, 10), (2, 20)

    def x(where, name, ts, dur, url=None):
        event = {"pid": where[0], "tid": where[1], "ph": "X", "name": name, "ts": ts, "dur": dur}
        if url:
            event["args"] = {"data": {"url": url}}
        return event

    events = [
        {"pid": 1, "tid": 10, "ph": "M", "name": "thread_name", "args": {"name": "CrRendererMain"}},
        {"pid": 2, "tid": 20, "ph": "M", "name": "thread_name", "args": {"name": "Compositor"}},
        x(main, "RunTask", 0, 5000),
        x(main, "FunctionCall", 100, 4000, "http://h/static/js/react-dom.abc.js"),
        x(main, "Layout", 4200, 500),
        x(main, "RunTask", 10_000, 2000),
        x(main, "UpdateLayoutTree", 10_100, 1500),
        x(main, "RunTask", 20_000, 1000),  # nothing inside
        x(other, "RunTask", 0, 99_000),  # not the renderer's main thread
        x(other, "FunctionCall", 10, 9000, "http://h/x.js"),
    ]
    busy, kinds = by_first_event(events)
    assert busy == 8.0
    assert kinds == {"FunctionCall react-dom.abc.js": 5.0, "UpdateLayoutTree": 2.0, "(nothing inside)": 1.0}


def test_a_picked_query_is_never_one_the_server_built_ahead():
    """The harness's ``query_pick`` and ``benchmarks.query_pick`` time queries the server has not built: from 64
    tokens on, each pick is further from every query shown before on the page (0, then 1-5 by the harness's
    "query" action, then the picks before it) than the neighbouring queries ``ui.prefetch`` builds ahead by
    default (the tests turn that off, so its default is read, not the value in force here)."""
    from benchmarks.interactivity import PICK_STRIDE
    from benchmarks.query_pick import pick_order
    from ui.prefetch import DEFAULT_NEIGHBOURS

    for count in (64, 256, 512, 1024):
        shown = list(range(6))
        for i in range(5):  # as Page.change picks them: option (i + 1) * PICK_STRIDE of count
            pick = ((i + 1) * PICK_STRIDE) % count
            assert all(abs(pick - before) > DEFAULT_NEIGHBOURS for before in shown), (count, pick, shown)
            shown.append(pick)
        order = pick_order(list(range(count)), 17)
        assert all(abs(a - b) > DEFAULT_NEIGHBOURS for a, b in zip(order, order[1:], strict=False)), count
        assert sorted(order) == list(range(count))  # every query, once


def test_view_bytes_packs_each_view_both_ways_and_leaves_the_packing_as_it_found_it():
    """benchmarks/view_bytes.py: every view of a short text, packed with float32 numbers sent as float32 and
    without; the views of the core's float32 numbers get smaller, none larger, and the packing is restored."""
    from benchmarks import view_bytes
    from ui import narrow, plotly_spec

    rows = view_bytes.run(["minilm"], [16])
    assert [r["view"] for r in rows] == list(view_bytes.VIEWS)
    assert all(0 < r["after"] <= r["before"] for r in rows)
    assert any(r["after"] < r["before"] for r in rows)
    assert plotly_spec.narrowed is narrow.narrowed


def test_overviews_times_every_statistic_on_each_shape_asked_for():
    """benchmarks/overviews.py: the overviews of weights shaped as each model's, timed; the weights are rows that sum
    to 1 (causal for SmolLM2), and the run reports each shape once per repeat."""
    import numpy as np

    from benchmarks import overviews

    causal = overviews.weights("smollm2", 6)
    assert causal.shape == (30, 9, 6, 6) and np.allclose(causal.sum(-1), 1) and not np.triu(causal[0, 0], 1).any()
    rows = overviews.run([("minilm", 8), ("smollm2", 4)], repeats=2)
    assert [(r["model"], r["tokens"]) for r in rows] == [("minilm", 8), ("smollm2", 4)]
    assert all(len(r["seconds"]) == 2 and r["median_s"] > 0 for r in rows)
