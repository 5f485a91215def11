"""Every way loading can fail says which model, what went wrong and what to do."""

from __future__ import annotations

import os
import time

import pytest
import torch

from attention_core.pretrained import ModelLoadError, capture, load_model, tokenize
from attention_core.pretrained.paths import resolve_local
from tests.tiny_models import build_tiny_model


@pytest.fixture(scope="module")
def bert_folder(tmp_path_factory):
    return build_tiny_model("bert", tmp_path_factory.mktemp("bert"))


def test_error_is_a_value_error_with_three_parts():
    err = ModelLoadError("gpt9", "no such model", "Check the spelling")
    assert isinstance(err, ValueError)
    assert str(err) == "Model 'gpt9': no such model. Check the spelling."
    assert (err.model, err.problem, err.remedy) == ("gpt9", "no such model", "Check the spelling")


def test_unknown_id_offline_fails_fast_and_clearly(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    started = time.perf_counter()
    with pytest.raises(ModelLoadError) as info:
        load_model("nobody-here/no-such-model-xyz")
    assert time.perf_counter() - started < 10
    message = str(info.value)
    assert "nobody-here/no-such-model-xyz" in message and "offline" in message
    assert "minilm" in message  # says what would work instead


def test_a_name_that_is_neither_path_nor_id():
    with pytest.raises(ModelLoadError, match="neither a model folder nor a Hugging Face id"):
        load_model("not a model!")


def test_missing_local_folder():
    with pytest.raises(ModelLoadError, match="no model folder"):
        load_model("./no/such/folder")


def test_folder_with_only_pickle_weights_is_refused(bert_folder, tmp_path):
    from safetensors.torch import load_file

    pickled = tmp_path / "pickled"
    pickled.mkdir()
    for item in bert_folder.iterdir():
        if item.suffix != ".safetensors":
            (pickled / item.name).write_bytes(item.read_bytes())
    torch.save(load_file(bert_folder / "model.safetensors"), pickled / "pytorch_model.bin")
    with pytest.raises(ModelLoadError) as info:
        load_model(str(pickled))
    message = str(info.value)
    assert "pytorch_model.bin" in message and "safetensors" in message and str(pickled) in message


def test_folder_without_config(tmp_path):
    with pytest.raises(ModelLoadError, match="config.json"):
        load_model(str(tmp_path))


def test_model_that_returns_no_attentions_fails_at_load(bert_folder, monkeypatch):
    from transformers.models.bert import modeling_bert

    original = modeling_bert.BertSelfAttention.forward

    def without_attentions(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        return out[0], None  # as a fused attention kernel leaves it: no weights, for the hooks or the model

    monkeypatch.setattr(modeling_bert.BertSelfAttention, "forward", without_attentions)
    with pytest.raises(ModelLoadError, match="returned no attention weights") as info:
        load_model(str(bert_folder))
    assert str(bert_folder) in str(info.value)


def test_capture_after_switching_to_sdpa_says_so(bert_folder):
    loaded = load_model(str(bert_folder))
    tokens = tokenize(loaded, "the cat sat on the mat")
    loaded.model.set_attn_implementation("sdpa")
    try:
        with pytest.raises(ModelLoadError, match="no attention weights"):
            capture(loaded, tokens)
    finally:
        loaded.model.set_attn_implementation("eager")
    assert capture(loaded, tokens).attentions.shape[0] == 2


def test_encoder_decoder_models_are_refused(tmp_path):
    from transformers import T5Config

    T5Config(vocab_size=32, d_model=16, d_kv=4, d_ff=32, num_layers=1, num_heads=4).save_pretrained(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"")  # never read: the config is refused first
    with pytest.raises(ModelLoadError, match="encoder-decoder"):
        load_model(str(tmp_path))


def test_unavailable_device_is_refused(bert_folder):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ValueError, match="CUDA is not available"):
        load_model(str(bert_folder), device="cuda")


# --- allowed models directory -------------------------------------------------------------------


@pytest.fixture()
def models_dir(tmp_path, bert_folder):
    root = tmp_path / "models"
    root.mkdir()
    os.symlink(bert_folder, root / "linked-out")  # a link that leads outside the directory
    (root / "inside").symlink_to(bert_folder, target_is_directory=True)
    real = root / "real-bert"
    real.mkdir()
    for item in bert_folder.iterdir():
        (real / item.name).write_bytes(item.read_bytes())
    return root


def test_models_dir_accepts_folders_inside(models_dir):
    assert resolve_local("real-bert", models_dir) == (models_dir / "real-bert").resolve()
    assert resolve_local(str(models_dir / "real-bert"), models_dir) == (models_dir / "real-bert").resolve()
    loaded = load_model("real-bert", models_dir=models_dir)
    assert loaded.family == "bert"


@pytest.mark.parametrize("name", ["../outside", "real-bert/../../outside", "./real-bert/.."])
def test_models_dir_rejects_dot_dot(models_dir, name):
    with pytest.raises(ModelLoadError, match=r"'\.\.' is not allowed"):
        load_model(name, models_dir=models_dir)


def test_models_dir_rejects_absolute_paths_outside(models_dir, bert_folder):
    with pytest.raises(ModelLoadError, match="outside the allowed models directory"):
        load_model(str(bert_folder), models_dir=models_dir)
    with pytest.raises(ModelLoadError, match="outside the allowed models directory"):
        load_model("/etc", models_dir=models_dir)


def test_models_dir_rejects_symlinks_that_escape(models_dir):
    for name in ("linked-out", "inside", str(models_dir / "linked-out")):
        with pytest.raises(ModelLoadError, match="outside the allowed models directory"):
            load_model(name, models_dir=models_dir)


def test_models_dir_must_exist(tmp_path):
    with pytest.raises(ModelLoadError, match="does not exist"):
        resolve_local("anything", tmp_path / "missing")


def test_hub_ids_still_go_to_the_hub_with_models_dir(models_dir):
    assert resolve_local("openai-community/gpt2", models_dir) is None
    assert resolve_local("gpt2", models_dir) is None


def test_a_cached_hub_model_loads_offline(bert_folder, tmp_path, monkeypatch):
    import huggingface_hub.constants

    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--tiny-org--tiny-bert"
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for item in bert_folder.iterdir():
        (snapshot / item.name).write_bytes(item.read_bytes())
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    loaded = load_model("tiny-org/tiny-bert")
    assert loaded.name == "tiny-org/tiny-bert" and loaded.family == "bert"
    assert capture(loaded, tokenize(loaded, "the cat sat")).attentions.shape[0] == 2
