"""View 1: the article's steps in order, each with its formula, its figure and a one-line readout."""

from __future__ import annotations

import streamlit as st

from attention_core.readouts import step_readouts
from attention_core.traces import ModelTrace
from viz.labels import plain_labels

from .. import compute, display, live_temperature, prefetch
from ..settings import Settings
from .common import current, figure, guarded, lazy_matrices


def projection_latex(bias: bool) -> str:
    """The projection formula the layer really computes (with + b when it has biases)."""
    terms = [f"{m} = XW^{m}" + (f" + b^{m}" if bias else "") for m in "QKV"]
    return r",\quad ".join(terms) + r" \qquad W^Q, W^K \in \mathbb{R}^{d_{model} \times d_k}"


def scaling_text(settings: Settings, scale: float, d_k: int) -> tuple[str, str]:
    """(sentence, formula) for step 4, stating the factor really applied (the model's own, none, or 1/t)."""
    if settings.scaling == "none":
        return "none (the control is off): the raw scores go to softmax unchanged.", r"\tilde{S} = QK^T"
    if settings.scaling == "custom":
        return (
            f"divide by the temperature t = {settings.temperature:g} (instead of √d_k = {d_k**0.5:.4g}).",
            rf"\tilde{{S}} = \frac{{QK^T}}{{t}} \qquad \tfrac{{1}}{{t}} = {scale:.4g}",
        )
    text = f"multiply by {scale:.4g} so the scores stay in softmax's sensitive range"
    if abs(scale * d_k**0.5 - 1) > 1e-6:  # e.g. GPT-2's 1/(√d_k · (layer + 1)): say it is the model's own factor
        return (
            text + f" (this model's own factor; 1/√d_k would be {1 / d_k**0.5:.4g}).",
            rf"\tilde{{S}} = QK^T \times {scale:.4g}",
        )
    return (
        text + ".",
        r"\tilde{S} = \frac{QK^T}{\sqrt{d_k}}" + rf"\qquad \tfrac{{1}}{{\sqrt{{{d_k:.0f}}}}} = {scale:.4g}",
    )


# Every figure costs the browser about 0.1-0.2 s to redraw on a 2-core machine, and a head change
# redraws all of them: above LAZY_TOKENS tokens, X and the three n x n pre-softmax steps are drawn only
# when their drawer is opened (the softmax weights always are); above LAZY_LONG_TOKENS, Q, K, V and the
# output too. Each step's formula and numbers stay on the page.
LAZY_TOKENS = 24
LAZY_LONG_TOKENS = 96


def _place(trace: ModelTrace, settings: Settings, names: tuple[str, ...], data: dict, columns: bool = False) -> None:
    figs = compute.figures(
        trace,
        settings.request(),
        "derivation",
        head=trace.head,
        theme=settings.theme,
        show_values=settings.show_values or None,
        only=names,
    )
    if "weights" in figs and display.active(settings):  # hidden specials / words / own range: said in the title
        figs, data = dict(figs), dict(data)
        figs["weights"], data["weights"] = display.weights_view(trace, settings)
    slots = st.columns(len(figs)) if columns and len(figs) > 1 else [st.container() for _ in figs]
    for slot, (name, fig) in zip(slots, figs.items(), strict=True):
        with slot:
            figure(fig, name, data.get(name))


def _step(trace, settings, names, data, *, drawer: str | None = None, columns: bool = False) -> None:
    """Draw ``names`` here, or inside a drawer that builds and sends them only while it is open."""
    if drawer is None:
        _place(trace, settings, names, data, columns)
        return
    box = st.expander(drawer, expanded=False, key=f"open_{names[0]}", on_change="rerun")
    if box.open:
        with box:
            _place(trace, settings, names, data, columns)


def _position_bias_step(trace: ModelTrace, settings: Settings, head, data: dict, drawer: str | None) -> None:
    """Step 5b, only when the head has a score bias: ALiBi's term added on its own, after the mask."""
    n = head.score_bias.shape[0]
    slope = f" This head's slope m = {-float(head.score_bias[n - 1, 0]) / (n - 1):.4g}." if n > 1 else ""
    st.markdown(
        "**5b. Position bias (ALiBi)**: ALiBi adds its distance penalty −m·|i − j| to every score, as its own "
        "term after the mask: nearer keys are preferred, blocked keys stay blocked." + slope
    )
    st.latex(r"\tilde{S}_{ij} \leftarrow \tilde{S}_{ij} - m_h\,|i - j|")
    _step(trace, settings, ("biased",), data, drawer=drawer)


LATER_KEY = (
    "lens-derivation-later"  # the fragment of steps 4-7 (app.py: the scaling's and mask's controls rerun it alone)
)


def render(trace: ModelTrace, settings: Settings) -> None:
    live_temperature.follow_release()
    h = trace.head
    data = lazy_matrices(settings.request(), "derivation", h)
    head = trace.core.head(h)
    r = step_readouts(head)
    st.subheader(f"Layer {trace.layer}, head {h}: attention one step at a time")
    _input_steps(trace, settings, head, data)
    _dot_product_step(trace, settings, head, data, r)
    later_steps(settings.model, settings.text)


@st.fragment(key=LATER_KEY)
def later_steps(model: str, text: str) -> None:
    """Steps 4-7, from the scaling on: all that a change of the scaling (its temperature), the mask (its own sizes)
    or the fill changes. Such a change reruns this fragment and the header alone (app.py ``_control_changed``):
    steps 1-3 (X, the projections, QKᵀ) stay in the page as they are, not sent and rendered again (report section
    7, "twenty-fifth" and "twenty-sixth")."""
    with guarded():  # a fragment's own rerun is not inside the view's guard
        live_temperature.follow_release()  # (its release reruns this fragment, which drew it)
        with prefetch.running(compute.session_id()):  # (the background builder waits)
            trace, settings = current(model, text, "derivation")
            head = trace.core.head(trace.head)
            data = lazy_matrices(settings.request(), "derivation", trace.head)
            r = step_readouts(head)
            _score_steps(trace, settings, head, data, r)
            _output_steps(trace, settings, head, data, r)


def _opened_above(limit: int, n: int, label: str) -> str | None:
    """A drawer label (the figure is drawn when opened) above ``limit`` tokens, else None (drawn at once)."""
    return f"{label} (drawn when opened: {n} tokens)" if n > limit else None


def _input_steps(trace: ModelTrace, settings: Settings, head, data: dict) -> None:
    """Steps 1-2: X, the projections (and the rotation for rotary heads), Q, K, V."""
    n, d_k = head.q.shape
    source = "the model's layer input" if settings.source == "replay" else "seeded token embeddings"
    st.markdown(f"**1. Input X**: one row per token ({n} tokens), from {source}.")
    st.latex(r"X \in \mathbb{R}^{n \times d_{model}}")
    if head.x is not None:
        _step(trace, settings, ("x",), data, drawer=_opened_above(LAZY_TOKENS, n, f"X ({n} × {head.x.shape[1]})"))

    bias = head.b_q is not None
    st.markdown(
        "**2. Projections**: three learned matrices map each token to a query, a key and a value"
        + (" (this layer also adds a learned bias vector to each)." if bias else ".")
    )
    st.latex(projection_latex(bias))
    if head.w_q is not None:
        _step(trace, settings, ("w_q", "w_k", "w_v"), data, drawer="The weight matrices W^Q, W^K, W^V of this head")
    if head.rotary:
        _step(
            trace,
            settings,
            ("q_before_rotary", "k_before_rotary"),
            data,
            columns=True,
            drawer=_opened_above(LAZY_TOKENS, n, "q and k before the rotation"),
        )
        st.markdown(
            "**2b. Rotary positions (RoPE)**: q and k are rotated by angles that grow with the token's position, "
            "pair of dimensions by pair; v is not rotated. The score of q_i and k_j then depends on i - j."
        )
        st.latex(
            r"\mathrm{RoPE}(x)_m = x_m \cos(m\theta) + \mathrm{rotate\_half}(x)_m \sin(m\theta)"
            r"\qquad \theta_d = \text{base}^{-2d/d_k}"
        )
    _step(
        trace,
        settings,
        ("q", "k", "v"),
        data,
        columns=True,
        drawer=_opened_above(LAZY_LONG_TOKENS, n, f"Q, K, V ({n} × {d_k} each)"),
    )


def _dot_product_step(trace: ModelTrace, settings: Settings, head, data: dict, r: dict) -> None:
    """Step 3: the raw scores QKᵀ."""
    n, d_k = head.q.shape
    st.markdown("**3. Dot products**: how well each query matches each key.")
    st.latex(r"e_{ij} = q_i \cdot k_j \qquad S = QK^T \in \mathbb{R}^{n \times n}")
    _step(trace, settings, ("scores",), data, drawer=_opened_above(LAZY_TOKENS, n, f"Raw scores QKᵀ ({n} × {n})"))
    st.caption(
        f"Variance of the scores: {r['score_var']:.3g} (d_k = {d_k:.0f}; for unit-variance q, k it would be about d_k). "
        f"Largest |score|: {r['score_absmax']:.3g}."
    )


def _score_steps(trace: ModelTrace, settings: Settings, head, data: dict, r: dict) -> None:
    """Steps 4-5b: scaling, masking and the position bias when there is one."""
    n, d_k = head.q.shape
    cells = f"{n} × {n}"
    what, formula = scaling_text(settings, r["scale"], d_k)
    st.markdown(f"**4. Scaling**: {what}")
    st.latex(formula)
    _step(trace, settings, ("scaled",), data, drawer=_opened_above(LAZY_TOKENS, n, f"Scaled scores ({cells})"))
    st.caption(f"Variance after scaling: {r['scaled_var']:.3g} (was {r['score_var']:.3g}).")

    fill = r"-\infty" if settings.fill == "-inf" else r"-10^9"
    st.markdown(
        "**5. Masking**: "
        + (
            "blocked keys get -∞, so softmax gives them exactly 0."
            if settings.fill == "-inf"
            else "blocked keys get -1e9 (the common shortcut): nearly 0 after softmax, but a row with every key "
            "blocked becomes uniform and leaks."
        )
    )
    st.latex(rf"\tilde{{S}}_{{ij}} \leftarrow {fill} \ \text{{where query }} i \text{{ may not see key }} j")
    _step(trace, settings, ("masked",), data, drawer=_opened_above(LAZY_TOKENS, n, f"Masked scores ({cells})"))
    empty = (
        f" {r['empty_rows']} row(s) have every key blocked: they attend to nothing (weights 0, output 0)"
        + (" — with fill -1e9 such rows would leak instead." if settings.fill == "-inf" else ".")
        if r["empty_rows"]
        else ""
    )
    st.caption(f"{r['blocked']} of {r['cells']} cells blocked.{empty}")
    if head.score_bias is not None:
        _position_bias_step(
            trace, settings, head, data, _opened_above(LAZY_TOKENS, n, f"Masked scores + ALiBi bias ({cells})")
        )


def _output_steps(trace: ModelTrace, settings: Settings, head, data: dict, r: dict) -> None:
    """Steps 6-7: softmax and the weighted sum of the values."""
    n = head.q.shape[0]
    st.markdown("**6. Softmax**: each row becomes a probability distribution over the keys.")
    st.latex(r"\alpha_{ij} = \frac{\exp(\tilde{S}_{ij})}{\sum_{j'} \exp(\tilde{S}_{ij'})}")
    _step(trace, settings, ("weights",), data)
    st.caption(
        f"Row sums from {r['row_sum_min']:.6f} to {r['row_sum_max']:.6f}. Mean entropy {r['entropy']:.3f} nats "
        f"(uniform over the allowed keys: {r['max_entropy']:.3f}); mean largest weight {r['max_weight']:.3f}."
    )
    live_temperature.section(head, plain_labels(trace.tokens), settings.query, fill=settings.fill, view="derivation")

    st.markdown("**7. Weighted sum**: each output row mixes the value vectors by those weights.")
    st.latex(r"O = AV = \mathrm{softmax}(\tilde{S})\,V")
    _step(
        trace,
        settings,
        ("output",),
        data,
        drawer=_opened_above(LAZY_LONG_TOKENS, n, f"Output O ({n} × {head.output.shape[1]})"),
    )
