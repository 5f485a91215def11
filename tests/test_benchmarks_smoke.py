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

pytestmark = pytest.mark.slow


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
