"""Head roles against hand-built heads: a copy head scores induction ~1, a random softmax ~1/n, a head built
to look one back scores previous-token 1; sink and positional by hand; the model path on a tiny model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_core.head_roles import (
    ROLE_LABELS,
    ROLES,
    classify,
    head_roles,
    induction_score,
    induction_score_of,
    model_induction_scores,
    positional_score,
    previous_token_score,
    repeated_tokens,
    sink_score,
)


def one_hot_rows(targets: list[int], keys: int) -> np.ndarray:
    """(L, S) attention with row i putting all its weight on key targets[i]."""
    weights = np.zeros((len(targets), keys))
    weights[np.arange(len(targets)), targets] = 1.0
    return weights


def copy_head(length: int, start: int = 0) -> np.ndarray:
    """(n, n) a causal head built to copy: every position of the second copy attends to i - T + 1, the rest
    to position 0 (n = start + 2T)."""
    n = start + 2 * length
    targets = [i - length + 1 if i >= start + length else 0 for i in range(n)]
    return one_hot_rows(targets, n)


def random_causal_softmax(n: int, seed: int = 0) -> np.ndarray:
    scores = np.random.default_rng(seed).normal(0.0, 1.0, (n, n))
    scores[np.triu_indices(n, 1)] = -np.inf
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    return weights / weights.sum(axis=1, keepdims=True)


def test_repeated_tokens_are_two_identical_copies_from_the_vocabulary():
    ids = repeated_tokens(range(100, 200), 16, seed=3)
    assert ids.shape == (32,) and torch.equal(ids[:16], ids[16:])
    assert int(ids.min()) >= 100 and int(ids.max()) < 200
    assert torch.equal(ids, repeated_tokens(range(100, 200), 16, seed=3))  # seeded


@pytest.mark.parametrize("start", [0, 1])
def test_a_copy_head_scores_induction_one(start):
    length = 12
    assert float(induction_score_of(copy_head(length, start), length, start)) == pytest.approx(1.0)


def test_a_random_softmax_scores_induction_about_one_over_n():
    length = 32
    n = 2 * length
    scores = np.array([float(induction_score_of(random_causal_softmax(n, seed), length)) for seed in range(20)])
    # a uniform causal head would give mean_i 1/(i + 1) over the second copy: about 1/n
    uniform = np.mean([1.0 / (i + 1) for i in range(length, n)])
    assert scores.mean() == pytest.approx(uniform, rel=0.35)
    assert scores.max() < 0.1


def test_induction_score_runs_weights_fn_on_the_repeated_ids():
    length, seen = 10, []

    def weights_fn(ids):  # one "layer" with a copy head and a uniform head, on a sequence with one prefix token
        seen.append(ids)
        n = ids.shape[0] + 1
        uniform = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]
        return np.stack([copy_head(length, start=1), uniform])[None]  # (1, 2, n, n)

    scores = induction_score(weights_fn, range(5, 50), length=length, seed=1, start=1)
    assert scores.shape == (1, 2)
    assert float(scores[0, 0]) == pytest.approx(1.0)
    assert float(scores[0, 1]) < 0.1
    assert len(seen) == 1 and torch.equal(seen[0][:length], seen[0][length:])


def test_induction_score_refuses_weights_too_short():
    with pytest.raises(ValueError, match="too short"):
        induction_score_of(np.eye(10), 8)


def test_previous_token_head_by_hand():
    n = 7
    previous = one_hot_rows([0] + [i - 1 for i in range(1, n)], n)
    assert float(previous_token_score(previous)) == pytest.approx(1.0)
    assert float(previous_token_score(np.eye(n))) == 0.0
    half = 0.5 * previous + 0.5 * np.eye(n)
    assert float(previous_token_score(half)) == pytest.approx(0.5)  # mean over i >= 1 of A[i, i-1]


def test_sink_score_by_hand():
    weights = np.array([[1.0, 0.0, 0.0, 0.0], [0.5, 0.5, 0.0, 0.0], [0.2, 0.2, 0.2, 0.4], [0.1, 0.3, 0.2, 0.4]])
    assert float(sink_score(weights)) == pytest.approx((1.0 + 0.5 + 0.2 + 0.1) / 4)  # position 0 only
    special = [True, False, False, True]  # e.g. [CLS] ... [SEP]
    assert float(sink_score(weights, special)) == pytest.approx((1.0 + 0.5 + 0.6 + 0.5) / 4)
    with pytest.raises(ValueError):
        sink_score(weights, [True, False])


def test_positional_score_by_hand():
    n = 6
    assert float(positional_score(np.eye(n))) == pytest.approx(1.0)  # always itself: offset 0
    two_back = one_hot_rows([max(i - 2, 0) for i in range(n)], n)
    assert float(positional_score(two_back)) == pytest.approx(4 / 6)  # rows 2..5 at offset -2
    previous = one_hot_rows([max(i - 1, 0) for i in range(n)], n)
    assert float(positional_score(previous)) == pytest.approx(1 / 6)  # -1 excluded: only row 0 (offset 0) left
    first = one_hot_rows([0] * n, n)
    assert float(positional_score(first)) == pytest.approx(1 / 6)  # a sink is not positional


def test_head_roles_labels_each_built_head():
    n, length = 8, 4
    heads = np.stack(
        [
            one_hot_rows([0] * n, n),  # sink
            one_hot_rows([0] + [i - 1 for i in range(1, n)], n),  # previous token
            np.eye(n),  # positional (itself)
            np.full((n, n), 1.0 / n),  # nothing in particular
        ]
    )[None]  # (1, 4, n, n)
    induction = np.array([[0.0, 0.0, 0.0, 0.1]])
    roles = head_roles(heads, induction=induction)
    assert list(roles.labels[0]) == ["sink", "previous_token", "positional", "mixed"]
    assert set(roles.scores) == set(ROLES) and set(ROLES) | {"mixed"} == set(ROLE_LABELS)
    values, rows, columns = roles.table()
    assert values.shape == (4, 5) and columns[-1] == "positional_offset" and rows[1] == "L0 H1 previous_token"
    assert values[2, -1] == 0  # the positional head's offset
    no_model = head_roles(heads)
    assert np.isnan(no_model.scores["induction"]).all() and no_model.labels[0, 0] == "sink"
    del length


def test_classify_threshold_and_priority():
    scores = {
        "sink": np.array([[0.3, 0.9]]),
        "previous_token": np.array([[0.2, 0.9]]),
        "induction": np.array([[np.nan, 0.1]]),
        "positional": np.array([[0.1, 0.0]]),
    }
    assert list(classify(scores)[0]) == ["mixed", "previous_token"]  # the more specific role first
    assert list(classify(scores, threshold=0.25)[0]) == ["sink", "previous_token"]
    scores["induction"] = np.array([[0.5, 0.45]])
    assert list(classify(scores)[0]) == ["induction", "induction"]  # an induction head is a sink on plain text too


def test_model_induction_scores_on_a_tiny_model(tmp_path):
    from attention_core.pretrained import load_model
    from tests.tiny_models import build_tiny_model

    for family in ("bert", "llama"):
        folder = build_tiny_model(family, tmp_path / family)
        loaded = load_model(str(folder), device="cpu")
        scores = model_induction_scores(loaded, length=8)
        assert scores.shape == (loaded.facts.num_layers, loaded.facts.num_heads)
        assert np.all((scores >= 0) & (scores <= 1))
