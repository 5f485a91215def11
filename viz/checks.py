"""Shape checks run first in every figure function: a wrong shape is a ValueError naming shapes."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def as_array(name: str, values, ndim: int | tuple[int, ...], *, dtype=np.float64) -> np.ndarray:
    """``values`` as a numpy array of ``dtype`` with ``ndim`` dimensions, else ValueError."""
    array = np.asarray(values, dtype=dtype)
    allowed = (ndim,) if isinstance(ndim, int) else ndim
    if array.ndim not in allowed:
        want = " or ".join(f"{d}-D" for d in allowed)
        raise ValueError(f"{name} must be {want}, got shape {array.shape}")
    return array


def layer_stack(name: str, attentions):
    """(layers, H, L, S) weights, read a layer at a time: an ndarray, or a store that hands out one layer's
    (H, L, S) array per ``[layer]`` (attention_core.packed.CausalStack: a causal model's packed weights, not
    copied into one array here); anything else goes through np.asarray. ValueError unless 4-D."""
    if not (hasattr(attentions, "shape") and hasattr(attentions, "__getitem__") and hasattr(attentions, "__len__")):
        attentions = np.asarray(attentions)
    if len(attentions.shape) != 4:
        raise ValueError(f"{name} must be 4-D (layers, H, L, S), got shape {tuple(attentions.shape)}")
    return attentions


def as_matrix(name: str, values) -> np.ndarray:
    """A 2-D float array, else ValueError naming the shape."""
    return as_array(name, values, 2)


def check_labels(name: str, labels: Sequence[str] | None, expected: int, array_name: str, shape) -> list[str]:
    """Labels as a list of ``expected`` strings; ValueError naming both lengths and the shape."""
    if labels is None:
        return [str(i) for i in range(expected)]
    labels = [str(label) for label in labels]
    if len(labels) != expected:
        raise ValueError(
            f"{name} has {len(labels)} labels but {array_name} has shape {tuple(shape)} (expected {expected})"
        )
    return labels


def same_shape(first_name: str, first: np.ndarray, second_name: str, second: np.ndarray) -> None:
    """ValueError naming both shapes when they differ."""
    if first.shape != second.shape:
        raise ValueError(f"{first_name} has shape {first.shape} but {second_name} has shape {second.shape}")


def as_mask(name: str, mask, shape: tuple[int, ...]) -> np.ndarray | None:
    """A boolean mask broadcast to ``shape`` (True = may attend), or None; ValueError if it cannot be."""
    if mask is None:
        return None
    mask = np.asarray(mask, dtype=bool)
    try:
        return np.broadcast_to(mask, shape)
    except ValueError:
        raise ValueError(f"{name} has shape {mask.shape}, which does not broadcast to {shape}") from None


def as_vector(name: str, values, length: int | None = None, other: str = "") -> np.ndarray:
    """A 1-D float array (of ``length`` when given), else ValueError naming the shapes."""
    array = as_array(name, values, 1)
    if length is not None and array.shape[0] != length:
        raise ValueError(f"{name} has shape {array.shape} but {other} needs length {length}")
    return array
