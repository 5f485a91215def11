"""Run any checkout's app.py under streamlit on loopback, and watch the server's memory.

Used by the interactivity section and the two load tests, so that the same harness measures the
working tree and another checkout (``--app-dir`` / ``ATTENTION_LENS_APP_DIR``, e.g. a ``git
worktree`` of the commit before a change). The server runs with ``cwd=app_dir``: streamlit puts the
script's folder first on ``sys.path``, so ``ui``, ``viz`` and ``attention_core`` resolve inside that
checkout, with this process's Python (the same venv).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.browser import free_port, wait_healthy

ROOT = Path(__file__).resolve().parents[1]
APP_DIR_ENV = "ATTENTION_LENS_APP_DIR"


def app_dir(explicit: str | os.PathLike | None = None) -> Path:
    """The checkout whose app.py is measured: ``explicit``, else $ATTENTION_LENS_APP_DIR, else this repository."""
    chosen = Path(explicit or os.environ.get(APP_DIR_ENV) or ROOT).expanduser().resolve()
    if not (chosen / "app.py").exists():
        raise FileNotFoundError(f"{chosen} has no app.py")
    return chosen


def parse_env(pairs: list[str] | None) -> dict[str, str]:
    """``["KEY=VALUE", ...]`` -> dict (for --server-env)."""
    found = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"expected KEY=VALUE, got {pair!r}")
        found[key] = value
    return found


@dataclass
class Server:
    url: str
    port: int
    proc: subprocess.Popen
    app_dir: Path
    log_path: Path | None = None

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/_stcore/stream"


@contextlib.contextmanager
def app_server(
    directory: str | os.PathLike | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 120.0,
    log_dir: Path | None = None,
) -> Iterator[Server]:
    """``streamlit run app.py`` in ``directory`` on a free loopback port; yields a Server; stops it after."""
    folder = app_dir(directory)
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        "app.py",
        "--server.headless=true",
        "--server.address=127.0.0.1",
        f"--server.port={port}",
        "--server.fileWatcherType=none",
        "--browser.gatherUsageStats=false",
    ]
    log_path = None
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
        log_path = log_dir / f"streamlit-{port}.log"
        log = open(log_path, "w")  # noqa: SIM115 - closed below
    else:
        log = subprocess.DEVNULL
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    proc = subprocess.Popen(cmd, cwd=folder, env=full_env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(proc, url, timeout, log_path)
        yield Server(url=url, port=port, proc=proc, app_dir=folder, log_path=log_path)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)
        if log is not subprocess.DEVNULL:
            log.close()


def tree_rss(pid: int) -> float:
    """Resident bytes of ``pid`` and its children (psutil); 0 when it is gone."""
    import psutil

    try:
        proc = psutil.Process(pid)
        procs = [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0.0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


@dataclass
class RssSampler:
    """Samples ``tree_rss(pid)`` every ``every`` seconds in a thread; ``peak_since(mark)`` for phases."""

    pid: int
    every: float = 0.2
    samples: list[tuple[float, float]] = field(default_factory=list)  # (monotonic s, bytes)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> RssSampler:
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.monotonic(), tree_rss(self.pid)))
            self._stop.wait(self.every)

    def now(self) -> float:
        value = tree_rss(self.pid)
        self.samples.append((time.monotonic(), value))
        return value

    def peak_since(self, mark: float, until: float | None = None) -> float:
        values = [v for t, v in list(self.samples) if t >= mark and (until is None or t <= until)]
        return max(values, default=0.0)
