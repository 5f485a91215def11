"""Load a real model by name, hub id or local folder: eager attention, float32, safetensors only.

Every load goes through ``AutoConfig``/``AutoTokenizer``/``AutoModel`` (``AutoModelForCausalLM``
for decoder checkpoints) with ``attn_implementation="eager"`` (the sdpa kernels return no attention
weights), ``use_safetensors=True`` (pickle weights can run code), ``trust_remote_code=False`` and an
optional ``revision``. Hub ids go through the local Hugging Face cache; when the hub cannot be
reached, only the cache is used (see ``network.py``). A hub id or local folder whose config declares
more parameters than $ATTENTION_LENS_MAX_PARAMS is refused from config.json alone (``size.py``).
After loading, a short probe sentence is captured and replayed, so a model that returns no
attentions fails here, and one whose q/k/v cannot be captured still loads with a notice (``probe.py``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from ..device import pick_device
from ..multihead import ProjectionWeights
from ..traces import ModelFacts
from .bundled import DEFAULT_MODEL, bundled_folder, bundled_name, say, smollm2_folder
from .errors import ModelLoadError, explain
from .families import AttentionSite, find_sites, model_facts, projection_weights
from .network import hub_reachable
from .paths import is_hub_id, resolve_local
from .probe import probe
from .size import check_size

Progress = Callable[[str, float], None]


@dataclass(frozen=True, eq=False)
class LoadedModel:
    """A model ready for capture. Shared between sessions: treat it as read-only."""

    name: str  # what was asked for: "minilm", "smollm2", a hub id or a folder
    source: str  # the folder or hub id actually loaded
    model: nn.Module  # eval mode, float32, on ``device``
    tokenizer: object  # a transformers tokenizer (fast where the model has one)
    family: str  # "bert", "gpt2", "llama" or "other" (see families.py)
    facts: ModelFacts
    sites: tuple[AttentionSite, ...]  # one per layer; empty when q/k/v cannot be captured
    projections: tuple[ProjectionWeights, ...]  # the layers' own W^Q, W^K, W^V, W^O (CPU; read-only)
    device: torch.device
    notices: tuple[str, ...] = ()
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)  # one capture at a time

    @property
    def capturable(self) -> bool:
        """True when q, k, v can be captured (else only the returned attention weights)."""
        return bool(self.sites)

    @property
    def runner(self) -> nn.Module:
        """The module capture runs: the base model (no language-model head; it plays no part in attention)."""
        return getattr(self.model, "base_model", self.model)


def _step(progress: Progress | None, message: str, fraction: float) -> None:
    if progress is not None:
        progress(message, fraction)


def _check_folder(folder: Path, name: str) -> None:
    if not (folder / "config.json").is_file():
        raise ModelLoadError(name, f"the folder {folder} has no config.json", "Point at a Hugging Face model folder")
    if not any(folder.glob("*.safetensors")) and not any(folder.glob("*.safetensors.index.json")):
        found = sorted(p.name for p in folder.iterdir() if p.suffix in (".bin", ".pt", ".pth", ".ckpt", ".pkl"))
        what = f"only pickle weights ({', '.join(found)})" if found else "no weights"
        raise ModelLoadError(
            name,
            f"the folder has {what}, no model.safetensors (pickle files can run code and are refused)",
            "Convert it once: load it in Python and call model.save_pretrained(folder, safe_serialization=True)",
        )


def _is_causal_lm(config) -> bool:
    names = getattr(config, "architectures", None) or []
    return any(n.endswith(("ForCausalLM", "LMHeadModel")) for n in names)


def _resolve(name: str, models_dir, allow_local: bool = True) -> tuple[str, Path | None]:
    """(display name, local folder or None for a hub id)."""
    key = bundled_name(name)
    if key is not None:
        return key, None
    if not allow_local and models_dir is None:
        if not is_hub_id(name) or Path(name).expanduser().exists():
            raise ModelLoadError(
                name,
                "local model folders are switched off here (no allowed models directory is configured)",
                "Use a bundled model (minilm, smollm2) or a Hugging Face id; whoever runs the server can set "
                "ATTENTION_LENS_MODELS_DIR to a folder of models",
            )
        return name, None
    folder = resolve_local(name, models_dir)
    if folder is not None:
        return name, folder
    if not is_hub_id(name):
        raise ModelLoadError(
            name,
            "this is neither a model folder nor a Hugging Face id",
            "Use an id like 'openai-community/gpt2', a folder path, or minilm / smollm2",
        )
    return name, None


def _from_pretrained(loader, source, name: str, offline: bool, **kwargs):
    try:
        return loader.from_pretrained(source, trust_remote_code=False, local_files_only=offline, **kwargs)
    except ModelLoadError:
        raise
    except Exception as err:  # transformers and the hub raise many kinds; explain() names them
        raise explain(err, name, offline=offline) from err


def load_model(
    name_or_path: str | Path | None = None,
    *,
    revision: str | None = None,
    device: str | torch.device | None = None,
    models_dir: str | Path | None = None,
    progress: Progress | None = None,
    allow_local: bool = True,
) -> LoadedModel:
    """Load "minilm" (default), "smollm2", a hub id or a local folder for attention capture.

    ``models_dir``: when set, local folders must lie inside it (relative names are looked up there).
    ``allow_local=False`` without ``models_dir`` refuses every local folder (bundled models and hub ids only).
    ``progress(message, fraction)`` hears about each step (and the one-time SmolLM2 conversion).
    Raises ModelLoadError (a ValueError) with a message fit to show a person.
    """
    name = str(name_or_path or DEFAULT_MODEL).strip()
    name, folder = _resolve(name, models_dir, allow_local)
    target = pick_device(None if device is None else str(device))
    notices: list[str] = []
    if bundled_name(name) is None:
        if folder is not None:
            _check_folder(folder, name)
        hub = {"revision": revision} if folder is None and revision else {}
        offline = folder is None and not hub_reachable()
        source = str(folder) if folder is not None else name
        return _load(name, source, hub, offline, target, notices, progress, 0.0, check_limit=True)
    if revision:
        notices.append(f"The bundled model {name} has one version; revision {revision!r} was ignored.")
    base = 0.7  # the one-time SmolLM2 conversion takes most of a first load
    _step(progress, f"Preparing bundled model {name}", 0.0)
    folder = bundled_folder(name, _scaled(progress, 0.0, base))
    try:
        return _load(name, str(folder), {}, False, target, notices, progress, base)
    except ModelLoadError as err:
        if name != "smollm2":
            raise
        say(progress, f"SmolLM2: the cached conversion did not load ({err}); converting again", base)
        folder = smollm2_folder(_scaled(progress, 0.0, base), rebuild=True)
        return _load(name, str(folder), {}, False, target, notices, progress, base)


def _scaled(progress: Progress | None, start: float, stop: float) -> Progress | None:
    """A progress callback that maps 0..1 onto start..stop of the caller's bar."""
    if progress is None:
        return None
    return lambda message, fraction: progress(message, start + (stop - start) * fraction)


def _load(name, source, hub, offline, target, notices, progress, base, *, check_limit=False) -> LoadedModel:
    """Config, tokenizer, weights, attention sites and the probe, from a folder or hub id.

    ``check_limit``: refuse, from the config alone, a model larger than $ATTENTION_LENS_MAX_PARAMS
    (see size.py) before the tokenizer or any weights are fetched or read.
    """
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoTokenizer

    progress = _scaled(progress, base, 1.0)
    _step(progress, f"Reading the configuration of {name}", 0.1)
    config = _from_pretrained(AutoConfig, source, name, offline, **hub)
    if getattr(config, "auto_map", None):  # custom code was on offer; transformers' own classes load it instead
        notices = [
            *notices,
            f"{name}'s config names custom code (auto_map); it was not run: the model is loaded with "
            f"transformers' own {type(config).__name__.removesuffix('Config')} classes.",
        ]
    if getattr(config, "is_encoder_decoder", False):
        raise ModelLoadError(
            name,
            "encoder-decoder models (T5, BART, ...) are not supported",
            "Pick an encoder (BERT-like) or a decoder (GPT-2- or Llama-like) model",
        )
    loader = AutoModelForCausalLM if _is_causal_lm(config) else AutoModel
    if check_limit:
        _step(progress, f"Checking the size of {name} from its configuration", 0.15)
        check_size(config, loader, name)
    _step(progress, f"Loading the tokenizer of {name}", 0.2)
    tokenizer = _from_pretrained(AutoTokenizer, source, name, offline, **hub)
    _step(progress, f"Loading the weights of {name}", 0.3)
    model = _from_pretrained(
        loader, source, name, offline, attn_implementation="eager", use_safetensors=True, dtype=torch.float32, **hub
    )
    if getattr(model.config, "_attn_implementation", "eager") != "eager":
        try:
            model.set_attn_implementation("eager")
        except Exception as err:
            raise ModelLoadError(
                name,
                "it cannot run eager attention, so it would return no attention weights",
                "Pick a model whose attention transformers implements in eager mode",
            ) from err
    model = model.to(device=target, dtype=torch.float32).eval()
    family, sites = find_sites(model)
    if not sites:
        notices = [
            *notices,
            f"The attention layout of {type(model).__name__} is not one Attention Lens knows (BERT-, GPT-2- or "
            "Llama-like): its attention weights are shown, but its q, k, v cannot be captured or replayed.",
        ]
    loaded = LoadedModel(
        name=name,
        source=source,
        model=model,
        tokenizer=tokenizer,
        family=family,
        facts=model_facts(name, model, family, sites),
        sites=sites,
        projections=tuple(projection_weights(s) for s in sites),
        device=target,
        notices=tuple(notices),
    )
    _step(progress, f"Checking that {name} returns its attention weights", 0.9)
    loaded = probe(loaded)
    _step(progress, f"{name} is ready", 1.0)
    return loaded
