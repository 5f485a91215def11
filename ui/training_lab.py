"""Training lab tab: train one attention layer with and without 1/sqrt(d_k), and set attention against
recurrence. Streamlit only: widgets in, calls into attention_core.training / .recurrence (plain data
out) and viz.training (figures out). Every widget key starts with "lab_".

Training runs chunk by chunk in this session's script thread: after each chunk the progress bar and
the figures are redrawn. Pressing Stop reruns the script, which interrupts the loop at its next
redraw; the chunks done so far stay in session_state (plain floats and numpy, no tensors) and are
shown with the step they reached. At most two trainings run at once in the whole server (the training
slot of ui.policy, held by the training generator while it runs); a third waits, then gets a message.
"""

from __future__ import annotations

from contextlib import closing
from dataclasses import replace

import streamlit as st

from attention_core.device import pick_device
from attention_core.recurrence import path_length_columns, path_lengths, time_sequence_models, timing_summary
from attention_core.training import TrainingConfig, TrainingSnapshot, train_side_by_side, variants
from ui.chart import draw
from ui.policy import TrainingBusyError, training_slot
from ui.text import plain
from ui.training_verdict import verdict
from viz.training import attention_vs_recurrence, probe_attention, training_curves

DEFAULTS = TrainingConfig()
D_K_CHOICES = (8, 16, 32, 64, 128, 256, 512)
INIT_CHOICES = (0.1, 0.25, 0.5, 1.0, 2.0, 4.0)
LR_CHOICES = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 0.3, 1.0, 3.0)
REDRAWS = 12  # about this many progress updates per training, whatever the number of steps
TIMING_NS = (16, 32, 64, 128, 256, 512, 1024)
PATH_NS = (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
RUNS_KEY, STOP_KEY, TIMING_KEY = "lab_runs", "lab_stop_requested", "lab_timing"


def _request_stop() -> None:
    st.session_state[STOP_KEY] = True


def _variant_toggles() -> tuple[bool, bool, int]:
    """The right-hand column: which variants to train, and the seed."""
    want_scaled = st.toggle(
        "train with scaling (÷ sqrt(d_k))",
        value=True,
        key="lab_scaled",
        help="The variant the article recommends: scores multiplied by 1/sqrt(d_k) before softmax.",
    )
    want_unscaled = st.toggle(
        "train without scaling (raw q·k)",
        value=True,
        key="lab_unscaled",
        help="The same layer, same seed, same data, but the scores go into softmax unscaled.",
    )
    seed = st.number_input(
        "seed",
        min_value=0,
        max_value=2**31 - 1,
        value=DEFAULTS.seed,
        step=1,
        key="lab_seed",
        help="Fixes the embeddings, the initial weights and every batch: the same seed gives the same curves.",
    )
    return want_scaled, want_unscaled, seed


def _more_settings() -> tuple[str, int, int]:
    """The "More settings" expander: optimiser, slots per example, batch size."""
    with st.expander("More settings"):
        a, b, c = st.columns(3)
        optimizer = a.radio(
            "optimiser",
            options=("adam", "sgd"),
            index=0,
            key="lab_optimizer",
            horizontal=True,
            help="Adam rescales each parameter's step and so partly hides vanishing gradients; "
            "plain SGD shows them raw (raise the learning rate to ~1 for SGD).",
        )
        num_slots = b.slider(
            "slots per example",
            min_value=4,
            max_value=32,
            value=DEFAULTS.num_slots,
            step=4,
            key="lab_num_slots",
            help="How many (key, value) pairs the query chooses among. More slots: a harder search, "
            "and uniform attention spreads thinner.",
        )
        batch_size = c.select_slider(
            "batch size",
            options=(16, 32, 64, 128),
            value=DEFAULTS.batch_size,
            key="lab_batch_size",
            help="Fresh examples per step. Larger batches give smoother curves and take longer.",
        )
    return optimizer, num_slots, batch_size


def _controls() -> tuple[TrainingConfig, bool, bool]:
    """Read the widgets into one base config (scaled flag unset) and the two variant toggles."""
    left, middle, right = st.columns(3)
    with left:
        d_k = st.select_slider(
            "d_k (width of q and k)",
            options=D_K_CHOICES,
            value=DEFAULTS.d_k,
            key="lab_d_k",
            help="The dimension the scaling is about. Raw scores q·k grow like sqrt(d_k), so the larger d_k, "
            "the more an unscaled softmax saturates. At small d_k the two variants behave alike.",
        )
        init_scale = st.select_slider(
            "initialisation scale",
            options=INIT_CHOICES,
            value=DEFAULTS.init_scale,
            key="lab_init_scale",
            help="Standard deviation of each entry of q, k and v at the start. 1 = unit variance per dimension, "
            "as in the article's argument; raw scores then start with std about init² · sqrt(d_k).",
        )
    with middle:
        learning_rate = st.select_slider(
            "learning rate",
            options=LR_CHOICES,
            value=DEFAULTS.learning_rate,
            format_func=lambda lr: f"{lr:g}",
            key="lab_learning_rate",
            help="Step size of the optimiser. Adam works around 1e-3..3e-2; plain SGD needs about 0.3..1.",
        )
        steps = st.slider(
            "training steps",
            min_value=50,
            max_value=2000,
            value=DEFAULTS.steps,
            step=50,
            key="lab_steps",
            help="Each step draws a fresh batch of 64 examples from the seed. Time grows linearly with steps.",
        )
    with right:
        want_scaled, want_unscaled, seed = _variant_toggles()
    optimizer, num_slots, batch_size = _more_settings()
    config = replace(
        DEFAULTS,
        d_k=int(d_k),
        init_scale=float(init_scale),
        learning_rate=float(learning_rate),
        steps=int(steps),
        seed=int(seed),
        optimizer=str(optimizer),
        num_slots=int(num_slots),
        num_keys=max(DEFAULTS.num_keys, int(num_slots)),
        batch_size=int(batch_size),
        snapshot_every=max(1, int(steps) // REDRAWS),
    )
    return config, want_scaled, want_unscaled


def _draw(runs: tuple[TrainingSnapshot, ...], progress, verdict_slot, curves_slot, probe_slot, *, live: bool) -> None:
    """Progress bar and curves for the snapshots so far; verdict and probe heatmaps unless ``live``.

    While a run is going (``live``) only the cheap parts are redrawn each chunk. The charts are the views' own
    (``ui.chart.draw``: the app's plotly.js, not Streamlit's chart and the second plotly.js it brings); a key
    names one element per run, so each chunk's curves get a key of their own.
    """
    config = runs[0].config
    step = max(s.step for s in runs)
    seconds = max(s.elapsed_s for s in runs)
    progress.progress(step / config.steps, text=f"step {step} of {config.steps} · {seconds:.1f} s")
    curves = training_curves(
        {s.variant: s.curves() for s in runs},
        total_steps=config.steps,
        chance_loss=config.chance_loss,
        chance_accuracy=1.0 / config.num_values,
        max_entropy=config.max_entropy,
    )
    with curves_slot:
        draw(curves, key=f"lab_curves_{step}" if live else "lab_curves")
    if live:
        verdict_slot.caption("Training … the verdict appears when the run ends (or when you press Stop training).")
        return
    result = verdict(config, runs)
    with verdict_slot.container():
        calm = {"scaling_helps": st.success, "no_difference": st.info, "single": st.info}
        calm.get(result.outcome, st.warning)(plain(result.headline, limit=2000))
        with st.expander("The measurements behind this verdict"):
            st.markdown("\n".join(f"- {plain(reason, limit=500)}" for reason in result.reasons))
    probes = probe_attention({s.variant: s.probe_weights for s in runs}, runs[0].probe_target_slot)
    with probe_slot:
        draw(probes, key="lab_probes")


def _train(configs: tuple[TrainingConfig, ...], slots: tuple) -> None:
    """Run the chosen variants chunk by chunk, keeping the latest snapshots in session_state."""
    st.session_state[STOP_KEY] = False
    st.session_state[RUNS_KEY] = None
    try:
        with closing(train_side_by_side(configs, guard=training_slot())) as chunks:
            for runs in chunks:
                st.session_state[RUNS_KEY] = runs
                stop = bool(st.session_state.get(STOP_KEY))
                _draw(runs, *slots, live=not (stop or all(snap.done for snap in runs)))
                if stop:  # a Stop press usually interrupts the script itself; this catches it between chunks
                    break
    except TrainingBusyError as err:
        st.warning(f"{err}. Your run did not start.")


def _training_section() -> None:
    st.subheader("Training lab: does 1/√d_k decide whether attention learns?")
    st.markdown(
        "A single attention head learns a lookup. Every example holds a row of **slots**, each a "
        "(key, value) pair, and a **query** that names one of the keys; the right answer is the value "
        "stored beside that key. To answer, the query must put its attention on the matching slot. "
        "The same layer is trained twice from the same seed on the same data: once with its scores "
        "divided by √d_k, once with raw scores q·k."
    )
    config, want_scaled, want_unscaled = _controls()
    start_col, stop_col, _ = st.columns([1, 1, 3])
    train_clicked = start_col.button(
        "Train",
        type="primary",
        key="lab_train",
        disabled=not (want_scaled or want_unscaled),
        help="Train the chosen variants side by side; the curves update as they go.",
    )
    stop_col.button(
        "Stop training",
        key="lab_stop",
        on_click=_request_stop,
        help="Stop the running training; what it has learned so far stays on screen.",
    )
    if not (want_scaled or want_unscaled):
        st.info("Switch on at least one variant to train.")
    progress = st.progress(0.0, text="not trained yet")
    notes = st.container()
    slots = (progress, st.empty(), st.empty(), st.empty())
    if train_clicked and (want_scaled or want_unscaled):
        _train(variants(config, scaled=want_scaled, unscaled=want_unscaled), slots)
        return
    runs = st.session_state.get(RUNS_KEY)
    if not runs:
        notes.caption("Press Train: the defaults take a few seconds on a laptop CPU.")
        return
    shown = runs[0].config
    if not all(s.done for s in runs):
        step = max(s.step for s in runs)
        notes.caption(f"Stopped at step {step} of {shown.steps}; the verdict describes those steps only.")
    trained = {s.variant for s in runs}
    wanted = {variant for variant, on in (("scaled", want_scaled), ("unscaled", want_unscaled)) if on}
    if replace(shown, scaled=True) != replace(config, scaled=True) or trained != wanted:
        notes.caption("These results are from the previous settings; press Train to run with the current ones.")
    _draw(runs, *slots, live=False)


def _recurrence_section() -> None:
    st.subheader("Attention against recurrence")
    st.markdown(
        "An attention layer computes every position from every other position in one step, so any two "
        "tokens are one hop apart. A recurrent net (RNN, GRU) reads the sequence one token at a time: "
        "position t has to wait for position t−1, and information from the first token reaches the last "
        "only after n−1 hops."
    )
    n = st.select_slider(
        "sequence length n",
        options=PATH_NS,
        value=512,
        key="lab_path_n",
        help="The counts below are exact for one layer of each kind.",
    )
    counts = path_lengths(int(n))
    cols = st.columns(4)
    cols[0].metric("attention: sequential steps", counts.attention_sequential_steps)
    cols[1].metric("attention: longest path", counts.attention_longest_path)
    cols[2].metric("recurrent: sequential steps", counts.recurrent_sequential_steps)
    cols[3].metric("recurrent: longest path", counts.recurrent_longest_path)
    device = str(pick_device())
    measure = st.button(
        f"Measure time on {device}",
        key="lab_measure",
        help=f"Times one forward pass of each layer (batch 2, width 64) at n = {TIMING_NS[0]} … {TIMING_NS[-1]}: "
        "this app's attention core, torch's fused attention, torch.nn.RNN and torch.nn.GRU. Takes a few seconds.",
    )
    if measure:
        with st.spinner("Timing attention, RNN and GRU …"):
            try:
                with training_slot():
                    report = time_sequence_models(TIMING_NS, batch_size=2, repeats=3, device=device)
                st.session_state[TIMING_KEY] = report
            except TrainingBusyError as err:
                st.warning(f"{err}. Nothing was measured.")
    report = st.session_state.get(TIMING_KEY)
    figure = attention_vs_recurrence(
        path_length_columns(PATH_NS),
        report.columns() if report is not None else None,
        device=report.device if report is not None else None,
    )
    draw(figure, key="lab_recurrence")
    if report is not None:
        st.caption(plain(timing_summary(report), limit=2000))


def render_training_lab() -> None:
    """The whole training-lab view: controls, live training, verdict, figures, attention vs recurrence."""
    _training_section()
    st.divider()
    _recurrence_section()
