"""The Docker image, as a user gets it: it builds, becomes healthy, serves the page, and a browser renders a chart.

The heavy lifting (a private dockerd, a stand-in python:3.11-slim base image made with debootstrap because no
registry is reachable, the local CPU torch wheel served to the build) is in tests/docker_env.py; the
Dockerfile is built as it is. The first run on a machine takes about a minute longer (apt-get install docker.io
debootstrap chromium, one debootstrap whose tarball is cached under ~/.cache/attention-lens/docker-base).
Skips, with the reason, where that is impossible (not root, not Linux, no apt-get). Numbers (build time, image
size, time to healthy) are written to artifacts/docker/metrics.json.

Cheap static checks of the same files (config.toml, compose.yaml, nginx.conf, .dockerignore) run everywhere.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path

import pytest

from tests import docker_env as dte

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "artifacts" / "docker"


# ---------------------------------------------------------------------------------------------------------------------
# static checks


def _dockerfile() -> str:
    return (REPO / "Dockerfile").read_text()


def _instructions() -> list[str]:
    """Dockerfile instructions, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", _dockerfile())
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_dockerfile_layout():
    ins = _instructions()
    assert ins[0] == "FROM python:3.11-slim"
    joined = "\n".join(ins)
    assert re.search(r"^ARG TORCH_INDEX_URL=https://download\.pytorch\.org/whl/cpu$", joined, re.M)
    assert re.search(r"^USER (?!root|0\b)\S+", joined, re.M), "the app must not run as root"
    assert "WORKDIR /app" in ins
    assert "EXPOSE 8501" in ins
    assert re.search(r"HF_HUB_OFFLINE=1", joined)
    assert re.search(r"ATTENTION_LENS_CACHE=/\S+", joined)
    health = next(i for i in ins if i.startswith("HEALTHCHECK"))
    assert "_stcore/health" in health and "--start-period=" in health
    assert not re.search(r"\bcurl\b", health), "the slim base has no curl"
    entry = next(i for i in ins if i.startswith("ENTRYPOINT"))
    assert json.loads(entry.removeprefix("ENTRYPOINT").strip())[:3] == ["streamlit", "run", "app.py"]
    assert re.search(r"STREAMLIT_SERVER_ADDRESS=0\.0\.0\.0", joined)
    # packages are installed before the code is copied, so a code change does not reinstall them
    pip_lines = [n for n, i in enumerate(ins) if i.startswith("RUN") and "pip install" in i]
    copy_all = ins.index("COPY . .")
    assert pip_lines and max(pip_lines) < copy_all
    assert all(not (i.startswith("COPY") and " . " in i) for i in ins[: max(pip_lines)])
    convert = next(n for n, i in enumerate(ins) if "attention_core.pretrained.bundled --all" in i)
    assert max(pip_lines) < convert < copy_all


def test_dockerfile_torch_version_matches_requirements():
    pinned = dte.requirement_version("torch")
    assert re.search(rf"^ARG TORCH_VERSION={re.escape(pinned)}$", _dockerfile(), re.M), (
        f"ARG TORCH_VERSION in the Dockerfile must match torch=={pinned} in requirements.txt"
    )


def test_dockerignore_keeps_local_state_out():
    lines = {ln.strip() for ln in (REPO / ".dockerignore").read_text().splitlines()}
    for entry in (".venv", ".git", "tests", "**/__pycache__", ".pytest_cache", "models", ".streamlit/secrets.toml"):
        assert entry in lines, entry
    assert "scripts/plotly_bundle" in lines  # the bundle's build recipe (and its node_modules) stay out
    assert ".streamlit" not in lines and "attention_core" not in lines and "static" not in lines  # the bundle goes in


def test_streamlit_config_is_valid_and_hardened():
    from streamlit import config as st_config

    cfg = tomllib.loads((REPO / ".streamlit" / "config.toml").read_text())
    options = st_config._config_options_template  # every option streamlit knows
    for section, values in cfg.items():
        for key in values:
            assert f"{section}.{key}" in options, f"unknown streamlit option {section}.{key}"
    server, client = cfg["server"], cfg["client"]
    assert server["headless"] is True and server["runOnSave"] is False
    assert server["fileWatcherType"] == "none"
    assert server["enableXsrfProtection"] is True
    assert server["maxUploadSize"] == 1 and 1 <= server["maxMessageSize"] <= 200
    assert 0 < server["disconnectedSessionTTL"] <= 120
    assert cfg["browser"]["gatherUsageStats"] is False
    # "none" hides details; the legacy `false` would still show tracebacks ("stacktrace")
    assert client["showErrorDetails"] == st_config.ShowErrorDetailsConfigOptions.NONE.value
    assert client["toolbarMode"] == "viewer"


def test_compose_demo_host():
    import yaml

    compose = yaml.safe_load((REPO / "compose.yaml").read_text())
    services = compose["services"]
    lens, replica, proxy = services["lens"], services["replica"], services["proxy"]
    for svc in (lens, replica):
        assert svc["restart"] in ("unless-stopped", "always", "on-failure")
        limits = svc["deploy"]["resources"]["limits"]
        assert limits["memory"] and limits["cpus"]
        assert "./models:/models:ro" in svc["volumes"]
        assert svc["environment"]["ATTENTION_LENS_MODELS_DIR"] == "/models"
        assert svc["read_only"] is True
    assert str(lens["deploy"]["resources"]["limits"]["memory"]) == dte.CONTAINER_MEMORY
    assert str(lens["deploy"]["resources"]["limits"]["cpus"]) == dte.CONTAINER_CPUS
    assert "profiles" not in lens
    assert replica["profiles"] == ["replicas"] and proxy["profiles"] == ["replicas"]
    assert replica["deploy"]["replicas"] >= 2
    assert "./deploy/nginx.conf:/etc/nginx/conf.d/default.conf:ro" in proxy["volumes"]
    assert proxy["depends_on"]["replica"]["condition"] == "service_healthy"


def test_nginx_example_is_sticky_and_proxies_websockets():
    conf = (REPO / "deploy" / "nginx.conf").read_text()
    code = "\n".join(line.split("#", 1)[0] for line in conf.splitlines())
    assert re.search(r"^\s*(ip_hash|hash \$\S+ consistent);", code, re.M), "upstream must be sticky"
    assert "server replica:8501" in code
    assert "proxy_set_header Upgrade $http_upgrade;" in code
    assert "proxy_set_header Connection $connection_upgrade;" in code
    assert code.count("{") == code.count("}")


# ---------------------------------------------------------------------------------------------------------------------
# the real thing


@pytest.fixture(scope="module")
def app():
    """Build the image from the repository, run it, and yield the running container (removed afterwards)."""
    context = Path(os.environ.get("ATTENTION_LENS_DOCKER_CONTEXT") or REPO)
    if not (context / "app.py").exists():
        pytest.skip(f"{context} holds no app.py: not a checkout of this project")
    try:
        dte.ensure_tools(browser=True)
        env = dte.DockerTestEnv(context, log_dir=ARTIFACTS)
    except dte.Unavailable as e:
        pytest.skip(f"cannot build Docker images here: {e}")
    with env:
        try:
            env.start()
        except dte.Unavailable as e:
            pytest.skip(f"cannot build Docker images here: {e}")
        tag = env.build()
        running = env.run(tag)
        yield running
        running.stop()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        (ARTIFACTS / "metrics.json").write_text(json.dumps(running.metrics.as_dict(), indent=2) + "\n")


@pytest.mark.docker
@pytest.mark.slow
def test_image_builds_and_becomes_healthy(app, record_property):
    m = app.metrics
    for key, value in m.as_dict().items():
        record_property(key, value)
    print(f"\nimage {m.image_bytes / 1e9:.2f} GB, build {m.build_s:.0f}s, healthy after {m.healthy_s:.1f}s")
    assert m.healthy_s > 0
    assert dte.http_get(f"{app.url}/_stcore/health") == (200, b"ok")
    assert m.image_bytes < 4e9, "the CPU image grew past 4 GB: a CUDA torch or the test tools got in?"


@pytest.mark.docker
@pytest.mark.slow
def test_container_is_hardened(app):
    assert app.exec("id", "-u").stdout.strip() != "0", "the app runs as root"
    env = dict(line.split("=", 1) for line in app.exec("env").stdout.splitlines() if "=" in line)
    assert env["HF_HUB_OFFLINE"] == "1"
    assert env["ATTENTION_LENS_MODELS_DIR"] == "/models"
    cache = env["ATTENTION_LENS_CACHE"]
    # the bundled models were converted at build time and are readable (the root filesystem is read-only here)
    listing = app.exec("find", cache, "-name", "*.safetensors", "-size", "+1M").stdout.split()
    assert listing, f"no converted model under {cache}"
    assert app.exec("test", "-r", listing[0], check=False).returncode == 0
    # what .dockerignore keeps out, and what must be in
    assert app.exec("test", "-e", "/app/tests", check=False).returncode != 0
    assert app.exec("test", "-e", "/app/.venv", check=False).returncode != 0
    assert app.exec("test", "-f", "/app/.streamlit/config.toml", check=False).returncode == 0
    probe = "from streamlit import config as c; c.get_config_options(); print(c.get_option('client.showErrorDetails'))"
    assert app.exec("python", "-c", probe).stdout.strip() == "none"
    assert app.exec("python", "-c", "import playwright", check=False).returncode != 0, "test tools in the image"


@pytest.mark.docker
@pytest.mark.slow
def test_bundled_models_are_ready_without_converting(app):
    """The app's own check accepts the conversion baked into the image (a rebuild would fail: read-only)."""
    result = app.exec("python", "-m", "attention_core.pretrained.bundled", "--all", check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "converting" not in output.lower(), output


@pytest.mark.docker
@pytest.mark.slow
def test_page_is_served(app):
    status, body = dte.http_get(f"{app.url}/")
    assert status == 200
    assert b'<div id="root">' in body or b"<title>Streamlit</title>" in body


@pytest.mark.docker
@pytest.mark.browser
@pytest.mark.slow
def test_browser_renders_a_chart_from_the_container(app):
    seconds = dte.render_chart(app.url, screenshot=ARTIFACTS / "docker-chart.png", timeout_s=120)
    print(f"\nfirst chart from the container after {seconds:.1f}s")
