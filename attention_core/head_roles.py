"""What each head does, scored four ways: sink, previous-token, induction, positional.

Every score is a number in 0..1 per (layer, head), computed from attention weights ``A`` (layers, H, L, S),
rows = queries i, columns = keys j:

- **sink**: the mean over query rows of the weight on the sink columns: the first position and any special
  token ([CLS], [SEP], BOS, padding), ``mean_i sum_{j in sinks} A[i, j]``. A head that parks its attention
  there when it has nothing to do scores near 1.
- **previous_token**: ``mean_{i >= 1} A[i, i - 1]``, the weight each token puts on the one just before it.
- **positional**: the share of query rows whose largest weight sits at one fixed offset ``j - i`` (the
  head's most common one), in the spirit of Voita et al. (2019)'s positional heads. Offset -1 is left out:
  that is the previous-token role, scored on its own. A head that always looks at itself (offset 0) or two
  back (-2) scores 1; a head that follows content scores low.
- **induction** (the standard measurement, as in Olsson et al. (2022) and TransformerLens): a sequence of
  ``T`` random token ids is repeated twice; a head that copies "what came after this token last time"
  attends from each position i of the second copy to ``i - T + 1``, the token after the first occurrence.
  Score = ``mean_{i in second copy} A[i, i - T + 1]``: about 1 for such a head, about 1/n for a head
  spreading evenly over n keys, and near 0 for a head that looks elsewhere.

Sink, previous-token and positional are read from the weights of the user's own text (the capture already
holds every layer); induction needs its own forward pass on random tokens, made by ``weights_fn(ids)`` so
the measurement is testable without a model (a hand-built copy head, a random softmax).

``classify`` names each head after the most specific role whose score reaches ``threshold``, in the order
of ``PRIORITY`` (induction, previous-token, positional, sink), else "mixed". Sink comes last: a head with
nothing to do on this text parks its weight on the first token, whatever it does elsewhere (SmolLM2's
induction heads are also sinks on ordinary text). Pure torch (numpy in and out is accepted too).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

ROLES = ("sink", "previous_token", "induction", "positional")
ROLE_LABELS = {
    "sink": "sink",
    "previous_token": "previous-token",
    "induction": "induction",
    "positional": "positional",
    "mixed": "mixed",
}
PRIORITY = ("induction", "previous_token", "positional", "sink")  # the most specific role first
THRESHOLD = 0.4  # a head is named after its largest score when that score reaches this, else "mixed"
INDUCTION_LENGTH = 24  # T: length of the random sequence that is repeated (one forward on about 2T tokens)


def _as_tensor(weights) -> torch.Tensor:
    """(..., L, S) float32 tensor; NaN (a masked-out row some code returns) counts as 0 weight."""
    tensor = torch.as_tensor(np.asarray(weights) if not isinstance(weights, torch.Tensor) else weights)
    tensor = tensor.to(torch.float32)
    if tensor.dim() < 2:
        raise ValueError(f"attention weights need at least 2 dimensions (L, S), got shape {tuple(tensor.shape)}")
    return torch.nan_to_num(tensor, nan=0.0)


def sink_score(weights, sinks: Sequence[bool] | None = None) -> torch.Tensor:
    """(...,) mean over query rows of the weight on the sink columns (position 0 and ``sinks``: True = special).

    ``weights``: (..., L, S). ``sinks``: (S,) bool; position 0 always counts as a sink.
    """
    weights = _as_tensor(weights)
    columns = torch.zeros(weights.shape[-1], dtype=torch.bool)  # (S,)
    columns[0] = True
    if sinks is not None:
        flags = torch.as_tensor(list(sinks), dtype=torch.bool)
        if flags.shape[0] != weights.shape[-1]:
            raise ValueError(f"sinks has {flags.shape[0]} flags for {weights.shape[-1]} keys")
        columns |= flags
    on_sinks = weights[..., columns].sum(dim=-1)  # (..., L)  weight of each row on the sink columns
    return on_sinks.mean(dim=-1)  # (...,)


def previous_token_score(weights) -> torch.Tensor:
    """(...,) ``mean_{i >= 1} A[i, i - 1]`` (0 for a single-token text)."""
    weights = _as_tensor(weights)
    length = min(weights.shape[-2], weights.shape[-1])
    if length < 2:
        return torch.zeros(weights.shape[:-2])
    below = torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1)  # (..., L - 1)  A[i, i - 1]
    return below.mean(dim=-1)


def modal_offsets(weights) -> tuple[torch.Tensor, torch.Tensor]:
    """(score, offset), each (...,): the most common offset ``j - i`` of each row's largest weight (-1
    excluded) and the share of rows whose largest weight sits there (see the module docstring)."""
    weights = _as_tensor(weights)
    rows, keys = weights.shape[-2], weights.shape[-1]
    top = weights.argmax(dim=-1)  # (..., L)  key of each row's largest weight
    offsets = top - torch.arange(rows)  # (..., L)  j - i, in -(L-1)..S-1
    shifted = offsets + (rows - 1)  # (..., L)  in 0..L+S-2, for counting
    counts = torch.zeros((*offsets.shape[:-1], rows + keys - 1), dtype=torch.float32)
    counts.scatter_add_(-1, shifted, torch.ones_like(shifted, dtype=torch.float32))  # (..., L + S - 1)
    if rows > 1:
        counts[..., rows - 2] = 0.0  # offset -1 belongs to the previous-token role
    best = counts.argmax(dim=-1)  # (...,)
    score = counts.gather(-1, best.unsqueeze(-1)).squeeze(-1) / rows  # (...,)
    return score, best - (rows - 1)


def positional_score(weights) -> torch.Tensor:
    """(...,) share of rows whose largest weight sits at the head's most common offset j - i (-1 excluded)."""
    return modal_offsets(weights)[0]


def repeated_tokens(vocab: Sequence[int], length: int = INDUCTION_LENGTH, *, seed: int = 0) -> torch.Tensor:
    """(2T,) int64: ``length`` ids drawn uniformly (with replacement) from ``vocab``, then the same again."""
    if length < 2:
        raise ValueError(f"the repeated sequence needs at least 2 tokens, got {length}")
    pool = torch.as_tensor(list(vocab), dtype=torch.long)
    if pool.numel() == 0:
        raise ValueError("no token ids to draw from")
    generator = torch.Generator().manual_seed(int(seed))
    first = pool[torch.randint(0, pool.numel(), (length,), generator=generator)]  # (T,)
    return torch.cat([first, first])  # (2T,)


def induction_score_of(weights, length: int, start: int = 0) -> torch.Tensor:
    """(...,) ``mean_{i in second copy} A[i, i - T + 1]`` for weights (..., n, n) of a sequence whose two
    copies of ``length`` = T tokens start at position ``start`` (after any prefix such as [CLS] or BOS)."""
    weights = _as_tensor(weights)
    queries = torch.arange(start + length, start + 2 * length)  # (T,)  every position of the second copy
    keys = queries - length + 1  # (T,)  the token after the same token's first occurrence
    if int(queries[-1]) >= weights.shape[-2] or int(keys[-1]) >= weights.shape[-1]:
        raise ValueError(f"weights {tuple(weights.shape)} are too short for two copies of {length} from {start}")
    return weights[..., queries, keys].mean(dim=-1)  # (...,)


def induction_score(
    weights_fn: Callable[[torch.Tensor], object],
    vocab: Sequence[int],
    *,
    length: int = INDUCTION_LENGTH,
    seed: int = 0,
    start: int = 0,
) -> torch.Tensor:
    """(layers, H) induction scores: ``weights_fn(ids)`` gets the (2T,) repeated random ids and returns the
    weights (layers, H, n, n) of the sequence it ran (``start`` = where the first copy begins in it)."""
    ids = repeated_tokens(vocab, length, seed=seed)
    weights = _as_tensor(weights_fn(ids))
    return induction_score_of(weights, length, start)


@dataclass(frozen=True)
class HeadRoles:
    """Per (layer, head) scores and the label each head gets (see the module docstring)."""

    scores: dict[str, np.ndarray]  # role -> (layers, H) float in 0..1 (NaN where not measured)
    offsets: np.ndarray  # (layers, H) int: the modal offset j - i behind the positional score
    labels: np.ndarray  # (layers, H) str: a key of ROLE_LABELS
    threshold: float

    def table(self) -> tuple[np.ndarray, list[str], list[str]]:
        """(rows, row_labels, column_labels) with one row per head: the four scores, then the offset."""
        layers, heads = self.labels.shape
        columns = [*ROLES, "positional_offset"]
        values = np.stack([*(self.scores[role] for role in ROLES), self.offsets.astype(np.float64)], axis=-1)
        rows = [f"L{layer} H{head} {self.labels[layer, head]}" for layer in range(layers) for head in range(heads)]
        return values.reshape(layers * heads, len(columns)), rows, columns


def classify(scores: dict[str, np.ndarray], threshold: float = THRESHOLD) -> np.ndarray:
    """(layers, H) labels: the first role of ``PRIORITY`` whose score reaches ``threshold``, else "mixed".
    NaN scores (not measured) never count."""
    labels = None
    for role in reversed(PRIORITY):  # later roles are overwritten by the more specific ones before them
        reached = np.nan_to_num(np.asarray(scores[role], dtype=np.float64), nan=-1.0) >= threshold
        labels = np.where(reached, role, "mixed" if labels is None else labels)
    return labels.astype(object)


def head_roles(
    attentions,
    *,
    sinks: Sequence[bool] | None = None,
    induction=None,
    threshold: float = THRESHOLD,
) -> HeadRoles:
    """Scores and labels for every head. ``attentions``: (layers, H, L, S) weights of the user's text;
    ``sinks``: (S,) True at special positions; ``induction``: (layers, H) from ``induction_score`` or None
    (left NaN, e.g. a from-scratch core with no model to run)."""
    if not (hasattr(attentions, "shape") and hasattr(attentions, "__getitem__")):
        attentions = np.asarray(attentions)
    if len(attentions.shape) != 4:
        raise ValueError(f"attentions must be (layers, H, L, S), got shape {tuple(attentions.shape)}")
    per_layer = []  # every score is per head: one layer at a time (no float32 copy of every layer at once)
    for index in range(attentions.shape[0]):
        layer = _as_tensor(attentions[index])  # (H, L, S)
        positional, offsets = modal_offsets(layer)  # (H,) each
        per_layer.append((sink_score(layer, sinks), previous_token_score(layer), positional, offsets))
    sink, previous, positional, offsets = (torch.stack(column) for column in zip(*per_layer, strict=True))
    heads = tuple(attentions.shape[:2])  # (layers, H)
    scores = {
        "sink": sink.numpy().astype(np.float64),
        "previous_token": previous.numpy().astype(np.float64),
        "induction": np.full(heads, np.nan)
        if induction is None
        else np.asarray(torch.as_tensor(induction).to(torch.float64)),
        "positional": positional.numpy().astype(np.float64),
    }
    if scores["induction"].shape != heads:
        raise ValueError(f"induction scores {scores['induction'].shape} do not match {heads}")
    return HeadRoles(scores=scores, offsets=offsets.numpy(), labels=classify(scores, threshold), threshold=threshold)


def model_weights_fn(loaded) -> tuple[Callable[[torch.Tensor], torch.Tensor], list[int], Callable[[int], int]]:
    """(weights_fn, vocab, start_of) for a loaded pretrained model.

    ``weights_fn(ids)`` wraps the (2T,) ids in the tokenizer's own special tokens ([CLS] ... [SEP], BOS, or
    none), runs the model once with ``output_attentions=True`` and returns (layers, H, n, n) float32 CPU
    weights. ``vocab`` is every non-special id the tokenizer and the embedding table both know;
    ``start_of(T)`` is where the first copy begins after the special prefix.
    """
    tokenizer = loaded.tokenizer
    special = set(getattr(tokenizer, "all_special_ids", ()) or ())
    size = len(tokenizer)
    config_size = getattr(getattr(loaded.model, "config", None), "vocab_size", None)
    if config_size:
        size = min(size, int(config_size))
    vocab = [i for i in range(size) if i not in special]

    def wrap(ids: list[int]) -> list[int]:
        build = getattr(tokenizer, "build_inputs_with_special_tokens", None)
        return list(build(ids)) if build is not None else list(ids)

    def start_of(length: int) -> int:
        probe = list(range(2 * length))
        built = wrap(probe)
        return next((k for k in range(len(built)) if built[k : k + len(probe)] == probe), 0)

    def weights_fn(ids: torch.Tensor) -> torch.Tensor:
        full = torch.tensor([wrap([int(i) for i in ids])], dtype=torch.long)  # (1, n)
        runner = loaded.runner
        with loaded.lock, torch.no_grad():
            outputs = runner(
                input_ids=full.to(loaded.device),
                attention_mask=torch.ones_like(full).to(loaded.device),
                output_attentions=True,
                return_dict=True,
                **({"use_cache": False} if "use_cache" in inspect.signature(runner.forward).parameters else {}),
            )
        returned = [a.detach()[0].to("cpu", torch.float32) for a in outputs.attentions]  # each (H, n, n)
        return torch.stack(returned)  # (layers, H, n, n)

    return weights_fn, vocab, start_of


def model_induction_scores(loaded, *, length: int = INDUCTION_LENGTH, seed: int = 0) -> np.ndarray:
    """(layers, H) induction scores of a loaded pretrained model (one forward on about 2T tokens)."""
    weights_fn, vocab, start_of = model_weights_fn(loaded)
    return induction_score(weights_fn, vocab, length=length, seed=seed, start=start_of(length)).numpy()
