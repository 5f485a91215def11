"""One frozen Settings object: the request that decides the numbers plus what is only shown.

It round-trips through the URL (``st.query_params``): only values that differ from the defaults
are written, every value read back is checked, and anything wrong falls back with a notice.
Pure Python: no streamlit import, so it is tested directly.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from attention_core.ablation import ABLATIONS
from attention_core.device import available_devices
from attention_core.pairs import PAIRS
from attention_core.request import CHOICES, LIMITS, TraceRequest, coerce_fields
from viz.contributions import CONTRIBUTION_MODES
from viz.stats import STATISTICS as STATISTIC_LABELS
from viz.theme import THEMES

VIEWS = ("derivation", "compare", "heads", "query", "pairs", "contributions", "pitfalls", "training")
VIEW_LABELS = {
    "derivation": "Derivation",
    "compare": "Core vs model",
    "heads": "Heads & layers",
    "query": "Query inspector",
    "pairs": "Minimal pairs",
    "contributions": "Head contributions",
    "pitfalls": "Pitfalls lab",
    "training": "Training lab",
}
UI_CHOICES = {"view": VIEWS, "theme": THEMES}
PITFALL_TABS = ("scaling", "cost", "order", "sparse")  # the pitfalls lab's tabs (labels in ui/views/pitfalls.py)
TILED_BLOCKS = (4, 8, 16, 32, 64)  # tile sizes the tiled-attention section offers (queries x keys)


@dataclass(frozen=True)
class Settings(TraceRequest):
    """TraceRequest + view-only fields (changing these never reruns the model or the core)."""

    view: str = "derivation"
    query: int = 0  # query token inspected
    show_values: bool = False  # numbers in heatmap cells (small n)
    theme: str = "screen"
    statistic: str = "entropy"  # colour of the layer x head overview
    pair_text: str = PAIRS["animal"][1]  # the minimal-pairs view's second text (the first is ``text``)
    hide_special: bool = False  # hide [CLS]/[SEP]/BOS columns, rows renormalised (said on the figure)
    words: bool = False  # merge subwords into words: keys summed, queries averaged (said on the figure)
    query_set: tuple[int, ...] = ()  # query inspector: several queries, their rows summed (empty: one query)
    fixed_range: bool = True  # weight colours on 0..1 everywhere (comparable); off: each map's own 0..max
    contribution_mode: str = "weights"  # head contributions view: raw weights or value-weighted contributions
    ablation: str = "zero"  # head contributions view: switch a head off by zero or by its mean over the sentence
    pitfall: str = "scaling"  # the pitfalls lab's tab
    tiled_block: int = 16  # pitfalls lab, O(n^2): tile size of the stepped tiled attention
    tiled_step: int = 0  # which tile was just loaded, 1..tiles (0: the last, the finished output)
    kv_steps: int = 6  # pitfalls lab, O(n^2): tokens the KV-cache section generates
    kv_step: int = 0  # which generated token is shown, 1..steps (0: the last)

    def request(self) -> TraceRequest:
        return TraceRequest(**{f.name: getattr(self, f.name) for f in fields(TraceRequest)})


STATISTICS = tuple(STATISTIC_LABELS)  # defined once, in viz.stats
# Controls that only choose what to look at: they rerun the view alone (a fragment) and never recompute.
# (head is a TraceRequest field for the command line; the app's caches leave it out of their keys.)
VIEW_ONLY = ("head", "view", "query", "statistic", "pair_text", "hide_special", "words", "query_set", "fixed_range")
# (pair_text: only the pairs view's own trace; hide_special, words, query_set, fixed_range: viz.display)
UI_CHOICES["statistic"] = STATISTICS
VIEW_ONLY += ("contribution_mode", "ablation")  # the contributions view's own runs, cached apart from the trace
UI_CHOICES["contribution_mode"] = CONTRIBUTION_MODES  # defined once, in viz.contributions
UI_CHOICES["ablation"] = ABLATIONS  # defined once, in attention_core.ablation
VIEW_ONLY += ("pitfall", "tiled_block", "tiled_step", "kv_steps", "kv_step")  # the views' own cached runs
UI_CHOICES["pitfall"] = PITFALL_TABS

# The ranges the sidebar's widgets offer (narrower than the core's LIMITS). A link's value outside
# them is clamped here with a notice: a widget handed such a value would refuse to draw.
UI_RANGES = {
    "window": (1, 64),
    "stride": (1, 32),
    "block": (1, 64),
    "temperature": (0.1, 64.0),
    "max_tokens": (4, LIMITS["max_tokens"][1]),
    "query": (0, 4096),
    "tiled_block": (TILED_BLOCKS[0], TILED_BLOCKS[-1]),
    "tiled_step": (0, 4096),  # the section offers at most a few thousand tiles (ui/views/tiled.py)
    "kv_steps": (1, 16),
    "kv_step": (0, 16),
}
UI_STEPS = {"tiled_block": TILED_BLOCKS}  # a select slider's only values: a link's other value takes the nearest
URL_TEXT_CHARS = 2000  # a link keeps at most this much of the text (long URLs break on reload)


def _to_text(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def to_query_params(settings: Settings) -> dict[str, str]:
    """Only the fields that differ from the defaults, as strings (short, readable links)."""
    default = Settings()
    params = {
        f.name: _to_text(getattr(settings, f.name))
        for f in fields(Settings)
        if getattr(settings, f.name) != getattr(default, f.name)
    }
    for name in ("text", "pair_text"):
        if len(params.get(name, "")) > URL_TEXT_CHARS:
            params[name] = params[name][:URL_TEXT_CHARS]
    return params


def clamp_to_ui(values: dict, notices: list[str]) -> None:
    """Clamp ``values`` (in place) into UI_RANGES (and UI_STEPS), with a notice for each change."""
    for name, (low, high) in UI_RANGES.items():
        if name in values and not low <= values[name] <= high:
            clamped = type(values[name])(min(max(values[name], low), high))
            notices.append(f"'{name}' = {values[name]} is outside {low}..{high} here; using {clamped}")
            values[name] = clamped
    for name, offered in UI_STEPS.items():
        if name in values and values[name] not in offered:
            nearest = min(offered, key=lambda option: (abs(option - values[name]), option))
            notices.append(f"'{name}' = {values[name]} is not one of {', '.join(map(str, offered))}; using {nearest}")
            values[name] = nearest


def from_query_params(params) -> tuple[Settings, list[str]]:
    """Settings from a URL's parameters. Wrong types, unknown names, out-of-range values fall back."""
    raw = {key: params[key] for key in params}
    values, notices = coerce_fields(Settings, raw)
    for name, choices in UI_CHOICES.items():
        if name in values and values[name] not in choices:
            notices.append(f"'{name}' = {values[name][:40]!r} is not one of {', '.join(choices)}; using default")
            values.pop(name)
    clamp_to_ui(values, notices)
    if "device" in values and values["device"] not in available_devices():
        notices.append(
            f"device {values['device'][:40]!r} is not available here (have {', '.join(available_devices())}); using auto"
        )
        values.pop("device")
    return Settings(**values), notices


__all__ = [
    "CHOICES",
    "PITFALL_TABS",
    "STATISTICS",
    "Settings",
    "THEMES",
    "TILED_BLOCKS",
    "UI_RANGES",
    "UI_STEPS",
    "URL_TEXT_CHARS",
    "VIEWS",
    "VIEW_LABELS",
    "VIEW_ONLY",
    "clamp_to_ui",
    "from_query_params",
    "to_query_params",
]
