"""Shared pieces of every section: the run's configuration, interleaved timing, tables, machine facts.

Timing rule for the whole report: every measured function runs once to warm up, then the functions
being compared take turns (A B C, C B A, A B C, ...) so that whatever else the machine is doing slows
them alike; a ratio is taken per round (same moment, same load) and the report gives the median of
those per-round ratios next to the median times.
"""

from __future__ import annotations

import cProfile
import datetime as dt
import gc
import io
import json
import os
import platform
import pstats
import re
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
PARAGRAPH = (  # the text every model benchmark reads, repeated to reach n tokens
    "Attention lets every token look at every other token and decide how much each one matters. "
    "The query asks, the keys answer, and the values carry what is passed along. "
)


@dataclass(frozen=True)
class Config:
    """What one run does. ``smoke``: tiny sizes and one repeat, so the test suite keeps the code working."""

    smoke: bool = False
    out: Path = HERE  # REPORT.md goes here, JSON and PNG under out/results
    png: bool = True  # write plots as PNG through kaleido (needs chromium)

    def pick(self, full, smoke):
        """The full-run value or the smoke value of a knob."""
        return smoke if self.smoke else full

    @property
    def results(self) -> Path:
        return self.out / "results"

    @property
    def scratch(self) -> Path:
        """Throw-away files (HTML pages for the browser); git ignores benchmarks/results/tmp/."""
        path = self.results / "tmp"
        path.mkdir(parents=True, exist_ok=True)
        return path


@dataclass(frozen=True)
class Target:
    """A number another issue promised. ``met`` None: not measured in this run (with ``measured`` saying why)."""

    name: str
    goal: str
    measured: str
    met: bool | None
    why: str = ""  # markdown (a profile) explaining a miss


@dataclass
class SectionResult:
    key: str
    title: str
    body: str = ""  # markdown
    data: dict[str, Any] = field(default_factory=dict)  # JSON-able numbers behind the body
    figures: dict[str, Any] = field(default_factory=dict)  # name -> plotly Figure (written as results/<name>.png)
    targets: list[Target] = field(default_factory=list)
    skipped: str | None = None  # the section could not run here, and why
    error: str | None = None  # it crashed: the traceback's tail
    seconds: float = 0.0


# ---------------------------------------------------------------- timing


def interleaved(
    fns: dict[str, Callable[[], Any]], repeats: int, warmup: int = 1, clock: Callable[[], float] = time.perf_counter
) -> dict[str, list[float]]:
    """Seconds of each call, ``repeats`` rounds, the order reversed every other round (after ``warmup`` rounds).

    The timer of every compute benchmark here (core, models, limit, training lab). ``clock``: wall time by
    default; ``time.process_time`` counts this process's CPU time only (steadier on a busy machine,
    meaningful with one torch thread).
    """
    names = list(fns)
    for _ in range(warmup):
        for name in names:
            result = fns[name]()
            del result
    samples: dict[str, list[float]] = {name: [] for name in names}
    for round_index in range(repeats):
        for name in names if round_index % 2 == 0 else names[::-1]:
            gc_was_on = gc.isenabled()
            gc.disable()
            started = clock()
            result = fns[name]()
            elapsed = clock() - started
            del result  # free big outputs (the core's trace at n=4096 holds GBs) before the next call
            if gc_was_on:
                gc.enable()
            samples[name].append(elapsed)
    return samples


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def ratio_median(samples: dict[str, list[float]], top: str, bottom: str) -> float:
    """Median of the per-round ratios top/bottom (each ratio from one round, under the same load)."""
    return median([a / b for a, b in zip(samples[top], samples[bottom], strict=True)])


# ---------------------------------------------------------------- profiles for missed targets


def torch_profile_table(fn: Callable[[], Any], row_limit: int = 12, warmup: bool = True) -> str:
    """torch.profiler's table of ``fn`` (CPU ops by self time), run once (after one warm-up call)."""
    from torch.profiler import ProfilerActivity, profile

    if warmup:
        fn()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=row_limit)


def cprofile_top(fn: Callable[[], Any], limit: int = 15, sort: str = "tottime", warmup: bool = True) -> str:
    """cProfile's top ``limit`` lines of ``fn`` (after one warm-up call), paths shortened to the repo."""
    if warmup:
        fn()
    profiler = cProfile.Profile()
    profiler.enable()
    fn()
    profiler.disable()
    buffer = io.StringIO()
    pstats.Stats(profiler, stream=buffer).sort_stats(sort).print_stats(limit)
    text = re.sub(r"\S*/site-packages/", "", buffer.getvalue().replace(str(ROOT) + "/", ""))
    lines = [line for line in text.splitlines() if line.strip()]
    summary = [line for line in lines if "function calls" in line][:1]
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("ncalls")), 0)
    return "\n".join(summary + lines[start:])


# ---------------------------------------------------------------- markdown


def write_json(path: Path, data: Any, **dumps: Any) -> None:
    """``data`` as indented JSON at ``path`` (its folder made): a benchmark's ``--json`` file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, **dumps))


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A markdown table; every column but the first right-aligned."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join([":---"] + ["---:"] * (len(headers) - 1)) + "|"]
    lines += ["| " + " | ".join("" if cell is None else str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def ms(seconds: float | None, digits: int = 1) -> str:
    return "n/a" if seconds is None else f"{seconds * 1e3:.{digits}f}"


def mib(num_bytes: float | None, digits: int = 1) -> str:
    return "n/a" if num_bytes is None else f"{num_bytes / 2**20:.{digits}f}"


def kib(num_bytes: float | None) -> str:
    return "n/a" if num_bytes is None else f"{num_bytes / 1024:,.0f}"


def times(ratio: float | None) -> str:
    return "n/a" if ratio is None else f"{ratio:.2f}x"


def code_block(text: str) -> str:
    return "```\n" + text.rstrip() + "\n```"


# ---------------------------------------------------------------- machine and versions


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict[str, Any]:
    import psutil
    import torch

    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "cpu": cpu_model(),
        "logical_cpus": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "load_average": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
        "os": platform.platform(),
        "python": platform.python_version(),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }


def thread_check(threads: int, cpus: int) -> dict[str, float]:
    """Median ms of a fixed small batched matmul at 1 thread, at ``threads`` and at ``cpus``: on a busy
    machine more threads can be much slower (they wait for each other while other work holds the cores)."""
    import torch

    a, b = torch.randn(12, 256, 64), torch.randn(12, 64, 256)
    found = {}
    for count in sorted({1, threads, cpus}):
        torch.set_num_threads(count)
        for _ in range(5):
            a @ b
        spent = []
        for _ in range(40):
            started = time.perf_counter()
            a @ b
            spent.append(time.perf_counter() - started)
        found[f"{count} thread{'s' if count > 1 else ''}"] = median(spent) * 1e3
    torch.set_num_threads(threads)
    return found


PACKAGES = (
    "torch",
    "transformers",
    "tokenizers",
    "numpy",
    "streamlit",
    "plotly",
    "kaleido",
    "playwright",
    "psutil",
    "bertviz",
    "ipython",
)


def _command_version(*cmd: str) -> str | None:
    if not shutil.which(cmd[0]):
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return out.splitlines()[0] if out else None


def source_state() -> str | None:
    """The commit measured, and whether files outside benchmarks/ differed from it (read-only git calls)."""
    if not shutil.which("git"):
        return None
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=30
        ).stdout.strip()
        changed = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return None
    if not commit:
        return None
    others = sorted({line[3:] for line in changed if not line[3:].startswith("benchmarks/")})
    return commit + (f" + uncommitted changes in {', '.join(others)}" if others else "")


def versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    from tests.browser import chromium_path

    browser = chromium_path()
    found["chromium"] = _command_version(browser, "--version") if browser else None
    found["attention-lens (git)"] = source_state()
    found["node"] = _command_version("node", "--version")
    found["npm"] = _command_version("npm", "--version")
    return found
