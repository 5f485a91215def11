"""A model larger than $ATTENTION_LENS_MAX_PARAMS is refused from its config, before any weights are read.

References: the parameter count of the real model (loaded with its weights) for the meta-device
count; a corrupt weights file (which fails any real load) to show that the refusal comes first.
"""

from __future__ import annotations

import time

import pytest
import torch
from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, LlamaConfig

from attention_core.pretrained import ModelLoadError, load_model, loading, size
from tests.tiny_models import build_tiny_model


@pytest.fixture(scope="module")
def tiny_folders(tmp_path_factory):
    return {family: build_tiny_model(family, tmp_path_factory.mktemp(family)) for family in ("llama", "gpt2", "bert")}


def _real_count(folder, loader) -> int:
    model = loader.from_pretrained(folder)
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize(
    "family, loader", [("llama", AutoModelForCausalLM), ("gpt2", AutoModelForCausalLM), ("bert", AutoModel)]
)
def test_meta_count_equals_the_real_models_count(tiny_folders, family, loader):
    folder = tiny_folders[family]
    config = AutoConfig.from_pretrained(folder)
    counted = size.count_parameters(config, loader)
    assert counted == _real_count(folder, loader) > 0  # gpt2 ties its embedding and head: counted once


def test_the_limit_from_the_environment(monkeypatch):
    monkeypatch.delenv(size.MAX_PARAMS_ENV, raising=False)
    assert size.max_params() == 1_000_000_000
    for raw, expected in (
        ("5000", 5000),
        ("1_000_000", 1_000_000),
        ("1e9", 1_000_000_000),
        ("0", None),
        ("none", None),
    ):
        monkeypatch.setenv(size.MAX_PARAMS_ENV, raw)
        assert size.max_params() == expected
    for raw in ("many", "-5"):
        monkeypatch.setenv(size.MAX_PARAMS_ENV, raw)
        with pytest.raises(ModelLoadError, match=size.MAX_PARAMS_ENV):
            size.max_params()


def _corrupt_copy(folder, tmp_path):
    """The tiny model's config and tokenizer, with a weights file that no loader can read."""
    copy = tmp_path / "model"
    copy.mkdir()
    for path in folder.iterdir():
        copy.joinpath(path.name).write_bytes(path.read_bytes())
    (copy / "model.safetensors").write_bytes(b"not a safetensors file at all" * 10)
    return copy


def test_a_local_folder_over_the_limit_is_refused_before_its_weights(tiny_folders, tmp_path, monkeypatch):
    folder = _corrupt_copy(tiny_folders["llama"], tmp_path)
    count = _real_count(tiny_folders["llama"], AutoModelForCausalLM)
    monkeypatch.setenv(size.MAX_PARAMS_ENV, str(count - 1))
    with pytest.raises(ModelLoadError) as refused:
        load_model(folder)
    message = str(refused.value)
    assert f"{count:,} parameters" in message and f"({count - 1:,})" in message and size.MAX_PARAMS_ENV in message
    # At the limit the same folder gets past the check and fails on its corrupt weights: so the
    # refusal above came before any weights were read.
    monkeypatch.setenv(size.MAX_PARAMS_ENV, str(count))
    with pytest.raises(ModelLoadError) as broken:
        load_model(folder)
    assert "parameters" not in str(broken.value) and size.MAX_PARAMS_ENV not in str(broken.value)


def test_a_hub_id_over_the_default_limit_fetches_only_its_config(monkeypatch):
    """An 8B Llama config on the hub: only config.json is asked for, then the refusal."""
    monkeypatch.delenv(size.MAX_PARAMS_ENV, raising=False)
    config = LlamaConfig(
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        vocab_size=128256,
        architectures=["LlamaForCausalLM"],
    )
    asked = []

    def fake_hub(loader, source, name, offline, **kwargs):
        asked.append(loader)
        if loader is AutoConfig:
            return config
        raise AssertionError(f"{loader.__name__} was asked for {source}: more than the config was fetched")

    monkeypatch.setattr(loading, "hub_reachable", lambda: True)
    monkeypatch.setattr(loading, "_from_pretrained", fake_hub)
    with pytest.raises(ModelLoadError, match="8,030,261,248 parameters") as refused:
        load_model("meta-llama/Giant-8B")
    assert asked == [AutoConfig] and "(1,000,000,000)" in str(refused.value)


def test_a_config_with_absurdly_many_layers_is_refused_without_building(monkeypatch):
    monkeypatch.delenv(size.MAX_PARAMS_ENV, raising=False)
    config = LlamaConfig(hidden_size=16, intermediate_size=16, num_hidden_layers=10_000_000, num_attention_heads=2)
    monkeypatch.setattr(size, "count_parameters", lambda *a: pytest.fail("built the model"))
    started = time.perf_counter()
    with pytest.raises(ModelLoadError, match="10,000,000 layers"):
        size.check_size(config, AutoModelForCausalLM, "absurd")
    assert time.perf_counter() - started < 1.0


def test_no_limit_builds_nothing_and_bundled_models_are_not_checked(monkeypatch):
    monkeypatch.setenv(size.MAX_PARAMS_ENV, "0")
    monkeypatch.setattr(size, "count_parameters", lambda *a: pytest.fail("built the model"))
    assert size.check_size(LlamaConfig(), AutoModelForCausalLM, "any") is None
    monkeypatch.setenv(size.MAX_PARAMS_ENV, "1000")  # far below MiniLM's 22M
    loaded = load_model("minilm")
    assert loaded.name == "minilm" and isinstance(loaded.model, torch.nn.Module)
