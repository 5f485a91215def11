"""Real pretrained transformers: load them, capture every layer's q, k, v, replay them with the core.

Uses torch and transformers only (never streamlit or plotly).

    loaded = load_model("minilm")                   # or "smollm2", a hub id, a local folder
    tokens = tokenize(loaded, "The cat sat.", max_tokens=512)
    captured = capture(loaded, tokens)              # per layer: X, q, k, v, mask, weights, head outputs
    diffs = replay(captured)                        # per layer: max |core - model| (ReplayDiff)
    trace = replay_layer(captured, 0)               # SDPATrace from the model's own q, k, v
    trace = replay_from_hidden(captured, 0)         # MultiHeadTrace from X and the layer's W^Q W^K W^V

Public API
- ``BUNDLED_MODELS: dict[str, str]`` name -> description; ``DEFAULT_MODEL = "minilm"``.
  Names accepted everywhere: "minilm", "smollm2" (or their hub ids), any Hugging Face id, any local folder.
- ``load_model(name_or_path=None, *, revision=None, device=None, models_dir=None, progress=None) -> LoadedModel``
  eval mode, float32, eager attention, safetensors only, never remote code. ``LoadedModel`` has
  ``.model .tokenizer .family .facts (ModelFacts) .name .source .sites .projections .device .notices .capturable``.
  ``progress(message: str, fraction: float)`` hears each step. Errors: ``ModelLoadError`` (a ValueError).
- ``tokenize(loaded, text, *, max_tokens=512) -> Tokens``: ``ids`` (1, L), ``labels``, ``offsets``,
  ``attention_mask`` (1, L), ``special``, ``dropped``, ``notice``. Empty text raises ValueError.
- ``capture(loaded, tokens) -> Capture``: ``.layers`` (LayerCapture per layer: ``hidden_in`` (L, D),
  ``q`` (H, L, E), ``k`` (Hkv, S, E), ``v`` (Hkv, S, Ev), ``mask`` (1, L, S) additive or None,
  ``attentions`` (H, L, S), ``attn_output`` (H, L, Ev), ``scale``, ``projection``, ``rotary``),
  ``.attentions`` (layers, H, L, S), ``.notices``, ``.tokens``, ``.facts``, ``.family``. CPU tensors.
- ``replay(capture) -> tuple[ReplayDiff, ...]``; ``replay_layer(capture, layer) -> SDPATrace``;
  ``replay_from_hidden(capture, layer) -> MultiHeadTrace``; ``replay_from_hidden_diff(capture, layer) -> ReplayDiff``.
- ``prepare_bundled(names=("minilm", "smollm2"), progress=None)``: make the bundled models ready offline
  (``python -m attention_core.pretrained.bundled --all``); cache root ``$ATTENTION_LENS_CACHE``.
- ``verify.add_arguments(parser)`` / ``verify.run(args) -> int``: ``python -m attention_core verify``.

Files: errors.py (ModelLoadError), paths.py (local folders, models_dir), network.py (hub reachable?),
bundled.py (bundled models, SmolLM2 conversion cache), families.py (where attention lives per
architecture), loading.py, probe.py (capture + replay one sentence right after loading), tokens.py,
capture.py (hooks), replay.py, verify.py (CLI).
Elsewhere: tiny random models of each family for tests in tests/tiny_models.py; the capture + replay
benchmark in benchmarks/models.py.
"""

from .bundled import BUNDLED_MODELS, DEFAULT_MODEL, bundled_folder, cache_root
from .bundled import prepare as prepare_bundled
from .capture import Capture, LayerCapture, capture
from .errors import ModelLoadError
from .loading import LoadedModel, load_model
from .replay import replay, replay_from_hidden, replay_from_hidden_diff, replay_layer
from .tokens import Tokens, tokenize

__all__ = [
    "BUNDLED_MODELS",
    "DEFAULT_MODEL",
    "Capture",
    "LayerCapture",
    "LoadedModel",
    "ModelLoadError",
    "Tokens",
    "bundled_folder",
    "cache_root",
    "capture",
    "load_model",
    "prepare_bundled",
    "replay",
    "replay_from_hidden",
    "replay_from_hidden_diff",
    "replay_layer",
    "tokenize",
]
