"""Attention masks as small named functions.

Every function returns a boolean tensor of shape (L, S) (or one that broadcasts to it) where
True = this query may attend to this key, the convention of torch's SDPA. Masks combine with ``&``:
``causal(6) & sliding_window(6, width=3)``. ``to_additive`` turns one into the float form some
code bases add to the scores, with a chosen fill value, to show why -1e9 is not -inf.
"""

from __future__ import annotations

import torch


def _grid(num_queries: int, num_keys: int | None, device) -> tuple[torch.Tensor, torch.Tensor]:
    if num_queries < 1 or (num_keys is not None and num_keys < 1):
        raise ValueError(f"mask sizes must be positive, got L={num_queries}, S={num_keys}")
    num_keys = num_queries if num_keys is None else num_keys
    rows = torch.arange(num_queries, device=device).unsqueeze(1)  # (L, 1) query index i
    cols = torch.arange(num_keys, device=device).unsqueeze(0)  # (1, S) key index j
    return rows, cols


def full(num_queries: int, num_keys: int | None = None, *, device=None) -> torch.Tensor:
    """(L, S) all True: every query sees every key (an encoder's self-attention)."""
    rows, cols = _grid(num_queries, num_keys, device)
    return (rows >= 0) & (cols >= 0)


def causal(num_queries: int, num_keys: int | None = None, *, device=None) -> torch.Tensor:
    """(L, S) True where j <= i: no peeking at later tokens. Aligned top-left like ``is_causal``."""
    rows, cols = _grid(num_queries, num_keys, device)
    return cols <= rows


def padding(attention_mask: torch.Tensor, num_queries: int | None = None) -> torch.Tensor:
    """From a tokenizer's attention_mask (S,) or (B, S) of 1 = real token, 0 = pad.

    Returns (L, S) for a 1-D mask, (B, 1, L, S) for a batch: every query may attend to real keys.
    """
    keep = torch.as_tensor(attention_mask).bool()  # (..., S)
    if keep.dim() not in (1, 2):
        raise ValueError(f"attention_mask must be (S,) or (B, S), got {tuple(keep.shape)}")
    num_queries = keep.shape[-1] if num_queries is None else num_queries
    rows = keep.unsqueeze(-2).expand(*keep.shape[:-1], num_queries, keep.shape[-1])  # (..., L, S)
    return rows if keep.dim() == 1 else rows.unsqueeze(1)  # (B, 1, L, S) broadcasts over heads


def sliding_window(
    num_queries: int, num_keys: int | None = None, *, width: int, causal: bool = False, device=None
) -> torch.Tensor:
    """(L, S) local attention: each query sees keys with |i - j| < width.

    With ``causal=True`` only 0 <= i - j < width: the query and the width-1 tokens before it
    (Mistral's sliding window). Cost per row drops from S to at most 2*width - 1 keys.
    """
    if width < 1:
        raise ValueError(f"window width must be >= 1, got {width}")
    rows, cols = _grid(num_queries, num_keys, device)
    distance = rows - cols  # (L, S) i - j
    if causal:
        return (distance >= 0) & (distance < width)
    return distance.abs() < width


def strided(num_queries: int, num_keys: int | None = None, *, stride: int, device=None) -> torch.Tensor:
    """(L, S) dilated pattern of the Sparse Transformer: keys with (i - j) divisible by stride."""
    if stride < 1:
        raise ValueError(f"stride must be >= 1, got {stride}")
    rows, cols = _grid(num_queries, num_keys, device)
    return (rows - cols) % stride == 0


def block_local(num_queries: int, num_keys: int | None = None, *, block: int, device=None) -> torch.Tensor:
    """(L, S) chunked attention: query i sees key j when both fall in the same block of ``block``."""
    if block < 1:
        raise ValueError(f"block size must be >= 1, got {block}")
    rows, cols = _grid(num_queries, num_keys, device)
    return rows // block == cols // block


def blocked_keys(num_queries: int, num_keys: int | None = None, *, keys=(), device=None) -> torch.Tensor:
    """(L, S) every key allowed except the hand-picked key positions in ``keys``."""
    rows, cols = _grid(num_queries, num_keys, device)
    allowed = (rows >= 0) & (cols >= 0)
    size = allowed.shape[1]
    for j in keys:
        if not -size <= int(j) < size:
            raise ValueError(f"blocked key {j} is outside 0..{size - 1}")
        allowed[:, int(j)] = False
    return allowed


def to_additive(mask: torch.Tensor, fill: float = float("-inf"), dtype=torch.float32) -> torch.Tensor:
    """Boolean mask -> float mask added to scores: 0 where allowed, ``fill`` where not.

    With fill=-inf a blocked key gets exactly zero weight. With a finite fill such as -1e9, a row
    whose keys are ALL blocked becomes uniform (every score equally -1e9): attention leaks to keys
    that were meant to be hidden. That is the classic silent mask bug.
    """
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask.bool(), fill)
