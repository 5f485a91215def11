"""How many parameters a model has, from its config alone, and the server's limit on it.

A visitor may type any Hugging Face id; a public server must not download a 70B model because of
that. ``check_size(config, loader, name)`` runs after only ``config.json`` was fetched and before
the tokenizer and the weights: it builds the model on torch's ``meta`` device (shapes, no memory,
no weights; about 2 s for a 70B Llama config on a 2-core machine) and counts its parameters, shared
(tied) tensors once. A config declaring more layers than any real model has is refused before
building.

The limit: env ``ATTENTION_LENS_MAX_PARAMS`` (an integer such as ``1000000000``, ``1_000_000_000``
or ``1e9``; default one billion); ``0`` or ``none`` switches the check off (a private machine).
The bundled models ship with the app and are not checked.
"""

from __future__ import annotations

import os

import torch

from .errors import ModelLoadError

MAX_PARAMS_ENV = "ATTENTION_LENS_MAX_PARAMS"
DEFAULT_MAX_PARAMS = 1_000_000_000
MAX_LAYERS = 1024  # no real model has more; building one on the meta device takes time per layer


def max_params() -> int | None:
    """The largest parameter count this server loads (None: no limit), from $ATTENTION_LENS_MAX_PARAMS."""
    raw = os.environ.get(MAX_PARAMS_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_PARAMS
    if raw.lower() in ("0", "none", "off", "unlimited"):
        return None
    try:
        value = int(raw)
    except ValueError:
        try:
            value = int(float(raw))  # 1e9
        except ValueError:
            value = -1
    if value <= 0:
        raise ModelLoadError(
            "(any)",
            f"{MAX_PARAMS_ENV}={raw!r} is not a positive number of parameters",
            f"Whoever runs the server: set {MAX_PARAMS_ENV} to e.g. 1000000000, or 0 for no limit",
        )
    return value


def _layers(config) -> int:
    value = getattr(config, "num_hidden_layers", None)  # transformers maps n_layer, num_layers, ... onto it
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else 0


def count_parameters(config, loader) -> int:
    """The exact parameter count of ``loader.from_config(config)``, built on the meta device (no weights)."""
    with torch.device("meta"):
        model = loader.from_config(config, trust_remote_code=False)
    return sum(p.numel() for p in model.parameters())  # parameters() yields a tied tensor once


def check_size(config, loader, name: str) -> int | None:
    """Raise ModelLoadError when ``config`` declares more parameters than allowed; else the count.

    Returns None when the limit is switched off (nothing is built then).
    """
    limit = max_params()
    if limit is None:
        return None
    layers = _layers(config)
    if layers > MAX_LAYERS:  # checked first: building that many layers, even on meta, takes a while
        raise ModelLoadError(
            name,
            f"its config declares {layers:,} layers, more than any model this server loads ({MAX_LAYERS})",
            "Pick a smaller model",
        )
    try:
        count = count_parameters(config, loader)
    except Exception as err:
        raise ModelLoadError(
            name,
            f"its size cannot be told from its config ({type(err).__name__}: {err}), so it is not downloaded",
            "Pick a model whose architecture transformers knows",
        ) from err
    if count > limit:
        raise ModelLoadError(
            name,
            f"its config declares {count:,} parameters, more than this server allows ({limit:,}), "
            "so its weights were not loaded",
            f"Pick a smaller model (or a bundled one: minilm, smollm2); whoever runs the server can raise "
            f"{MAX_PARAMS_ENV}",
        )
    return count
