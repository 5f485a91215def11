"""Training lab: does scaling by 1/sqrt(d_k) decide whether one attention layer learns?

The toy task is associative recall, generated on the fly from a seed. Each example holds S slots,
every slot a (key, value) pair with distinct keys, plus one query token that names one of the keys;
the target is the value stored beside that key:

    slots  (k3, v7) (k0, v2) (k9, v7) (k5, v1)      query k9   ->   target v7

One attention layer can solve it in a single hop: the query attends to the slot whose key matches
and reads the value off it. The model (all embeddings fixed and random, only the projections learn):

    x_j = (E_key[key_j] + E_val[value_j]) / sqrt(2)     # (B, S, D) one row per slot
    x_q = E_key[query]                                   # (B, 1, D) the query token
    q = x_q W^Q,  k = x W^K,  v = x W^V                  # (B, 1, 1, E), (B, 1, S, E), (B, 1, S, Ev)
    a = softmax(q k^T * scale)                           # (B, 1, 1, S) scale = 1/sqrt(E) or 1
    logits = (a v) W^O                                   # (B, num_values)

With ``init_scale = 1`` the entries of q and k start with unit variance, so the raw score q . k has
standard deviation sqrt(d_k): at d_k = 256 that is 16, softmax is nearly one-hot on a random slot
and the gradient reaching the scores vanishes. Dividing by sqrt(d_k) brings the spread back to 1.

``train_steps(config)`` is a generator that yields a ``TrainingSnapshot`` (plain floats and numpy,
never tensors) every ``config.snapshot_every`` steps, so a caller can draw progress chunk by chunk
and stop by simply not asking for the next one. At most ``MAX_CONCURRENT_TRAININGS`` trainings run
at once in this process (a semaphore); the thread count is torch's own (``torch.set_num_threads``
set by the caller is respected, never changed here).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

import numpy as np
import torch

from .sdpa import scaled_dot_product_attention

MAX_CONCURRENT_TRAININGS = 2
_TRAINING_SLOTS = threading.BoundedSemaphore(MAX_CONCURRENT_TRAININGS)


class TrainingBusyError(RuntimeError):
    """Raised when every training slot stayed taken for the whole wait."""


@dataclass(frozen=True)
class TrainingConfig:
    """One training run. Defaults are chosen to show the article's effect on a 2-core CPU in seconds."""

    d_k: int = 256  # E: width of q and k (the dimension the scaling is about)
    scaled: bool = True  # multiply the scores by 1/sqrt(d_k), or leave them raw (scale 1)
    init_scale: float = 1.0  # per-entry std of q, k, v at initialisation (1 = unit variance)
    learning_rate: float = 1e-2
    steps: int = 300
    optimizer: str = "adam"  # "adam" or "sgd"
    num_slots: int = 8  # S: (key, value) pairs per example, the keys the query chooses among
    num_keys: int = 16  # key vocabulary (>= num_slots, keys in one example are distinct)
    num_values: int = 16  # value vocabulary = the classes; chance accuracy is 1 / num_values
    d_model: int = 32  # D: width of the fixed random embeddings
    d_v: int = 32  # Ev: width of the values (kept apart from d_k so only d_k changes the scores)
    batch_size: int = 64  # fresh examples per step
    seed: int = 0  # one seed fixes the embeddings, the initial weights and every batch
    snapshot_every: int = 10  # yield a snapshot after this many steps (and after the last)
    probe_examples: int = 8  # fixed examples whose attention rows the snapshots carry

    def __post_init__(self) -> None:
        positive = ("d_k", "steps", "num_slots", "num_keys", "num_values", "d_model", "d_v", "batch_size")
        for name in (*positive, "snapshot_every", "probe_examples"):
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
    def chance_loss(self) -> float:
        """Cross-entropy of guessing uniformly over the values: log(num_values)."""
        return math.log(self.num_values)

    @property
    def max_entropy(self) -> float:
        """Entropy of a uniform attention row over the slots: log(num_slots)."""
        return math.log(self.num_slots)


@dataclass(frozen=True)
class RecallBatch:
    """A batch of the associative-recall task (integer tensors)."""

    keys: torch.Tensor  # (B, S) distinct key ids per example
    values: torch.Tensor  # (B, S) value id stored beside each key
    query: torch.Tensor  # (B,) one of that example's keys
    target_slot: torch.Tensor  # (B,) the slot whose key equals the query
    target: torch.Tensor  # (B,) values[b, target_slot[b]]: what the model must answer


def make_batch(
    batch_size: int, num_slots: int, num_keys: int, num_values: int, generator: torch.Generator
) -> RecallBatch:
    """Draw ``batch_size`` recall examples: distinct keys per example, values with repeats allowed."""
    if num_keys < num_slots:
        raise ValueError(f"num_keys ({num_keys}) must be >= num_slots ({num_slots})")
    noise = torch.rand(batch_size, num_keys, generator=generator)  # (B, num_keys)
    keys = noise.argsort(dim=-1)[:, :num_slots]  # (B, S) a random subset, in random order
    values = torch.randint(num_values, (batch_size, num_slots), generator=generator)  # (B, S)
    target_slot = torch.randint(num_slots, (batch_size,), generator=generator)  # (B,)
    rows = torch.arange(batch_size)
    query = keys[rows, target_slot]  # (B,)
    target = values[rows, target_slot]  # (B,)
    return RecallBatch(keys=keys, values=values, query=query, target_slot=target_slot, target=target)


class RecallAttention(torch.nn.Module):
    """One attention head over the slots, read out to value logits. Embeddings are fixed buffers."""

    def __init__(self, config: TrainingConfig, generator: torch.Generator) -> None:
        super().__init__()
        d, e, ev = config.d_model, config.d_k, config.d_v

        def draw(*shape: int, std: float) -> torch.Tensor:
            return torch.randn(*shape, generator=generator) * std

        self.register_buffer("key_embedding", draw(config.num_keys, d, std=1.0))  # (num_keys, D)
        self.register_buffer("value_embedding", draw(config.num_values, d, std=1.0))  # (num_values, D)
        std = config.init_scale / math.sqrt(d)  # unit-variance x -> q, k, v entries with std init_scale
        self.w_q = torch.nn.Parameter(draw(d, e, std=std))  # (D, E)
        self.w_k = torch.nn.Parameter(draw(d, e, std=std))  # (D, E)
        self.w_v = torch.nn.Parameter(draw(d, ev, std=std))  # (D, Ev)
        self.w_o = torch.nn.Parameter(draw(ev, config.num_values, std=1.0 / math.sqrt(ev)))  # (Ev, num_values)
        self.scale = config.scale

    def forward(self, batch: RecallBatch) -> tuple[torch.Tensor, object]:
        """Value logits (B, num_values) and the SDPA trace of the query's attention row."""
        slots = (self.key_embedding[batch.keys] + self.value_embedding[batch.values]) / math.sqrt(2)  # (B, S, D)
        query_x = self.key_embedding[batch.query].unsqueeze(1)  # (B, 1, D)
        q = (query_x @ self.w_q).unsqueeze(1)  # (B, 1, L=1, E)  one head
        k = (slots @ self.w_k).unsqueeze(1)  # (B, 1, S, E)
        v = (slots @ self.w_v).unsqueeze(1)  # (B, 1, S, Ev)
        trace = scaled_dot_product_attention(q, k, v, scale=self.scale)
        read = trace.output[:, 0, 0, :]  # (B, Ev) the value the query pulled out
        logits = read @ self.w_o  # (B, num_values)
        return logits, trace


@dataclass(frozen=True)
class TrainingSnapshot:
    """Progress of one run so far: per-step histories (plain floats) and the probe's attention now."""

    config: TrainingConfig
    step: int  # steps done
    losses: tuple[float, ...]  # cross-entropy per step (on that step's fresh batch)
    accuracies: tuple[float, ...]  # fraction answered right per step
    entropies: tuple[float, ...]  # mean entropy (nats) of the query's attention row per step
    score_grad_norms: tuple[float, ...]  # ||dLoss/d(softmax input)|| per step, summed over the batch
    score_stds: tuple[float, ...]  # std of the softmax input (scores * scale) per step
    probe_weights: np.ndarray  # (P, S) attention of the probe queries over their slots, now
    probe_target_slot: np.ndarray  # (P,) which slot each probe query should attend to
    elapsed_s: float  # wall time of the run so far
    done: bool  # True on the last snapshot of a run

    @property
    def variant(self) -> str:
        return "scaled" if self.config.scaled else "unscaled"

    def final(self, name: str, window: int = 20) -> float:
        """Mean of the last ``window`` entries of a history (``losses``, ``accuracies``, ...)."""
        values = getattr(self, name)
        if not values:
            return float("nan")
        tail = values[-window:]
        return float(sum(tail) / len(tail))


@contextmanager
def training_slot(timeout_s: float = 30.0) -> Iterator[None]:
    """Hold one of the process-wide training slots; raise TrainingBusyError after ``timeout_s``."""
    if not _TRAINING_SLOTS.acquire(timeout=timeout_s):
        raise TrainingBusyError(
            f"{MAX_CONCURRENT_TRAININGS} trainings are already running; try again in a few seconds"
        )
    try:
        yield
    finally:
        _TRAINING_SLOTS.release()


def _optimizer(config: TrainingConfig, params: list[torch.nn.Parameter]) -> torch.optim.Optimizer:
    if config.optimizer == "adam":
        return torch.optim.Adam(params, lr=config.learning_rate)
    return torch.optim.SGD(params, lr=config.learning_rate)


def train_steps(config: TrainingConfig, *, slot_timeout_s: float = 30.0) -> Iterator[TrainingSnapshot]:
    """Train one variant, yielding a snapshot every ``snapshot_every`` steps and after the last.

    Deterministic for a seed (same seed, same numbers). Stopping early: stop iterating (or call
    ``.close()``); the training slot is released when the generator is closed or collected.
    """
    with training_slot(slot_timeout_s):
        init_gen = torch.Generator().manual_seed(config.seed)
        data_gen = torch.Generator().manual_seed(config.seed + 1_000_003)
        probe_gen = torch.Generator().manual_seed(config.seed + 2_000_003)
        model = RecallAttention(config, init_gen)
        optimizer = _optimizer(config, list(model.parameters()))
        probe = make_batch(config.probe_examples, config.num_slots, config.num_keys, config.num_values, probe_gen)
        losses: list[float] = []
        accuracies: list[float] = []
        entropies: list[float] = []
        grad_norms: list[float] = []
        score_stds: list[float] = []
        start = time.perf_counter()
        for step in range(1, config.steps + 1):
            batch = make_batch(config.batch_size, config.num_slots, config.num_keys, config.num_values, data_gen)
            logits, trace = model(batch)
            trace.scaled.retain_grad()  # the softmax input: where saturation bites
            loss = torch.nn.functional.cross_entropy(logits, batch.target)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            with torch.no_grad():
                weights = trace.weights[:, 0, 0, :]  # (B, S)
                entropy = torch.special.entr(weights).sum(dim=-1).mean()  # nats, 0 = one-hot
                accuracy = (logits.argmax(dim=-1) == batch.target).float().mean()
                losses.append(float(loss))
                accuracies.append(float(accuracy))
                entropies.append(float(entropy))
                grad_norms.append(float(trace.scaled.grad.norm()))
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
                    score_grad_norms=tuple(grad_norms),
                    score_stds=tuple(score_stds),
                    probe_weights=probe_trace.weights[:, 0, 0, :].numpy().astype(np.float64),
                    probe_target_slot=probe.target_slot.numpy().copy(),
                    elapsed_s=time.perf_counter() - start,
                    done=step == config.steps,
                )


def variants(config: TrainingConfig, *, scaled: bool = True, unscaled: bool = True) -> tuple[TrainingConfig, ...]:
    """The configs to compare: the same run with scaling on and/or off (everything else equal)."""
    chosen = [flag for flag, wanted in ((True, scaled), (False, unscaled)) if wanted]
    if not chosen:
        raise ValueError("choose at least one variant (scaled or unscaled)")
    return tuple(replace(config, scaled=flag) for flag in chosen)


def train_side_by_side(configs: tuple[TrainingConfig, ...]) -> Iterator[tuple[TrainingSnapshot, ...]]:
    """Advance several runs in lockstep, one chunk each per yield, so a page can draw them together.

    Yields a tuple with the latest snapshot of every run; a run that finished keeps its last one.
    """
    runs = [train_steps(c) for c in configs]
    latest: list[TrainingSnapshot | None] = [None] * len(runs)
    try:
        active = set(range(len(runs)))
        while active:
            for i in sorted(active):
                try:
                    latest[i] = next(runs[i])
                except StopIteration:
                    active.discard(i)
            if all(s is not None for s in latest) and active:
                yield tuple(latest)  # type: ignore[arg-type]
        if all(s is not None for s in latest):
            pass
    finally:
        for run in runs:
            run.close()


def run_to_end(config: TrainingConfig) -> TrainingSnapshot:
    """Train one variant to the end and return its last snapshot."""
    last = None
    for last in train_steps(config):
        pass
    assert last is not None
    return last
