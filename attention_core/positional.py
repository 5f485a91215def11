"""Positional encodings as named functions.

Attention on its own ignores order: permute the tokens and the outputs permute the same way. Each
encoding here breaks that symmetry in a different place:

- ``none``          nothing added: a bag of words.
- ``sinusoidal``    fixed sin/cos waves added to X (Vaswani et al.).
- ``learned``       a table of one vector per position added to X (BERT, GPT-2); a real model's
                    table or a seeded random one.
- ``rotary``        q and k rotated by an angle that grows with position (RoPE: Llama, Mistral).
- ``alibi``         no change to X; a bias -slope * |i - j| added to the scores (ALiBi).

``apply(name, x, ...)`` is the one place that turns a name into those three hooks (X, q and k, the
scores); the pipeline and the pitfalls lab both call it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

ENCODINGS = ("none", "sinusoidal", "learned", "rotary", "alibi")


def no_encoding(num_positions: int, d_model: int, *, dtype=torch.float32, device=None) -> torch.Tensor:
    """(n, d_model) zeros: X is left as it is."""
    return torch.zeros(num_positions, d_model, dtype=dtype, device=device)


def sinusoidal(
    num_positions: int, d_model: int, *, base: float = 10000.0, dtype=torch.float32, device=None
) -> torch.Tensor:
    """(n, d_model) with PE[p, 2i] = sin(p / base^(2i/d)) and PE[p, 2i+1] = cos(p / base^(2i/d))."""
    positions = torch.arange(num_positions, dtype=torch.float64, device=device).unsqueeze(1)  # (n, 1)
    pair = torch.arange(0, d_model, 2, dtype=torch.float64, device=device)  # (ceil(d/2),) 2i
    angles = positions / base ** (pair / d_model)  # (n, ceil(d/2)) p / base^(2i/d)
    table = torch.zeros(num_positions, d_model, dtype=torch.float64, device=device)
    table[:, 0::2] = torch.sin(angles)  # even dims
    table[:, 1::2] = torch.cos(angles[:, : d_model // 2])  # odd dims
    return table.to(dtype)


def learned(
    num_positions: int,
    d_model: int,
    *,
    table: torch.Tensor | None = None,
    seed: int = 0,
    std: float = 1.0,
    dtype=torch.float32,
    device=None,
) -> torch.Tensor:
    """(n, d_model): rows of a learned position table, or a seeded random one when none is given."""
    if table is not None:
        if table.dim() != 2 or table.shape[1] != d_model or table.shape[0] < num_positions:
            raise ValueError(f"position table {tuple(table.shape)} cannot cover ({num_positions}, {d_model})")
        return table[:num_positions].to(dtype=dtype, device=device)
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(num_positions, d_model, generator=generator, dtype=torch.float64) * std).to(
        dtype=dtype, device=device
    )


def rotary_cos_sin(
    num_positions: int, head_dim: int, *, base: float = 10000.0, dtype=torch.float32, device=None
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin tables (n, head_dim) for RoPE in the half-split layout Hugging Face Llama uses."""
    if head_dim % 2:
        raise ValueError(f"rotary encoding needs an even head dim, got {head_dim}")
    inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float64, device=device) / head_dim)  # (E/2,)
    angles = torch.arange(num_positions, dtype=torch.float64, device=device).unsqueeze(1) * inv_freq  # (n, E/2)
    angles = torch.cat((angles, angles), dim=-1)  # (n, E)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)  # (..., E/2) each
    return torch.cat((-second, first), dim=-1)  # (..., E)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate (..., n, E) query or key vectors by position: x cos + rotate_half(x) sin."""
    return x * cos + _rotate_half(x) * sin


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """(H,) geometric slopes 2^(-8/H), 2^(-16/H), ... (Press et al.; exact for powers of two)."""
    closest = 2 ** math.floor(math.log2(num_heads))
    start = 2 ** (-8 / closest)
    slopes = [start ** (i + 1) for i in range(closest)]
    if closest < num_heads:  # the paper's rule for head counts that are not powers of two
        extra = 2 ** (-4 / closest)
        slopes += [extra ** (2 * i + 1) for i in range(num_heads - closest)]
    return torch.tensor(slopes, dtype=torch.float64)


def alibi_bias(
    num_heads: int, num_queries: int, num_keys: int | None = None, *, dtype=torch.float32, device=None
) -> torch.Tensor:
    """(H, L, S) bias -slope_h * |i - j| added to the scores: far keys are penalised linearly."""
    num_keys = num_queries if num_keys is None else num_keys
    rows = torch.arange(num_queries, device=device).unsqueeze(1)  # (L, 1)
    cols = torch.arange(num_keys, device=device).unsqueeze(0)  # (1, S)
    distance = (rows - cols).abs().to(torch.float64)  # (L, S) |i - j|
    slopes = alibi_slopes(num_heads).to(device)  # (H,)
    return (-slopes.view(-1, 1, 1) * distance).to(dtype)  # (H, L, S)


@dataclass(frozen=True)
class Positions:
    """Where one encoding enters attention: in X, in q and k, or in the scores."""

    x: torch.Tensor  # (L, D) the input, with the table added for sinusoidal / learned
    rotate: Callable[[torch.Tensor], torch.Tensor] | None  # rotary: (..., L, E) q or k -> rotated
    score_bias: torch.Tensor | None  # (H, L, L) ALiBi's bias, added to the scores; None otherwise


def apply(
    name: str,
    x: torch.Tensor,
    *,
    heads: int,
    head_dim: int,
    seed: int = 0,
    inside_x: str | None = None,
    rotary: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> Positions:
    """Attach the encoding ``name`` (one of ``ENCODINGS``) to X (L, D) for ``heads`` heads of ``head_dim``.

    ``inside_x``: the encoding X already carries (a real model's layer input has its learned or
    sinusoidal table inside): that one is not added twice. ``rotary``: the model's own (cos, sin)
    tables (L, E), used instead of computing them. Tables come in X's dtype and device; the learned
    table is a seeded random one.
    """
    if name not in ENCODINGS:
        raise ValueError(f"unknown encoding {name!r}; choose one of {', '.join(ENCODINGS)}")
    length, d_model = x.shape[-2:]
    like = {"dtype": x.dtype, "device": x.device}
    if name == "sinusoidal" and inside_x != name:
        x = x + sinusoidal(length, d_model, **like)  # (L, D)
    elif name == "learned" and inside_x != name:
        x = x + learned(length, d_model, seed=seed, **like)  # (L, D) seeded table
    rotate = None
    if name == "rotary":
        cos, sin = rotary if rotary is not None else rotary_cos_sin(length, head_dim, **like)  # (L, E) each

        def rotate(t: torch.Tensor) -> torch.Tensor:
            return apply_rotary(t, cos.to(t), sin.to(t))

    bias = alibi_bias(heads, length, **like) if name == "alibi" else None  # (H, L, L)
    return Positions(x=x, rotate=rotate, score_bias=bias)
