"""View: head contributions. One layer of the real model taken apart by head: raw weights against
value-weighted contributions, each head's share of the block's output, the check that the heads add up to
the model's own attention output (on a float64 copy of the model), switching a head off (ablation) and, for decoders, direct logit attribution.

Every number comes from ``attention_core.contributions`` / ``attention_core.ablation`` and is kept once per
input in the app's byte-bounded store; the layer × head ablation map is computed only on a click. The numbers
shown are gathered in one ``viz.contributions_panels.ShownContributions``: each section draws its panel from
it, and the slides zip at the end (built only when clicked) draws the same panels in the 'slides' theme.
One function per section, in the order they appear: controls, sum check, grid, row, shares, ablation,
direct logit attribution (decoders), map, export.
"""

from __future__ import annotations

from dataclasses import asdict, replace

import numpy as np
import streamlit as st

from attention_core import ablation
from attention_core.ablation import ABLATIONS
from attention_core.contributions import SUM_CHECK_TOLERANCE, layer_contributions
from attention_core.contributions_check import sum_check_float64
from attention_core.traces import ModelTrace
from viz.contributions import CONTRIBUTION_MODE_LABELS, CONTRIBUTION_MODES
from viz.contributions_panels import (
    DirectParts,
    ShownContributions,
    ablation_panel,
    contributions_zip,
    direct_logits_panel,
    grid_panel,
    head_shares_panel,
    map_panel,
    next_token_panel,
    row_panel,
)
from viz.labels import escape_label, plain_labels, visible_label

from .. import compute
from ..policy import heavy
from ..settings import Settings
from ..sidebar import as_position
from ..text import plain
from .common import figure, image_export_problem

ABLATION_LABELS = {"zero": "zero (o_h ← 0)", "mean": "mean (o_h ← its mean over the sentence)"}


def _input_key(settings: Settings) -> tuple:
    return (settings.model, settings.text, settings.max_tokens, settings.pad_to)


def _array_bytes(*arrays) -> int:
    return sum(int(getattr(a, "nbytes", 0)) for a in arrays if a is not None)


def _reference(settings: Settings, loaded, cap):
    """The unablated forward with the attention outputs hooked: once per input."""

    def run():
        with heavy():
            return ablation.reference_run(loaded, cap.tokens)

    def size(ref) -> int:
        return _array_bytes(ref.attn_outputs, ref.merged_means, ref.hidden, ref.final_in)

    return compute.store().get(("contrib_reference", *_input_key(settings)), run, size)


def _parts(settings: Settings, cap, reference, layer: int):
    def run():
        return layer_contributions(cap.layer(layer), reference.attn_outputs[layer])

    def size(parts) -> int:
        return _array_bytes(parts.weights, parts.value_norms, parts.contribution_norms, parts.head_outputs)

    return compute.store().get(("contrib_parts", *_input_key(settings), layer), run, size)


def _float64_check(settings: Settings, cap) -> dict[int, float]:
    """{layer: max |Σ heads + b^O − attention output|} on the float64 copy of the model: once per input,
    every layer in one forward (the copy itself is made once per model, ``compute.float64_model``)."""

    def run():
        wide = compute.float64_model(settings.model)
        with heavy():
            return sum_check_float64(wide, cap.tokens)

    return compute.store().get(("contrib_check64", *_input_key(settings)), run, lambda found: 64 * len(found))


def _layer_ablation(settings: Settings, loaded, cap, reference, layer: int, mode: str, position: int):
    def run():
        with heavy():
            return ablation.ablate_layer(loaded, cap.tokens, layer, mode=mode, position=position, reference=reference)

    key = ("contrib_ablation", *_input_key(settings), layer, mode, position)
    return compute.store().get(key, run, lambda found: 4096 * len(found))


def _map_key(settings: Settings, mode: str, position: int) -> tuple:
    return ("contrib_map", *_input_key(settings), mode, position)


def _direct_logits(settings: Settings, loaded, reference, parts, position: int):
    def run():
        return ablation.direct_logit_attribution(loaded, reference, parts, position)

    key = ("contrib_dla", *_input_key(settings), parts.layer, position)
    return compute.store().get(key, run, lambda found: 1024)


def _position(labels: list[str], decoder: bool) -> int:
    """The position select: the shared ``query`` setting (so it is in the link, as in the query inspector)."""
    n = len(labels)
    st.session_state["query"] = as_position(st.session_state.get("query", 0))
    if st.session_state["query"] >= n:
        st.session_state["query"] = n - 1
    return int(
        st.selectbox(
            "Position",
            list(range(n)),
            key="query",
            format_func=lambda i: f"{i}: {labels[i]}" if 0 <= int(i) < n else str(i),  # a stale value: its number
            help="The query row compared below and, for a decoder, where the next token is predicted (the last "
            "token predicts what follows the whole text)."
            if decoder
            else "The query row compared below.",
        )
    )


def _unavailable(trace: ModelTrace, settings: Settings) -> str | None:
    if settings.source != "replay" or trace.model is None:
        return (
            "Head contributions take the real pretrained model apart (its values, its W^O, its own attention "
            "output), and ablation reruns it. With scratch weights there is no pretrained model to take apart: "
            "set the source to the real model's layer (replay) with MiniLM or SmolLM2."
        )
    return None


def render(trace: ModelTrace, settings: Settings) -> None:
    st.subheader(f"Head contributions: layer {trace.layer}")
    loaded = _model_or_why(trace, settings)
    if loaded is None:
        return
    _intro()
    cap = compute.capture(settings.model, settings.text, settings.max_tokens, settings.pad_to)
    layer = min(max(trace.layer, 0), len(loaded.sites) - 1)
    reference = _reference(settings, loaded, cap)
    parts = _parts(settings, cap, reference, layer)
    labels = list(cap.tokens.labels)
    decoder = reference.decoder
    mode, mode_off, position = _controls(plain_labels(labels), decoder)
    checked = _float64_check(settings, cap)[layer]
    _sum_check(checked, parts)
    shares = parts.contribution_shares()  # (H, L, S)
    shown = ShownContributions(
        tokens=labels,
        layer=layer,
        head=min(max(trace.head, 0), parts.num_heads - 1),
        position=position,
        mode=mode,
        weights=parts.weights,
        shares=shares,
        head_shares=parts.head_shares(),  # (H, L)
        decoder=decoder,
        ablation=mode_off,
        metric=ablation.metric_name(decoder),
        mask=_grid_mask(trace, parts),
        sum_check=_sum_check_numbers(checked, parts),
    )
    _grid(shown, settings.theme)
    _row(shown, settings.theme)
    _shares(shown, settings.theme)
    shown = _ablation(shown, settings, loaded, cap, reference)
    if decoder:
        shown = _direct_logit_attribution(shown, settings, loaded, reference, parts)
    shown = _ablation_map(shown, settings, loaded, cap, reference, parts.num_heads)
    _slides_button(shown, settings)


def _model_or_why(trace: ModelTrace, settings: Settings):
    """The loaded model, or None after saying why this view cannot take it apart."""
    why = _unavailable(trace, settings)
    loaded = None if why else compute.load_model(settings.model)
    if loaded is not None and not loaded.capturable:
        why = f"{plain(loaded.name, 80)}'s attention layout is not one Attention Lens can take apart by head."
    if why:
        st.info(why, icon=":material/info:")
        return None
    return loaded


def _intro() -> None:
    st.markdown(
        "A weight α says where a query looks; what it takes is α times the key's value carried through the head's "
        "slice of the output projection. A head can look hard at a token whose value is nearly nothing (often "
        "the first token or [CLS]) and change almost nothing. The per-head terms add up exactly to the block's output:"
    )
    st.latex(
        r"\mathrm{out}_i = \sum_h \sum_j \underbrace{\alpha^h_{ij}\, v_{g(h),j} W^O_h}_{c^h_{ij}} + b^O"
        r"\qquad \lVert c^h_{ij} \rVert = \alpha^h_{ij}\, \lVert v_{g(h),j} W^O_h \rVert"
    )


def _controls(plain_tokens: list[str], decoder: bool) -> tuple[str, str, int]:
    """(what the grid shows, how a head is switched off, the position), side by side."""
    cols = st.columns([3, 2, 3])
    with cols[0]:
        mode = st.radio(
            "Show",
            CONTRIBUTION_MODES,
            key="contribution_mode",
            format_func=CONTRIBUTION_MODE_LABELS.get,
            help="The same cells, the same 0..1 scale: raw weights, or each row's contribution norms scaled to sum to 1.",
        )
    with cols[1]:
        mode_off = st.radio(
            "Switch a head off by",
            ABLATIONS,
            key="ablation",
            format_func=ABLATION_LABELS.get,
            help="Zero: the head's output is removed. Mean: it is replaced by its average over this sentence's "
            "tokens (keeps its constant part, removes what depends on the token).",
        )
    with cols[2]:
        position = _position(plain_tokens, decoder)
    return mode, mode_off, position


def _sum_check_numbers(checked: float, parts) -> dict:
    """The check as the manifest records it: the float64 number is the one held to the tolerance."""
    return {
        "max_abs_diff": float(checked),
        "precision": "float64",
        "float32_max_abs_diff": float(parts.sum_check_max_abs_diff),
        "tolerance": SUM_CHECK_TOLERANCE,
        "ok": bool(checked <= SUM_CHECK_TOLERANCE),
    }


def _sum_check(checked: float, parts) -> None:
    ok = checked <= SUM_CHECK_TOLERANCE
    st.metric(
        "Σ heads + b^O vs the model's own attention output (float64)",
        f"{checked:.1e}",
        delta="adds up" if ok else "does not add up",
        delta_color="normal" if ok else "inverse",
        help="Max |sum of the per-head parts + b^O − the output projection's output|, both from a float64 copy of "
        f"the model fed the same tokens (its weights, values, W^O and b^O, its output hooked); held to "
        f"{SUM_CHECK_TOLERANCE:g}. The same comparison on the float32 model the view draws from gives "
        f"{parts.sum_check_max_abs_diff:.1e}: that is float32 rounding (SmolLM2's attention outputs reach 180), "
        "shown for information only.",
    )


def _grid_mask(trace: ModelTrace, parts):
    """The trace's mask, outlined in the grid when it fits this layer's weights (else None)."""
    mask = None if trace.model is None else getattr(trace.model, "mask", None)
    return mask if mask is not None and getattr(mask, "shape", None) == parts.weights.shape[1:] else None


def _place(name: str, draw, shown: ShownContributions, theme: str) -> None:
    fig, table = draw(shown, theme)
    figure(fig, name, table)


def _grid(shown: ShownContributions, theme: str) -> None:
    _place("contributions_grid", grid_panel, shown, theme)


def _row(shown: ShownContributions, theme: str) -> None:
    _place("contributions_row", row_panel, shown, theme)


def _shares(shown: ShownContributions, theme: str) -> None:
    _place("contributions_head_shares", head_shares_panel, shown, theme)


def _ablation(shown: ShownContributions, settings: Settings, loaded, cap, reference) -> ShownContributions:
    """Switching each head of the layer off: the bars and, for a decoder, the selected head's next tokens."""
    st.markdown("##### Switching a head off")
    st.caption(
        "A hook on the output projection edits one head's slice of its input, and the real model runs again "
        "(the whole forward pass: the layers below see exactly what they saw before). "
        + (
            "Effect: the change in log-probability of the token the model ranked first at this position."
            if shown.decoder
            else "Effect: 1 − cosine between the sentence embeddings (mean of the last hidden states) before and after."
        )
    )
    found = _layer_ablation(settings, loaded, cap, reference, shown.layer, shown.ablation, shown.position)
    shown = replace(shown, effects=np.array([a.effect for a in found], dtype=np.float64))
    _place("contributions_ablation_layer", ablation_panel, shown, settings.theme)
    chosen = found[shown.head]
    if not shown.decoder:
        st.caption(
            f"Head {shown.head} switched off ({shown.ablation}): cosine between the sentence embeddings before and "
            f"after {chosen.cosine:.6f}."
        )
        return shown
    shown = replace(
        shown,
        top_before=tuple((t.label, t.log_prob) for t in chosen.top_before),
        top_after=tuple((t.label, t.log_prob) for t in chosen.top_after),
        next_title=f"position {shown.position}: next token before and after switching off head {shown.head} "
        f"({shown.ablation}); Δ log p('{escape_label(visible_label(chosen.target.label, 20))}') = {chosen.effect:+.3f}",
    )
    _place("contributions_next_token", next_token_panel, shown, settings.theme)
    return shown


def _direct_logit_attribution(
    shown: ShownContributions, settings: Settings, loaded, reference, parts
) -> ShownContributions:
    dla = _direct_logits(settings, loaded, reference, parts, shown.position)
    direct = DirectParts(dla.heads, dla.bias, dla.rest, dla.constant, dla.logit, dla.token.label, dla.check)
    shown = replace(shown, direct=direct)
    _place("contributions_direct_logits", direct_logits_panel, shown, settings.theme)
    st.caption(
        "Direct logit attribution: each head's output at this position through the final norm (its scale held "
        f"at its value on the whole residual stream) and the unembedding row of '{plain(dla.token.label, 20)}'. "
        f"Only the direct path: what later layers make of a head is in the ablation, not here. The parts sum to "
        f"the model's logit {dla.logit:.3f} to within {dla.check:.1e}."
    )
    return shown


def _ablation_map(
    shown: ShownContributions, settings: Settings, loaded, cap, reference, num_heads: int
) -> ShownContributions:
    """The layer × head map: computed on a click, then kept (and shown) for this input, mode and position."""
    st.markdown("##### Every layer, every head")
    runs = f"{len(loaded.sites)} batched forward passes of {num_heads} rows"
    map_key = _map_key(settings, shown.ablation, shown.position)
    if st.button(f"Compute the layer × head ablation map ({runs})", key="contrib_map_go"):
        bar = st.progress(0.0, text="Switching off each head in turn")

        def progress(message: str, fraction: float) -> None:
            bar.progress(min(max(float(fraction), 0.0), 1.0), text=plain(message, 120))

        def run():
            with heavy():
                return ablation.ablation_map(
                    loaded,
                    cap.tokens,
                    mode=shown.ablation,
                    position=shown.position,
                    reference=reference,
                    progress=progress,
                )

        compute.store().get(map_key, run, lambda found: int(found.effects.nbytes))
        bar.empty()
    found_map = compute.store().peek(map_key)
    if found_map is None:
        st.caption(f"Computed on a click: {runs}, one per layer (a few seconds for MiniLM, longer for SmolLM2).")
        return shown
    shown = replace(shown, ablation_map=found_map.effects)
    _place("contributions_ablation_map", map_panel, shown, settings.theme)
    return shown


def _slides_button(shown: ShownContributions, settings: Settings) -> None:
    """Every figure above in the 'slides' theme, its numbers as CSV and a manifest, zipped on a click."""
    st.divider()
    view_only = {
        "head": shown.head,
        "query": shown.position,
        "contribution_mode": shown.mode,
        "ablation": shown.ablation,
    }

    def make() -> bytes:  # deferred: built only when clicked (about half a second per image)
        formats = "html,csv" if image_export_problem() else "png,svg,html,csv"
        return contributions_zip(shown, formats, settings={**asdict(settings.request()), **view_only})

    st.download_button(
        "⬇ Export this view for slides (PNG, SVG, HTML, CSV as a zip)",
        make,
        file_name=f"attention-lens-contributions-L{shown.layer}H{shown.head}.zip",
        mime="application/zip",
        key="export_zip",
        on_click="ignore",
        help="Every figure of this view in the white 'slides' theme, its numbers as CSV, and a manifest of the "
        "settings and the sum check."
        + (" No Chromium on the server: the zip holds HTML and CSV only." if image_export_problem() else ""),
    )
