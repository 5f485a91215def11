"""The bundled models (MiniLM, SmolLM2), the conversion cache, and the verify command line."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest
import torch

from attention_core.pretrained import (
    BUNDLED_MODELS,
    DEFAULT_MODEL,
    ModelLoadError,
    bundled,
    capture,
    load_model,
    replay,
    replay_from_hidden_diff,
    tokenize,
    verify,
)
from tests.tiny_models import build_tiny_model

TOLERANCE = 1e-5
TEXT = "The animal didn't cross the street because it was too tired."


def _reference_attentions(loaded, tokens) -> torch.Tensor:
    with torch.no_grad():
        out = loaded.runner(input_ids=tokens.ids, attention_mask=tokens.attention_mask, output_attentions=True)
    return torch.stack([a[0] for a in out.attentions])


def _assert_replays(captured, layers) -> None:
    diffs = replay(captured)
    assert len(diffs) == captured.num_layers
    assert all(d.weights <= TOLERANCE and d.output <= TOLERANCE for d in diffs), diffs
    for layer in layers:
        diff = replay_from_hidden_diff(captured, layer)
        assert diff.weights <= TOLERANCE and diff.output <= TOLERANCE, diff


def test_bundled_names():
    assert DEFAULT_MODEL == "minilm" and set(BUNDLED_MODELS) == {"minilm", "smollm2"}
    assert bundled.bundled_name("sentence-transformers/all-MiniLM-L6-v2") == "minilm"
    assert bundled.bundled_name("HuggingFaceTB/SmolLM2-135M-Instruct") == "smollm2"
    assert bundled.bundled_name("gpt2") is None


def test_minilm_is_the_default_and_replays():
    loaded = load_model()
    assert loaded.name == "minilm" and loaded.family == "bert" and loaded.notices == ()
    facts = loaded.facts
    assert (facts.num_layers, facts.num_heads, facts.d_model, facts.d_head) == (6, 12, 384, 32)
    assert (facts.positional, facts.causal, facts.max_positions) == ("learned", False, 512)
    tokens = tokenize(loaded, TEXT)
    assert tokens.labels[0] == "[CLS]" and tokens.labels[-1] == "[SEP]" and "animal" in tokens.labels
    captured = capture(loaded, tokens)
    torch.testing.assert_close(captured.attentions, _reference_attentions(loaded, tokens), rtol=0, atol=0)
    _assert_replays(captured, range(6))


# --- conversion cache, with a stand-in converter (the real one is the slow test below) -------------


def _fake_convert(source: Path, target: Path, progress) -> None:
    (target / "config.json").write_text("{}")
    (target / "model.safetensors").write_bytes(b"x" * 1000)
    files = {p.name: p.stat().st_size for p in target.iterdir()}
    facts = {"format": bundled._FORMAT, "source": source.name, "source_size": source.stat().st_size, "files": files}
    (target / bundled.MARKER).write_text(json.dumps(facts))


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(bundled.CACHE_ENV, str(tmp_path / "cache"))
    calls = []

    def convert(source, target, progress):
        calls.append(target)
        _fake_convert(source, target, progress)

    monkeypatch.setattr(bundled, "_convert_smollm2", convert)
    return tmp_path / "cache", calls


def test_conversion_is_cached(cache):
    root, calls = cache
    messages = []
    folder = bundled.smollm2_folder(lambda message, fraction: messages.append((message, fraction)))
    assert folder == root / "smollm2-135m-instruct" and (folder / bundled.MARKER).is_file()
    assert messages[-1][1] == 1.0 and "ready" in messages[-1][0]
    assert bundled.smollm2_folder() == folder and len(calls) == 1  # second time: no conversion
    assert [p.name for p in root.iterdir()] == [folder.name]  # no temporary folder left
    assert oct(folder.stat().st_mode & 0o777) == oct(0o755)


def test_crash_mid_conversion_leaves_nothing_trusted(cache, monkeypatch):
    root, _ = cache

    def crash(source, target, progress):
        (target / "model.safetensors").write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(bundled, "_convert_smollm2", crash)
    with pytest.raises(KeyboardInterrupt):
        bundled.smollm2_folder()
    assert list(root.iterdir()) == []


@pytest.mark.parametrize("damage", ["truncate", "no-marker", "bad-marker"])
def test_corrupted_cache_is_detected_and_rebuilt(cache, capsys, damage):
    root, calls = cache
    folder = bundled.smollm2_folder()
    if damage == "truncate":
        (folder / "model.safetensors").write_bytes(b"x" * 10)
    elif damage == "no-marker":
        (folder / bundled.MARKER).unlink()
    else:
        (folder / bundled.MARKER).write_text("{not json")
    capsys.readouterr()
    messages = []
    assert bundled.smollm2_folder(lambda m, f: messages.append(m)) == folder
    assert len(calls) == 2 and bundled.check_conversion(folder, bundled.smollm2_gguf()) is None
    printed = capsys.readouterr().err  # progress goes to stderr
    assert "cannot be trusted" in printed and "rebuilding" in printed and "cannot be trusted" in messages[0]


def test_a_cache_that_does_not_load_is_converted_again(cache, capsys):
    _, calls = cache  # the stand-in converter writes a folder transformers cannot load
    with pytest.raises(ModelLoadError):
        load_model("smollm2")
    assert len(calls) == 2 and "did not load" in capsys.readouterr().err


def test_stale_temporary_folders_are_cleaned(cache):
    root, _ = cache
    stale = root / ".smollm2-135m-instruct-tmp-old"
    stale.mkdir(parents=True)
    os.utime(stale, (0, 0))
    bundled.smollm2_folder()
    assert not stale.exists()


def test_bundled_command_line(cache, capsys):
    assert bundled.main(["minilm"]) == 0
    assert "minilm:" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        bundled.main(["nonsense"])


# --- python -m attention_core verify --------------------------------------------------------------


@pytest.fixture(scope="module")
def llama_folder(tmp_path_factory):
    return build_tiny_model("llama", tmp_path_factory.mktemp("llama"))


def _verify(*argv: str) -> int:
    return verify.run(verify.add_arguments(argparse.ArgumentParser()).parse_args(list(argv)))


def test_verify_passes_and_prints_each_layer(llama_folder, capsys):
    assert _verify("--model", str(llama_folder), "--text", "the cat sat on the mat") == 0
    out = capsys.readouterr().out
    assert "OK" in out and "llama" in out
    assert sum(line.strip().startswith(("0 ", "1 ")) for line in out.splitlines()) == 2


def test_verify_json_and_failing_tolerance(llama_folder, capsys):
    assert _verify("--model", str(llama_folder), "--text", "the cat", "--json", "--tolerance", "-1") == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and report["failed_layers"] == [0, 1] and len(report["layers"]) == 2
    assert set(report["layers"][0]) == {"layer", "weights", "output", "from_x_weights", "from_x_output"}


def test_verify_reports_unusable_input(llama_folder, capsys):
    assert _verify("--model", str(llama_folder), "--text", "  ") == 2
    assert "empty" in capsys.readouterr().err


# --- SmolLM2: the real conversion (about 25-40 s once), in a temporary cache -----------------------


@pytest.fixture(scope="session")
def smollm2(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(bundled.CACHE_ENV, str(tmp_path_factory.mktemp("attention-lens-cache")))
        messages = []
        loaded = load_model("smollm2", progress=lambda m, f: messages.append((m, f)))
        yield loaded, messages


@pytest.mark.slow
def test_smollm2_converts_once_and_replays(smollm2, capsys):
    loaded, messages = smollm2
    assert any("dequantising" in m for m, _ in messages) and messages[-1][1] == 1.0
    fractions = [f for _, f in messages]
    assert fractions == sorted(fractions)  # one bar from 0 to 1, conversion included
    facts = loaded.facts
    assert (loaded.name, loaded.family, facts.positional, facts.causal) == ("smollm2", "llama", "rotary", True)
    assert (facts.num_layers, facts.num_heads, facts.num_kv_heads, facts.d_head) == (30, 9, 3, 64)
    assert loaded.notices == ()
    tokens = tokenize(loaded, TEXT)
    captured = capture(loaded, tokens)
    assert captured.layer(0).k.shape == (3, tokens.length, 64) and captured.layer(0).q.shape == (9, tokens.length, 64)
    torch.testing.assert_close(captured.attentions, _reference_attentions(loaded, tokens), rtol=0, atol=0)
    _assert_replays(captured, (0, 15, 29))

    prompt = tokenize(loaded, "The capital of France is")
    with torch.no_grad():
        logits = loaded.model(input_ids=prompt.ids).logits[0, -1]
    assert loaded.tokenizer.decode(int(logits.argmax())).strip() == "Paris"

    folder = Path(loaded.source)
    assert bundled.check_conversion(folder, bundled.smollm2_gguf()) is None
    capsys.readouterr()
    again = load_model("smollm2")  # from the cache now: no conversion
    assert "converting" not in capsys.readouterr().err and again.source == loaded.source
