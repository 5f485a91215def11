"""Training lab core: the toy task's data, determinism, the article's claim measured, path lengths."""

from __future__ import annotations

import ast
import math
from collections import deque
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from attention_core import training
from attention_core.device import limited_threads
from attention_core.recurrence import (
    PathLengths,
    path_length_columns,
    path_lengths,
    time_sequence_models,
    timing_summary,
)
from attention_core.training import (
    TrainingConfig,
    TrainingSnapshot,
    make_batch,
    run_to_end,
    summarize,
    train_side_by_side,
    train_steps,
    variants,
)
from ui.policy import MAX_CONCURRENT_TRAININGS, TrainingBusyError, training_slot
from ui.training_verdict import verdict

ROOT = Path(__file__).parents[1]
SMALL = TrainingConfig(d_k=32, steps=30, snapshot_every=10)


# ---- the toy task's data ------------------------------------------------------------------------


@pytest.mark.parametrize(("num_slots", "num_keys", "num_values"), [(16, 16, 16), (5, 12, 3), (1, 1, 1)])
def test_batch_is_a_correct_recall_task(num_slots, num_keys, num_values):
    batch = make_batch(200, num_slots, num_keys, num_values, torch.Generator().manual_seed(3))
    assert batch.keys.shape == batch.values.shape == (200, num_slots)
    assert batch.query.shape == batch.target.shape == batch.target_slot.shape == (200,)
    for b in range(200):
        keys = batch.keys[b].tolist()
        values = batch.values[b].tolist()
        query = int(batch.query[b])
        assert len(set(keys)) == num_slots, "keys within one example are distinct"
        assert all(0 <= k < num_keys for k in keys) and all(0 <= v < num_values for v in values)
        assert keys.count(query) == 1, "the query names exactly one slot"
        slot = keys.index(query)
        assert slot == int(batch.target_slot[b])
        assert values[slot] == int(batch.target[b]), "the target is the value stored beside the query's key"


def test_batches_cover_slots_and_values_evenly():
    batch = make_batch(4000, 8, 16, 16, torch.Generator().manual_seed(0))
    slot_counts = np.bincount(batch.target_slot.numpy(), minlength=8) / 4000
    value_counts = np.bincount(batch.target.numpy(), minlength=16) / 4000
    assert np.abs(slot_counts - 1 / 8).max() < 0.03  # the answer is not always in one place
    assert np.abs(value_counts - 1 / 16).max() < 0.03  # chance accuracy really is 1/16


def test_batches_follow_the_seed():
    first = make_batch(8, 4, 8, 8, torch.Generator().manual_seed(7))
    again = make_batch(8, 4, 8, 8, torch.Generator().manual_seed(7))
    other = make_batch(8, 4, 8, 8, torch.Generator().manual_seed(8))
    assert torch.equal(first.keys, again.keys) and torch.equal(first.values, again.values)
    assert not torch.equal(first.keys, other.keys)


def test_config_rejects_impossible_settings():
    with pytest.raises(ValueError, match="num_keys"):
        TrainingConfig(num_slots=8, num_keys=4)
    with pytest.raises(ValueError, match="optimizer"):
        TrainingConfig(optimizer="rmsprop")
    with pytest.raises(ValueError, match="d_k"):
        TrainingConfig(d_k=0)
    assert TrainingConfig(d_k=64).scale == pytest.approx(1 / 8)
    assert TrainingConfig(d_k=64, scaled=False).scale == 1.0


# ---- the model uses the core, and its numbers -------------------------------------------------------


def test_model_attention_matches_torch_sdpa():
    config = replace(SMALL, d_k=16, scaled=False)
    model = training.RecallAttention(config, torch.Generator().manual_seed(0))
    batch = make_batch(5, config.num_slots, config.num_keys, config.num_values, torch.Generator().manual_seed(1))
    logits, trace = model(batch)
    slots = (model.key_embedding[batch.keys] + model.value_embedding[batch.values]) / math.sqrt(2)
    q = (model.key_embedding[batch.query] @ model.w_q)[:, None, None, :]
    k, v = (slots @ model.w_k)[:, None], (slots @ model.w_v)[:, None]
    reference = torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=1.0)[:, 0, 0] @ model.w_o
    torch.testing.assert_close(logits, reference)
    assert trace.scale == 1.0


def test_init_scale_sets_the_spread_of_raw_scores():
    """Unit-variance q and k give raw scores of std ~ sqrt(d_k): the article's argument, measured."""
    for d_k in (16, 256):
        config = TrainingConfig(d_k=d_k, scaled=False, batch_size=512)
        model = training.RecallAttention(config, torch.Generator().manual_seed(0))
        batch = make_batch(512, 16, 16, 16, torch.Generator().manual_seed(1))
        with torch.no_grad():
            _, trace = model(batch)
        assert float(trace.scores.std()) == pytest.approx(math.sqrt(d_k), rel=0.35)


# ---- determinism and streaming -------------------------------------------------------------------


def test_training_is_deterministic_for_a_seed():
    first, again = run_to_end(SMALL), run_to_end(SMALL)
    assert first.losses == again.losses
    assert first.score_grads == again.score_grads
    np.testing.assert_array_equal(first.probe_weights, again.probe_weights)
    other = run_to_end(replace(SMALL, seed=1))
    assert other.losses != first.losses


def test_snapshots_arrive_every_k_steps_and_carry_plain_data():
    snaps = list(train_steps(replace(SMALL, steps=25, snapshot_every=10)))
    assert [s.step for s in snaps] == [10, 20, 25]
    assert [s.done for s in snaps] == [False, False, True]
    last = snaps[-1]
    assert len(last.losses) == len(last.accuracies) == len(last.entropies) == len(last.score_grads) == 25
    assert snaps[0].losses == last.losses[:10], "a snapshot's history is the prefix of later ones"
    assert all(isinstance(x, float) for x in last.losses)
    assert last.probe_weights.shape == (SMALL.probe_examples, SMALL.num_slots)
    np.testing.assert_allclose(last.probe_weights.sum(axis=1), 1.0, rtol=1e-5)
    curves = last.curves()
    assert set(curves) == {"step", "loss", "accuracy", "entropy", "score_grad"}
    assert curves["step"][0] == 1 and curves["step"][-1] == 25


def test_side_by_side_runs_in_lockstep_and_matches_separate_runs():
    configs = variants(SMALL)
    chunks = list(train_side_by_side(configs))
    assert [tuple(s.step for s in chunk) for chunk in chunks] == [(10, 10), (20, 20), (30, 30)]
    assert [s.variant for s in chunks[-1]] == ["scaled", "unscaled"]
    assert all(s.done for s in chunks[-1])
    for snap, config in zip(chunks[-1], configs, strict=True):
        assert snap.losses == run_to_end(config).losses


def test_stopping_early_releases_the_training_slot():
    run = train_steps(replace(SMALL, steps=1000, snapshot_every=1), guard=training_slot())
    next(run)  # holding a slot now
    with training_slot(0.01):  # the other slot is still free
        with pytest.raises(TrainingBusyError), training_slot(0.01):
            pass
    run.close()  # stop: what a page does when the user presses Stop
    with training_slot(0.01), training_slot(0.01):  # both free again
        pass


def test_at_most_two_trainings_at_once():
    assert MAX_CONCURRENT_TRAININGS == 2
    with training_slot(0.01), training_slot(0.01):
        with pytest.raises(TrainingBusyError, match="already running"):
            next(train_steps(SMALL, guard=training_slot(0.01)))


def test_thread_limit_is_capped_and_restored():
    before = torch.get_num_threads()
    with limited_threads(64) as used:
        assert used == before == torch.get_num_threads(), "never more threads than the process allows"
    with limited_threads(1) as used:
        assert used == torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    first, second = limited_threads(1), limited_threads(1)  # two sessions' trainings overlap ...
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)  # ... the first leaves while the second still runs
    assert torch.get_num_threads() == 1
    second.__exit__(None, None, None)
    assert torch.get_num_threads() == before, "the last one out puts the process count back"


# ---- the article's claim, asserted -----------------------------------------------------------------


@pytest.fixture(scope="module")
def default_runs() -> tuple[TrainingSnapshot, ...]:
    return deque(train_side_by_side(variants(TrainingConfig())), maxlen=1)[0]


def test_defaults_scaling_trains_and_unscaled_does_not(default_runs):
    scaled, unscaled = (summarize(s) for s in default_runs)
    assert default_runs[0].config.d_k == 256 and default_runs[0].step == TrainingConfig().steps
    assert scaled.final_loss < 0.05 and scaled.steps_to_learn is not None
    assert unscaled.final_loss > 10 * scaled.final_loss
    assert unscaled.steps_to_learn is None
    # the mechanism the article names: saturated softmax, vanishing gradient at the scores
    assert unscaled.initial_entropy < 0.25 * TrainingConfig().max_entropy < scaled.initial_entropy
    assert unscaled.initial_score_grad < scaled.initial_score_grad / 10
    result = verdict(TrainingConfig(), default_runs)
    assert result.outcome == "scaling_helps"
    assert f"{scaled.final_loss:.3f}" in result.headline and f"{unscaled.final_loss:.3f}" in result.headline


def test_scaling_wins_for_another_seed_too():
    scaled, unscaled = (summarize(run_to_end(c)) for c in variants(TrainingConfig(seed=1)))
    assert scaled.final_loss < 0.5 * unscaled.final_loss


def test_small_d_k_shows_no_difference_and_says_why():
    config = TrainingConfig(d_k=8, steps=150)
    runs = deque(train_side_by_side(variants(config)), maxlen=1)[0]
    result = verdict(config, runs)
    assert result.outcome == "no_difference"
    assert "never went one-hot" in result.headline


# ---- the verdict reads the numbers (hand-made histories) -------------------------------------------


def _snapshot(config: TrainingConfig, losses, accuracies, entropies, grads=None) -> TrainingSnapshot:
    n = len(losses)
    return TrainingSnapshot(
        config=config,
        step=n,
        losses=tuple(losses),
        accuracies=tuple(accuracies),
        entropies=tuple(entropies),
        score_grads=tuple(grads or [0.1] * n),
        score_stds=(1.0,) * n,
        probe_weights=np.full((2, config.num_slots), 1 / config.num_slots),
        probe_target_slot=np.zeros(2, dtype=int),
        elapsed_s=0.1,
        done=n == config.steps,
    )


def test_verdict_cases_from_hand_made_histories():
    config = TrainingConfig(steps=100)
    high = config.max_entropy * 0.9
    learner = _snapshot(replace(config, scaled=True), [0.01] * 100, [1.0] * 100, [high] * 100)
    stuck = _snapshot(replace(config, scaled=False), [2.7] * 100, [0.06] * 100, [0.0] * 100)
    assert verdict(config, (learner, stuck)).outcome == "scaling_helps"
    flipped = (
        replace(stuck, config=replace(config, scaled=True)),
        replace(learner, config=replace(config, scaled=False)),
    )
    assert verdict(config, flipped).outcome == "unscaled_better"
    both_stuck = (replace(stuck, config=replace(config, scaled=True)), stuck)
    assert verdict(config, both_stuck).outcome == "neither_learned"
    nan = replace(stuck, losses=(float("nan"),) * 100)
    assert verdict(config, (learner, nan)).outcome == "diverged"
    single = verdict(config, (learner,))
    assert single.outcome == "single" and "Only the scaled" in single.headline
    partial = replace(
        learner,
        step=50,
        losses=learner.losses[:50],
        accuracies=learner.accuracies[:50],
        entropies=learner.entropies[:50],
        done=False,
    )
    assert "after 50 of 100 steps" in verdict(config, (partial,)).headline


# ---- attention against recurrence ------------------------------------------------------------------


def _bfs_hops(edges: dict[int, list[int]], n: int) -> np.ndarray:
    """(n, n) hops from source j (column) to position i (row), -1 where unreachable."""
    hops = np.full((n, n), -1)
    for source in range(n):
        hops[source, source] = 0
        frontier, seen, depth = [source], {source}, 0
        while frontier:
            depth += 1
            nxt = [t for s in frontier for t in edges[s] if t not in seen]
            for t in nxt:
                seen.add(t)
                hops[t, source] = depth
            frontier = nxt
    return hops


def _dag_depth(parents: dict[int, list[int]], n: int) -> int:
    """Longest chain of computations that must run one after another (inputs are depth 0)."""
    depth: dict[int, int] = {}
    for i in range(n):  # positions are listed in an order where parents come first
        depth[i] = 1 + max((depth[p] for p in parents[i]), default=0)
    return max(depth.values())


@pytest.mark.parametrize("n", [1, 2, 3, 7, 16])
def test_path_lengths_match_the_dependency_graphs(n):
    counts = path_lengths(n)
    # attention: every position reads every token directly; all outputs depend only on the inputs
    attention = _bfs_hops({j: [i for i in range(n) if i != j] for j in range(n)}, n)
    assert counts.attention_longest_path == attention.max()
    assert counts.attention_sequential_steps == _dag_depth({i: [] for i in range(n)}, n)
    # recurrence: token j reaches position j+1 through h_j; h_t needs h_{t-1}
    recurrent = _bfs_hops({j: [j + 1] if j + 1 < n else [] for j in range(n)}, n)
    assert counts.recurrent_longest_path == recurrent.max()
    assert counts.recurrent_sequential_steps == _dag_depth({i: [i - 1] if i else [] for i in range(n)}, n)


def test_path_lengths_literal_values():
    assert path_lengths(1024) == PathLengths(
        n=1024,
        attention_sequential_steps=1,
        attention_longest_path=1,
        recurrent_sequential_steps=1024,
        recurrent_longest_path=1023,
    )
    columns = path_length_columns([2, 8])
    np.testing.assert_array_equal(columns["recurrent_longest_path"], [1, 7])
    np.testing.assert_array_equal(columns["attention_longest_path"], [1, 1])
    with pytest.raises(ValueError):
        path_lengths(0)


def test_timing_measures_every_layer():
    report = time_sequence_models((4, 8), d_model=8, num_heads=2, batch_size=1, repeats=1, device="cpu")
    assert [row.n for row in report.rows] == [4, 8]
    columns = report.columns()
    for name in ("core_attention_ms", "fused_attention_ms", "rnn_ms", "gru_ms"):
        assert np.isfinite(columns[name]).all() and (columns[name] > 0).all()
    assert "n = 8" in timing_summary(report)


def test_timing_leaves_the_global_generator_alone():
    state = torch.random.get_rng_state()
    time_sequence_models((4,), d_model=8, num_heads=2, batch_size=1, repeats=1, device="cpu")
    assert torch.equal(state, torch.random.get_rng_state())


@pytest.mark.parametrize(
    ("path", "forbidden"),
    [
        ("attention_core/training.py", {"streamlit", "plotly"}),
        ("attention_core/recurrence.py", {"streamlit", "plotly"}),
        ("viz/training.py", {"streamlit", "torch"}),
        ("ui/training_lab.py", {"torch", "numpy", "plotly"}),
        ("ui/training_verdict.py", {"torch", "numpy", "plotly", "streamlit"}),
        ("ui/policy.py", {"torch", "numpy", "plotly", "streamlit"}),
    ],
)
def test_training_lab_modules_keep_their_walls(path, forbidden):
    tree = ast.parse((ROOT / path).read_text())
    imported = {
        alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    }
    imported |= {
        node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    }
    assert not imported & forbidden, f"{path} imports {imported & forbidden}"
