"""Build and run the Attention Lens Docker image on a machine with no running Docker engine and no registry.

Test infrastructure: tests/test_docker.py imports it (``from tests import docker_env``); it also runs by
hand, as root, from the repository root:

    python -m tests.docker_env                 # build, run, check health, print the numbers
    python -m tests.docker_env --browser       # ... and render a chart in headless Chromium
    python -m tests.docker_env --keep-running  # leave the container up until Ctrl-C

What it does, without changing the Dockerfile:
1. installs Debian's docker.io and debootstrap if missing (apt-get; needs root);
2. makes a stand-in ``python:3.11-slim`` base image: a debootstrap'd Debian bookworm with python3, pip, venv,
   the host's CA certificates and a ``python`` link, imported with ``docker import``. The rootfs tarball is cached
   under ``$ATTENTION_LENS_CACHE/docker-base`` (default ~/.cache/attention-lens/docker-base), so reruns skip it;
3. starts a private dockerd (data-root, exec-root, socket and pidfile in a temp dir; host networking only);
4. serves the host's CPU torch wheel over HTTP on 127.0.0.1 and builds with ``--network host`` and
   ``--build-arg WHEELHOUSE=<that url>`` (PyPI's own torch for Linux is a multi-GB CUDA build);
5. runs the image read-only with the same limits as compose.yaml, waits for Docker's HEALTHCHECK to say healthy;
6. stops everything it started (by pid), unmounts what dockerd left mounted and removes the temp dir.

Environment knobs:
- ATTENTION_LENS_DOCKER_DATA_ROOT: keep dockerd's data-root (image layers, build cache) in this folder between runs
  instead of a temp dir: reruns then rebuild only the layers whose inputs changed. Off by default.
- ATTENTION_LENS_DOCKER_MIRROR: Debian mirror for debootstrap (default http://deb.debian.org/debian).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import glob
import hashlib
import http.server
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BASE_IMAGE = "python:3.11-slim"
IMAGE_TAG = "attention-lens:test"
DEBIAN_SUITE = "bookworm"  # Debian 12: python3 is 3.11, like python:3.11-slim
DEBOOTSTRAP_PACKAGES = "python3,python3-pip,python3-venv,ca-certificates,passwd"
# Bump when the stand-in recipe changes, so a cached rootfs made by an older recipe is not reused.
RECIPE_VERSION = "3"
WORKDIR_PREFIX = "al-docker-"
TMPFS_SIZE = "12g"  # an upper bound; a tmpfs only uses what is written (about 2.5 GB here)
TMPFS_MIN_FREE_GIB = 10.0
CONTAINER_MEMORY = "3g"  # keep these two in step with compose.yaml
CONTAINER_CPUS = "2"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
CHART_SELECTOR = ".js-plotly-plot svg.main-svg"


class Unavailable(RuntimeError):
    """This machine cannot build or run the image (no root, no way to install Docker). Tests skip on it."""


def log(msg: str) -> None:
    print(f"[docker-test {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def cache_dir() -> Path:
    root = Path(os.environ.get("ATTENTION_LENS_CACHE") or Path.home() / ".cache" / "attention-lens")
    path = root / "docker-base"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _run(cmd: list[str], *, timeout: float = 600, env: dict[str, str] | None = None, check: bool = True, **kw):
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, **kw)
    if check and result.returncode != 0:
        tail = (result.stdout + result.stderr)[-3000:]
        raise RuntimeError(f"command failed ({result.returncode}): {' '.join(cmd)}\n{tail}")
    return result


# ---------------------------------------------------------------------------------------------------------------------
# 1. tools


def _apt_install(packages: list[str], reason: str) -> None:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    log(f"apt-get install {' '.join(packages)} ({reason})")
    cmd = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages]
    if subprocess.run(cmd, capture_output=True, env=env, timeout=900).returncode == 0:
        return
    _run(["apt-get", "update", "-q"], env=env, timeout=600)
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if result.returncode != 0:
        raise Unavailable(f"apt-get install {' '.join(packages)} failed:\n{result.stderr[-1500:]}")


def ensure_tools(browser: bool = False) -> None:
    """Make sure dockerd, a docker client and debootstrap (and Chromium, when asked) are installed."""
    if sys.platform != "linux":
        raise Unavailable("the Docker test needs Linux")
    if os.geteuid() != 0:
        raise Unavailable("the Docker test needs root (it starts its own dockerd and runs debootstrap)")
    if shutil.which("apt-get") is None and not (shutil.which("dockerd") and shutil.which("debootstrap")):
        raise Unavailable("dockerd/debootstrap are missing and there is no apt-get to install them")
    missing = []
    if not (Path("/usr/sbin/dockerd").exists() or shutil.which("dockerd")):
        missing.append("docker.io")
    if not (Path("/usr/sbin/debootstrap").exists() or shutil.which("debootstrap")):
        missing.append("debootstrap")
    if missing:
        _apt_install(missing, "for the Docker image test")
    if browser and not Path(CHROMIUM).exists():
        _apt_install(["chromium"], "for the browser check")


@functools.cache
def docker_client() -> str:
    """The docker CLI to drive the private daemon.

    Debian's docker.io client (/usr/bin/docker) has BuildKit built in; a newer standalone CLI without the buildx
    plugin would refuse BuildKit builds, so prefer Debian's.
    """
    for candidate in ("/usr/bin/docker", shutil.which("docker")):
        if candidate and Path(candidate).exists():
            return candidate
    raise Unavailable("no docker CLI found (apt-get install docker.io)")


# ---------------------------------------------------------------------------------------------------------------------
# 2. stand-in base image


def _host_ca_files() -> list[Path]:
    return sorted(Path(p) for p in glob.glob("/usr/local/share/ca-certificates/**/*.crt", recursive=True))


def base_rootfs_tarball() -> Path:
    """A cached tarball of a Debian bookworm rootfs that stands in for python:3.11-slim (made on first use)."""
    digest = hashlib.sha256(f"{RECIPE_VERSION}|{DEBIAN_SUITE}|{DEBOOTSTRAP_PACKAGES}".encode())
    for ca in _host_ca_files():
        digest.update(ca.read_bytes())
    tarball = cache_dir() / f"python-3.11-slim-standin-{digest.hexdigest()[:12]}.tar"
    if tarball.exists():
        return tarball
    for old in cache_dir().glob("python-3.11-slim-standin-*.tar"):
        old.unlink()
    for old in cache_dir().glob("rootfs-*"):  # a debootstrap that was killed
        if time.time() - old.stat().st_mtime > 3600:
            _release(old)
    mirror = os.environ.get("ATTENTION_LENS_DOCKER_MIRROR", "http://deb.debian.org/debian")
    rootfs = Path(tempfile.mkdtemp(prefix="rootfs-", dir=cache_dir()))
    rootfs.chmod(0o755)  # becomes the image's "/": mkdtemp's 0700 would lock the non-root app user out
    t0 = time.monotonic()
    try:
        log(f"debootstrap {DEBIAN_SUITE} into {rootfs} (once; cached afterwards)")
        result = subprocess.run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={DEBOOTSTRAP_PACKAGES}",
                DEBIAN_SUITE,
                str(rootfs),
                mirror,
            ],
            capture_output=True,
            text=True,
            timeout=900,
        )
        if result.returncode != 0:
            raise RuntimeError(f"debootstrap failed:\n{(result.stdout + result.stderr)[-3000:]}")
        # pip inside the build must trust what the host trusts (e.g. a TLS-inspecting egress proxy).
        ca_dir = rootfs / "usr/local/share/ca-certificates"
        ca_dir.mkdir(parents=True, exist_ok=True)
        for ca in _host_ca_files():
            shutil.copy2(ca, ca_dir / ca.name)
        _run(["chroot", str(rootfs), "update-ca-certificates"])
        for marker in rootfs.glob("usr/lib/python3*/EXTERNALLY-MANAGED"):
            marker.unlink()
        bindir = rootfs / "usr/local/bin"
        bindir.mkdir(parents=True, exist_ok=True)
        for name, target in (("python", "/usr/bin/python3"), ("python3", "/usr/bin/python3"), ("pip", "/usr/bin/pip3")):
            link = bindir / name
            if not link.exists():
                link.symlink_to(target)
        # like the official slim image: no apt caches or package lists
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for item in (rootfs / junk).glob("*"):
                if item.is_file():
                    item.unlink()
        partial = tarball.with_suffix(".partial")
        _run(["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(partial), "."], timeout=600)
        partial.rename(tarball)
        size_mib = tarball.stat().st_size / 2**20
        log(f"stand-in rootfs ready in {time.monotonic() - t0:.0f}s: {tarball} ({size_mib:.0f} MiB)")
        return tarball
    finally:
        _release(rootfs)


def _release(path: Path) -> None:
    """Unmount whatever is mounted under `path` (debootstrap mounts /proc and /sys in its target), then remove it."""
    for mountpoint in sorted(_mounts_under(path), reverse=True):
        if subprocess.run(["umount", mountpoint], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", mountpoint], capture_output=True)
    remove_tree(path)


# ---------------------------------------------------------------------------------------------------------------------
# 3. private dockerd


def _mounts_under(path: Path) -> list[str]:
    prefix = str(path).rstrip("/") + "/"
    found = []
    with open("/proc/self/mounts") as f:
        for line in f:
            mountpoint = line.split()[1].encode().decode("unicode_escape")
            if mountpoint.startswith(prefix) or mountpoint == str(path):
                found.append(mountpoint)
    return found


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child still answers kill(0); reap it if it is ours
    with contextlib.suppress(ChildProcessError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    return True


def _stop_pid(pid: int, timeout: float) -> None:
    if not _pid_alive(pid):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _pid_alive(pid):
            return
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


@dataclass
class Daemon:
    """A dockerd of our own: nothing of it is shared with a system Docker, if there is one."""

    workdir: Path
    data_root: Path
    proc: subprocess.Popen | None = None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def exec_root(self) -> Path:
        return self.workdir / "exec"

    @property
    def socket(self) -> Path:
        return self.workdir / "docker.sock"

    @property
    def logfile(self) -> Path:
        return self.workdir / "dockerd.log"

    def start(self, timeout: float = 90) -> None:
        config = self.workdir / "daemon.json"
        config.write_text("{}\n")
        self.data_root.mkdir(parents=True, exist_ok=True)
        cmd = [
            shutil.which("dockerd") or "/usr/sbin/dockerd",
            "--config-file", str(config),
            "--storage-driver=overlay2",
            "--iptables=false",
            "--ip6tables=false",
            "--bridge=none",
            "--data-root", str(self.data_root),
            "--exec-root", str(self.exec_root),
            "--pidfile", str(self.workdir / "docker.pid"),
            "-H", f"unix://{self.socket}",
        ]  # fmt: skip
        log(f"starting dockerd (workdir {self.workdir})")
        with open(self.logfile, "wb") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.env = {**os.environ, "DOCKER_HOST": f"unix://{self.socket}", "DOCKER_BUILDKIT": "1"}
        self.env.pop("DOCKER_CONTEXT", None)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"dockerd exited with {self.proc.returncode}:\n{self.log_tail()}")
            if self.socket.exists() and self.docker("version", check=False, timeout=10).returncode == 0:
                return
            time.sleep(0.3)
        raise RuntimeError(f"dockerd did not answer within {timeout:.0f}s:\n{self.log_tail()}")

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.logfile.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def docker(self, *args: str, check: bool = True, timeout: float = 600, **kw) -> subprocess.CompletedProcess:
        return _run([docker_client(), *args], env=self.env, check=check, timeout=timeout, **kw)

    def stop(self) -> None:
        t0 = time.monotonic()
        if self.proc is not None:
            # containers first, so that dockerd has nothing left to wait for
            ids = self.docker("ps", "-aq", check=False, timeout=30).stdout.split()
            if ids:
                self.docker("rm", "-f", *ids, check=False, timeout=60)
            containerd_pid = None
            pidfile = self.exec_root / "containerd" / "containerd.pid"
            with contextlib.suppress(OSError, ValueError):
                containerd_pid = int(pidfile.read_text().strip())
            _stop_pid(self.proc.pid, timeout=30)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
            if containerd_pid:
                _stop_pid(containerd_pid, timeout=10)
            self.proc = None
        t1 = time.monotonic()
        for mountpoint in sorted(_mounts_under(self.workdir) + _mounts_under(self.data_root), reverse=True):
            if subprocess.run(["umount", mountpoint], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", mountpoint], capture_output=True)
        log(f"dockerd stopped in {t1 - t0:.1f}s, mounts released in {time.monotonic() - t1:.1f}s")


def _raise_keyboard_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def _mem_available_gib() -> float:
    with contextlib.suppress(OSError, ValueError, StopIteration):
        with open("/proc/meminfo") as f:
            line = next(ln for ln in f if ln.startswith("MemAvailable:"))
        return int(line.split()[1]) / 2**20
    return 0.0


def _mount_tmpfs_if_roomy(path: Path) -> bool:
    """Put dockerd's data-root on a tmpfs when memory allows (~3 GB used): faster builds, and removing it is instant.

    Deleting the same ~60,000 files from a busy disk took minutes here. ATTENTION_LENS_DOCKER_TMPFS=0 turns it off.
    """
    if os.environ.get("ATTENTION_LENS_DOCKER_TMPFS", "1") == "0" or _mem_available_gib() < TMPFS_MIN_FREE_GIB:
        return False
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE},mode=0711", "tmpfs", str(path)], capture_output=True
    )
    if result.returncode != 0:
        log(f"no tmpfs for the data-root ({result.stderr.decode(errors='replace').strip()}); using the disk")
        return False
    return True


def cleanup_stale_runs() -> None:
    """Stop and remove what an earlier run left behind when it was killed before it could clean up.

    A work dir is stale when the process named in its owner.pid is gone. Only a dockerd/containerd whose pidfile
    lies in that work dir and whose command line names it is stopped (by pid).
    """
    for workdir in Path("/tmp").glob(f"{WORKDIR_PREFIX}*"):
        try:
            owner = int((workdir / "owner.pid").read_text())
        except (OSError, ValueError):
            if time.time() - workdir.stat().st_mtime < 600:
                continue  # being set up right now by another run
            owner = None
        if owner is not None and _pid_alive(owner):
            continue
        log(f"cleaning up {workdir}, left over by a run that was killed")
        for pidfile in (workdir / "docker.pid", workdir / "exec" / "containerd" / "containerd.pid"):
            with contextlib.suppress(OSError, ValueError):
                pid = int(pidfile.read_text())
                if str(workdir) in Path(f"/proc/{pid}/cmdline").read_text(errors="replace"):
                    _stop_pid(pid, timeout=30)
        # on a disk this can take minutes: let it go on while this run works
        threading.Thread(target=_release, args=(workdir,), daemon=True).start()


def remove_tree(path: Path) -> None:
    """rm -rf, but never across a mount point (a mount that failed to come off must not lose its files)."""
    t0 = time.monotonic()
    subprocess.run(["rm", "-rf", "--one-file-system", str(path)], capture_output=True)
    log(f"removed {path} in {time.monotonic() - t0:.1f}s")


# ---------------------------------------------------------------------------------------------------------------------
# 4. the torch wheel, served to the build


def requirement_version(name: str, path: Path = REPO / "requirements.txt") -> str:
    for line in path.read_text().splitlines():
        m = re.match(rf"^\s*{re.escape(name)}\s*==\s*([^\s;#]+)", line, re.IGNORECASE)
        if m:
            return m.group(1)
    raise RuntimeError(f"{name} is not pinned with == in {path}")


def find_local_torch_wheel(version: str) -> Path | None:
    """The CPU torch wheel that pip on this host would take (pip's find-links folders, then /opt/wheels)."""
    folders = [p for p in os.environ.get("PIP_FIND_LINKS", "").split() if p]
    with contextlib.suppress(Exception):
        out = _run([sys.executable, "-m", "pip", "config", "list"], timeout=60, check=False).stdout
        folders += re.findall(r"find-links='([^']+)'", out)
    folders.append("/opt/wheels")
    for folder in folders:
        folder = folder.removeprefix("file://")
        hits = sorted(glob.glob(os.path.join(folder, f"torch-{version}+cpu-cp311-cp311-*linux*x86_64.whl")))
        if hits:
            return Path(hits[0])
    return None


class WheelServer:
    """Serves one folder over HTTP on 127.0.0.1 (reachable from a build run with --network host)."""

    def __init__(self, folder: Path):
        handler = functools.partial(_QuietHandler, directory=str(folder))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> WheelServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class names it so
        pass


# ---------------------------------------------------------------------------------------------------------------------
# 5. build, run, measure


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url: str, timeout: float = 5) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


@dataclass
class Metrics:
    build_s: float = 0.0
    image_bytes: int = 0
    http_ok_s: float = 0.0
    healthy_s: float = 0.0
    base_s: float = 0.0
    daemon_s: float = 0.0
    stop_s: float = 0.0

    def as_dict(self) -> dict[str, float | int | str]:
        d = dict(self.__dict__)
        d["image_size"] = f"{self.image_bytes / 1e9:.2f} GB ({self.image_bytes / 2**30:.2f} GiB)"
        return d


@dataclass
class RunningApp:
    daemon: Daemon
    container: str
    url: str
    metrics: Metrics
    image: str

    def exec(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess:
        """Run a command in the container (as the image's user)."""
        return self.daemon.docker("exec", self.container, *cmd, check=check, timeout=120)

    def stop(self, timeout: int = 20) -> float:
        """`docker stop` (SIGTERM, then SIGKILL after `timeout`); returns how long it took."""
        t0 = time.monotonic()
        self.daemon.docker("stop", "-t", str(timeout), self.container, timeout=timeout + 60)
        self.metrics.stop_s = time.monotonic() - t0
        return self.metrics.stop_s


class DockerTestEnv:
    """Everything the Docker test needs, started in order and stopped in reverse by close()."""

    def __init__(self, context: Path = REPO, log_dir: Path | None = None):
        self.context = Path(context)
        self.log_dir = log_dir
        self.metrics = Metrics()
        self._stack = contextlib.ExitStack()
        self.daemon: Daemon | None = None
        self.workdir: Path | None = None

    # -- lifecycle --
    def __enter__(self) -> DockerTestEnv:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        t0 = time.monotonic()
        self._stack.close()
        log(f"stopped and cleaned up in {time.monotonic() - t0:.1f}s")

    def start(self) -> Daemon:
        ensure_tools()
        t0 = time.monotonic()
        tarball = base_rootfs_tarball()
        if threading.current_thread() is threading.main_thread():
            # `kill PID` (a CI timeout, say) must still stop dockerd and free its mounts: unwind like Ctrl-C.
            previous = signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
            self._stack.callback(signal.signal, signal.SIGTERM, previous)
        cleanup_stale_runs()
        workdir = Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX, dir="/tmp"))  # short: socket paths are limited
        (workdir / "owner.pid").write_text(f"{os.getpid()}\n")
        self.workdir = workdir
        self._stack.callback(remove_tree, workdir)
        keep = os.environ.get("ATTENTION_LENS_DOCKER_DATA_ROOT")
        data_root = Path(keep) if keep else workdir / "data"
        if not keep:
            data_root.mkdir(mode=0o711)
            _mount_tmpfs_if_roomy(data_root)
        self.daemon = Daemon(workdir=workdir, data_root=data_root)
        self._stack.callback(self.daemon.stop)
        t1 = time.monotonic()
        self.daemon.start()
        self.metrics.daemon_s = time.monotonic() - t1
        if self.daemon.docker("image", "inspect", BASE_IMAGE, check=False).returncode != 0:
            log(f"importing {tarball.name} as {BASE_IMAGE}")
            with open(tarball, "rb") as f:
                self.daemon.docker(
                    "import",
                    "-c", "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                    "-c", "ENV LANG=C.UTF-8",
                    "-c", 'CMD ["python3"]',
                    "-", BASE_IMAGE,
                    stdin=f,
                )  # fmt: skip
        self.metrics.base_s = time.monotonic() - t0 - self.metrics.daemon_s
        return self.daemon

    def build(self, tag: str = IMAGE_TAG, extra_args: dict[str, str] | None = None) -> str:
        assert self.daemon is not None, "start() first"
        version = requirement_version("torch")
        wheel = find_local_torch_wheel(version)
        build_args: dict[str, str] = {}
        if wheel is not None:
            folder = Path(tempfile.mkdtemp(prefix="wheels-", dir=self.workdir))
            try:
                os.link(wheel, folder / wheel.name)  # no copy of 190 MB when on the same filesystem
            except OSError:
                shutil.copy2(wheel, folder / wheel.name)
            server = self._stack.enter_context(WheelServer(folder))
            # The wheel comes from our server; torch's own dependencies (sympy, networkx, ...) from PyPI.
            build_args |= {"WHEELHOUSE": server.url, "TORCH_INDEX_URL": "https://pypi.org/simple"}
            log(f"serving {wheel.name} at {server.url}")
        else:
            log("no local CPU torch wheel found: the build takes torch from the Dockerfile's default index")
        build_args |= extra_args or {}
        cmd = ["build", "--network", "host", "--force-rm", "--progress", "plain", "-t", tag]
        for key, value in build_args.items():
            cmd += ["--build-arg", f"{key}={value}"]
        cmd.append(str(self.context))
        log(f"docker {' '.join(cmd)}")
        log_dir = self.log_dir or self.daemon.workdir
        log_dir.mkdir(parents=True, exist_ok=True)
        build_log = log_dir / "docker-build.log"
        t0 = time.monotonic()
        with open(build_log, "w") as out:  # streamed, so a slow or stuck build can be watched
            proc = subprocess.run(
                [docker_client(), *cmd], env=self.daemon.env, stdout=out, stderr=subprocess.STDOUT, timeout=1800
            )
        self.metrics.build_s = time.monotonic() - t0
        if proc.returncode != 0:
            tail = build_log.read_text(errors="replace")[-6000:]
            raise RuntimeError(f"docker build failed after {self.metrics.build_s:.0f}s (log: {build_log}):\n{tail}")
        self.metrics.image_bytes = int(self.daemon.docker("image", "inspect", "-f", "{{.Size}}", tag).stdout.strip())
        history = self.daemon.docker("history", "--format", "{{.Size}}\t{{.CreatedBy}}", tag, check=False).stdout
        (log_dir / "docker-history.txt").write_text(history)
        log(f"built {tag} in {self.metrics.build_s:.0f}s, {self.metrics.image_bytes / 1e9:.2f} GB")
        return tag

    def run(self, tag: str = IMAGE_TAG, port: int | None = None, health_timeout: float = 180) -> RunningApp:
        """Start the image like compose.yaml does (read-only, limits) on 127.0.0.1:port and wait until healthy."""
        assert self.daemon is not None, "start() first"
        port = port or free_port()
        name = f"attention-lens-test-{os.getpid()}"
        models = Path(tempfile.mkdtemp(prefix="models-", dir=self.workdir))
        models.chmod(0o755)
        limits = ["--memory", CONTAINER_MEMORY, "--cpus", CONTAINER_CPUS]
        if not _cgroup_limits_work(self.daemon):
            log("this kernel/cgroup setup refuses container limits; running without them")
            limits = []
        t0 = time.monotonic()
        cid = self.daemon.docker(
            "run", "-d", "--name", name,
            "--network", "host",  # the private daemon has no bridge; bind loopback only (below)
            "-e", f"STREAMLIT_SERVER_PORT={port}",
            "-e", "STREAMLIT_SERVER_ADDRESS=127.0.0.1",
            # the same hardening as compose.yaml
            "--read-only", "--tmpfs", "/tmp",
            "--cap-drop", "ALL", "--security-opt", "no-new-privileges:true", "--pids-limit", "512",
            "-v", f"{models}:/models:ro",
            *limits,
            tag,
        ).stdout.strip()  # fmt: skip
        self._stack.callback(self.daemon.docker, "rm", "-f", cid, check=False, timeout=60)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + health_timeout
        while time.monotonic() < deadline:
            state = json.loads(self.daemon.docker("inspect", "-f", "{{json .State}}", cid).stdout)
            if not state.get("Running"):
                logs = self.daemon.docker("logs", cid, check=False)
                raise RuntimeError(
                    f"container exited ({state.get('ExitCode')}):\n{(logs.stdout + logs.stderr)[-4000:]}"
                )
            if not self.metrics.http_ok_s:
                with contextlib.suppress(OSError):
                    if http_get(f"{url}/_stcore/health", timeout=2) == (200, b"ok"):
                        self.metrics.http_ok_s = time.monotonic() - t0
            health = (state.get("Health") or {}).get("Status")
            if health == "healthy":
                self.metrics.healthy_s = time.monotonic() - t0
                log(f"healthy after {self.metrics.healthy_s:.1f}s (HTTP ok after {self.metrics.http_ok_s:.1f}s)")
                return RunningApp(self.daemon, cid, url, self.metrics, tag)
            if health == "unhealthy":
                logs = self.daemon.docker("logs", cid, check=False)
                raise RuntimeError(
                    f"container unhealthy:\n{json.dumps(state, indent=1)[-3000:]}\n{logs.stderr[-3000:]}"
                )
            time.sleep(0.5)
        logs = self.daemon.docker("logs", cid, check=False)
        raise RuntimeError(f"not healthy within {health_timeout:.0f}s:\n{(logs.stdout + logs.stderr)[-4000:]}")


def _cgroup_limits_work(daemon: Daemon) -> bool:
    info = json.loads(daemon.docker("info", "-f", "{{json .}}").stdout)
    return bool(info.get("MemoryLimit")) and bool(info.get("CPUCfsQuota") or info.get("CPUShares"))


# ---------------------------------------------------------------------------------------------------------------------
# browser


def render_chart(url: str, screenshot: Path | None = None, timeout_s: float = 90) -> float:
    """Open the app in headless Debian Chromium and wait for a Plotly chart; returns seconds to the first chart."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        raise Unavailable(f"{CHROMIUM} is missing (apt-get install -y chromium)")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            t0 = time.monotonic()
            page.goto(url, wait_until="domcontentloaded")
            page.wait_for_selector(CHART_SELECTOR, state="visible", timeout=timeout_s * 1000)
            elapsed = time.monotonic() - t0
            if screenshot is not None:
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(screenshot), full_page=False)
            return elapsed
        finally:
            browser.close()


@contextlib.contextmanager
def running_app(context: Path = REPO, log_dir: Path | None = None) -> Iterator[RunningApp]:
    """Build the image from `context`, run it and yield it; everything is stopped and removed afterwards."""
    with DockerTestEnv(context, log_dir=log_dir) as env:
        env.start()
        tag = env.build()
        yield env.run(tag)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--context", type=Path, default=REPO, help="build context (default: the repository)")
    parser.add_argument("--browser", action="store_true", help="also render a chart in headless Chromium")
    parser.add_argument("--keep-running", action="store_true", help="keep the container up until Ctrl-C")
    parser.add_argument("--log-dir", type=Path, default=REPO / "artifacts" / "docker")
    args = parser.parse_args(argv)
    t0 = time.monotonic()
    try:
        ensure_tools(browser=args.browser)
        with running_app(args.context, log_dir=args.log_dir) as app:
            status, _ = http_get(app.url + "/")
            extra: dict[str, object] = {"page_status": status, "container_uid": app.exec("id", "-u").stdout.strip()}
            if args.browser:
                extra["first_chart_s"] = render_chart(app.url, screenshot=args.log_dir / "docker-chart.png")
            if args.keep_running:
                log(f"serving at {app.url}; Ctrl-C to stop")
                with contextlib.suppress(KeyboardInterrupt):
                    while True:
                        time.sleep(1)
            app.stop()
            result = {**app.metrics.as_dict(), **extra, "total_s": time.monotonic() - t0}
            print(json.dumps(result, indent=2))
            args.log_dir.mkdir(parents=True, exist_ok=True)
            (args.log_dir / "metrics.json").write_text(json.dumps(result, indent=2) + "\n")
    except Unavailable as e:
        print(f"cannot run here: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
