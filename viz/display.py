"""Attention maps as shown, not as computed: special tokens hidden, subwords merged into words, query sets.

Every change here is for display only and is said in the figure's title (``DisplayMap.note``):

- **hide special tokens**: the columns of [CLS], [SEP], BOS, padding ... are removed and every row is
  renormalised to sum to 1 over the keys left, ``A'[i, j] = A[i, j] / sum_{j' kept} A[i, j']`` (a row with
  no weight left stays 0). Their rows stay: what [CLS] looks at is worth seeing. Special positions come from
  the token offsets: a special token covers no characters of the text (an empty span); a tokenizer without
  offsets falls back to the usual spellings ([CLS], <s>, <|...|>).
- **words**: subword tokens are merged into words, keys summed and queries averaged:
  ``W[a, b] = mean_{i in word a} sum_{j in word b} A[i, j]``, so each merged row still sums to 1. A token
  continues the word before it when it is a WordPiece continuation ("·ing"), or when it touches the token
  before (no gap in the text), neither starts with a space, and both meet with a letter or digit there
  ("token" + "ization"; "didn" + "'" stays apart). Special tokens are words of their own.
- **query set**: several query rows summed, ``sum_{i in set} A[i, :]`` (it sums to the size of the set).

Pure numpy; reads a trace by its ``tokens`` and ``offsets`` only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from .labels import escape_label, tick_labels, visible_label
from .theme import LINE_COLOURS, apply_theme

CONTINUATION = "·"  # how a WordPiece continuation is shown ("##ing" -> "·ing"; attention_core.pretrained.tokens)
SPECIAL_SPELLING = re.compile(r"^(\[[A-Z]+\]|<[^<>\s]{1,40}>)$")  # [CLS], [SEP], <s>, </s>, <pad>, <|endoftext|>
HIDDEN_NOTE = "rows renormalised after hiding {names}"
WORDS_NOTE = "merged into words: keys summed, queries averaged"


def special_positions(tokens: Sequence[str], offsets: Sequence[Sequence[int]] | None = None) -> np.ndarray:
    """(L,) bool, True at special tokens: an empty character span (see the module docstring)."""
    count = len(tokens)
    spans = list(offsets or ())
    if len(spans) == count and any(int(b) > int(a) for a, b in spans):
        return np.array([int(b) <= int(a) for a, b in spans], dtype=bool)
    return np.array([bool(SPECIAL_SPELLING.match(str(t).strip())) for t in tokens], dtype=bool)


def _continues(previous: str, token: str, touching: bool) -> bool:
    if token.startswith(CONTINUATION) and len(token) > len(CONTINUATION):
        return True
    if not touching or not token or not previous or token[0].isspace():
        return False
    return previous[-1].isalnum() and token[0].isalnum()


def word_groups(tokens: Sequence[str], offsets: Sequence[Sequence[int]] | None = None, special=None) -> list[list[int]]:
    """Token positions grouped into words, in order (see the module docstring for the rule)."""
    special = special_positions(tokens, offsets) if special is None else np.asarray(special, dtype=bool)
    spans = list(offsets or ())
    have_spans = len(spans) == len(tokens)
    groups: list[list[int]] = []
    for i, token in enumerate(tokens):
        token = str(token)
        if groups and not special[i] and not special[i - 1]:
            touching = have_spans and int(spans[i][0]) == int(spans[i - 1][1])
            if _continues(str(tokens[i - 1]), token, touching):
                groups[-1].append(i)
                continue
        groups.append([i])
    return groups


def group_label(tokens: Sequence[str], group: Sequence[int]) -> str:
    """The word a group spells: its pieces joined, WordPiece continuation marks dropped."""
    pieces = [str(tokens[group[0]])]
    for i in group[1:]:
        token = str(tokens[i])
        pieces.append(token[len(CONTINUATION) :] if token.startswith(CONTINUATION) else token)
    return "".join(pieces)


def renormalise_without(weights, hidden) -> tuple[np.ndarray, np.ndarray]:
    """(weights without the ``hidden`` columns, rows renormalised to 1; kept column positions).

    ``weights``: (..., L, S); ``hidden``: (S,) bool. A row with no weight on the kept keys stays 0.
    """
    weights = np.asarray(weights, dtype=np.float64)
    hidden = np.asarray(hidden, dtype=bool)
    if hidden.shape != (weights.shape[-1],):
        raise ValueError(f"hidden has shape {hidden.shape}; the weights have {weights.shape[-1]} keys")
    kept = np.flatnonzero(~hidden)
    left = np.nan_to_num(weights[..., kept])  # (..., L, S')
    totals = left.sum(axis=-1, keepdims=True)  # (..., L, 1)
    return np.divide(left, totals, out=np.zeros_like(left), where=totals > 0), kept


def merge_groups(weights, row_groups: Sequence[Sequence[int]], col_groups: Sequence[Sequence[int]]) -> np.ndarray:
    """(..., R, C): keys summed within each column group, queries averaged within each row group."""
    weights = np.nan_to_num(np.asarray(weights, dtype=np.float64))
    rows, cols = weights.shape[-2], weights.shape[-1]
    keys = np.zeros((cols, len(col_groups)))  # (S, C)  1 where key j belongs to word b
    for b, group in enumerate(col_groups):
        keys[list(group), b] = 1.0
    queries = np.zeros((len(row_groups), rows))  # (R, L)  1/|word| where query i belongs to word a
    for a, group in enumerate(row_groups):
        queries[a, list(group)] = 1.0 / len(group)
    return queries @ weights @ keys  # (..., R, C)


def merge_mask(mask, row_groups, col_groups) -> np.ndarray | None:
    """A merged cell may attend when any of its (query, key) cells may."""
    if mask is None:
        return None
    mask = np.asarray(mask, dtype=bool)
    queries = np.zeros((len(row_groups), mask.shape[0]))  # (R, L)  1 where query i belongs to word a
    for a, group in enumerate(row_groups):
        queries[a, list(group)] = 1.0
    keys = np.zeros((mask.shape[1], len(col_groups)))  # (S, C)
    for b, group in enumerate(col_groups):
        keys[list(group), b] = 1.0
    return (queries @ mask.astype(np.float64) @ keys) > 0  # (R, C)  some allowed cell in the block


def query_set_row(weights, queries: Sequence[int]) -> np.ndarray:
    """(..., S): the rows of ``queries`` summed (attention of the set as a whole; it sums to len(queries))."""
    weights = np.nan_to_num(np.asarray(weights, dtype=np.float64))
    chosen = sorted({int(i) for i in queries})
    if not chosen or chosen[0] < 0 or chosen[-1] >= weights.shape[-2]:
        raise ValueError(f"query set {chosen} is empty or outside 0..{weights.shape[-2] - 1}")
    return weights[..., chosen, :].sum(axis=-2)


@dataclass(frozen=True)
class DisplayMap:
    """Weights as shown: (..., R, C) with their labels and the sentence that says what changed."""

    weights: np.ndarray  # (..., R, C)
    mask: np.ndarray | None  # (R, C) bool, True = may attend
    row_labels: list[str]
    col_labels: list[str]
    row_groups: list[list[int]]  # token positions behind each row
    col_groups: list[list[int]]  # token positions behind each column
    note: str  # "" when nothing changed

    @property
    def changed(self) -> bool:
        return bool(self.note)


def display_note(hidden_names: Sequence[str], words: bool) -> str:
    """The sentence a title carries: what was hidden and renormalised, what was merged."""
    parts = []
    if hidden_names:
        parts.append(HIDDEN_NOTE.format(names=", ".join(dict.fromkeys(str(n) for n in hidden_names))))
    if words:
        parts.append(WORDS_NOTE)
    return "; ".join(parts)


def display_map(
    weights,
    tokens: Sequence[str],
    offsets: Sequence[Sequence[int]] | None = None,
    *,
    mask=None,
    hide_special: bool = False,
    words: bool = False,
    merge_rows: bool = True,
) -> DisplayMap:
    """``weights`` (..., L, L) of a text as shown with the chosen display options (both off: unchanged).

    ``merge_rows=False`` merges only the keys into words (rows stay tokens: for a query set's summed row)."""
    weights = np.asarray(weights)
    tokens = [str(t) for t in tokens]
    count = len(tokens)
    if weights.shape[-2:] != (count, count):
        raise ValueError(f"weights {weights.shape} do not match {count} tokens")
    special = special_positions(tokens, offsets)
    hidden = special if hide_special else np.zeros(count, dtype=bool)
    if hidden.all():  # nothing would be left to show: keep every key
        hidden = np.zeros(count, dtype=bool)
    shown_mask = None if mask is None else np.broadcast_to(np.asarray(mask, dtype=bool), (count, count))
    groups = word_groups(tokens, offsets, special) if words else [[i] for i in range(count)]
    rows = groups if merge_rows else [[i] for i in range(count)]
    kept = np.flatnonzero(~hidden)
    columns = [[int(j) for j in g if not hidden[j]] for g in groups]
    columns = [g for g in columns if g]
    values = weights
    if hidden.any():
        values, _ = renormalise_without(weights, hidden)
        if shown_mask is not None:
            shown_mask = shown_mask[:, kept]
    if words:
        position = {int(j): k for k, j in enumerate(kept)}  # token position -> column of the kept matrix
        local = [[position[j] for j in g] for g in columns]
        values = merge_groups(values, rows, local)
        shown_mask = merge_mask(shown_mask, rows, local)
    note = display_note([tokens[j] for j in np.flatnonzero(hidden)], words)
    return DisplayMap(
        weights=np.asarray(values, dtype=np.float64) if note else weights,
        mask=shown_mask if note else mask,
        row_labels=[group_label(tokens, g) for g in rows],
        col_labels=[group_label(tokens, g) for g in columns],
        row_groups=rows,
        col_groups=columns,
        note=note,
    )


def query_set_bars(
    row, key_labels: Sequence[str], query_labels: Sequence[str], *, note: str = "", theme: str = "screen"
) -> go.Figure:
    """The summed attention row of a query set (or one query) over the keys as shown, one bar per key."""
    row = np.asarray(row, dtype=np.float64)
    if row.ndim != 1 or row.shape[0] != len(key_labels):
        raise ValueError(f"row {row.shape} does not match {len(key_labels)} key labels")
    ticks = tick_labels(key_labels)
    x = np.arange(row.shape[0])
    fig = go.Figure(
        go.Bar(
            x=x,
            y=row,
            marker_color=LINE_COLOURS[0],
            customdata=ticks,
            hovertemplate="key %{customdata}<br>summed weight %{y:.4f}<extra></extra>",
            name="summed row",
        )
    )
    names = ", ".join(f"'{escape_label(visible_label(q, 16))}'" for q in list(query_labels)[:8])
    more = f" and {len(query_labels) - 8} more" if len(query_labels) > 8 else ""
    what = f"rows of {len(query_labels)} queries summed" if len(query_labels) > 1 else "the query's row"
    title = f"Attention of {names}{more}: {what} (total {row.sum():.3g})"
    fig.update_xaxes(tickmode="array", tickvals=list(x), ticktext=ticks, tickangle=-45, title_text="key")
    fig.update_yaxes(title_text="weight" if len(query_labels) == 1 else "summed weight", rangemode="tozero")
    fig.update_layout(title_text=title + (f"<br><sup>{escape_label(note)}</sup>" if note else ""), height=420)
    return apply_theme(fig, theme)
