"""The query step-through as the display options show it (``viz.display``): special keys hidden, words.

For query i of one head (scores e_ij = q_i·k_j, scaled ẽ_ij, weights α_ij, values v_j):

- **hide special tokens**: their keys leave every panel and the weights are renormalised over the keys left,
  α'_ij = α_ij / Σ_{j' kept} α_ij'. That is exactly softmax_j of the scaled scores over the kept keys, so the
  output column, Σ_j α'_ij v_j, is what the head would have output had those keys been masked, not its output.
  Scores are shown as computed (renormalising applies to weights).
- **words**: the query is the word A holding token i, its tokens' rows averaged in every panel; weights and
  contributions are summed over each key word B's tokens:

      W[A, B] = mean_{i in A} sum_{j in B} α'_ij                    # each row still sums to 1
      c[A, B] = mean_{i in A} sum_{j in B} α'_ij v_j                # (Ev,)   and sum_B c[A, B] = mean_{i in A} o_i

  Scores are not summed over a word's keys (a sum of logits is no score): panels 1-2 keep one bar per token
  key, the mean over A's rows, on their own key axis, and their titles say so.
- **fixed colour range** off: the weight panel's axis reaches this row's largest weight instead of 1.

Each change is said in the figure's title. Pure numpy and plotly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from .checks import as_matrix
from .display import group_label, renormalise_without, special_positions, word_groups
from .heatmaps import colour_axis
from .labels import escape_label, visible_label
from .query import BAR_TEXT_MAX, STEP_TITLES, step_panels
from .theme import apply_theme, theme_spec

STRETCHED_NOTE = "weight axis stretched to this row's largest weight (not comparable across rows)"


@dataclass(frozen=True)
class QueryRowShown:
    """One query's step-through rows as shown (see the module docstring)."""

    query_tokens: list[int]  # token positions whose rows are averaged into the query row
    query_label: str  # the query word (or token)
    score_labels: list[str]  # (K,) token keys left after hiding
    scores: np.ndarray  # (K,)     mean_{i in A} q_i·k_j
    scaled: np.ndarray  # (K,)     mean_{i in A} ẽ_ij
    score_blocked: np.ndarray  # (K,) bool: no row of A may attend to key j
    key_groups: list[list[int]]  # token positions behind each key shown
    key_labels: list[str]  # (C,)
    weights: np.ndarray  # (C,)    W[A, B]
    blocked: np.ndarray  # (C,) bool: no (row of A, token of B) may attend
    contributions: np.ndarray  # (C, Ev)  c[A, B]
    hidden: list[str]  # the special tokens hidden
    words: bool
    hide_special: bool = False  # hiding was asked for (a text may have no special token to hide)

    @property
    def output(self) -> np.ndarray:
        """(Ev,) Σ_B c[A, B]: mean_{i in A} of the output over the keys shown."""
        return self.contributions.sum(axis=0)

    def notes(self) -> list[str]:
        """What the figure shows differently from the computed row, one line each (none when nothing)."""
        said = []
        if len(self.query_tokens) > 1:
            first, last = self.query_tokens[0], self.query_tokens[-1]
            said.append(f"query word '{visible_label(self.query_label, 20)}' = tokens {first}-{last}, rows averaged")
        if self.hide_special and not self.hidden:
            said.append("no special tokens in this text to hide")
        if self.hidden:
            names = ", ".join(dict.fromkeys(self.hidden))
            said.append(f"weights renormalised after hiding {names} (= softmax without them; scores as computed)")
        if self.words:
            said.append(
                "keys merged into words: weights and α v summed, scores per token (merging applies to weights only)"
            )
        return said


def _checked(scores, scaled, weights, values, mask, count: int) -> tuple:
    rows = [as_matrix(name, m) for name, m in (("scores", scores), ("scaled", scaled), ("weights", weights))]
    values = as_matrix("values", values)
    if any(m.shape != (count, count) for m in rows) or values.shape[0] != count:
        raise ValueError(f"scores/scaled/weights (L, L) and values (L, Ev) must match {count} tokens")
    allowed = np.ones((count, count), bool) if mask is None else np.broadcast_to(np.asarray(mask, bool), (count, count))
    return (*rows, values, allowed)


def query_row_as_shown(
    scores,
    scaled,
    weights,
    values,
    tokens: Sequence[str],
    offsets: Sequence[Sequence[int]] | None,
    query: int,
    *,
    mask=None,
    hide_special: bool = False,
    words: bool = False,
) -> QueryRowShown:
    """Query ``query``'s step-through rows as shown: head maps (L, L), ``values`` (L, Ev), ``mask`` (L, L)."""
    tokens = [str(t) for t in tokens]
    count = len(tokens)
    scores, scaled, weights, values, allowed = _checked(scores, scaled, weights, values, mask, count)
    if not 0 <= query < count:
        raise ValueError(f"query {query} out of range 0..{count - 1}")
    special = special_positions(tokens, offsets)
    hidden = special if hide_special and not special.all() else np.zeros(count, dtype=bool)
    groups = word_groups(tokens, offsets, special) if words else [[i] for i in range(count)]
    rows = next(g for g in groups if query in g)  # the query word A
    kept = np.flatnonzero(~hidden)  # (K,) token keys left
    renormalised, _ = renormalise_without(weights[rows], hidden)  # (|A|, K)  α'_ij
    mean_weights = renormalised.mean(axis=0)  # (K,)  mean_{i in A} α'_ij
    column = {int(j): k for k, j in enumerate(kept)}  # token position -> index among the kept keys
    key_groups = [g for g in ([j for j in group if not hidden[j]] for group in groups) if g]
    local = [[column[j] for j in group] for group in key_groups]  # (C,) groups of kept-key indices
    per_key = mean_weights[:, None] * values[kept]  # (K, Ev)  mean_{i in A} α'_ij v_j
    score_allowed = allowed[rows][:, kept].any(axis=0)  # (K,)  some row of A may attend
    return QueryRowShown(
        query_tokens=list(rows),
        query_label=group_label(tokens, rows),
        score_labels=[tokens[j] for j in kept],
        scores=scores[rows][:, kept].mean(axis=0),  # (K,)
        scaled=scaled[rows][:, kept].mean(axis=0),  # (K,)
        score_blocked=~score_allowed,
        key_groups=key_groups,
        key_labels=[group_label(tokens, g) for g in key_groups],
        weights=np.array([mean_weights[g].sum() for g in local]),  # (C,)  W[A, B]
        blocked=np.array([not score_allowed[g].any() for g in local], dtype=bool),
        contributions=np.stack([per_key[g].sum(axis=0) for g in local]),  # (C, Ev)  c[A, B]
        hidden=[tokens[j] for j in np.flatnonzero(hidden)],
        words=words,
        hide_special=hide_special,
    )


def _titles(shown: QueryRowShown) -> tuple[str, ...]:
    """The panel titles, each saying what its bars or cells are."""
    one, two, three, four = STEP_TITLES
    alpha = "α′<sub>ij</sub>" if shown.hidden else "α<sub>ij</sub>"
    rows = len(shown.query_tokens)
    if shown.words:
        where = ", per token key" + (f", mean of the word's {rows} query rows" if rows > 1 else "")
        one, two = one + where, two + where
    if shown.hidden:
        three = f"3. weight  {alpha}  renormalised over the keys shown (= softmax without the hidden keys)"
    if shown.words:
        three = ("3. weight " + (f"{alpha} renormalised, " if shown.hidden else "")) + "summed over each word's keys"
        three += f", mean of {rows} query rows" if rows > 1 else ""
        four = f"4. contribution  Σ<sub>j∈word</sub> {alpha} v<sub>j</sub>  (rows = value dims)  and output"
    elif shown.hidden:
        four = f"4. contribution  {alpha} v<sub>j</sub>  (rows = value dims)  and output"
    if shown.hidden:
        four += "  (as if the hidden keys were masked)"
    return one, two, three, four


def query_shown_figure(
    shown: QueryRowShown,
    *,
    query_index: int | None = None,
    fixed_range: bool = True,
    show_values: bool | None = None,
    theme: str = "screen",
) -> go.Figure:
    """The step-through of ``shown`` (traces as ``query.query_step_figure``); the title says what changed."""
    show = (len(shown.key_labels) <= BAR_TEXT_MAX) if show_values is None else bool(show_values)
    top = float(np.nanmax(shown.weights)) if not fixed_range and np.nanmax(shown.weights) > 0 else 1.0
    fig = step_panels(
        (("q·k", shown.scores), ("scaled", shown.scaled)),
        shown.weights,
        shown.blocked,
        shown.contributions,
        shown.key_labels,
        show=show,
        titles=_titles(shown),
        score_keys=(shown.score_labels, shown.score_blocked) if shown.words else None,
        weight_top=top,
    )
    label = escape_label(visible_label(shown.query_label, 24))
    where = "" if query_index is None else f" (token {query_index})"
    title = f"Query {'word' if shown.words else 'token'} '{label}'{where}: scores → weights → weighted sum of V"
    notes = [*shown.notes(), *([] if fixed_range else [STRETCHED_NOTE])]
    fig.update_layout(
        title_text=title + "".join(f"<br><sup>{escape_label(n)}</sup>" for n in notes),
        coloraxis=colour_axis("diverging", title="α v"),
        height=980 if shown.words else 940,
        bargap=0.25,
    )
    fig.layout.coloraxis.colorbar.update(len=0.45, y=0.0, yanchor="bottom")
    apply_theme(fig, theme)
    spec = theme_spec(theme)
    fig.update_layout(margin_t=spec.margin["t"] + spec.title_size * len(notes))  # room for the note lines
    return fig
