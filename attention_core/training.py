"""Training lab: does scaling by 1/sqrt(d_k) decide whether one attention layer learns?

The toy task is associative recall, generated on the fly from a seed. Each example holds S slots,
each slot a (key, value) pair with distinct keys, plus a query token naming one of the keys; the
target is the value stored beside that key:

    slots  (k3, v7) (k0, v2) (k9, v7) (k5, v1) ...      query k9   ->   target v7

One attention layer solves it in a single hop: the query attends to the slot whose key matches and
reads the value off it. The model (embeddings fixed and random, only the four projections learn):

    x_j = (E_key[key_j] + E_val[value_j]) / sqrt(2)      # (B, S, D)   one row per slot
    x_q = E_key[query]                                    # (B, 1, D)   the query token
    q = x_q W^Q,  k = x W^K,  v = x W^V                   # (B, 1, 1, E), (B, 1, S, E), (B, 1, S, Ev)
    a = softmax(q k^T * scale)                            # (B, 1, 1, S) scale = 1/sqrt(E), or 1 unscaled
    logits = (a v) W^O                                    # (B, num_values)

With ``init_scale = 1`` the entries of q and k start with unit variance, so a raw score q . k has
standard deviation about sqrt(d_k): 16 at d_k = 256. Softmax of such scores is nearly one-hot on a
random slot, and for most examples the gradient reaching the scores is ~0. Dividing by sqrt(d_k)
brings the spread back to ~1, where softmax is still soft and every example teaches something.

``train_steps(config)`` is a generator yielding a ``TrainingSnapshot`` (plain floats and numpy,
never tensors) every ``config.snapshot_every`` steps, so a page can draw progress chunk by chunk and
stop by not asking for the next chunk. ``train_side_by_side`` advances several variants in lockstep.
Each run uses at most ``config.num_threads`` torch threads, never more than the process allows
(``attention_core.device.limited_threads``). How many runs a server allows at once is its own policy,
not the core's: it passes a ``guard`` (the app: ``ui.policy.training_slot()``), which the run holds from
its first step until it ends or is closed. ``summarize`` reduces a run to the numbers a verdict needs;
the verdict in words is presentation (``ui/training_verdict.py``).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace

import numpy as np
import torch

from .analysis import row_entropy
from .device import limited_threads
from .sdpa import SDPATrace, scaled_dot_product_attention

LEARNED_ACCURACY = 0.9  # a run "has learned" once its rolling accuracy reaches this


@dataclass(frozen=True)
class TrainingConfig:
    """One training run. The defaults show the article's effect within seconds on a 2-core CPU."""

    d_k: int = 256  # E: width of q and k, the dimension the scaling is about
    scaled: bool = True  # multiply the scores by 1/sqrt(d_k), or leave them raw (scale 1)
    init_scale: float = 1.0  # std of each entry of q, k, v at initialisation (1 = unit variance)
    learning_rate: float = 1e-2
    steps: int = 300
    optimizer: str = "adam"  # "adam" or "sgd"
    num_slots: int = 16  # S: (key, value) pairs per example, the keys the query chooses among
    num_keys: int = 16  # key vocabulary (>= num_slots: keys within one example are distinct)
    num_values: int = 16  # value vocabulary = the classes; chance accuracy is 1 / num_values
    d_model: int = 32  # D: width of the fixed random embeddings
    d_v: int = 32  # Ev: width of the values, kept apart from d_k so only d_k changes the scores
    batch_size: int = 64  # fresh examples per step
    seed: int = 0  # fixes the embeddings, the initial weights and every batch
    snapshot_every: int = 10  # yield a snapshot after this many steps (and after the last)
    probe_examples: int = 12  # fixed examples whose attention rows every snapshot carries
    num_threads: int = 1  # torch threads for this run, capped by torch.get_num_threads()

    def __post_init__(self) -> None:
        sizes = ("d_k", "steps", "num_slots", "num_keys", "num_values", "d_model", "d_v", "batch_size")
        for name in (*sizes, "snapshot_every", "probe_examples", "num_threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.num_keys < self.num_slots:
            raise ValueError(f"num_keys ({self.num_keys}) must be >= num_slots ({self.num_slots}): keys are distinct")
        if not self.init_scale > 0:
            raise ValueError(f"init_scale must be > 0, got {self.init_scale}")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")
        if self.optimizer not in ("adam", "sgd"):
            raise ValueError(f"optimizer must be 'adam' or 'sgd', got {self.optimizer!r}")

    @property
    def scale(self) -> float:
        """The factor applied to q . k: 1/sqrt(d_k) when scaled, else 1."""
        return 1.0 / math.sqrt(self.d_k) if self.scaled else 1.0

    @property
    def variant(self) -> str:
        return "scaled" if self.scaled else "unscaled"

    @property
    def chance_loss(self) -> float:
        """Cross-entropy of a uniform guess over the values: log(num_values)."""
        return math.log(self.num_values)

    @property
    def max_entropy(self) -> float:
        """Entropy of a uniform attention row over the slots: log(num_slots)."""
        return math.log(self.num_slots)

    @property
    def expected_raw_score_std(self) -> float:
        """std of q . k at initialisation: init_scale^2 * sqrt(d_k) (q, k entries of std init_scale)."""
        return self.init_scale**2 * math.sqrt(self.d_k)


@dataclass(frozen=True)
class RecallBatch:
    """A batch of the associative-recall task (integer tensors)."""

    keys: torch.Tensor  # (B, S) distinct key ids per example
    values: torch.Tensor  # (B, S) value id stored beside each key
    query: torch.Tensor  # (B,) one of that example's keys
    target_slot: torch.Tensor  # (B,) the slot whose key equals the query
    target: torch.Tensor  # (B,) values[b, target_slot[b]]: the answer


def make_batch(
    batch_size: int, num_slots: int, num_keys: int, num_values: int, generator: torch.Generator
) -> RecallBatch:
    """Draw ``batch_size`` recall examples: distinct keys per example, values may repeat."""
    if num_keys < num_slots:
        raise ValueError(f"num_keys ({num_keys}) must be >= num_slots ({num_slots})")
    noise = torch.rand(batch_size, num_keys, generator=generator)  # (B, num_keys)
    keys = noise.argsort(dim=-1)[:, :num_slots]  # (B, S) a random subset in random order
    values = torch.randint(num_values, (batch_size, num_slots), generator=generator)  # (B, S)
    target_slot = torch.randint(num_slots, (batch_size,), generator=generator)  # (B,)
    rows = torch.arange(batch_size)
    query = keys[rows, target_slot]  # (B,)
    target = values[rows, target_slot]  # (B,)
    return RecallBatch(keys=keys, values=values, query=query, target_slot=target_slot, target=target)


class RecallAttention(torch.nn.Module):
    """One attention head from the query over the slots, read out to value logits."""

    def __init__(self, config: TrainingConfig, generator: torch.Generator) -> None:
        super().__init__()
        d, e, ev = config.d_model, config.d_k, config.d_v

        def draw(rows: int, cols: int, std: float) -> torch.Tensor:
            return torch.randn(rows, cols, generator=generator) * std

        self.register_buffer("key_embedding", draw(config.num_keys, d, 1.0))  # (num_keys, D) fixed
        self.register_buffer("value_embedding", draw(config.num_values, d, 1.0))  # (num_values, D) fixed
        std = config.init_scale / math.sqrt(d)  # unit-variance x -> q, k, v entries of std init_scale
        self.w_q = torch.nn.Parameter(draw(d, e, std))  # (D, E)
        self.w_k = torch.nn.Parameter(draw(d, e, std))  # (D, E)
        self.w_v = torch.nn.Parameter(draw(d, ev, std))  # (D, Ev)
        self.w_o = torch.nn.Parameter(draw(ev, config.num_values, 1.0 / math.sqrt(ev)))  # (Ev, num_values)
        self.scale = config.scale

    def forward(self, batch: RecallBatch) -> tuple[torch.Tensor, SDPATrace]:
        """Value logits (B, num_values) and the SDPA trace of the query's attention row (B, 1, 1, S)."""
        slots = (self.key_embedding[batch.keys] + self.value_embedding[batch.values]) / math.sqrt(2)  # (B, S, D)
        query_x = self.key_embedding[batch.query].unsqueeze(1)  # (B, 1, D)
        q = (query_x @ self.w_q).unsqueeze(1)  # (B, 1, 1, E)   one head, one query
        k = (slots @ self.w_k).unsqueeze(1)  # (B, 1, S, E)
        v = (slots @ self.w_v).unsqueeze(1)  # (B, 1, S, Ev)
        trace = scaled_dot_product_attention(q, k, v, scale=self.scale)
        read = trace.output[:, 0, 0, :]  # (B, Ev) what the query pulled out of the slots
        logits = read @ self.w_o  # (B, num_values)
        return logits, trace


@dataclass(frozen=True)
class TrainingSnapshot:
    """Progress of one run so far: per-step histories (plain floats) and the probe's attention now."""

    config: TrainingConfig
    step: int  # steps done
    losses: tuple[float, ...]  # cross-entropy per step, on that step's fresh batch
    accuracies: tuple[float, ...]  # fraction answered right per step
    entropies: tuple[float, ...]  # mean entropy (nats) of the query's attention row per step
    score_grads: tuple[float, ...]  # median over examples of ||d loss_b / d(softmax input)_b|| per step
    score_stds: tuple[float, ...]  # std of the softmax input (scores * scale) per step
    probe_weights: np.ndarray  # (P, S) attention of the probe queries over their slots, now
    probe_target_slot: np.ndarray  # (P,) the slot each probe query should attend to
    elapsed_s: float  # wall time of the run so far
    done: bool  # True on the last snapshot of a run

    @property
    def variant(self) -> str:
        return self.config.variant

    def curves(self) -> dict[str, np.ndarray]:
        """Histories as float64 arrays, keyed as the figures name them; ``step`` counts from 1."""
        return {
            "step": np.arange(1, self.step + 1, dtype=np.float64),
            "loss": np.asarray(self.losses, dtype=np.float64),
            "accuracy": np.asarray(self.accuracies, dtype=np.float64),
            "entropy": np.asarray(self.entropies, dtype=np.float64),
            "score_grad": np.asarray(self.score_grads, dtype=np.float64),
        }


def _optimizer(config: TrainingConfig, params: list[torch.nn.Parameter]) -> torch.optim.Optimizer:
    if config.optimizer == "adam":
        return torch.optim.Adam(params, lr=config.learning_rate)
    return torch.optim.SGD(params, lr=config.learning_rate)


def _run(config: TrainingConfig) -> Iterator[TrainingSnapshot]:
    """The training loop itself, without slot or thread handling."""
    init_gen = torch.Generator().manual_seed(config.seed)
    data_gen = torch.Generator().manual_seed(config.seed + 1_000_003)
    probe_gen = torch.Generator().manual_seed(config.seed + 2_000_003)
    model = RecallAttention(config, init_gen)
    optimizer = _optimizer(config, list(model.parameters()))
    probe = make_batch(config.probe_examples, config.num_slots, config.num_keys, config.num_values, probe_gen)
    losses: list[float] = []
    accuracies: list[float] = []
    entropies: list[float] = []
    score_grads: list[float] = []
    score_stds: list[float] = []
    start = time.perf_counter()
    for step in range(1, config.steps + 1):
        batch = make_batch(config.batch_size, config.num_slots, config.num_keys, config.num_values, data_gen)
        logits, trace = model(batch)
        trace.scaled.retain_grad()  # the softmax input, where saturation bites
        loss = torch.nn.functional.cross_entropy(logits, batch.target)  # mean over the batch
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            weights = trace.weights[:, 0, 0, :]  # (B, S)
            row_grads = trace.scaled.grad[:, 0, 0, :] * config.batch_size  # (B, S) d loss_b / d z_b
            losses.append(float(loss))
            accuracies.append(float((logits.argmax(dim=-1) == batch.target).float().mean()))
            entropies.append(float(row_entropy(weights).mean()))  # nats, 0 = one-hot
            score_grads.append(float(row_grads.norm(dim=-1).median()))
            score_stds.append(float(trace.scaled.std()))
        if step % config.snapshot_every == 0 or step == config.steps:
            with torch.no_grad():
                _, probe_trace = model(probe)
            yield TrainingSnapshot(
                config=config,
                step=step,
                losses=tuple(losses),
                accuracies=tuple(accuracies),
                entropies=tuple(entropies),
                score_grads=tuple(score_grads),
                score_stds=tuple(score_stds),
                probe_weights=probe_trace.weights[:, 0, 0, :].numpy().astype(np.float64),  # (P, S)
                probe_target_slot=probe.target_slot.numpy().copy(),  # (P,)
                elapsed_s=time.perf_counter() - start,
                done=step == config.steps,
            )


def train_steps(config: TrainingConfig, *, guard: AbstractContextManager | None = None) -> Iterator[TrainingSnapshot]:
    """Train one variant, yielding a snapshot every ``snapshot_every`` steps and after the last.

    The same config gives the same numbers. To stop early, stop iterating (or call ``.close()``).
    ``guard`` (e.g. a server's training slot) is entered at the first step and left when the generator
    ends, is closed or is collected.
    """
    with guard or nullcontext(), limited_threads(config.num_threads):
        yield from _run(config)


def variants(config: TrainingConfig, *, scaled: bool = True, unscaled: bool = True) -> tuple[TrainingConfig, ...]:
    """The runs to compare: ``config`` with scaling on and/or off, everything else equal."""
    chosen = [flag for flag, wanted in ((True, scaled), (False, unscaled)) if wanted]
    if not chosen:
        raise ValueError("choose at least one variant (scaled or unscaled)")
    return tuple(replace(config, scaled=flag) for flag in chosen)


def train_side_by_side(
    configs: tuple[TrainingConfig, ...], *, guard: AbstractContextManager | None = None
) -> Iterator[tuple[TrainingSnapshot, ...]]:
    """Advance several runs in lockstep (one chunk each per yield), under one ``guard`` as ``train_steps``.

    Yields a tuple with the latest snapshot of every run; a run that has finished repeats its last
    one. The last yield has ``done`` set on every snapshot.
    """
    if not configs:
        raise ValueError("give at least one config")
    with guard or nullcontext(), limited_threads(max(c.num_threads for c in configs)):
        runs = [_run(c) for c in configs]
        latest = [next(run) for run in runs]
        yield tuple(latest)
        while not all(s.done for s in latest):
            latest = [s if s.done else next(run) for s, run in zip(latest, runs, strict=True)]
            yield tuple(latest)


def run_to_end(config: TrainingConfig) -> TrainingSnapshot:
    """Train one variant to the end and return its last snapshot."""
    return deque(train_steps(config), maxlen=1)[0]  # steps >= 1: at least one snapshot


# ---- reading the numbers: each run reduced to what a verdict needs (in words: ui/training_verdict.py) ----

SATURATED_ENTROPY = 0.25  # an attention row is "nearly one-hot" below this fraction of log(S)


@dataclass(frozen=True)
class RunSummary:
    """What one run measured, reduced to the numbers a verdict needs."""

    variant: str
    steps_done: int
    final_loss: float  # mean over the last tenth of the steps done (at least 5)
    final_accuracy: float
    steps_to_learn: int | None  # first step where the rolling accuracy reached LEARNED_ACCURACY
    initial_score_std: float  # std of the softmax input at step 1
    initial_entropy: float  # mean attention entropy at step 1 (nats)
    initial_score_grad: float  # median per-example gradient at the softmax input, step 1
    saturated_step: int | None  # first step with a nearly one-hot softmax while still answering wrong
    saturated_score_std: float  # std of the softmax input at that step (nan if never)
    saturated_entropy: float  # attention entropy at that step (nan if never)
    diverged: bool  # a loss became NaN or infinite


def summarize(snapshot: TrainingSnapshot) -> RunSummary:
    """Reduce a snapshot's histories to a ``RunSummary``."""
    config = snapshot.config
    losses = np.asarray(snapshot.losses, dtype=np.float64)
    accuracies = np.asarray(snapshot.accuracies, dtype=np.float64)
    entropies = np.asarray(snapshot.entropies, dtype=np.float64)
    window = min(len(losses), max(5, len(losses) // 10))
    rolling = np.convolve(accuracies, np.ones(window) / window, mode="valid")  # (steps - window + 1,)
    reached = np.flatnonzero(rolling >= LEARNED_ACCURACY)
    stuck = np.flatnonzero((entropies < SATURATED_ENTROPY * config.max_entropy) & (accuracies < 0.5))
    first_stuck = int(stuck[0]) if stuck.size else None
    return RunSummary(
        variant=snapshot.variant,
        steps_done=snapshot.step,
        final_loss=float(losses[-window:].mean()),
        final_accuracy=float(accuracies[-window:].mean()),
        steps_to_learn=int(reached[0] + window) if reached.size else None,
        initial_score_std=snapshot.score_stds[0],
        initial_entropy=snapshot.entropies[0],
        initial_score_grad=snapshot.score_grads[0],
        saturated_step=None if first_stuck is None else first_stuck + 1,
        saturated_score_std=float("nan") if first_stuck is None else snapshot.score_stds[first_stuck],
        saturated_entropy=float("nan") if first_stuck is None else snapshot.entropies[first_stuck],
        diverged=not bool(np.isfinite(losses).all()),
    )
