"""Write REPORT.md and results/*.json from the sections' results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .common import Config, SectionResult, Target, code_block, table

HOW_TO_RUN = """\
```bash
make bench                                   # = .venv/bin/python -m benchmarks (about 10-15 minutes)
.venv/bin/python -m benchmarks --sections core,limit   # some sections only: core models app browser peer limit
.venv/bin/python -m benchmarks --smoke --out /tmp/b    # tiny sizes, one repeat (what tests/test_benchmarks_smoke.py runs)
.venv/bin/python -m benchmarks --sections interactivity  # issue 12: click to paint, link open, bytes, RSS, load tests
.venv/bin/python -m benchmarks.interactivity --app-dir /tmp/before --json benchmarks/results/interactivity_before.json
```
Section 7 measures the working tree's app, or another checkout's with `--app-dir` / `ATTENTION_LENS_APP_DIR`
(`BENCH_INTERACTIVITY_QUICK=1`: sizes 64 and 512 only, 30 s load tests); its tables include the saved
before numbers (`results/interactivity_before.json`) next to this run's.
bertviz and IPython (section 5 only) come from `requirements-bench.txt`; `python -m benchmarks` installs them
with `pip install --no-deps -r requirements-bench.txt` when `import bertviz` fails (`--no-install` turns that off)."""


def _mark(met: bool | None) -> str:
    return {True: "met", False: "**MISSED**", None: "not measured"}[met]


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item") and callable(value.item):
        return value.item()
    return value


def _with_earlier(cfg: Config, results: list[SectionResult]) -> list[SectionResult]:
    """This run's sections plus, for sections not run now, the last saved result of the same kind of run."""
    from .__main__ import SECTION_ORDER

    ran = {r.key: r for r in results}
    merged = []
    for key in SECTION_ORDER:
        if key in ran:
            merged.append(ran[key])
            continue
        path = cfg.results / f"{key}.json"
        if not path.exists():
            continue
        saved = json.loads(path.read_text(encoding="utf-8"))
        if saved.get("smoke") != cfg.smoke or "body" not in saved:
            continue
        old = SectionResult(
            key,
            saved["title"],
            body=saved["body"],
            skipped=saved["skipped"],
            error=saved["error"],
            seconds=saved["seconds"],
            data={"_earlier_run": saved.get("date")},
        )
        old.targets = [Target(**t) for t in saved["targets"]]
        merged.append(old)
    return merged


def write(
    cfg: Config,
    results: list[SectionResult],
    machine: dict,
    versions: dict,
    images: list[str],
    notes: list[str],
) -> Path:
    cfg.results.mkdir(parents=True, exist_ok=True)
    for r in results:
        body = r.body
        for name in r.figures:
            if name not in images:  # no PNG (no browser for kaleido, or --no-png): drop the image line
                body = "\n".join(line for line in body.splitlines() if f"results/{name}.png" not in line)
        r.body = body
        payload = {
            "title": r.title,
            "date": machine["date"],
            "smoke": cfg.smoke,
            "seconds": r.seconds,
            "skipped": r.skipped,
            "error": r.error,
            "targets": [t.__dict__ for t in r.targets],
            "body": r.body,
            "data": r.data,
        }
        (cfg.results / f"{r.key}.json").write_text(json.dumps(_jsonable(payload), indent=1), encoding="utf-8")
    results = _with_earlier(cfg, results)
    (cfg.results / "run.json").write_text(
        json.dumps(_jsonable({"machine": machine, "versions": versions, "smoke": cfg.smoke, "notes": notes}), indent=1),
        encoding="utf-8",
    )

    targets = [t for r in results for t in r.targets]
    lines = [
        "# Attention Lens: benchmarks",
        "",
        f"Generated {machine['date']} by `{machine.get('command', 'python -m benchmarks')}`"
        f"{' (smoke: tiny sizes, not real numbers)' if cfg.smoke else ''}. "
        "One run on a shared machine (other work ran at the same time): compare numbers within a table, where "
        "they were measured side by side, more than across tables.",
        "",
        "## How to run",
        "",
        HOW_TO_RUN,
        "",
        "## Machine and versions",
        "",
        table(
            ["what", "value"],
            [
                ["date (UTC)", machine["date"]],
                ["CPU", machine["cpu"]],
                ["CPUs (logical / usable by this process)", f"{machine['logical_cpus']} / {machine['cpus_usable']}"],
                ["torch threads", machine["torch_threads"]],
                [
                    "thread check: (12,256,64) @ (12,64,256), median ms",
                    ", ".join(f"{k}: {v:.2f}" for k, v in machine.get("thread_check_ms", {}).items()),
                ],
                ["memory", f"{machine['memory_gib']} GiB"],
                ["GPU", machine["gpu"] or "none (CPU only)"],
                [
                    "load average at start / end (1, 5, 15 min)",
                    f"{machine['load_average']} / {machine.get('load_average_end')}",
                ],
                ["OS", machine["os"]],
                ["Python", machine["python"]],
                *[[name, version or "not installed"] for name, version in versions.items()],
            ],
        ),
        "",
        "## Targets",
        "",
        table(
            ["target", "goal", "measured", "result"],
            [[t.name, t.goal, t.measured, _mark(t.met)] for t in targets],
        )
        if targets
        else "No target was measured in this run.",
        "",
        "Timing: every function is warmed up once, then the compared functions take turns, the order reversed "
        "every other round, so load from other work hits them alike; tables give medians, and ratios are the "
        "median of per-round ratios (each from one round).",
    ]
    for note in notes:
        lines += ["", f"Note: {note}"]
    for r in results:
        lines += ["", f"## {r.title}", ""]
        if r.error:
            lines += ["The section failed:", "", code_block(r.error)]
            continue
        if r.skipped:
            lines += [f"Skipped: {r.skipped}."]
            continue
        lines.append(r.body)
        for t in r.targets:
            if t.met is False and t.why:
                lines += ["", f"### Why the target was missed: {t.name}", "", t.why]
        earlier = r.data.get("_earlier_run")
        lines += [
            "",
            f"_Section time: {r.seconds:.0f} s" + (f" (kept from the run of {earlier})" if earlier else "") + "._",
        ]
    path = cfg.out / "REPORT.md"
    path.write_text("\n".join(lines).rstrip() + "\n", encoding="utf-8")
    return path
