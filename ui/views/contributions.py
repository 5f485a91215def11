"""View: head contributions. One layer of the real model taken apart by head: raw weights against
value-weighted contributions, each head's share of the block's output, the check that the heads add up to
the model's own attention output, switching a head off (ablation) and, for decoders, direct logit attribution.

Every number comes from ``attention_core.contributions`` / ``attention_core.ablation`` and is kept once per
input in the app's byte-bounded store; the layer × head ablation map is computed only on a click.
"""

from __future__ import annotations

import streamlit as st

from attention_core import ablation
from attention_core.ablation import ABLATIONS
from attention_core.contributions import SUM_CHECK_TOLERANCE, layer_contributions
from attention_core.traces import ModelTrace
from viz.contributions import (
    CONTRIBUTION_MODE_LABELS,
    CONTRIBUTION_MODES,
    ablation_bars,
    ablation_map_figure,
    contribution_grid,
    direct_logit_figure,
    head_share_figure,
    next_token_figure,
    row_comparison,
)
from viz.labels import plain_labels

from .. import compute
from ..policy import heavy
from ..settings import Settings
from ..sidebar import as_position
from ..text import plain
from .common import figure

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
    why = _unavailable(trace, settings)
    loaded = None if why else compute.load_model(settings.model)
    if loaded is not None and not loaded.capturable:
        why = f"{plain(loaded.name, 80)}'s attention layout is not one Attention Lens can take apart by head."
    if why:
        st.info(why, icon=":material/info:")
        return
    st.markdown(
        "A weight α says where a query looks; what it takes is α times the key's value carried through the head's "
        "slice of the output projection. A head can look hard at a token whose value is nearly nothing (often "
        "the first token or [CLS]) and change almost nothing. The per-head terms add up exactly to the block's output:"
    )
    st.latex(
        r"\mathrm{out}_i = \sum_h \sum_j \underbrace{\alpha^h_{ij}\, v_{g(h),j} W^O_h}_{c^h_{ij}} + b^O"
        r"\qquad \lVert c^h_{ij} \rVert = \alpha^h_{ij}\, \lVert v_{g(h),j} W^O_h \rVert"
    )
    cap = compute.capture(settings.model, settings.text, settings.max_tokens, settings.pad_to)
    layer = min(max(trace.layer, 0), len(loaded.sites) - 1)
    reference = _reference(settings, loaded, cap)
    parts = _parts(settings, cap, reference, layer)
    labels = list(cap.tokens.labels)
    plain_tokens = plain_labels(labels)
    decoder = reference.decoder
    head = min(max(trace.head, 0), parts.num_heads - 1)

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

    ok = parts.sum_check_ok
    st.metric(
        "Σ heads + b^O vs the model's own attention output",
        f"{parts.sum_check_max_abs_diff:.1e}",
        delta="adds up" if ok else "does not add up",
        delta_color="normal" if ok else "inverse",
        help=f"Max |sum of the per-head parts + b^O − the output projection's output, hooked from the real model|; "
        f"held to {SUM_CHECK_TOLERANCE:g} of max(1, the size of the terms summed) ({parts.sum_check_scaled_diff:.1e} "
        "here): a float32 sum is only as exact as the terms it adds (SmolLM2's reach 180).",
    )

    mask = None if trace.model is None else getattr(trace.model, "mask", None)
    if mask is not None and getattr(mask, "shape", None) != parts.weights.shape[1:]:
        mask = None
    shares = parts.contribution_shares()  # (H, L, S)
    figure(
        contribution_grid(
            parts.weights, shares, labels, mode=mode, layer=layer, selected=head, mask=mask, theme=settings.theme
        ),
        "contributions_grid",
        (parts.weights[head] if mode == "weights" else shares[head], plain_tokens, plain_tokens),
    )
    figure(
        row_comparison(
            parts.weights[head, position],
            shares[head, position],
            labels,
            query_index=position,
            head=head,
            layer=layer,
            theme=settings.theme,
        ),
        "contributions_row",
        (
            [[float(w), float(c)] for w, c in zip(parts.weights[head, position], shares[head, position], strict=True)],
            plain_tokens,
            ["weight", "contribution_share"],
        ),
    )
    head_shares = parts.head_shares()  # (H, L)
    figure(
        head_share_figure(head_shares, labels, layer=layer, selected=head, theme=settings.theme),
        "contributions_head_shares",
        (head_shares, [f"head {h}" for h in range(parts.num_heads)], plain_tokens),
    )

    st.markdown("##### Switching a head off")
    st.caption(
        "A hook on the output projection edits one head's slice of its input, and the real model runs again "
        "(the whole forward pass: the layers below see exactly what they saw before). "
        + (
            "Effect: the change in log-probability of the token the model ranked first at this position."
            if decoder
            else "Effect: 1 − cosine between the sentence embeddings (mean of the last hidden states) before and after."
        )
    )
    found = _layer_ablation(settings, loaded, cap, reference, layer, mode_off, position)
    effects = [a.effect for a in found]
    figure(
        ablation_bars(
            effects, metric=ablation.metric_name(decoder), layer=layer, decoder=decoder, theme=settings.theme
        ),
        "contributions_ablation_layer",
        ([[e] for e in effects], [f"head {h}" for h in range(len(effects))], ["effect"]),
    )
    chosen = found[head]
    if decoder:
        before = [(t.label, t.log_prob) for t in chosen.top_before]
        after = [(t.label, t.log_prob) for t in chosen.top_after]
        title = (
            f"position {position}: next token before and after switching off head {head} ({mode_off}); "
            f"Δ log p('{plain(chosen.target.label, 20)}') = {chosen.effect:+.3f}"
        )
        figure(
            next_token_figure(before, after, title=title, theme=settings.theme),
            "contributions_next_token",
            (
                [[lp] for _, lp in before] + [[lp] for _, lp in after],
                [f"before: {plain(t, 40)}" for t, _ in before] + [f"after: {plain(t, 40)}" for t, _ in after],
                ["log_prob"],
            ),
        )
        dla = _direct_logits(settings, loaded, reference, parts, position)
        figure(
            direct_logit_figure(
                dla.heads,
                bias=dla.bias,
                rest=dla.rest,
                constant=dla.constant,
                logit=dla.logit,
                token=dla.token.label,
                layer=layer,
                position=position,
                theme=settings.theme,
            ),
            "contributions_direct_logits",
            (
                [[float(v)] for v in dla.heads] + [[dla.bias], [dla.rest], [dla.constant]],
                [f"head {h}" for h in range(len(dla.heads))] + ["b_O", "rest", "constant"],
                ["logit_part"],
            ),
        )
        st.caption(
            "Direct logit attribution: each head's output at this position through the final norm (its scale held "
            f"at its value on the whole residual stream) and the unembedding row of '{plain(dla.token.label, 20)}'. "
            f"Only the direct path: what later layers make of a head is in the ablation, not here. The parts sum to "
            f"the model's logit {dla.logit:.3f} to within {dla.check:.1e}."
        )
    else:
        st.caption(
            f"Head {head} switched off ({mode_off}): cosine between the sentence embeddings before and after "
            f"{chosen.cosine:.6f}."
        )

    st.markdown("##### Every layer, every head")
    runs = f"{len(loaded.sites)} batched forward passes of {parts.num_heads} rows"
    map_key = _map_key(settings, mode_off, position)
    if st.button(f"Compute the layer × head ablation map ({runs})", key="contrib_map_go"):
        bar = st.progress(0.0, text="Switching off each head in turn")

        def progress(message: str, fraction: float) -> None:
            bar.progress(min(max(float(fraction), 0.0), 1.0), text=plain(message, 120))

        def run():
            with heavy():
                return ablation.ablation_map(
                    loaded, cap.tokens, mode=mode_off, position=position, reference=reference, progress=progress
                )

        compute.store().get(map_key, run, lambda found: int(found.effects.nbytes))
        bar.empty()
    found_map = compute.store().peek(map_key)
    if found_map is None:
        st.caption(f"Computed on a click: {runs}, one per layer (a few seconds for MiniLM, longer for SmolLM2).")
        return
    figure(
        ablation_map_figure(
            found_map.effects,
            metric=found_map.metric,
            decoder=found_map.decoder,
            selected=(layer, head),
            theme=settings.theme,
        ),
        "contributions_ablation_map",
        (
            found_map.effects,
            [f"layer {i}" for i in range(found_map.effects.shape[0])],
            [f"head {h}" for h in range(found_map.effects.shape[1])],
        ),
    )
