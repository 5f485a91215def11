"""Is a model name a local folder or a Hugging Face id, and may it be loaded from here?

With ``models_dir`` set (the hardened server mode), local folders must resolve inside that directory:
``..`` components, absolute paths elsewhere and symlinks that lead out are refused. Relative names
are then looked up inside ``models_dir``. Without it any readable folder is accepted.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .errors import ModelLoadError

# owner/name or a bare name, as the hub spells them: letters, digits, "-", "_", "." (never "..").
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*(/[A-Za-z0-9_.\-]+)?$")


def is_hub_id(name: str) -> bool:
    """True when ``name`` could be a Hugging Face model id ("gpt2", "openai-community/gpt2")."""
    return bool(_HUB_ID.match(name)) and ".." not in name and not name.endswith(".")


def _is_explicit_path(name: str) -> bool:
    """Spelled like a path (not a hub id): absolute, ./ ../ ~, backslashes or more than one "/"."""
    return (
        os.path.isabs(name)
        or name in (".", "..")
        or name.startswith(("./", "../", "~", ".\\", "..\\"))
        or "\\" in name
        or name.count("/") > 1
    )


def resolve_local(name: str, models_dir: str | os.PathLike | None = None) -> Path | None:
    """The resolved local folder ``name`` points to, or None when ``name`` should go to the hub.

    Raises ModelLoadError for a path that does not exist or that leaves ``models_dir``.
    """
    raw = name.strip()
    if not raw:
        raise ModelLoadError(
            name, "no model name was given", "Pick a bundled model (minilm, smollm2), an id or a folder"
        )
    given = Path(raw).expanduser()
    if models_dir is None:
        if given.is_dir():
            return given.resolve()
        if _is_explicit_path(raw) or given.exists():
            raise ModelLoadError(
                raw, "no model folder at this path", "Check the path; it must be a folder with config.json"
            )
        return None

    root = Path(models_dir).expanduser().resolve()
    if not root.is_dir():
        raise ModelLoadError(raw, f"the allowed models directory {root} does not exist", "Create it or fix the setting")
    if ".." in Path(raw).parts or ".." in raw.replace("\\", "/").split("/"):
        raise ModelLoadError(raw, "'..' is not allowed in a model path", f"Name a folder inside {root}")
    candidate = given if given.is_absolute() else root / given
    if not (given.is_absolute() or _is_explicit_path(raw) or candidate.exists() or os.path.islink(candidate)):
        return None  # not a folder here: a hub id
    resolved = candidate.resolve()  # follows symlinks, so a link leading out is caught below
    if not resolved.is_relative_to(root):
        raise ModelLoadError(
            raw, f"the path leads outside the allowed models directory {root}", "Name a folder inside it"
        )
    if not resolved.is_dir():
        raise ModelLoadError(raw, f"no model folder at {resolved}", f"Put the model in a folder inside {root}")
    return resolved
