"""Key/value-cache decoding against independent references.

References, none of them the code under test: the model's own full causal pass (its returned attentions,
eager, no cache), its own head outputs (capture's hooks on the output projection), transformers' own greedy
``generate`` with its own cache, torch's SDPA and a softmax written out here for the scratch layer, and cache
byte counts worked out by hand from each tiny model's sizes. Tiny random models (2 layers, d_model 32,
4 query heads, E = 8) keep the file to a few seconds; one SmolLM2 test is marked slow.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from attention_core import ProjectionWeights, init_weights
from attention_core import __main__ as cli
from attention_core.kvcache import attention_macs, cache_bytes, kv_cache_scratch, kv_groups
from attention_core.kvcache_model import kv_cache_decode
from attention_core.pretrained import capture, load_model
from attention_core.pretrained.tokens import Tokens
from tests.tiny_models import build_tiny_model

ROOT = Path(__file__).resolve().parents[1]
TOL = 1e-5
TEXT = "the cat sat on"
STEPS = 5
LAYERS, HEADS, E = 2, 4, 8  # every tiny model; llama, qwen2, mistral have 2 key/value heads
# keys + values, per cached position, all layers, float32, worked out by hand: layers * 2 * Hkv * E * 4 bytes
BYTES_PER_POSITION = {"llama": 2 * 2 * 2 * 8 * 4, "qwen2": 2 * 2 * 2 * 8 * 4, "gpt2": 2 * 2 * 4 * 8 * 4}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """family -> (loaded model, run): built, loaded and decoded once per family."""
    made = {}

    def get(family):
        if family not in made:
            folder = build_tiny_model(family, tmp_path_factory.mktemp(family))
            loaded = load_model(str(folder))
            made[family] = (loaded, kv_cache_decode(loaded, TEXT, STEPS), folder)
        return made[family]

    return get


def _fed_sequence(run) -> torch.Tensor:
    """Every token fed in: the prompt, then each step's token but the last."""
    ids = list(run.prompt_ids) + [s.token_id for s in run.steps[:-1]]
    return torch.tensor([ids])  # (1, n)


@pytest.mark.parametrize("family", ["llama", "qwen2", "gpt2", "mistral"])
def test_each_row_is_the_row_of_the_models_full_causal_pass(tiny, family):
    loaded, run, _ = tiny(family)
    assert len(run.steps) == STEPS
    sequence = _fed_sequence(run)
    with torch.no_grad():  # the model's own full pass: no cache, eager, its returned weights
        full = loaded.model(input_ids=sequence, use_cache=False, output_attentions=True, return_dict=True)
    attentions = torch.stack([a[0] for a in full.attentions])  # (layers, H, n, n)
    tokens = Tokens(
        text="",
        ids=sequence,
        attention_mask=torch.ones_like(sequence),
        labels=("",) * sequence.shape[1],
        offsets=((0, 0),) * sequence.shape[1],
        special=(False,) * sequence.shape[1],
    )
    head_outputs = torch.stack([layer.attn_output for layer in capture(loaded, tokens).layers])  # (layers, H, n, Ev)
    for step in run.steps:
        p = step.position
        assert step.position == len(run.prompt_ids) - 1 + step.step - 1
        assert step.weights.shape == (LAYERS, HEADS, p + 1)  # the new row over every cached key
        assert (torch.from_numpy(step.weights) - attentions[:, :, p, : p + 1]).abs().max() <= TOL
        assert (torch.from_numpy(step.output) - head_outputs[:, :, p]).abs().max() <= TOL
        assert step.diff_full <= TOL and step.diff_cached <= TOL and step.diff_cache_object <= TOL
        assert step.diff_full_replay <= TOL
        assert torch.allclose(torch.from_numpy(step.weights).sum(-1), torch.ones(LAYERS, HEADS))
        # the greedy token is the argmax of the model's own logits at this row of the full pass
        assert step.token_id == int(full.logits[0, p].argmax())


@pytest.mark.parametrize("family", ["llama", "qwen2", "gpt2", "mistral"])
def test_tokens_and_rows_are_those_of_the_models_own_cached_generate(tiny, family):
    loaded, run, _ = tiny(family)
    prompt = torch.tensor([run.prompt_ids])
    with torch.no_grad():
        out = loaded.model.generate(
            input_ids=prompt,
            attention_mask=torch.ones_like(prompt),
            max_new_tokens=STEPS,
            do_sample=False,
            use_cache=True,
            output_attentions=True,
            return_dict_in_generate=True,
            pad_token_id=0,
        )
    assert tuple(out.sequences[0, prompt.shape[1] :].tolist()) == run.new_ids == run.generate_ids
    assert run.tokens_match_generate is True
    for step, layers in zip(run.steps, out.attentions, strict=True):
        for i, returned in enumerate(layers):
            row = returned[0, :, -1]  # (H, S') generate's new row (a sliding window returns only its window)
            mine = torch.from_numpy(step.weights[i])
            assert (mine[:, -row.shape[-1] :] - row).abs().max() <= TOL
            assert (mine[:, : mine.shape[-1] - row.shape[-1]] == 0).all()  # keys outside the window weigh 0
        assert step.diff_generate <= TOL


@pytest.mark.parametrize("family", ["llama", "qwen2", "gpt2"])
def test_cache_bytes_by_hand_and_the_gqa_saving(tiny, family):
    _, run, _ = tiny(family)
    per_position = BYTES_PER_POSITION[family]
    for step in run.steps:
        t = step.keys
        assert step.cache_bytes == per_position * t == sum(step.cache_bytes_per_layer)
        assert step.cache_bytes_per_layer == (per_position * t // LAYERS,) * LAYERS
        assert step.cache_bytes_one_kv_per_head == 2 * 2 * HEADS * E * 4 * t  # H key/value heads instead of Hkv
        assert step.cache_bytes == cache_bytes(LAYERS, run.num_kv_heads, t, E, E)
    if family == "gpt2":
        assert run.groups == ((0,), (1,), (2,), (3,)) and run.gqa_saving == 1
    else:
        assert (run.num_heads, run.num_kv_heads) == (4, 2)
        assert run.groups == ((0, 1), (2, 3)) and run.gqa_saving == 2  # query heads 0, 1 read key/value head 0
        assert run.steps[-1].cache_bytes_one_kv_per_head == 2 * run.steps[-1].cache_bytes


def test_sliding_window_cache_holds_only_the_window(tiny):
    _, run, _ = tiny("mistral")  # sliding_window 4: the cache keeps 3 positions, the step reads 4 keys
    assert {s.cache_bytes for s in run.steps} == {2 * 2 * 2 * 8 * 4 * 3}
    for step in run.steps:
        assert (step.weights[..., : step.keys - 4] == 0).all()
        assert step.macs_step == attention_macs(LAYERS, HEADS, 1, 4, E, E)


def test_work_per_step_is_linear_in_t_and_the_full_pass_quadratic(tiny):
    _, run, _ = tiny("llama")
    for step in run.steps:
        t = step.keys
        assert step.macs_step == LAYERS * HEADS * t * (E + E)  # q.k and weights @ v of one row
        assert step.macs_full == LAYERS * HEADS * t * t * (E + E)  # the whole t x t pattern again
        assert step.seconds_step > 0 and step.seconds_full > 0


def test_groups_and_refusals(tmp_path):
    assert kv_groups(9, 3) == ((0, 1, 2), (3, 4, 5), (6, 7, 8))
    assert kv_groups(4, 4) == ((0,), (1,), (2,), (3,))
    with pytest.raises(ValueError, match="evenly"):
        kv_groups(9, 2)
    bert = load_model(str(build_tiny_model("bert", tmp_path / "bert")))
    with pytest.raises(ValueError, match="not a causal"):
        kv_cache_decode(bert, TEXT, 2)
    neox = load_model(str(build_tiny_model("gpt_neox", tmp_path / "neox")))
    with pytest.raises(ValueError, match="captures q, k, v"):
        kv_cache_decode(neox, TEXT, 2)


def test_decoding_stops_at_the_end_of_text_token_as_generate_does(tiny):
    loaded, run, _ = tiny("llama")
    stop = run.new_ids[2]
    expected = run.new_ids.index(stop) + 1
    config = loaded.model.generation_config
    saved = config.eos_token_id
    config.eos_token_id = stop
    try:
        short = kv_cache_decode(loaded, TEXT, STEPS, time_full=False)
    finally:
        config.eos_token_id = saved
    assert short.new_ids == run.new_ids[:expected] == short.generate_ids
    assert any("end-of-text" in n for n in short.notices)


def test_one_token_prompt_has_no_prefill(tiny):
    loaded, _, _ = tiny("gpt2")  # gpt2's tokenizer adds no BOS: "the" is one token
    run = kv_cache_decode(loaded, "the", 3, check_generate=False, time_full=False)
    assert len(run.prompt_ids) == 1
    assert [s.keys for s in run.steps] == [1, 2, 3]
    assert (run.steps[0].weights == 1).all()  # one key: all the weight
    assert run.worst("full") <= TOL


# --- the same run on a float64 copy of the model: the core judged at matching precision ----------------


@pytest.mark.parametrize(("family", "bound"), [("gpt2", 1e-12), ("llama", 1e-6), ("mistral", 1e-6)])
def test_float64_copy_checks_the_core_at_matching_precision(tiny, family, bound):
    """GPT-2 runs wholly in float64 (1e-15); Llama-type models keep their eager softmax and RMSNorm in float32."""
    loaded, run32, _ = tiny(family)
    run = kv_cache_decode(loaded, TEXT, STEPS, check_generate=False, time_full=False, check_float64=True)
    assert run.new_ids == run32.new_ids  # the tokens are the float32 model's own
    assert next(loaded.model.parameters()).dtype == torch.float32  # the shared model is left as it was
    for step in run.steps:
        assert step.diff_cached_float64 <= bound and step.diff_full_float64 <= bound
    assert run.worst("full_float64") < run.worst("full")  # closer than float32 (its own rounding)


def test_a_wrong_core_cache_fails_the_float64_check(tiny, monkeypatch, capsys):
    """Shift the core's cached values in the float64 run only: the float64 references must catch it."""
    from attention_core.kvcache_model import Stepper

    _, _, folder = tiny("llama")
    original = Stepper.core_rows

    def skewed(self, layers):
        if self.dtype == torch.float64:
            for values in self.values:
                values[:, 0] += 1e-3  # the first cached position's values, a little off (1e-3 per step)
        return original(self, layers)

    monkeypatch.setattr(Stepper, "core_rows", skewed)
    args = ["kvcache", "--model", str(folder), "--text", TEXT, "--steps", "3", "--json", "--no-generate"]
    assert cli.main(args) == 1
    report = json.loads(capsys.readouterr().out)
    worst = report["max_abs_diff"]
    assert report["ok"] is False and "full_float64" in report["checked"] and "full" not in report["checked"]
    assert worst["full_float64"] > TOL and worst["cached_float64"] > TOL
    assert worst["cached"] <= TOL and worst["full"] <= TOL  # the float32 run was left alone


# --- the scratch causal layer: torch's SDPA and a softmax written out here ---------------------------


def _rotate(x: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """RoPE by hand, half-split layout: pairs (i, i + E/2) turned by position * base^(-2i/E)."""
    n, e = x.shape[-2], x.shape[-1]
    angle = torch.arange(n, dtype=torch.float64)[:, None] * base ** (-torch.arange(0, e, 2, dtype=torch.float64) / e)
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)  # (n, E/2)
    first, second = x[..., : e // 2], x[..., e // 2 :]
    return torch.cat((first * cos - second * sin, second * cos + first * sin), dim=-1)


@pytest.mark.parametrize("kv_heads", [4, 2, 1])
def test_scratch_layer_matches_torch_sdpa_row_by_row(kv_heads):
    heads, d_model, e, length = 4, 16, 4, 9
    full = init_weights(d_model, e, heads, seed=3, with_output=False, dtype=torch.float64)
    weights = ProjectionWeights(
        w_q=full.w_q,
        w_k=full.w_k[:, : kv_heads * e],
        w_v=full.w_v[:, : kv_heads * e],
        num_heads=heads,
        num_kv_heads=kv_heads,
    )
    x = torch.randn(length, d_model, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    run = kv_cache_scratch(x, weights)
    q = _rotate((x @ weights.w_q).reshape(length, heads, e).transpose(0, 1))  # (H, L, E)
    k = _rotate((x @ weights.w_k).reshape(length, kv_heads, e).transpose(0, 1))  # (Hkv, L, E)
    v = (x @ weights.w_v).reshape(length, kv_heads, e).transpose(0, 1)  # (Hkv, L, Ev)
    reference = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)  # (H, L, Ev)
    group = heads // kv_heads
    scores = q @ k.repeat_interleave(group, 0).transpose(-2, -1) / math.sqrt(e)  # (H, L, L)
    pattern = scores.masked_fill(~torch.ones(length, length, dtype=torch.bool).tril(), float("-inf")).softmax(-1)
    assert run.diff_full <= 1e-12
    for t, step in enumerate(run.steps):
        assert step.weights.shape == (heads, t + 1)
        assert abs(torch.from_numpy(step.weights) - pattern[:, t, : t + 1]).max() <= 1e-12
        assert abs(torch.from_numpy(step.output) - reference[:, t]).max() <= 1e-12
        assert step.cache_bytes == 2 * kv_heads * (t + 1) * e * 8  # float64 keys and values, Hkv heads
        assert step.cache_bytes_one_kv_per_head == 2 * heads * (t + 1) * e * 8
    # the cache projects one row at a time (x_t W^K), the reference all rows at once (X W^K): BLAS may round
    # the last bit differently between the two on some CPUs, so the caches are held to float64 rounding
    assert run.k_cache.shape == tuple(k.shape) and run.v_cache.shape == tuple(v.shape)
    assert (
        abs(torch.from_numpy(run.k_cache) - k).max() <= 1e-12 and abs(torch.from_numpy(run.v_cache) - v).max() <= 1e-12
    )
    assert run.groups == kv_groups(heads, kv_heads)


# --- command line ------------------------------------------------------------------------------------


def test_cli_json_on_a_local_folder(tiny):
    _, run, folder = tiny("llama")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "attention_core",
            "kvcache",
            "--model",
            str(folder),
            "--text",
            TEXT,
            "--steps",
            "3",
            "--json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)  # stdout holds the JSON object only
    assert report["ok"] is True and report["tokens_match_generate"] is True
    assert report["groups"] == [[0, 1], [2, 3]] and report["gqa_saving"] == 2
    assert [r["token_id"] for r in report["steps"]] == list(run.new_ids[:3])
    for row in report["steps"]:
        assert row["cache_bytes"] == BYTES_PER_POSITION["llama"] * row["keys"]
        assert row["max_abs_diff_full"] <= TOL and row["max_abs_diff_cached"] <= TOL
        assert row["max_abs_diff_generate"] <= TOL and row["max_abs_diff_full_replay"] <= TOL


def test_cli_table_and_exit_status(tiny, capsys):
    _, _, folder = tiny("qwen2")
    assert cli.main(["kvcache", "--model", str(folder), "--text", TEXT, "--steps", "2"]) == 0
    table = capsys.readouterr().out
    assert "kv0<-q0,1" in table and "OK" in table
    # the incremental rows differ from the full pass by rounding (about 1e-7): a tolerance of 0 fails
    assert cli.main(["kvcache", "--model", str(folder), "--text", TEXT, "--steps", "2", "--tolerance", "0"]) == 1
    assert "FAILED" in capsys.readouterr().out
    assert cli.main(["kvcache", "--model", str(folder), "--text", "  ", "--steps", "2"]) == 2
    assert cli.main(["kvcache", "--model", "scratch", "--steps", "6", "--json"]) == 0
    scratch = json.loads(capsys.readouterr().out)
    assert scratch["ok"] and [r["keys"] for r in scratch["steps"]] == [1, 2, 3, 4, 5, 6]


# --- SmolLM2 (the bundled real model) ----------------------------------------------------------------


@pytest.mark.slow
def test_smollm2_cached_decoding():
    loaded = load_model("smollm2")
    run = kv_cache_decode(loaded, "The capital of France is", 4)
    assert (run.num_layers, run.num_heads, run.num_kv_heads, run.head_dim) == (30, 9, 3, 64)
    assert run.groups == ((0, 1, 2), (3, 4, 5), (6, 7, 8)) and run.gqa_saving == 3
    assert run.tokens_match_generate is True
    for name in ("full", "full_replay", "cached", "cache_object", "generate"):
        assert run.worst(name) <= TOL, name
    for step in run.steps:
        assert step.cache_bytes == 30 * 2 * 3 * step.keys * 64 * 4  # 46,080 bytes per cached position
        assert step.cache_bytes_one_kv_per_head == 3 * step.cache_bytes


@pytest.mark.slow
def test_smollm2_32_steps_on_the_command_line(capsys):
    """The acceptance command: float32's own cached-vs-full drift is reported, the core judged in float64."""
    assert cli.main(["kvcache", "--model", "smollm2", "--steps", "32", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    worst = report["max_abs_diff"]
    assert report["ok"] is True and report["tokens_match_generate"] is True
    assert worst["cached"] <= TOL and worst["cache_object"] <= TOL and worst["generate"] <= TOL
    assert worst["full_float64"] <= TOL and worst["cached_float64"] <= TOL and worst["full_replay"] <= TOL
    assert len(report["steps"]) >= 20  # long enough for the float32 drift (about 1e-5) to show
