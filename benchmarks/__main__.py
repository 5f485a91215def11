"""``python -m benchmarks``: run the sections, write REPORT.md, results/*.json and results/*.png.

Exit status 1 when a section crashed (its traceback is in the report), else 0; a missed target is
reported, never a failure.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from pathlib import Path

from .common import HERE, ROOT, Config, SectionResult

SECTION_ORDER = ("core", "models", "app", "browser", "peer", "limit", "interactivity")
TITLES = {
    "core": "1. Attention core vs torch SDPA vs transformers eager",
    "models": "2. Model capture + replay vs a plain forward with attentions",
    "app": "3. App: rerun time per control change, figure JSON size",
    "browser": "4. Browser: control change to updated chart, JS heap",
    "peer": "5. Peer: bertviz head_view / model_view vs the app's equivalent views",
    "limit": "6. The limit: achieved GFLOP/s",
    "interactivity": "7. Interactivity (issue 12): click to painted chart, opening a link, websocket bytes, memory, load",
}
REQUIREMENTS = ROOT / "requirements-bench.txt"


def section_module(key: str):
    from . import app_speed, browser_latency, core_sdpa, interactivity, limit, models, peer

    return {
        "core": core_sdpa,
        "models": models,
        "app": app_speed,
        "browser": browser_latency,
        "peer": peer,
        "limit": limit,
        "interactivity": interactivity,
    }[key]


def ensure_bench_packages(install: bool) -> str | None:
    """Install requirements-bench.txt (--no-deps) when bertviz or IPython is missing; a note if still missing."""
    try:
        import bertviz  # noqa: F401
        import IPython  # noqa: F401

        return None
    except ImportError as err:
        missing = str(err)
    if not install:
        return f"{missing}: section 5 is skipped (pip install --no-deps -r requirements-bench.txt)"
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "-r", str(REQUIREMENTS)]
    print(f"==> {missing}; installing the benchmark's extra packages: {' '.join(cmd[2:])}", flush=True)
    import subprocess

    done = subprocess.run(cmd, cwd=ROOT)
    if done.returncode != 0:
        return f"pip install -r requirements-bench.txt failed ({done.returncode}): section 5 is skipped"
    import importlib

    importlib.invalidate_caches()
    return None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one repeat (seconds, not real numbers)")
    parser.add_argument("--sections", default=",".join(SECTION_ORDER), help=f"comma-separated, of {SECTION_ORDER}")
    parser.add_argument(
        "--out", type=Path, default=HERE, help="folder for REPORT.md and results/ (default benchmarks/)"
    )
    parser.add_argument("--no-png", action="store_true", help="skip writing plots as PNG")
    parser.add_argument("--no-install", action="store_true", help="never pip install requirements-bench.txt")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch threads here and in the app/probe subprocesses (default: as the app, the CPUs this process may use)",
    )
    return parser


def run_section(key: str, cfg: Config) -> SectionResult:
    print(f"==> {TITLES[key]}", flush=True)
    started = time.perf_counter()
    try:
        result = section_module(key).run(cfg)
    except Exception:  # noqa: BLE001 - one broken section must not lose the others' numbers
        result = SectionResult(key, TITLES[key], error="\n".join(traceback.format_exc().splitlines()[-25:]))
    result.seconds = time.perf_counter() - started
    state = "failed" if result.error else f"skipped ({result.skipped})" if result.skipped else "done"
    print(f"    {state} in {result.seconds:.0f} s", flush=True)
    if result.error:
        print(result.error, file=sys.stderr)
    return result


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    keys = [k.strip() for k in args.sections.split(",") if k.strip()]
    unknown = [k for k in keys if k not in SECTION_ORDER]
    if unknown or not keys:
        print(f"unknown section(s) {unknown}; choose from {SECTION_ORDER}", file=sys.stderr)
        return 2
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    cfg = Config(smoke=args.smoke, out=args.out.resolve(), png=not args.no_png)
    cfg.results.mkdir(parents=True, exist_ok=True)
    notes = []
    if "peer" in keys:
        note = ensure_bench_packages(install=not args.no_install)
        if note:
            notes.append(note)

    from attention_core.device import configure_threads

    from . import common, plots, report

    if args.threads:  # children (streamlit, the memory probe) read the environment; this process is told
        os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(args.threads)
    threads = app_threads = configure_threads()  # as the app: no more torch threads than the CPUs it may use
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
        threads = args.threads
        notes.append(
            f"torch threads were set to {threads} with --threads (the app would use {app_threads} here). The "
            "thread check in the machine table shows why on a shared machine: while other work holds the cores, "
            "threads that wait for each other can make one call many times slower than a single thread."
        )
    machine, versions = common.machine(), common.versions()
    machine["command"] = " ".join(["python -m benchmarks", *(argv if argv is not None else sys.argv[1:])])
    machine["thread_check_ms"] = common.thread_check(threads, machine["cpus_usable"] or threads)
    started = time.perf_counter()
    results = [run_section(key, cfg) for key in SECTION_ORDER if key in keys]
    machine["load_average_end"] = [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None
    source_end = common.source_state()
    if source_end != versions.get("attention-lens (git)"):
        notes.append(
            f"the source changed while the benchmark ran (start: {versions.get('attention-lens (git)')}; "
            f"end: {source_end}); processes started later (the app server, the memory probe) may have run newer code"
        )
    images: list[str] = []
    if cfg.png:
        figures = {name: fig for r in results for name, fig in r.figures.items()}
        try:
            images, message = plots.write_pngs(figures, cfg.results)
        except Exception as err:  # noqa: BLE001 - plots are a nicety; the tables carry the numbers
            message = f"{type(err).__name__}: {err}"
        if message:
            notes.append(f"plots were not written as PNG: {message}")
    path = report.write(cfg, results, machine, versions, images, notes)
    print(f"==> wrote {path} ({time.perf_counter() - started:.0f} s)", flush=True)
    for r in results:
        for t in r.targets:
            mark = {True: "met", False: "MISSED", None: "not measured"}[t.met]
            print(f"    {mark:>12}: {t.name}: {t.measured}")
    return 1 if any(r.error for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
