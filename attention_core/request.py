"""The one plain request that turns into traces: what the app, the URL and the CLI all describe.

``TraceRequest`` holds only plain values (str, int, float, bool, tuples) so it hashes for caching,
round-trips through a URL and a JSON settings file. ``validate`` clamps or defaults bad values and
says what it changed, so hostile URLs and typos never reach the math.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from . import positional
from .sdpa import default_scale

DEFAULT_TEXT = "The animal didn't cross the street because it was too tired."

SCALINGS = ("sqrt_dk", "none", "custom")
MASKS = ("model", "none", "causal", "sliding_window", "strided", "block_local", "blocked_keys")
FILLS = ("-inf", "-1e9")
ENCODINGS = ("model", *positional.ENCODINGS)  # "model": whatever the chosen model uses
SOURCES = ("replay", "scratch")

LIMITS = {  # field: (lowest, highest)
    "layer": (0, 1000),
    "head": (0, 1000),
    "temperature": (0.01, 1000.0),
    "window": (1, 4096),
    "stride": (1, 4096),
    "block": (1, 4096),
    "pad_to": (0, 4096),
    "d_model": (2, 1024),
    "d_k": (2, 512),
    "heads": (1, 32),
    "seed": (0, 2**31 - 1),
    "max_tokens": (1, 2048),
}
CHOICES = {"scaling": SCALINGS, "mask": MASKS, "fill": FILLS, "encoding": ENCODINGS, "source": SOURCES}
MAX_TEXT_CHARS = 20_000


@dataclass(frozen=True)
class TraceRequest:
    """Everything that decides the numbers. Defaults reproduce the bundled model exactly."""

    text: str = DEFAULT_TEXT
    model: str = "minilm"  # a bundled name, a Hugging Face id, or a folder under the models dir
    layer: int = 0
    head: int = 0
    scaling: str = "sqrt_dk"  # divide scores by sqrt(d_k) | "none" | "custom": divide by temperature
    temperature: float = 8.0
    mask: str = "model"  # "model" = what the model itself uses (encoder: all keys; decoder: causal)
    window: int = 3  # sliding_window width
    window_causal: bool = False
    stride: int = 2  # strided
    block: int = 4  # block_local
    blocked: tuple[int, ...] = ()  # blocked_keys: key positions nobody may attend to
    fill: str = "-inf"  # how blocked scores are filled: -inf (exact zero) or -1e9 (leaks on empty rows)
    pad_to: int = 0  # pad the input with pad tokens to this length (0 = no padding)
    encoding: str = "model"  # positional encoding used by the own core
    source: str = "replay"  # replay the model's layer input and W^Q/W^K/W^V, or "scratch"
    d_model: int = 64  # scratch sizes
    d_k: int = 16
    heads: int = 4
    seed: int = 0
    device: str = "auto"
    max_tokens: int = 128  # cap on tokens fed to the model (notice when text is cut)

    def scale_for(self, d_k: int, model_scale: float | None = None) -> float:
        """The factor multiplying QK^T: the model's own (1/sqrt(d_k)) unless the user overrides it."""
        if self.scaling == "none":
            return 1.0
        if self.scaling == "custom":
            return 1.0 / self.temperature
        return model_scale if model_scale is not None else default_scale(d_k)


def _coerce(name: str, value, default):
    if isinstance(default, bool):
        if isinstance(value, str):
            if value.strip().lower() in ("1", "true", "yes", "on"):
                return True
            if value.strip().lower() in ("0", "false", "no", "off", ""):
                return False
            raise ValueError
        return bool(value)
    if isinstance(default, int):
        number = float(value)
        if not math.isfinite(number) or number != int(number):
            raise ValueError
        return int(number)
    if isinstance(default, float):
        number = float(value)
        if not math.isfinite(number):
            raise ValueError
        return number
    if isinstance(default, tuple):
        items = value.split(",") if isinstance(value, str) else list(value)
        return tuple(sorted({int(float(i)) for i in items if str(i).strip() != ""}))[:64]
    return str(value)


def coerce_fields(cls, raw: dict, defaults=None) -> tuple[dict, list[str]]:
    """Turn loose values (URL strings, JSON) into typed, in-range fields of ``cls``; notices for each fix."""
    defaults = defaults or cls()
    values, notices = {}, []
    known = {f.name for f in fields(cls)}
    for key in raw:
        if key not in known:
            notices.append(f"ignored unknown setting '{key}'")
    for f in fields(cls):
        if f.name not in raw:
            continue
        default = getattr(defaults, f.name)
        try:
            value = _coerce(f.name, raw[f.name], default)
        except (TypeError, ValueError, OverflowError):
            notices.append(f"'{f.name}' = {str(raw[f.name])[:40]!r} is not valid; using {default!r}")
            continue
        if f.name in CHOICES and value not in CHOICES[f.name]:
            notices.append(f"'{f.name}' = {value[:40]!r} is not one of {', '.join(CHOICES[f.name])}; using {default!r}")
            continue
        if f.name in LIMITS:
            low, high = LIMITS[f.name]
            clamped = min(max(value, low), high)
            if clamped != value:
                notices.append(f"'{f.name}' = {value} is out of range {low}..{high}; using {clamped}")
                value = clamped
        if isinstance(value, tuple) and any(item < 0 for item in value):
            notices.append(f"'{f.name}': negative positions {[i for i in value if i < 0][:5]} dropped")
            value = tuple(item for item in value if item >= 0)
        if f.name == "text" and len(value) > MAX_TEXT_CHARS:
            notices.append(f"text was {len(value):,} characters; kept the first {MAX_TEXT_CHARS:,}")
            value = value[:MAX_TEXT_CHARS]
        values[f.name] = value
    return values, notices


def validate(request: TraceRequest) -> tuple[TraceRequest, list[str]]:
    """Clamp and default every field of an existing request; returns the fixed request and notices."""
    values, notices = coerce_fields(TraceRequest, {f.name: getattr(request, f.name) for f in fields(TraceRequest)})
    return TraceRequest(**values), notices  # a value coerce_fields refused is left out: the default, as it says
