"""How much of the first token reaches position n: a recurrent net's state against attention's direct path.

A recurrent net folds the sequence into one state, one step at a time:

    h_t = f(x_t, h_{t-1})
    dh_n/dx_1 = (dh_n/dh_{n-1}) (dh_{n-1}/dh_{n-2}) ... (dh_2/dh_1) (dh_1/dx_1)   # n - 1 factors

so the first token's influence on h_n is a product of n - 1 step Jacobians and, for a net whose steps
shrink vectors (a tanh RNN at its usual initialisation, a GRU that half-forgets), it fades roughly
geometrically with n. One causal self-attention layer reads x_1 directly at every position:

    o_n = sum_{j <= n} alpha_{n,j} v_j,   v_1 = x_1 W^V   ->   direct part of do_n/dx_1 = alpha_{n,1} (W^V)^T

one hop, one weight, whatever n is (the rest of do_n/dx_1 flows through the scores).

``first_token_jacobian_norms`` measures ||dh_n/dx_1||_F for every n with torch's forward-mode
autograd (no formula), for any causal sequence map; ``measure_bottleneck`` runs it for a seeded
``torch.nn.RNN``, a ``torch.nn.GRU`` and one attention head on the same random inputs. Hop counts
come from ``recurrence.path_lengths``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch.autograd import forward_ad

from .multihead import init_weights
from .recurrence import path_length_columns
from .sdpa import scaled_dot_product_attention

SequenceMap = Callable[[torch.Tensor], torch.Tensor]  # (B, N, D) -> (B, N, Dh), output n sees inputs 1..n


def first_token_jacobian_norms(sequence_fn: SequenceMap, x: torch.Tensor) -> np.ndarray:
    """||d out_n / d x_1||_F for n = 1..N, measured by autograd. ``x`` (N, D) -> (N,) float64.

    ``sequence_fn`` maps a batch (B, N, D) to (B, N, Dh) and must treat batch rows independently.
    Forward-mode autograd (``torch.autograd.forward_ad``) gives every Jacobian at once: the batch
    holds D copies of x, copy k nudged along e_k at x_1 only, so its output tangent at step n is
    column k of d out_n / d x_1. D passes' worth of work instead of N * Dh backward ones.
    """
    if x.dim() != 2 or x.shape[0] < 1:
        raise ValueError(f"x must be (N, D) with N >= 1, got shape {tuple(x.shape)}")
    x = x.detach()
    steps, d_in = x.shape
    tangent = torch.zeros(d_in, steps, d_in, dtype=x.dtype)  # (D, N, D)
    tangent[:, 0, :] = torch.eye(d_in, dtype=x.dtype)  # copy k: direction e_k on x_1, nothing elsewhere
    with forward_ad.dual_level():
        batch = forward_ad.make_dual(x.expand(d_in, steps, d_in).contiguous(), tangent)  # (D, N, D)
        out = sequence_fn(batch)  # (D, N, Dh)
        if out.dim() != 3 or out.shape[:2] != (d_in, steps):
            raise ValueError(f"sequence_fn must map (B, N, D) to (B, N, Dh); got {tuple(out.shape)} for N = {steps}")
        columns = forward_ad.unpack_dual(out).tangent  # (D, N, Dh)  copy k: d out_n / d x_1 . e_k
    if columns is None:  # the output does not depend on x at all
        return np.zeros(steps)
    jacobians = columns.permute(1, 2, 0)  # (N, Dh, D)  d out_n / d x_1
    return jacobians.flatten(1).norm(dim=-1).detach().to(torch.float64).numpy()  # (N,)


def _recurrent(module: torch.nn.Module) -> SequenceMap:
    return lambda batch: module(batch)[0]  # nn.RNN / nn.GRU return (all states (B, N, H), last state)


def _attention(w_q: torch.Tensor, w_k: torch.Tensor, w_v: torch.Tensor, *, direct_only: bool) -> SequenceMap:
    """One causal head. ``direct_only``: the weights are computed from a detached copy of x, so
    gradient reaches x_1 only through v_1 (the direct path alpha_{n,1} v_1)."""

    def attend(batch: torch.Tensor) -> torch.Tensor:
        scored = batch.detach() if direct_only else batch
        q, k = scored @ w_q, scored @ w_k  # (B, N, E)
        v = batch @ w_v  # (B, N, Ev)
        return scaled_dot_product_attention(q, k, v, is_causal=True).output  # (B, N, Ev)

    return attend


def _first_key_weights(x: torch.Tensor, w_q: torch.Tensor, w_k: torch.Tensor) -> np.ndarray:
    """alpha_{n,1} for n = 1..N: how much position n's query weighs the first key."""
    with torch.no_grad():
        trace = scaled_dot_product_attention(x @ w_q, x @ w_k, x, is_causal=True)  # values unused here
    return trace.weights[:, 0].numpy()  # (N,)


@dataclass(frozen=True)
class Bottleneck:
    """Measured reach of the first token, n = 1..N, for nets of width d on the same inputs."""

    n: np.ndarray  # (N,) 1..N
    norms: dict[str, np.ndarray]  # name -> (N,) ||d out_n / d x_1||_F
    first_weight: np.ndarray  # (N,) alpha_{n,1} of the attention head
    hops: dict[str, np.ndarray]  # "recurrent" (n - 1) and "attention" (1, 0 at n = 1) path lengths
    hidden: int
    seed: int

    @property
    def survival(self) -> dict[str, np.ndarray]:
        """Each norm divided by its value at n = 1 ("attention, per unit weight" also by alpha_{n,1})."""
        out = {name: values / values[0] for name, values in self.norms.items() if name != "attention (direct path)"}
        direct = self.norms["attention (direct path)"] / self.first_weight
        out["attention, direct path ÷ α(n,1)"] = direct / direct[0]
        return out


def measure_bottleneck(steps: int = 32, hidden: int = 16, *, seed: int = 0) -> Bottleneck:
    """||d out_n / d x_1|| for a seeded tanh RNN, a GRU and one causal attention head, in float64.

    Inputs x_t ~ N(0, 1) in R^hidden; RNN and GRU use torch's default initialisation, attention
    ``init_weights`` (std 1/sqrt(d)). One forward-mode pass per model, batch = hidden copies.
    """
    if not 1 <= steps <= 256 or not 1 <= hidden <= 64:
        raise ValueError(f"steps must be in 1..256 and hidden in 1..64, got {steps}, {hidden}")
    with torch.random.fork_rng(devices=[]):  # nn.RNN/GRU draw from the global generator; leave it as it was
        torch.manual_seed(seed)
        rnn = torch.nn.RNN(hidden, hidden, batch_first=True).double()
        gru = torch.nn.GRU(hidden, hidden, batch_first=True).double()
    weights = init_weights(hidden, hidden, 1, seed=seed, dtype=torch.float64, with_output=False)
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(steps, hidden, generator=generator, dtype=torch.float64)  # (N, D)
    maps = {
        "RNN (tanh)": _recurrent(rnn),
        "GRU": _recurrent(gru),
        "attention": _attention(weights.w_q, weights.w_k, weights.w_v, direct_only=False),
        "attention (direct path)": _attention(weights.w_q, weights.w_k, weights.w_v, direct_only=True),
    }
    norms = {name: first_token_jacobian_norms(fn, x) for name, fn in maps.items()}
    columns = path_length_columns(range(1, steps + 1))
    return Bottleneck(
        n=np.arange(1, steps + 1, dtype=np.float64),
        norms=norms,
        first_weight=_first_key_weights(x, weights.w_q, weights.w_k),
        hops={
            "recurrent": columns["recurrent_longest_path"],
            "attention": columns["attention_longest_path"],
        },
        hidden=hidden,
        seed=seed,
    )
