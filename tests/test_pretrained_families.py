"""Capture and replay on tiny random models of every supported family, checked against the model itself."""

from __future__ import annotations

import importlib

import pytest
import torch

from attention_core.positional import apply_rotary
from attention_core.pretrained import capture, load_model, replay, replay_from_hidden, replay_layer, tokenize
from attention_core.pretrained.replay import replay_from_hidden_diff
from tests.tiny_models import build_tiny_model

TEXT = "The cats were walking on the mat.\nThey talked, happy!"
TOLERANCE = 1e-5
# family name given to the builder -> (family reported, query heads, key/value heads, causal, positional)
EXPECTED = {
    "bert": ("bert", 4, 4, False, "learned"),
    "roberta": ("bert", 4, 4, False, "learned"),
    "distilbert": ("bert", 4, 4, False, "learned"),
    "electra": ("bert", 4, 4, False, "learned"),
    "gpt2": ("gpt2", 4, 4, True, "learned"),
    "llama": ("llama", 4, 2, True, "rotary"),
    "qwen2": ("llama", 4, 2, True, "rotary"),
    "mistral": ("llama", 4, 2, True, "rotary"),
}


@pytest.fixture(scope="module", params=sorted(EXPECTED))
def tiny(request, tmp_path_factory):
    folder = build_tiny_model(request.param, tmp_path_factory.mktemp(request.param))
    loaded = load_model(str(folder))
    tokens = tokenize(loaded, TEXT)
    return request.param, loaded, tokens, capture(loaded, tokens)


def _reference_attentions(loaded, tokens) -> torch.Tensor:
    """The model's own forward pass, no hooks: (layers, H, L, S)."""
    with torch.no_grad():
        out = loaded.runner(input_ids=tokens.ids, attention_mask=tokens.attention_mask, output_attentions=True)
    return torch.stack([a[0] for a in out.attentions])


def test_facts_and_shapes(tiny):
    kind, loaded, tokens, captured = tiny
    family, heads, kv_heads, causal, positional = EXPECTED[kind]
    facts = loaded.facts
    assert (loaded.family, facts.family, facts.num_heads, facts.num_kv_heads) == (family, family, heads, kv_heads)
    assert (facts.causal, facts.positional, facts.num_layers, facts.d_model, facts.d_head) == (
        causal,
        positional,
        2,
        32,
        8,
    )
    assert facts.max_positions == 64 and facts.num_parameters > 0
    assert loaded.notices == () and loaded.capturable
    n = tokens.length
    assert captured.attentions.shape == (2, heads, n, n)
    for layer in captured.layers:
        assert layer.hidden_in.shape == (n, 32)
        assert layer.q.shape == (heads, n, 8)
        assert layer.k.shape == (kv_heads, n, 8) and layer.v.shape == (kv_heads, n, 8)
        assert layer.attn_output.shape == (heads, n, 8)
        assert layer.attentions.shape == (heads, n, n)
        assert layer.projection.w_q.shape == (32, heads * 8) and layer.projection.w_k.shape == (32, kv_heads * 8)
        assert layer.projection.w_o.shape == (heads * 8, 32)
        assert (layer.rotary is not None) == (positional == "rotary")
        assert all(t.device.type == "cpu" and not t.requires_grad for t in (layer.q, layer.k, layer.v))


def test_captured_weights_are_what_the_model_returns(tiny):
    _, loaded, tokens, captured = tiny
    torch.testing.assert_close(captured.attentions, _reference_attentions(loaded, tokens), rtol=0, atol=0)
    assert captured.attentions.std() > 0.05  # peaked patterns, so the replay check means something


def test_replay_from_captured_qkv_matches(tiny):
    _, _, _, captured = tiny
    diffs = replay(captured)
    assert [d.layer for d in diffs] == [0, 1]
    assert all(d.weights <= TOLERANCE and d.output <= TOLERANCE for d in diffs), diffs


def test_replay_in_one_call_or_a_group_at_a_time_gives_the_same_check(tiny, monkeypatch):
    """``_groups``: a short input replays a layer in one call, a long one a key/value group at a time; every query
    head lands in exactly one call with its own kv head, and the reported differences do not depend on the split."""
    replay_module = importlib.import_module(
        "attention_core.pretrained.replay"
    )  # the module (the package exports the function)

    _, _, _, captured = tiny
    layer = captured.layers[0]
    heads, kv_heads = layer.q.shape[0], layer.k.shape[0]
    per = heads // kv_heads
    cells = layer.q.shape[1] * layer.k.shape[1]
    for budget, calls in ((1 << 22, 1), (per * cells, kv_heads), (1, kv_heads)):
        groups = replay_module._groups(layer, budget)
        assert len(groups) == calls
        covered = [h for q, _ in groups for h in range(heads)[q]]
        assert covered == list(range(heads))
        assert all(q.start // per == kv.start and q.stop // per == kv.stop for q, kv in groups)
    together = replay(captured)
    monkeypatch.setattr(replay_module, "REPLAY_CELLS", 1)  # one kv group per call, as for a long input
    apart = replay(captured)
    assert [(d.layer, d.weights <= TOLERANCE, d.output <= TOLERANCE) for d in apart] == [
        (d.layer, True, True) for d in together
    ]
    for one, other in zip(together, apart, strict=True):
        assert abs(one.weights - other.weights) <= TOLERANCE and abs(one.output - other.output) <= TOLERANCE


def test_replay_from_hidden_matches(tiny):
    _, _, _, captured = tiny
    for layer in range(captured.num_layers):
        diff = replay_from_hidden_diff(captured, layer)
        assert diff.weights <= TOLERANCE and diff.output <= TOLERANCE, diff
        trace = replay_from_hidden(captured, layer)
        torch.testing.assert_close(trace.attention.weights, captured.layer(layer).attentions, rtol=0, atol=TOLERANCE)


def test_masks_the_model_used(tiny):
    kind, _, tokens, captured = tiny
    n = tokens.length
    mask = captured.layer(0).mask
    if not EXPECTED[kind][3]:
        assert mask is None  # one unpadded sequence: the encoder attends everywhere
        return
    allowed = mask[0] == 0  # (L, S) additive mask: 0 = may attend
    expected = torch.ones(n, n, dtype=torch.bool).tril()
    if kind == "mistral":  # sliding window of 4 keys
        expected &= ~torch.ones(n, n, dtype=torch.bool).tril(-4)
    assert torch.equal(allowed, expected)
    weights = replay_layer(captured, 1).weights
    assert torch.all(weights[:, ~expected] == 0)


def test_hooks_are_removed(tiny):
    _, loaded, tokens, _ = tiny

    def hooks():  # transformers keeps hooks of its own; ours must all be gone after a capture
        return [(name, len(m._forward_hooks), len(m._forward_pre_hooks)) for name, m in loaded.model.named_modules()]

    before = hooks()
    capture(loaded, tokens)
    assert hooks() == before


def test_gpt2_scale_follows_the_config(tmp_path):
    # the tiny GPT-2 sets scale_attn_by_inverse_layer_idx=True: layer i divides 1/sqrt(E) by (i + 1)
    loaded = load_model(build_tiny_model("gpt2", tmp_path / "gpt2"))
    captured = capture(loaded, tokenize(loaded, TEXT))
    assert captured.layer(0).scale == pytest.approx(8**-0.5)
    assert captured.layer(1).scale == pytest.approx(8**-0.5 / 2)
    assert max(max(d.weights, d.output) for d in replay(captured)) <= TOLERANCE


def test_rotary_matches_hugging_face_convention():
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    torch.manual_seed(0)
    q, k = torch.randn(1, 4, 6, 8), torch.randn(1, 2, 6, 8)
    angles = torch.arange(6.0)[:, None] * torch.rand(4)[None, :]  # (L, E/2)
    cos, sin = torch.cat((angles, angles), -1).cos()[None], torch.cat((angles, angles), -1).sin()[None]  # (1, L, E)
    q_hf, k_hf = apply_rotary_pos_emb(q, k, cos, sin)
    torch.testing.assert_close(apply_rotary(q[0], cos[0], sin[0]), q_hf[0])
    torch.testing.assert_close(apply_rotary(k[0], cos[0], sin[0]), k_hf[0])


def test_unknown_layout_still_shows_attentions(tmp_path):
    loaded = load_model(str(build_tiny_model("gpt_neox", tmp_path / "neox")))
    assert loaded.family == "other" and not loaded.capturable
    assert any("cannot be captured" in n for n in loaded.notices)
    tokens = tokenize(loaded, TEXT)
    captured = capture(loaded, tokens)
    assert captured.attentions.shape[:2] == (2, 4)
    torch.testing.assert_close(captured.attentions, _reference_attentions(loaded, tokens))
    assert all(layer.q is None and layer.k is None and layer.v is None for layer in captured.layers)
    assert any("cannot be captured" in n for n in captured.notices)
    assert replay(captured) == ()
    with pytest.raises(ValueError, match="not captured"):
        replay_layer(captured, 0)


def test_capture_takes_one_sequence(tiny):
    _, loaded, tokens, _ = tiny
    from dataclasses import replace

    with pytest.raises(ValueError, match=r"\(1, L\)"):
        capture(loaded, replace(tokens, ids=tokens.ids.repeat(2, 1)))


@pytest.mark.parametrize("kind", ["bert", "llama"])
def test_padded_input_replays_with_the_models_mask(kind, tmp_path):
    from dataclasses import replace

    loaded = load_model(build_tiny_model(kind, tmp_path / kind))
    tokens = tokenize(loaded, "the cat sat on the mat")
    n, extra = tokens.length, 3
    pad = loaded.tokenizer.pad_token_id
    padded = replace(
        tokens,
        ids=torch.cat([tokens.ids, torch.full((1, extra), pad)], dim=1),  # (1, L + 3)
        attention_mask=torch.cat([tokens.attention_mask, torch.zeros(1, extra, dtype=torch.long)], dim=1),
        labels=(*tokens.labels, *["[PAD]"] * extra),
        offsets=(*tokens.offsets, *[(0, 0)] * extra),
        special=(*tokens.special, *[True] * extra),
    )
    captured = capture(loaded, padded)
    assert captured.attentions.shape[-1] == n + extra
    assert torch.all(captured.attentions[..., n:] == 0)  # nobody attends to padding
    assert max(max(d.weights, d.output) for d in replay(captured)) <= TOLERANCE
    assert max(max(d.weights, d.output) for d in (replay_from_hidden_diff(captured, i) for i in (0, 1))) <= TOLERANCE


def test_progress_is_reported(tmp_path):
    seen = []
    load_model(build_tiny_model("distilbert", tmp_path / "d"), progress=lambda m, f: seen.append((m, f)))
    fractions = [f for _, f in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and "ready" in seen[-1][0]


def test_concurrent_captures_do_not_mix(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    loaded = load_model(build_tiny_model("llama", tmp_path / "llama"))
    texts = ["the cat sat on the mat", "they were happy", "attention is all you need to see"] * 3
    alone = [capture(loaded, tokenize(loaded, t)).attentions for t in texts]
    with ThreadPoolExecutor(max_workers=3) as pool:
        together = list(pool.map(lambda t: capture(loaded, tokenize(loaded, t)).attentions, texts))
    for a, b in zip(alone, together, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_first_look_is_the_whole_pass_up_to_its_layer(tiny):
    """``capture(..., upto=0)``: layer 0 exactly as the whole pass records it (weights, q, k, v, X, outputs, mask,
    rotary), marked partial, and the pass stopped there (the next layer's attention never ran)."""
    kind, loaded, tokens, whole = tiny
    assert whole.complete and whole.num_layers == loaded.facts.num_layers >= 2
    later = []
    handle = loaded.sites[1].attention.register_forward_hook(lambda *args: later.append(1))
    try:
        first = capture(loaded, tokens, upto=0)
    finally:
        handle.remove()
    assert not later, f"{kind}: the pass ran past layer 0"
    assert (first.complete, first.num_layers) == (False, 1)
    a, b = first.layers[0], whole.layers[0]
    assert torch.equal(a.attentions, b.attentions)
    for name in ("hidden_in", "q", "k", "v", "attn_output", "mask"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None and y is None) or torch.equal(x, y), f"{kind}: {name} differs"
    assert (a.rotary is None) == (b.rotary is None)
    if a.rotary is not None:
        assert all(torch.equal(x, y) for x, y in zip(a.rotary, b.rotary, strict=True))
    assert (a.scale, a.qk_norm) == (b.scale, b.qk_norm)
    # the last layer asked for is the whole capture: nothing is cut
    assert capture(loaded, tokens, upto=loaded.facts.num_layers - 1).complete
