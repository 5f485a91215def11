"""Right after loading: capture and replay one short sentence, so a model that returns no attention
weights fails at load time, and one whose q, k, v cannot be captured or replayed still loads, with a
notice that says so. Imported by ``loading`` only; it uses capture, replay and tokens, none of which
import it back.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from .capture import capture
from .errors import ModelLoadError, explain
from .replay import replay
from .tokens import tokenize_text

if TYPE_CHECKING:
    from .loading import LoadedModel

PROBE_TEXT = "The quick brown fox jumps over the lazy dog."
PROBE_TOLERANCE = 1e-4  # replay differences above this on the probe earn a notice


def probe(loaded: LoadedModel) -> LoadedModel:
    """Capture and replay a short sentence: no attentions -> error; q/k/v trouble -> notice."""
    tokens = tokenize_text(
        loaded.tokenizer, PROBE_TEXT, max_tokens=32, max_positions=loaded.facts.max_positions or None
    )
    try:
        captured = capture(loaded, tokens)
    except ModelLoadError:
        raise
    except Exception as err:
        if not loaded.sites:
            raise explain(err, loaded.name) from err
        stripped = replace(loaded, sites=(), projections=())
        note = f"Capturing q, k, v failed ({type(err).__name__}: {err}); only the model's attention weights are shown."
        return probe(replace(stripped, notices=(*loaded.notices, note)))
    notices = list(loaded.notices)
    notices += [n for n in captured.notices if n not in notices and n != tokens.notice]
    diffs = replay(captured)
    worst = max((max(d.weights, d.output) for d in diffs), default=0.0)
    if diffs and not worst <= PROBE_TOLERANCE:
        notices.append(
            f"Replaying this model's own q, k, v misses its attention by up to {worst:.2g}: it computes attention "
            "with a step the core does not model, so treat the captured q, k, v with care."
        )
    return replace(loaded, notices=tuple(notices))
