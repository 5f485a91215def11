"""A causal model's attention weights kept as their lower triangles: the same numbers in half the bytes.

A decoder's returned weights are exactly 0 above the diagonal (softmax of a finfo.min score underflows
to +0.0), so storing only the lower triangle of every (L, L) map loses nothing. ``CausalStack`` keeps
(layers, H, L(L+1)/2) float32 and hands out each layer as a full (H, L, L) array on demand, bit for bit
the array the model returned (SmolLM2 at 1,024 tokens: 1,080 MiB -> 540 MiB for the whole capture).

It reads like the (layers, H, L, S) ndarray it replaces: ``shape``, ``len``, iteration over layers,
``stack[layer]``, ``stack[layer, head]``, ``np.asarray(stack)`` (which builds the full array: avoid it
for long inputs). Arrays handed out are read-only and shared (the last few layers are kept).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from functools import lru_cache

import numpy as np
import torch

KEEP_LAYERS = 2  # unpacked layers kept for the next caller (a view reads its layer many times)


@lru_cache(maxsize=8)
def _row_starts(length: int) -> np.ndarray:
    """(L + 1,) where each row's run starts in a packed triangle: row i holds keys 0..i."""
    return np.concatenate([[0], np.cumsum(np.arange(1, length + 1))]).astype(np.int64)


def upper_is_zero(weights: torch.Tensor) -> bool:
    """True when every cell above the diagonal of the (..., L, L) maps is +0.0, bit for bit."""
    if weights.dim() < 2 or weights.shape[-1] != weights.shape[-2] or weights.dtype != torch.float32:
        return False
    # The first query's keys after it first (..., L-1): a bidirectional encoder's maps are non-zero there, and
    # the answer is known without copying every map (MiniLM at 512 tokens: 0.11 s of the capture's 0.6 s).
    if bool(weights[..., 0, 1:].view(torch.int32).any()):
        return False
    upper = torch.triu(weights, diagonal=1)  # (..., L, L) zeros on and below the diagonal
    return not bool(upper.view(torch.int32).any())  # -0.0 and NaN count as non-zero


def pack(weights: np.ndarray, out: np.ndarray) -> None:
    """Write the lower triangles of (H, L, L) ``weights`` into ``out`` (H, L(L+1)/2), row by row."""
    length = weights.shape[-1]
    starts = _row_starts(length)
    for row in range(length):
        out[:, starts[row] : starts[row + 1]] = weights[:, row, : row + 1]  # keys 0..row of query ``row``


def _aligned_empty(shape: tuple[int, ...]) -> np.ndarray:
    """float32 memory from torch's allocator (64-byte aligned, like the dense buffer the model's weights
    came in), so a layer handed out sits in memory as it did before packing."""
    return torch.empty(shape, dtype=torch.float32).numpy()


def unpack(packed: np.ndarray, length: int, out: np.ndarray | None = None) -> np.ndarray:
    """(H, L, L) float32 from (H, L(L+1)/2): the lower triangles back in place, +0.0 above (one pass)."""
    starts = _row_starts(length)
    full = _aligned_empty((packed.shape[0], length, length)) if out is None else out  # (H, L, L)
    for row in range(length):
        full[:, row, : row + 1] = packed[:, starts[row] : starts[row + 1]]  # keys 0..row
        full[:, row, row + 1 :] = 0.0  # keys after the query: exactly 0, as the model returned
    return full


class CausalStack:
    """(layers, H, L, L) causal attention weights stored as lower triangles (see the module docstring)."""

    def __init__(self, packed: np.ndarray, length: int) -> None:
        if packed.ndim != 3 or packed.shape[-1] != length * (length + 1) // 2:
            raise ValueError(f"packed must be (layers, H, L(L+1)/2) for L={length}, got {packed.shape}")
        self.packed = packed  # (layers, H, L(L+1)/2)
        self.length = length
        self._kept: OrderedDict[int, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def shape(self) -> tuple[int, int, int, int]:
        layers, heads, _ = self.packed.shape
        return (layers, heads, self.length, self.length)

    ndim = 4
    dtype = np.dtype(np.float32)

    @property
    def nbytes(self) -> int:
        return int(self.packed.nbytes)

    def __len__(self) -> int:
        return self.packed.shape[0]

    def layer(self, index: int) -> np.ndarray:
        """(H, L, L) the layer's weights, read-only; the last ``KEEP_LAYERS`` asked for are kept."""
        index = range(len(self))[index]  # negative indices, and IndexError past the end
        with self._lock:
            if index in self._kept:
                self._kept.move_to_end(index)
                return self._kept[index]
        full = unpack(self.packed[index], self.length)  # (H, L, L)
        full.flags.writeable = False
        with self._lock:
            self._kept[index] = full
            while len(self._kept) > KEEP_LAYERS:
                self._kept.popitem(last=False)
        return full

    def __getitem__(self, key):
        if isinstance(key, tuple):
            return self.layer(int(key[0]))[key[1:]] if key else self
        if isinstance(key, (int, np.integer)):
            return self.layer(int(key))
        return np.asarray(self)[key]

    def __iter__(self):
        for index in range(len(self)):
            yield self.layer(index)

    def __array__(self, dtype=None, copy=None):
        full = _aligned_empty(self.shape)  # (layers, H, L, L)
        for index, layer in enumerate(self.packed):
            unpack(layer, self.length, out=full[index])
        return full if dtype is None else full.astype(dtype, copy=False)

    def tensor(self, index: int) -> torch.Tensor:
        """The layer as a torch tensor (zero-copy over ``layer(index)``; read-only: do not write to it)."""
        import warnings

        with warnings.catch_warnings():  # torch warns that the numpy array is not writable
            warnings.simplefilter("ignore", UserWarning)
            return torch.from_numpy(self.layer(index))


class LayerSink:
    """The weights each attention layer returns, taken as the forward pass runs (a forward hook per layer)
    and packed at once when causal, so the pass never holds every layer's full maps (SmolLM2 at 1,024
    tokens: 1.1 GB the model would collect with ``output_attentions=True``)."""

    def __init__(self, layers: int) -> None:
        self.layers = layers
        self.packed: np.ndarray | None = None  # (layers, H, L(L+1)/2), made at the first causal layer
        self.length = 0
        self.dense: dict[int, torch.Tensor] = {}  # layers that are not causal (or not square), as returned
        self.seen: set[int] = set()

    def add(self, index: int, weights: torch.Tensor) -> None:
        """Layer ``index``'s (H, L, S) float32 CPU weights, bit for bit as the model returned them."""
        self.seen.add(index)
        self.dense.pop(index, None)
        heads, length = weights.shape[0], weights.shape[-1]
        fits = self.packed is None or (self.packed.shape[1] == heads and self.length == length)
        if length > 1 and fits and upper_is_zero(weights):
            if self.packed is None:
                self.packed = np.empty((self.layers, heads, length * (length + 1) // 2), dtype=np.float32)
                self.length = length
            pack(weights.numpy(), self.packed[index])
        else:
            self.dense[index] = weights

    @property
    def complete(self) -> bool:
        return len(self.seen) == self.layers

    def result(self) -> torch.Tensor | CausalStack:
        """Every layer as a CausalStack, or, when any layer is not causal, one (layers, H, L, S) float32 buffer."""
        if not self.dense:
            return CausalStack(self.packed, self.length)
        first = next(iter(self.dense.values()))
        buffer = torch.empty((self.layers, *first.shape), dtype=torch.float32)  # (layers, H, L, S)
        for index in range(self.layers):
            if index in self.dense:
                buffer[index].copy_(self.dense.pop(index))
            else:
                unpack(self.packed[index], self.length, out=buffer[index].numpy())
        return buffer


def stack_returned(returned: list) -> torch.Tensor | CausalStack:
    """The model's per-layer (1, H, L, S) weights (``output_attentions``) as one store, by ``LayerSink``:
    packed when every layer is causal, else one float32 (layers, H, L, S) buffer. Each layer's own tensor
    is released as soon as it is taken."""
    sink = LayerSink(len(returned))
    for index in range(len(returned)):
        sink.add(index, returned[index].detach()[0].to("cpu", torch.float32))
        returned[index] = None  # release the model's tensor now
    return sink.result()
