"""Section 3: the app's rerun time per control change (AppTest), and figure JSON size and encode time.

Reruns: ``streamlit.testing.v1.AppTest`` runs app.py in this process (no browser, no network); each
control is set to a value and the script rerun, timed around ``at.run()``. The first time a value is
seen the cached trace (and, for text, the model capture) has to be computed: "first time"; setting the
same values again hits Streamlit's caches: "seen before". Both are medians. A change whose callback names the
fragments to rerun (head, view: app.py) is timed as that fragment run, as a browser gets it.

Figures: ``viz.views.figures_for_trace`` on a real MiniLM trace at n tokens; each figure encoded with
``plotly.io.to_json(fig, validate=False)``, as ``st.plotly_chart`` does. Target: the 512 x 512
weights heatmap's JSON at most 2 MB (2,000,000 bytes).
"""

from __future__ import annotations

import base64
import json
import time

from . import plots
from .common import (
    PARAGRAPH,
    ROOT,
    Config,
    SectionResult,
    Target,
    kib,
    median,
    ms,
    table,
)

CONTROLS = [  # (control, AppTest accessor, widget key, values other than the default)
    ("text", "text_area", "text", None),
    ("layer", "slider", "layer", [1, 2, 3]),
    ("head", "slider", "head", [1, 2, 3]),
    ("scaling", "radio", "scaling", ["none", "custom"]),
    ("mask", "selectbox", "mask", ["causal", "sliding_window", "strided"]),
    ("encoding", "selectbox", "encoding", ["none", "sinusoidal", "rotary"]),
    ("source", "radio", "source", ["scratch"]),
    ("view", "segmented_control", "view", ["compare", "heads", "query"]),
    ("show_values", "checkbox", "show_values", [True]),
]
JSON_TARGET_BYTES = 2_000_000


def _z_rows(at) -> int | None:
    """Rows of the weights heatmap as the app sent it (the token count)."""
    for chart in at.get("plotly_chart"):
        if chart.proto.id.endswith("fig_weights"):
            z = json.loads(chart.proto.spec)["data"][0]["z"]
            if isinstance(z, dict) and "bdata" in z:
                shape = z.get("shape")
                if shape:
                    return int(str(shape).split(",")[0])
                return len(base64.b64decode(z["bdata"]))
            return len(z)
    return None


def shows_only_fragments(at) -> bool:
    """After a change whose callback named the fragments to rerun (app.py), AppTest's page holds only what they
    drew (no title), where a browser keeps the rest of the page."""
    return not at.exception and not len(at.title) and str(at._script_path).endswith("app.py")


def _problems(at) -> list[str]:
    return [e.message for e in at.exception] + [e.value for e in at.error]


def rerun_times(cfg: Config, text: str, label: str) -> tuple[list[dict], dict]:
    """Per control: first-time and seen-before rerun times for one starting text."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.session_state["text"] = text
    started = time.perf_counter()
    at.run()
    first_run = time.perf_counter() - started
    problems = _problems(at)
    tokens = _z_rows(at)
    same = []
    for _ in range(cfg.pick(3, 1)):
        started = time.perf_counter()
        at.run()
        same.append(time.perf_counter() - started)
    rounds = cfg.pick(2, 1)
    rows = []
    smoke_controls = ("text", "layer", "scaling", "view")
    for control, kind, key, values in CONTROLS:
        if cfg.smoke and control not in smoke_controls:
            continue
        if values is None:  # text: new texts each time, so the first round must run the model again
            values = [f"Sentence {i}. {text}" for i in range(1, cfg.pick(4, 2))]
        else:
            values = values[: cfg.pick(len(values), 1)]
        default = at.session_state[key] if key in at.session_state else None
        first, again = [], []

        def change(value, kind=kind, key=key, control=control):
            widget = getattr(at, kind)(key=key)
            if kind == "text_area":
                widget.input(value)
            else:
                widget.set_value(value)
            started = time.perf_counter()
            at.run()
            elapsed = time.perf_counter() - started
            if shows_only_fragments(at):  # one more whole run (not timed): the next change finds its widget
                at.run()
            problems.extend(f"{control}={value!r}: {p}" for p in _problems(at))
            return elapsed

        for round_index in range(rounds):
            for value in values:
                (first if round_index == 0 else again).append(change(value))
            again.append(change(default))  # back to the default: its trace is cached
        rows.append(
            {
                "text": label,
                "tokens": tokens,
                "control": control,
                "first_s": median(first),
                "again_s": median(again),
                "first_count": len(first),
                "again_count": len(again),
            }
        )
    return rows, {
        "text": label,
        "tokens": tokens,
        "first_run_s": first_run,
        "no_change_s": median(same),
        "problems": problems[:20],
    }


def figure_json(cfg: Config) -> list[dict]:
    """JSON bytes and encode time of the derivation and heads views' figures at n tokens (MiniLM)."""
    import plotly.io as pio

    from attention_core import pipeline
    from attention_core.request import TraceRequest
    from viz.views import figures_for_trace

    loaded = pipeline.load(TraceRequest())
    rows = []
    repeats = cfg.pick(3, 1)
    for n in cfg.pick((16, 64, 256, 512), (16,)):
        request = TraceRequest(text=PARAGRAPH * (n // 8 + 4), max_tokens=n)
        trace = pipeline.build_trace(request, loaded.facts, pipeline.capture_text(loaded, request))
        row = {"n": len(trace.tokens)}
        for view in ("derivation", "heads"):
            build = []
            for _ in range(repeats):
                started = time.perf_counter()
                figs = figures_for_trace(trace, view, statistic="entropy")
                build.append(time.perf_counter() - started)
            sizes, encode = {}, {}
            for name, fig in figs.items():
                spent = []
                for _ in range(repeats):
                    started = time.perf_counter()
                    text = pio.to_json(fig, validate=False)
                    spent.append(time.perf_counter() - started)
                sizes[name], encode[name] = len(text.encode()), median(spent)
            row[view] = {"build_s": median(build), "bytes": sizes, "encode_s": encode}
            if view == "derivation":
                row["weights_breakdown"] = _breakdown(figs["weights"])
        rows.append(row)
    return rows


def _breakdown(fig) -> dict[str, int]:
    """JSON bytes of the weights figure by trace and key (what to shrink if the target is missed)."""
    spec = json.loads(fig.to_json())
    parts = {"layout": len(json.dumps(spec.get("layout", {})))}
    for index, trace in enumerate(spec.get("data", [])):
        for key, value in trace.items():
            size = len(json.dumps(value))
            if size > 1000:
                parts[f"trace {index} ({trace.get('name', '')}) {key}"] = size
    return parts


def run(cfg: Config) -> SectionResult:
    from attention_core.request import DEFAULT_TEXT

    texts = cfg.pick(
        [(DEFAULT_TEXT, "default sentence"), (PARAGRAPH * 10, "paragraph, max_tokens=128")],
        [(DEFAULT_TEXT, "default sentence")],
    )
    reruns, starts = [], []
    for text, label in texts:
        rows, start = rerun_times(cfg, text, label)
        reruns += rows
        starts.append(start)
    figures = figure_json(cfg)

    result = SectionResult("app", "3. App: rerun time per control change, figure JSON size")
    result.data = {"reruns": reruns, "starts": starts, "figures": figures}
    start_rows = [
        [s["text"], s["tokens"], ms(s["first_run_s"]), ms(s["no_change_s"]), "; ".join(s["problems"]) or "none"]
        for s in starts
    ]
    rerun_rows = [
        [r["text"], r["tokens"], r["control"], ms(r["first_s"]), r["first_count"], ms(r["again_s"]), r["again_count"]]
        for r in reruns
    ]
    fig_rows = []
    for r in figures:
        d, h = r["derivation"], r["heads"]
        fig_rows.append(
            [
                r["n"],
                kib(d["bytes"]["weights"]),
                ms(d["encode_s"]["weights"]),
                len(d["bytes"]),
                kib(sum(d["bytes"].values())),
                ms(d["build_s"]),
                ms(sum(d["encode_s"].values())),
                kib(sum(h["bytes"].values())),
                ms(h["build_s"]),
                ms(sum(h["encode_s"].values())),
            ]
        )
    result.body = "\n\n".join(
        [
            "**Reruns (AppTest, MiniLM, CPU).** Time of `at.run()` after one control change (AppTest runs "
            "the script in-process without rendering, so this is the server side of a rerun: widgets, cached "
            "calls, figure building and encoding). Each control is set to each listed value in turn and back "
            "to its default, twice; 'first time' = the value's first appearance (its trace is computed), "
            "'seen before' = the second round and the returns to the default (cache hits).",
            table(
                [
                    "start text",
                    "tokens",
                    "first run (ms, includes loading the model once)",
                    "rerun, no change (ms)",
                    "errors",
                ],
                start_rows,
            ),
            table(
                ["start text", "tokens", "control", "first time (ms)", "changes", "seen before (ms)", "changes"],
                rerun_rows,
            ),
            "**Figure JSON** (`plotly.io.to_json(fig, validate=False)`, as `st.plotly_chart` sends it): the "
            "weights heatmap alone, the whole derivation view (all its figures), and the heads view "
            "(grid of the 12 heads of the layer + one layer × head overview). Build = `figures_for_trace`.",
            table(
                [
                    "n",
                    "weights JSON (KiB)",
                    "weights encode (ms)",
                    "derivation figures",
                    "derivation JSON (KiB)",
                    "derivation build (ms)",
                    "derivation encode (ms)",
                    "heads JSON (KiB)",
                    "heads build (ms)",
                    "heads encode (ms)",
                ],
                fig_rows,
            ),
            "![figure JSON size](results/app_json.png)",
        ]
    )
    ns = [r["n"] for r in figures]
    result.figures["app_json"] = plots.lines(
        ns,
        {
            "weights heatmap": [r["derivation"]["bytes"]["weights"] / 2**20 for r in figures],
            "derivation view": [sum(r["derivation"]["bytes"].values()) / 2**20 for r in figures],
            "heads view": [sum(r["heads"]["bytes"].values()) / 2**20 for r in figures],
        },
        title="Figure JSON sent to the browser",
        x_title="tokens n",
        y_title="MiB",
        guide=("weights target 2 MB", JSON_TARGET_BYTES / 2**20),
    )
    at_512 = next((r for r in figures if r["n"] == 512), None)
    if at_512 is None:
        result.targets.append(
            Target("512x512 weights heatmap JSON <= 2 MB", "<= 2,000,000 bytes", "n=512 not in this run", None)
        )
    else:
        size = at_512["derivation"]["bytes"]["weights"]
        met = size <= JSON_TARGET_BYTES
        why = (
            ""
            if met
            else "Bytes by trace and key:\n\n"
            + table(["part", "bytes"], [[k, f"{v:,}"] for k, v in sorted(at_512["weights_breakdown"].items())])
        )
        result.targets.append(
            Target("512x512 weights heatmap JSON <= 2 MB", "<= 2,000,000 bytes", f"{size:,} bytes", met, why)
        )
    return result
