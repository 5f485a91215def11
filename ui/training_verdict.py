"""The training lab's verdict: what a scaled-vs-unscaled comparison measured, said in words.

Presentation only: ``attention_core.training.summarize`` reduces each run to numbers (``RunSummary``);
``verdict`` compares them and builds a headline and the measurements behind it, every figure in the text
taken from those numbers. The ui shows it (``ui/training_lab.py``); the training benchmark prints its outcome.
No streamlit here, so tests and benchmarks read it without a page.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from attention_core.training import LEARNED_ACCURACY, RunSummary, TrainingConfig, TrainingSnapshot, summarize


@dataclass(frozen=True)
class Verdict:
    """The outcome of a comparison in words, built from measured numbers only."""

    outcome: str  # "scaling_helps", "no_difference", "unscaled_better", "neither_learned", "diverged", "single"
    headline: str  # what happened and why, in a few sentences
    reasons: tuple[str, ...]  # the measurements behind it, one per line


def _learned(s: RunSummary) -> str:
    if s.steps_to_learn is not None:
        return f"reached {LEARNED_ACCURACY:.0%} accuracy at step {s.steps_to_learn}"
    return f"never reached {LEARNED_ACCURACY:.0%} accuracy"


def _describe(s: RunSummary) -> str:
    return f"{s.variant}: final loss {s.final_loss:.3f}, accuracy {s.final_accuracy:.0%}, {_learned(s)}"


def _saturation(s: RunSummary, config: TrainingConfig) -> str:
    """Why (or whether) this run's softmax went nearly one-hot before it had learned, in numbers."""
    name = "With" if s.variant == "scaled" else "Without"
    top = config.max_entropy
    if s.saturated_step is None:
        return (
            f"{name} scaling the softmax never went one-hot on a wrong slot (step-1 score std "
            f"{s.initial_score_std:.2f}, entropy {s.initial_entropy:.2f} of {top:.2f} nats), so gradients kept flowing."
        )
    if s.saturated_step == 1:
        return (
            f"{name} scaling the scores start with std {s.initial_score_std:.1f}, so softmax is nearly one-hot "
            f"from the first step (entropy {s.initial_entropy:.2f} of {top:.2f} nats) and most examples send "
            "almost no gradient back to W^Q and W^K."
        )
    return (
        f"{name} scaling the scores start with std {s.initial_score_std:.1f}, but they grew: by step "
        f"{s.saturated_step} their std was {s.saturated_score_std:.1f} and softmax was nearly one-hot "
        f"(entropy {s.saturated_entropy:.2f} of {top:.2f} nats) while the answers were still mostly wrong"
        + (
            f"; without the 1/sqrt(d_k) factor each update moves the scores sqrt({config.d_k}) = "
            f"{math.sqrt(config.d_k):.0f} times further."
            if s.variant == "unscaled"
            else "."
        )
    )


def verdict(config: TrainingConfig, runs: tuple[TrainingSnapshot, ...]) -> Verdict:
    """Compare the scaled and unscaled runs of ``config`` (either may be missing) in words."""
    by_variant = {snap.variant: summarize(snap) for snap in runs}
    scaled, unscaled = by_variant.get("scaled"), by_variant.get("unscaled")
    steps = max((s.steps_done for s in by_variant.values()), default=0)
    partial = f" after {steps} of {config.steps} steps" if steps < config.steps else ""
    chance = config.chance_loss
    if scaled is None or unscaled is None:
        only = scaled or unscaled
        if only is None:
            return Verdict("single", "Nothing trained yet.", ())
        return Verdict(
            "single",
            f"Only the {only.variant} variant was trained{partial}: {_describe(only)}. Train both to compare. "
            + _saturation(only, config),
            (f"chance: loss {chance:.2f}, accuracy {1 / config.num_values:.0%}",),
        )

    grad_ratio = scaled.initial_score_grad / max(unscaled.initial_score_grad, 1e-30)
    reasons = (
        _describe(scaled),
        _describe(unscaled),
        f"chance: loss {chance:.2f}, accuracy {1 / config.num_values:.0%}",
        f"step 1, std of the softmax input: {unscaled.initial_score_std:.2f} unscaled (expected init_scale^2 * "
        f"sqrt(d_k) = {config.expected_raw_score_std:.1f}), {scaled.initial_score_std:.2f} scaled",
        f"step 1, attention entropy: {unscaled.initial_entropy:.2f} unscaled, {scaled.initial_entropy:.2f} scaled "
        f"(uniform = {config.max_entropy:.2f} nats, one-hot = 0)",
        f"step 1, typical gradient at the softmax input: {unscaled.initial_score_grad:.1e} unscaled, "
        f"{scaled.initial_score_grad:.1e} scaled (ratio {grad_ratio:.3g})",
    )
    if scaled.diverged or unscaled.diverged:
        which = " and ".join(s.variant for s in (scaled, unscaled) if s.diverged)
        return Verdict(
            "diverged",
            f"Training diverged{partial} ({which}: the loss became NaN or infinite); lower the learning rate.",
            reasons,
        )

    gap = unscaled.final_loss - scaled.final_loss  # > 0: scaling ended lower
    margin = 0.1 * chance
    s_steps, u_steps = scaled.steps_to_learn, unscaled.steps_to_learn
    faster = s_steps is not None and (u_steps is None or u_steps > 1.3 * s_steps + 10)
    slower = u_steps is not None and (s_steps is None or s_steps > 1.3 * u_steps + 10)
    losses = f"final loss {scaled.final_loss:.3f} scaled vs {unscaled.final_loss:.3f} unscaled"
    if faster or (gap > margin and not slower):
        if s_steps is not None and u_steps is None:
            how = f"the scaled layer learned the task by step {s_steps}; the unscaled one had not learned it{partial}"
        elif s_steps is not None:
            how = f"the scaled layer learned the task by step {s_steps}, the unscaled one only by step {u_steps}"
        else:
            how = f"neither reached {LEARNED_ACCURACY:.0%} accuracy{partial}, but the scaled one got much further"
        headline = f"Scaling made the difference: {how} ({losses}). " + _saturation(unscaled, config)
        return Verdict("scaling_helps", headline, reasons)
    if slower or gap < -margin:
        headline = (
            f"Here the unscaled layer did better{partial} ({losses}). "
            + _saturation(scaled, config)
            + " "
            + _saturation(unscaled, config)
        )
        return Verdict("unscaled_better", headline, reasons)
    if s_steps is None and u_steps is None and min(scaled.final_loss, unscaled.final_loss) > 0.8 * chance:
        headline = (
            f"Neither variant learned{partial} ({losses}; chance is {chance:.2f}). "
            + _saturation(scaled, config)
            + " Try more steps or another learning rate before drawing a conclusion."
        )
        return Verdict("neither_learned", headline, reasons)
    both = (
        f"both learned (scaled by step {s_steps}, unscaled by step {u_steps})"
        if s_steps is not None and u_steps is not None
        else "they ended close"
    )
    headline = f"No clear difference at these settings{partial}: {both}; {losses}. " + _saturation(unscaled, config)
    return Verdict("no_difference", headline, reasons)
