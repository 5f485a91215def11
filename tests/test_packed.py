"""A causal model's weights kept as lower triangles (attention_core/packed.py): the same numbers, half the bytes.

References: the model's own ``output_attentions`` (a separate forward pass), numpy's ``np.tril`` and the
whole-array viz/attention_core functions run on the dense array.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_core.head_roles import head_roles, modal_offsets, previous_token_score, sink_score
from attention_core.packed import CausalStack, pack, stack_returned, unpack, upper_is_zero
from attention_core.pipeline import pad_tokens
from attention_core.pretrained import capture, load_model, tokenize
from tests.tiny_models import build_tiny_model
from viz.rollout import attention_rollout
from viz.stats import STATISTICS, overview_matrix
from viz.summaries import overview_by_head, overviews_by_head, rollout_streamed


def causal_weights(layers: int, heads: int, n: int, seed: int = 0) -> np.ndarray:
    """(layers, H, n, n) softmax rows over keys 0..i, exactly 0 above the diagonal."""
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=(layers, heads, n, n)).astype(np.float32) * 3
    scores[..., np.triu(np.ones((n, n), dtype=bool), 1)] = -np.inf
    return torch.from_numpy(scores).softmax(-1).numpy()


def test_pack_and_unpack_give_back_every_bit():
    weights = causal_weights(1, 3, 17)[0]  # (H, n, n)
    weights[0, 5, 2] = np.float32(1e-45)  # a denormal survives
    packed = np.empty((3, 17 * 18 // 2), dtype=np.float32)
    pack(weights, packed)
    again = unpack(packed, 17)
    assert again.dtype == np.float32 and again.shape == weights.shape
    assert np.array_equal(again.view(np.int32), weights.view(np.int32))
    assert np.array_equal(packed[1, :3], [weights[1, 0, 0], weights[1, 1, 0], weights[1, 1, 1]])  # row by row


@pytest.mark.parametrize("where", [(1, 2, 4), (1, 0, 3), (0, 4, 5)])  # inside; the first query's row; the last key
@pytest.mark.parametrize("upper", [0.0, -0.0, np.nan, 1e-30])
def test_upper_is_zero_only_for_plus_zero_bits(upper, where):
    weights = torch.from_numpy(causal_weights(1, 2, 6)[0])
    assert upper_is_zero(weights)
    weights[where] = upper
    assert upper_is_zero(weights) == (str(upper) == "0.0")
    assert not upper_is_zero(weights[..., :5])  # not square: never packed
    assert not upper_is_zero(weights.double())  # float64 stays dense (widened as before)


def test_causal_stack_reads_like_the_dense_array():
    dense = causal_weights(4, 3, 20, seed=1)  # (layers, H, L, L)
    stack = stack_returned([torch.from_numpy(layer[None].copy()) for layer in dense])
    assert isinstance(stack, CausalStack)
    assert stack.shape == dense.shape and len(stack) == 4 and stack.ndim == 4
    assert stack.nbytes == 4 * 3 * 4 * (20 * 21 // 2) < dense.nbytes * 0.6
    assert np.array_equal(np.asarray(stack), dense)
    assert np.array_equal(stack[2], dense[2]) and np.array_equal(stack[-1], dense[-1])
    assert np.array_equal(stack[1, 2], dense[1, 2]) and np.array_equal(stack[3, 0, 5], dense[3, 0, 5])
    assert all(np.array_equal(a, b) for a, b in zip(stack, dense, strict=True))
    assert np.array_equal(stack.tensor(0).numpy(), dense[0])
    assert not stack[0].flags.writeable  # shared: nobody may write into it
    with pytest.raises(IndexError):
        stack[4]
    with pytest.raises(ValueError, match="packed must be"):
        CausalStack(np.zeros((1, 2, 7), dtype=np.float32), 4)


def test_a_non_causal_or_one_token_capture_stays_one_dense_buffer():
    dense = causal_weights(2, 2, 5)
    dense[1, 0, 0, 3] = 0.25  # one layer sees a later key: the whole store stays dense
    returned = [torch.from_numpy(layer[None].copy()) for layer in dense]
    stored = stack_returned(returned)
    assert isinstance(stored, torch.Tensor) and stored.shape == dense.shape
    assert np.array_equal(stored.numpy(), dense) and returned == [None, None]  # each released once copied
    assert isinstance(stack_returned([torch.ones(1, 2, 1, 1)]), torch.Tensor)


def test_viz_and_head_roles_read_the_stack_a_layer_at_a_time():
    dense = causal_weights(3, 4, 12, seed=2)
    stack = stack_returned([torch.from_numpy(layer[None].copy()) for layer in dense])
    together = overviews_by_head(stack, tuple(STATISTICS))  # one pass over the layers for every statistic
    for name in STATISTICS:
        assert np.array_equal(overview_matrix(stack, name), overview_matrix(dense, name))
        assert np.array_equal(together[name], overview_matrix(dense, name))
        assert np.array_equal(overview_by_head(stack, name), overview_matrix(dense, name))
    assert np.array_equal(attention_rollout(stack), attention_rollout(dense))
    assert np.array_equal(rollout_streamed(stack), attention_rollout(dense))
    roles = head_roles(stack)
    whole = torch.from_numpy(dense)  # the per-head scores computed on every layer at once
    assert np.array_equal(roles.scores["sink"], sink_score(whole).numpy().astype(np.float64))
    assert np.array_equal(roles.scores["previous_token"], previous_token_score(whole).numpy().astype(np.float64))
    score, offsets = modal_offsets(whole)
    assert np.array_equal(roles.scores["positional"], score.numpy().astype(np.float64))
    assert np.array_equal(roles.offsets, offsets.numpy())


@pytest.fixture(scope="module")
def tiny_decoder(tmp_path_factory):
    return load_model(str(build_tiny_model("llama", tmp_path_factory.mktemp("packed_llama"))))


def _returned(loaded, tokens) -> np.ndarray:
    with torch.no_grad():
        out = loaded.runner(
            input_ids=tokens.ids, attention_mask=tokens.attention_mask, output_attentions=True, use_cache=False
        )
    return torch.stack([a[0] for a in out.attentions]).numpy()  # (layers, H, L, S)


def test_a_decoder_capture_is_packed_and_equals_the_models_own_attentions(tiny_decoder):
    tokens = tokenize(tiny_decoder, "the cat sat on the mat and the dog sat on the log")
    cap = capture(tiny_decoder, tokens)
    reference = _returned(tiny_decoder, tokens)
    assert isinstance(cap.stacked, CausalStack) and cap.weights_by_layer is cap.stacked
    assert np.array_equal(np.asarray(cap.weights_by_layer).view(np.int32), reference.view(np.int32))
    for index, layer in enumerate(cap.layers):
        assert np.array_equal(layer.attentions.numpy(), reference[index])
    assert np.array_equal(cap.attentions.numpy(), reference)


def test_a_padded_decoder_capture_keeps_the_models_numbers(tiny_decoder):
    tokens = tokenize(tiny_decoder, "the cat sat")
    padded = pad_tokens(tiny_decoder, tokens, tokens.ids.shape[1] + 4)
    cap = capture(tiny_decoder, padded)
    assert np.array_equal(np.asarray(cap.weights_by_layer), _returned(tiny_decoder, padded))


@pytest.mark.parametrize("family", ["llama", "bert", "gpt2"])
def test_one_forward_pass_takes_each_layers_weights_as_it_runs(family, tmp_path, monkeypatch):
    """The hooks take every layer's returned weights during one pass without ``output_attentions`` (the
    model never holds every layer at once); where they cannot, the model is asked for them (same numbers)."""
    import sys

    capture_module = sys.modules["attention_core.pretrained.capture"]
    loaded = load_model(str(build_tiny_model(family, tmp_path / family)))
    tokens = tokenize(loaded, "the cat sat on the mat and the dog sat")
    reference = _returned_any(loaded, tokens)
    runs = []
    original = capture_module._run
    monkeypatch.setattr(capture_module, "_run", lambda *a, **k: runs.append(k) or original(*a, **k))
    cap = capture(loaded, tokens)
    assert runs == [{"output_attentions": False}]
    assert np.array_equal(np.asarray(cap.weights_by_layer).view(np.int32), reference.view(np.int32))
    assert isinstance(cap.stacked, CausalStack) == (family != "bert")

    runs.clear()
    monkeypatch.setattr(capture_module.LayerSink, "complete", property(lambda self: False))  # hooks saw too little
    again = capture(loaded, tokens)
    assert runs == [{"output_attentions": False}, {"output_attentions": True}]
    assert np.array_equal(np.asarray(again.weights_by_layer), reference)


def _returned_any(loaded, tokens) -> np.ndarray:
    import inspect

    kwargs = {"use_cache": False} if "use_cache" in inspect.signature(loaded.runner.forward).parameters else {}
    with torch.no_grad():
        out = loaded.runner(
            input_ids=tokens.ids, attention_mask=tokens.attention_mask, output_attentions=True, **kwargs
        )
    return torch.stack([a[0] for a in out.attentions]).numpy()
