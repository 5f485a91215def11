"""Cached calls into attention_core, shared by every session of the server, never copied.

What a click costs (see docs/INTERACTION.md): settings split into those that decide numbers (the
request without ``head``) and those that only choose what to look at (head, query, view,
statistic). Models live in ``st.cache_resource``; captures, traces and per-capture summaries live
in one byte-bounded ``Store`` (ATTENTION_LENS_CACHE_MB, default 512): held by reference, float32,
computed once even when many sessions ask at the same moment, nothing pickled per rerun.

Resources, for a server shared by many sessions:
- model loads, forwards and trace builds run inside ``heavy()``, the server policy of ``ui.policy``: at
  most ATTENTION_LENS_MAX_HEAVY (default 2) at once in the whole server, else ``ServerBusy``.
- ``token_budget(facts)``: the most tokens one request may hold so its capture (every layer's weights)
  and its trace stay under ATTENTION_LENS_MAX_TRACE_MB (default 1536 MB): the app caps longer inputs
  with a notice. At the default, MiniLM computes its full 512 positions and SmolLM2 about 1,100 tokens.
- local model folders are refused unless ATTENTION_LENS_MODELS_DIR names the folder they must be in.
"""

from __future__ import annotations

import math
import os
import threading
from dataclasses import astuple, replace

import numpy as np
import streamlit as st

from attention_core import pipeline
from attention_core.request import TraceRequest, validate
from viz.summaries import overview_by_head as overview_by_head  # re-exported: tests and callers read it here
from viz.summaries import overviews_by_head
from viz.summaries import rollout_streamed as rollout_streamed

from . import first_looks, plotly_spec, prefetch
from .policy import ServerBusy as ServerBusy  # app.py catches it as compute.ServerBusy
from .policy import env_number, heavy
from .sizes import capture_bytes, trace_bytes
from .sizes import return_freed_memory as return_freed_memory  # app.py calls it once per server
from .store import freeze_long_lived

MAX_TRACE_MB = env_number("ATTENTION_LENS_MAX_TRACE_MB", 1536.0, 1.0)
CACHE_MB = env_number("ATTENTION_LENS_CACHE_MB", 512.0, 16.0)
TRACE_MAPS_PER_HEAD = 4  # (L, S) float32 maps a trace owns per head: the core's scores, scaled, masked, weights
# (the model's weights are views of the capture's buffer; it returns no pre-softmax steps)


_PREPARE = threading.Lock()  # one conversion of a bundled model at a time in the whole server


def prepare_bundled(name: str, progress) -> None:
    """Make a bundled model ready (SmolLM2: the one-time conversion) outside the cached loader, so the
    page can show each step in a progress bar (a cached function may not draw into the page)."""
    from attention_core.pretrained.bundled import bundled_name, prepare

    bundled = bundled_name(name)
    if bundled is None:
        return
    with _PREPARE, heavy():
        prepare((bundled,), progress=progress)


def models_dir() -> str | None:
    """Folder that local model paths must live in (ATTENTION_LENS_MODELS_DIR), if configured.

    Unset, the app accepts bundled models and Hugging Face ids only: a public server never reads
    arbitrary folders. (The command line accepts any folder.)
    """
    return os.environ.get("ATTENTION_LENS_MODELS_DIR") or None


def request_bytes(num_layers: int, num_heads: int, tokens: int) -> int:
    """Bytes of float32 (L, L) maps one request holds: the capture's weights of every layer and head,
    plus the trace's own maps of the chosen layer (the big terms; vectors are linear in L)."""
    return 4 * tokens**2 * (num_layers * num_heads + TRACE_MAPS_PER_HEAD * num_heads)


def token_budget_for(num_layers: int, num_heads: int) -> int:
    """The most tokens one request may hold so ``request_bytes`` stays under MAX_TRACE_MB (at least 16)."""
    per_token2 = request_bytes(num_layers, num_heads, 1)
    return max(16, math.isqrt(int(MAX_TRACE_MB * 2**20 / per_token2)))


def token_budget(facts) -> int:
    """token_budget_for this model's layers and heads."""
    return token_budget_for(facts.num_layers, facts.num_heads)


@st.cache_resource(show_spinner=False)
def shared_store():
    """The one byte-bounded cache of captures, traces and summaries in this server (see ui/store.py), with
    its sweeper, which lets go of what ended sessions held (ui/sweep.py)."""
    from . import sweep
    from .store import Store

    made = Store(int(CACHE_MB * 2**20))
    sweep.start(made)
    return made


def session_id():
    """This browser tab's session id; on the prefetch thread, the session whose job it builds
    (``prefetch.acting_owner``); None outside a server's script run otherwise (a script, AppTest's helpers)."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx(suppress_warning=True)  # a prefetch thread has none: no warning in the log per build
    return prefetch.acting_owner() if ctx is None else ctx.session_id


def store():
    """The shared store as this session uses it: what it reads is remembered as its own (ui/store.py Owned)."""
    from .store import Owned

    return Owned(shared_store(), session_id())


@st.cache_resource(max_entries=3, show_spinner=False)
def load_model(name: str):
    folder = models_dir()
    with heavy():
        loaded = pipeline.load(TraceRequest(model=name), models_dir=folder, allow_local=folder is not None)
    freeze_long_lived()  # once per server (ui/store.py)
    return loaded


FLOAT64_TTL_S = 600.0  # a float64 copy unused for this long is let go


@st.cache_resource(max_entries=1, ttl=FLOAT64_TTL_S, show_spinner=False)
def float64_model(name: str):
    """A float64 CPU copy of the model (``kvcache_checks.float64_copy``) for the sum check of the head
    contributions: made once per model, not per input or rerun (SmolLM2's takes seconds and holds about
    1.1 GB), and only one in the whole server (another model's copy replaces it), let go after 10 minutes."""
    from attention_core.kvcache_checks import float64_copy

    loaded = load_model(name)
    with heavy():
        return float64_copy(loaded)


def input_key(request: TraceRequest) -> tuple:
    """(model, text, max_tokens, pad_to): what decides a capture."""
    return (request.model, request.text, request.max_tokens, request.pad_to)


def capture(name: str, text: str, max_tokens: int, pad_to: int):
    """The model run once on this text with hooks: shared by every session asking for the same input."""
    return whole_capture(store(), load_model, name, text, max_tokens, pad_to)


def whole_capture(held, loader, name: str, text: str, max_tokens: int, pad_to: int):
    """``capture`` through ``held`` (a session's view of the store: on the check's thread, the one the script
    handed it) with ``loader`` (the cached model loader, or there the model the script looked up); then the
    first looks at that input go."""

    def run():
        loaded = loader(name)
        with heavy():
            request = TraceRequest(model=name, text=text, max_tokens=max_tokens, pad_to=pad_to)
            return pipeline.capture_text(loaded, request)

    cap = held.get(_capture_key(name, text, max_tokens, pad_to), run, capture_bytes)
    first_looks.forget(held, (name, text, max_tokens, pad_to))
    return cap


# Views that show one layer only (the derivation: X, Q, K, V and every step of the chosen layer and head): opening a
# long text there draws from a first look, the model run up to that layer (``first_look``), and the rest of the
# layers are captured after the page's first chart, in the background, with the all-layers check (``ui.all_layers.replay_if_ready``).
ONE_LAYER_VIEWS = frozenset({"derivation"})


def _capture_key(name: str, text: str, max_tokens: int, pad_to: int) -> tuple:
    return ("capture", name, text, max_tokens, pad_to)


def _first_key(name: str, text: str, max_tokens: int, pad_to: int, layer: int) -> tuple:
    return ("first-capture", name, text, max_tokens, pad_to, layer)


def replays_in_script(layers: int, heads: int, length: int) -> bool:
    """Whether the all-layers check of an input this size runs in the script (quick), not in the background."""
    return layers * heads * length**2 <= SYNC_REPLAY_CELLS


def first_look(name: str, text: str, max_tokens: int, pad_to: int, layer: int):
    """The capture to draw one layer from: the whole capture when it is held or when the input is short (its
    all-layers check runs in the script anyway); else the model run up to ``layer`` only and stopped there
    (``Capture.complete`` False): at 512 tokens that is MiniLM's layer 0 in a sixth of the pass, SmolLM2's in a
    thirtieth (report section 7, "twenty-eighth"). Those layers are the whole pass's, bit for bit."""
    held = store().peek(_capture_key(name, text, max_tokens, pad_to))
    if held is not None:
        return held
    loaded = load_model(name)
    layer = min(max(int(layer), 0), loaded.facts.num_layers - 1)
    if not loaded.sites or layer >= len(loaded.sites) - 1:
        return capture(name, text, max_tokens, pad_to)
    key = _first_key(name, text, max_tokens, pad_to, layer)
    if (looked := store().peek(key)) is not None:
        return looked
    request = TraceRequest(model=name, text=text, max_tokens=max_tokens, pad_to=pad_to)
    length = pipeline.request_tokens(loaded, request).ids.shape[1]
    if replays_in_script(loaded.facts.num_layers, loaded.facts.num_heads, length):
        return capture(name, text, max_tokens, pad_to)

    def run():
        with heavy():
            return pipeline.capture_text(loaded, request, upto=layer)

    first_looks.remember(input_key(request), key)
    looked = store().get(key, run, capture_bytes)
    if looked.complete:  # the model's modules hid their weights from the hooks: it made the whole pass, kept as such
        looked = store().get(_capture_key(name, text, max_tokens, pad_to), lambda: looked, capture_bytes)
        first_looks.forget(store(), input_key(request))
    return looked


def numbers_key(request: TraceRequest) -> tuple:
    """What decides the numbers: the request without ``head`` (a head change only picks a slice)."""
    return astuple(replace(request, head=0))


def trace_for(request: TraceRequest, notices=(), *, view: str | None = None):
    """The trace for ``request``: built once per numbers key, then only its ``head`` is set (no copy).

    The request goes through ``validate`` first, as on the command line (``pipeline.run_trace``): what it
    fixes joins ``notices``. ``view``: the view it is drawn for; one of ``ONE_LAYER_VIEWS`` may get a trace made
    from a first look (``first_look``; ``complete`` False, no ``model_attentions``) while the whole capture of a
    long input is not yet held."""
    request, fixed = validate(request)
    notices = (*notices, *fixed)
    if view in ONE_LAYER_VIEWS:
        cap = first_look(*input_key(request), request.layer)
        if not cap.complete:
            return with_head(_first_trace(request, tuple(notices), cap), request.head)

    def build():
        loaded = load_model(request.model)
        cap = capture(*input_key(request))
        with heavy():
            return pipeline.build_trace(replace(request, head=0), loaded.facts, cap, tuple(notices), with_replay=False)

    trace = store().get(("trace", numbers_key(request), tuple(notices)), build, trace_bytes)
    return with_head(trace, request.head)


def _first_trace(request: TraceRequest, notices: tuple, cap):
    """The trace of a first look's capture (the chosen layer exactly as the whole one's), kept until the whole
    capture is held."""

    def build():
        loaded = load_model(request.model)
        with heavy():
            return pipeline.build_trace(replace(request, head=0), loaded.facts, cap, notices, with_replay=False)

    key = ("first-trace", numbers_key(request), notices)
    first_looks.remember(input_key(request), key)
    return store().get(key, build, trace_bytes)


def replay_for(request: TraceRequest):
    """(captured, hidden): every layer replayed through the core, per-layer max |core - model|; once per capture."""
    cap = capture(*input_key(request))
    with heavy():
        return pipeline.replay_summary(cap)


SYNC_REPLAY_CELLS = (
    6 * 12 * 128**2
)  # replay every layer in the script up to MiniLM at 128 tokens; above, in the background


def with_replay(trace, request: TraceRequest):
    """The trace with its per-layer replay check filled in (a shallow copy)."""
    if trace.replay or trace.replay_hidden:
        return trace
    captured, hidden = replay_for(request)
    return replace(trace, replay=captured, replay_hidden=hidden)


def with_head(trace, head: int):
    """The same trace looking at another head (a shallow copy: every array shared)."""
    head = min(max(int(head), 0), trace.core.num_heads - 1)
    return trace if head == trace.head else replace(trace, head=head)


def figures(
    trace, request: TraceRequest, view: str, *, ahead: bool | float = False, every_head: bool | None = None, **options
) -> dict:
    """``viz.views.figures_for_trace`` once per numbers, head, view and options, shared by every session
    (a class opening the same link, a teacher going back to a head), each kept as the bytes sent
    (``plotly_spec.Sent``; ``.figure()`` builds the plotly Figure again).
    The derivation's are kept by a digest of what they are built from (``viz.views.derivation_key``): a step
    whose numbers a change left alone (Q after a new mask) is the figure shown before, not rebuilt.
    ``ahead``: a view not shown; queued for the background builder (``ui.prefetch``; a callable ``precomputed`` is
    called there; a number: the pause in seconds it waits for), {} now.

    ``every_head`` (default: for ``viz.marks.MARKED_VIEWS``, Heads & layers and the attention lines): the figures
    built for head 0 and kept for every head, which ``marked_figures`` marks with the chosen head. Heads & layers
    shows the model's own weights when it has them: those figures are kept per capture and layer
    (``_summary_key``), so the core's scaling, mask or encoding leave them as they were."""
    from viz.marks import MARKED_VIEWS
    from viz.views import derivation_key, figures_for_trace

    every_head = view in MARKED_VIEWS if every_head is None else every_head

    def job(head: int, **changed):  # the store key and builder at ``head`` (ui.prefetch builds the neighbours)
        at = with_head(trace, 0 if every_head else head)
        opts = {**options, **changed, **({"head": at.head} if "head" in options else {})}
        shown = {name: value for name, value in opts.items() if name != "precomputed"}
        if view == "derivation":
            made_of = derivation_key(at, **shown)
        elif every_head and view == "heads":
            made_of = (_summary_key(trace, request), trace.layer)
        else:
            made_of = numbers_key(request)
        key = ("figures", made_of, None if every_head else at.head, view, tuple(sorted(shown.items())))
        return key, lambda: plotly_spec.kept(figures_for_trace(at, view, **_resolved(opts)))  # as sent

    key, build = job(trace.head)
    if ahead:
        prefetch.note_ahead(store(), key, build, _figures_bytes, quiet=None if ahead is True else float(ahead))
        return {}
    if "precomputed" not in options and not every_head:  # precomputed arrays belong to this head only
        prefetch.note(store(), job, _figures_bytes, trace.head, trace.core.num_heads)
        if options.get("query") is not None:  # the query inspector: the queries next to this one too
            queries = len(trace.tokens)
            prefetch.note(store(), lambda i: job(trace.head, query=i), _figures_bytes, int(options["query"]), queries)
    return store().get(key, build, _figures_bytes)


def marked_figures(trace, request: TraceRequest, view: str, **options) -> dict:
    """name -> (figure, update): ``figures`` kept for every head, each with the ``viz.selection`` update that
    marks trace.head on it (``viz.marks.head_marks``; the browser applies it to the chart already drawn). A figure
    that cannot be marked so (one head's attention lines) comes as that head's own figure, with no update."""
    from viz.marks import head_marks

    base = figures(trace, request, view, **options)
    marks = head_marks(view, base, trace)
    own = figures(trace, request, view, every_head=False, **options) if None in marks.values() else {}
    return {name: (own[name], None) if marks[name] is None else (fig, marks[name]) for name, fig in base.items()}


def _resolved(options: dict) -> dict:  # a callable ``precomputed`` (a view built ahead) is called by the builder
    made = options.get("precomputed")
    return {**options, "precomputed": made()} if callable(made) else options


def _figures_bytes(figs: dict) -> int:
    total = 0
    for fig in figs.values():
        total += plotly_spec.json_bytes(fig)  # the bytes kept for the browser (ui.chart)
        for data in () if isinstance(fig, plotly_spec.Sent) else fig.data:
            for name in ("z", "x", "y", "customdata", "text"):
                value = getattr(data, name, None)
                if value is not None:
                    total += int(getattr(value, "nbytes", 0)) or 8 * len(value)
    return total


def _summary_key(trace, request: TraceRequest) -> tuple:
    """The model's weights belong to the capture (text, model, sizes); the core's to the whole request."""
    if trace.model_attentions is not None:
        return _capture_key(*input_key(request))
    return ("trace", numbers_key(request))


def overview(trace, request: TraceRequest, statistic: str) -> np.ndarray:
    """(layers, heads) statistic of the model's (or the core's) weights; all five made once per capture."""
    from viz.stats import STATISTICS
    from viz.views import heads_source

    attentions, _, _ = heads_source(trace)
    key = ("overview", _summary_key(trace, request))  # every statistic at once: one pass over the layers

    def build() -> dict:
        return overviews_by_head(attentions, tuple(STATISTICS))

    return store().get(key, build, lambda value: sum(a.nbytes for a in value.values()))[statistic]


def rollout(trace, request: TraceRequest) -> np.ndarray | None:
    """Attention rollout (L, S) across the model's layers, once per capture."""
    if trace.model_attentions is None:
        return None
    key = ("rollout", _summary_key(trace, request))
    return store().get(key, lambda: rollout_streamed(trace.model_attentions), _nbytes_value)


def _nbytes_value(value) -> int:
    return int(getattr(value, "nbytes", 0))
