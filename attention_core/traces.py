"""Numpy traces: what the core and the real model computed, handed to viz/ and the app.

Everything here is plain numpy (float32 exactly as computed, held once and shared read-only; bool for masks) in frozen dataclasses, so the
layers above never touch torch. Shapes use SDPA's letters: L queries, S keys, D = d_model,
E = d_k (head dim of q and k), Ev = d_v, H heads.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class HeadTrace:
    """Every step of one head, numpy."""

    q: np.ndarray  # (L, E)   query vectors (after rotary where used)
    k: np.ndarray  # (S, E)   key vectors
    v: np.ndarray  # (S, Ev)  value vectors
    scores: np.ndarray | None  # (L, S)  q_i . k_j (None for the real model, which returns only weights)
    scaled: np.ndarray | None  # (L, S)  scores * scale
    masked: np.ndarray | None  # (L, S)  scaled with -inf (or the chosen fill) where blocked: the mask alone
    weights: np.ndarray  # (L, S)  softmax rows
    output: np.ndarray  # (L, Ev) weights @ v
    mask: np.ndarray  # (L, S) bool, True = may attend
    scale: float
    x: np.ndarray | None = None  # (L, D) input to the projections, when known
    w_q: np.ndarray | None = None  # (D, E)
    w_k: np.ndarray | None = None  # (D, E)
    w_v: np.ndarray | None = None  # (D, Ev)
    b_q: np.ndarray | None = None  # (E,)  bias added after X W^Q, when the model has one
    b_k: np.ndarray | None = None  # (E,)
    b_v: np.ndarray | None = None  # (Ev,)
    q_before_rotary: np.ndarray | None = None  # (L, E) X W^Q (+ b^Q) before RoPE, when q is rotated
    k_before_rotary: np.ndarray | None = None  # (S, E)
    score_bias: np.ndarray | None = None  # (L, S) position bias added after masking (ALiBi); None without one

    @property
    def rotary(self) -> bool:
        return self.q_before_rotary is not None

    @property
    def logits(self) -> np.ndarray | None:
        """(L, S) what softmax sees: the masked scores, plus the position bias where there is one (ALiBi)."""
        if self.masked is None or self.score_bias is None:
            return self.masked
        return self.masked + self.score_bias


@dataclass(frozen=True)
class LayerTrace:
    """All heads of one layer. Key/value heads are repeated to H for grouped-query models."""

    q: np.ndarray  # (H, L, E)
    k: np.ndarray  # (H, S, E)
    v: np.ndarray  # (H, S, Ev)
    scores: np.ndarray | None  # (H, L, S)  None for the real model: it returns only its weights
    scaled: np.ndarray | None  # (H, L, S)
    masked: np.ndarray | None  # (H, L, S)
    weights: np.ndarray  # (H, L, S)
    output: np.ndarray  # (H, L, Ev)
    mask: np.ndarray  # (L, S) bool, True = may attend
    scale: float
    x: np.ndarray | None = None  # (L, D)
    w_q: np.ndarray | None = None  # (H, D, E)
    w_k: np.ndarray | None = None  # (H, D, E)
    w_v: np.ndarray | None = None  # (H, D, Ev)
    b_q: np.ndarray | None = None  # (H, E)
    b_k: np.ndarray | None = None  # (H, E)  key/value heads repeated to H
    b_v: np.ndarray | None = None  # (H, Ev)
    q_before_rotary: np.ndarray | None = None  # (H, L, E)
    k_before_rotary: np.ndarray | None = None  # (H, S, E)
    score_bias: np.ndarray | None = None  # (H, L, S) position bias added after masking (ALiBi)

    @property
    def num_heads(self) -> int:
        return self.weights.shape[0]

    def head(self, h: int) -> HeadTrace:
        if not 0 <= h < self.num_heads:
            raise ValueError(f"head {h} out of range 0..{self.num_heads - 1}")

        def pick(a):
            return None if a is None else a[h]

        return HeadTrace(
            q=self.q[h],
            k=self.k[h],
            v=self.v[h],
            scores=pick(self.scores),
            scaled=pick(self.scaled),
            masked=pick(self.masked),
            weights=self.weights[h],
            output=self.output[h],
            mask=self.mask,
            scale=self.scale,
            x=self.x,
            w_q=pick(self.w_q),
            w_k=pick(self.w_k),
            w_v=pick(self.w_v),
            b_q=pick(self.b_q),
            b_k=pick(self.b_k),
            b_v=pick(self.b_v),
            q_before_rotary=pick(self.q_before_rotary),
            k_before_rotary=pick(self.k_before_rotary),
            score_bias=pick(self.score_bias),
        )


@dataclass(frozen=True)
class ReplayDiff:
    """max |core - model| for one layer when the core replays the model's captured q, k, v."""

    layer: int
    weights: float
    output: float


@dataclass(frozen=True)
class ModelFacts:
    name: str
    family: str  # "bert", "gpt2", "llama", or "scratch"
    num_layers: int
    num_heads: int
    num_kv_heads: int
    d_model: int
    d_head: int
    positional: str  # "learned", "rotary", "sinusoidal", ...
    causal: bool
    max_positions: int
    num_parameters: int


@dataclass(frozen=True)
class ModelTrace:
    """One request's answer: tokens, the own core's layer, the real model's layer, and the check."""

    tokens: tuple[str, ...]  # display labels, one per position
    token_ids: tuple[int, ...]
    offsets: tuple[tuple[int, int], ...]  # character span of each token in the text
    core: LayerTrace  # the from-scratch core, for the chosen layer (all heads)
    model: LayerTrace | None  # the real model's own q, k, v, weights for that layer
    # (layers, H, L, S) weights the model returned: an ndarray, or for a causal model the packed
    # attention_core.packed.CausalStack (same numbers; index it by layer rather than np.asarray it)
    model_attentions: np.ndarray | None
    replay: tuple[ReplayDiff, ...]  # per layer, core replaying the model's q, k, v
    facts: ModelFacts
    layer: int
    head: int
    notices: tuple[str, ...] = field(default=())
    departures: tuple[str, ...] = field(default=())  # where the core's settings differ from the model
    replay_hidden: tuple[ReplayDiff, ...] = field(default=())  # per layer, core from X and W^Q/W^K/W^V
    core_vs_model: float | None = None  # max |core - model| weights over the chosen layer's heads
    # False: built from a first look at the layers up to this one (model_attentions None until every layer is)
    complete: bool = True
