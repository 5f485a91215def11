"""Minimal pairs: two texts that differ in a word or two, one head, one token's attention row in each.

Tokens of the two texts are aligned by difflib's longest matching blocks (equal tokens in order), so
"The trophy ... too big." and "The trophy ... too small." line up everywhere except big/small. Plain
numpy in and out: the app hands in two traces of the same model, layer and settings.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

import numpy as np

SPECIAL = re.compile(r"^(\[[A-Z]+\]|<[^<>]*>|<\|[^|]*\|>)$")  # [CLS], <s>, <|endoftext|>

# A few classic pairs: (first text, second text, what it shows, the token to start from)
PAIRS = {
    "animal": (
        "The animal didn't cross the street because it was too tired.",
        "The animal didn't cross the street because it was too wide.",
        "coreference: 'it' is the animal, then the street",
        "it",
    ),
    "trophy": (
        "The trophy didn't fit in the suitcase because it was too big.",
        "The trophy didn't fit in the suitcase because it was too small.",
        "coreference (Winograd): 'it' is the trophy, then the suitcase",
        "it",
    ),
    "council": (
        "The city council refused the demonstrators a permit because they feared violence.",
        "The city council refused the demonstrators a permit because they advocated violence.",
        "coreference: 'they' changes side with one verb",
        "they",
    ),
    "agreement": (
        "The key to the cabinets is on the table.",
        "The keys to the cabinet are on the table.",
        "subject-verb agreement across a phrase",
        "is",
    ),
    "bank": (
        "She sat on the bank of the river and watched the water.",
        "She sat in the bank and waited for the cashier.",
        "word sense: bank as a shore or a business",
        "bank",
    ),
    "park": (
        "They will park the car near the gate.",
        "They will walk in the park near the gate.",
        "word sense: park as a verb or a noun",
        "park",
    ),
    "negation": (
        "The film was good and the actors were convincing.",
        "The film was not good and the actors were not convincing.",
        "negation: which words look at 'not'",
        "good",
    ),
}


def align_tokens(first: list[str], second: list[str]) -> list[tuple[int | None, int | None]]:
    """Pairs (i, j) of positions that correspond; (i, None) / (None, j) for tokens of one text only.

    Equal runs (difflib's matching blocks) pair up, and so do replaced runs of the same length, one to
    one ("key"/"keys", "is"/"are"); in a gap of unequal lengths, the first text's tokens come first.
    """
    matcher = difflib.SequenceMatcher(a=first, b=second, autojunk=False)
    pairs: list[tuple[int | None, int | None]] = []
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        if tag == "equal" or (tag == "replace" and a1 - a0 == b1 - b0):
            pairs += list(zip(range(a0, a1), range(b0, b1), strict=True))
        else:
            pairs += [(a, None) for a in range(a0, a1)] + [(None, b) for b in range(b0, b1)]
    return pairs


@dataclass(frozen=True)
class PairRows:
    """One query token's attention row in both texts, on the aligned keys."""

    labels: tuple[str, ...]  # (K,) aligned key labels: "tok" or "first/second" where they differ
    first: np.ndarray  # (K,) weights of the first text's row (NaN where the key exists only in the second)
    second: np.ndarray  # (K,) weights of the second text's row (NaN where only in the first)
    difference: np.ndarray  # (K,) second - first on aligned keys (NaN where a key is in one text only)
    query_first: int  # the query position in the first text
    query_second: int | None  # its aligned position in the second text (None: the token is not there)
    changed_mass: float  # half the L1 distance of the two rows over shared keys plus weight on unshared keys

    def largest_change(self) -> int | None:
        """Index of the aligned key whose weight changed most between the texts (None: no shared key)."""
        shared = np.isfinite(self.difference)
        if self.query_second is None or not shared.any():
            return None
        return int(np.nanargmax(np.abs(np.where(shared, self.difference, np.nan))))

    def table(self) -> tuple[np.ndarray, list[str], list[str]]:
        """(K, 3) first, second, difference per aligned key, with row and column labels (for CSV)."""
        values = np.stack([self.first, self.second, self.difference], axis=1)  # (K, 3)
        return values, list(self.labels), ["first text", "second text", "second - first"]


def pair_rows(first_tokens, first_weights, second_tokens, second_weights, query: int) -> PairRows:
    """``*_weights`` (L, S) of one head in each text; ``query`` a position of the first text."""
    first_tokens, second_tokens = list(first_tokens), list(second_tokens)
    first_weights, second_weights = np.asarray(first_weights), np.asarray(second_weights)
    if not 0 <= query < len(first_tokens):
        raise ValueError(f"query {query} out of range 0..{len(first_tokens) - 1}")
    pairs = align_tokens(first_tokens, second_tokens)
    query_second = next((j for i, j in pairs if i == query), None)
    labels, a, b = [], [], []
    for i, j in pairs:
        if i is None or j is None or first_tokens[i] == second_tokens[j]:
            labels.append(first_tokens[i] if j is None else second_tokens[j])
        else:
            labels.append(f"{first_tokens[i]}/{second_tokens[j]}")  # replaced one for one
        a.append(np.nan if i is None else float(first_weights[query, i]))
        b.append(np.nan if (j is None or query_second is None) else float(second_weights[query_second, j]))
    a, b = np.array(a), np.array(b)  # (K,)
    difference = b - a  # NaN unless the key is in both texts
    changed = 0.5 * (
        np.nansum(np.abs(difference))
        + np.nansum(np.where(np.isnan(b), a, 0.0))
        + np.nansum(np.where(np.isnan(a), b, 0.0))
    )
    return PairRows(tuple(labels), a, b, difference, query, query_second, float(changed))


def most_changed_query(first_tokens, first_weights, second_tokens, second_weights) -> int:
    """The first text's position whose row changes most between the texts (a good place to start)."""
    aligned = {i: j for i, j in align_tokens(list(first_tokens), list(second_tokens)) if i is not None}
    best, best_mass = 0, -1.0
    for i in range(len(first_tokens)):
        if aligned.get(i) is None or SPECIAL.match(str(first_tokens[i])):
            continue  # a token only the first text has, or [CLS]-like markers (their rows move for any change)
        mass = pair_rows(first_tokens, first_weights, second_tokens, second_weights, i).changed_mass
        if mass > best_mass:
            best, best_mass = i, mass
    return best


def find_token(tokens, word: str) -> int | None:
    """The first position whose token is ``word`` (case and word-start markers such as Ġ or ▁ ignored)."""
    for i, token in enumerate(tokens):
        if str(token).lstrip("Ġ▁ ").lower() == word.lower():
            return i
    return None
