"""Suite-wide settings, applied before any test module imports the app's packages."""

from __future__ import annotations

import os

# The app builds the neighbouring heads' figures in the background after each view (ui.prefetch). In the
# suite that would only spend the two cores on figures no test looks at; tests/test_prefetch.py turns it on.
os.environ.setdefault("ATTENTION_LENS_PREFETCH_HEADS", "0")

import pytest

from tests.browser import CHROMIUM_ARGS, chromium_path, streamlit_app


# AppTest and keyed fragment reruns: the head slider and the view control name the fragments they rerun
# (app.py: ``st.rerun([...])`` in their callbacks). AppTest then runs only those fragments and its element tree
# holds only what they drew, where a browser keeps the rest of the page. So after a run whose page has no
# title (only fragments ran), the harness runs the whole script once more: the tests read the whole page, as a
# person sees it. tests/test_numbers_panel.py checks the fragment runs themselves on a real server.
def _whole_page_runs() -> None:
    from streamlit.testing.v1 import AppTest

    from benchmarks.app_speed import shows_only_fragments

    if getattr(AppTest, "_lens_whole_page", False):
        return
    plain_run = AppTest._run

    def run(self, *args, **kwargs):
        result = plain_run(self, *args, **kwargs)
        if shows_only_fragments(self):
            result = plain_run(self, timeout=kwargs.get("timeout"))
        return result

    AppTest._run = run
    AppTest._lens_whole_page = True


_whole_page_runs()


# The browser tests' shared fixtures: one headless Chromium and one app server per module.
@pytest.fixture(scope="module")
def browser():
    path = chromium_path()
    if not path:
        pytest.skip("Debian chromium is not installed (make test installs it: apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        yield b
        b.close()


# Parallel runs (pytest-xdist: `make test` passes -n 2 --dist loadfile --no-loadscope-reorder; a plain
# `pytest` runs in one process). Each test module stays on one worker, so its module fixtures (a browser,
# an app server, a loaded model) start once; the cases of the option walk share nothing and go one by
# one to whichever worker is free. Ten browser sessions for a minute (marked `alone`) are not in this run:
# `make test` runs them afterwards, with nothing beside them. The longest units are handed out
# first, so that no long one ends the run alone. (xdist's own --dist loadgroup cannot do this under
# pytest 9: its xdist_group marks are lost.)
SPREAD = ("tests/test_app_options.py",)
TOGETHER: dict[str, str] = {}  # modules that share one unit (none at present)
LONGEST_FIRST = (  # node id prefixes, longest first (durations of a full run on 2 cores)
    "tests/test_docker.py",  # image build ~130 s, then the container checks
    "tests/test_app_options.py::test_every_option_of_every_control[minilm-pitfalls]",
    "tests/test_app_options.py::test_every_option_of_every_control[smollm2-derivation]",
    "tests/test_app_options.py::test_every_option_of_every_control[smollm2-pitfalls]",
    "tests/test_app_options.py::test_every_option_of_every_control[scratch-pitfalls]",
    "tests/test_app_options.py::test_every_option_of_every_control[minilm-derivation]",
    "tests/test_app_options.py::test_every_option_of_every_control[scratch-derivation]",
    "tests/test_hardening_text.py",
    "tests/test_pretrained_bundled.py",
    "tests/test_benchmarks_smoke.py",
    "tests/test_longcontext_browser.py",
    "tests/test_cli_json.py",
    "tests/test_browser.py",
    "tests/test_kvcache.py",
    "tests/test_app_options.py::test_every_option_of_every_control[smollm2-contributions]",
    "tests/test_app_options.py::test_every_option_of_every_control[minilm-contributions]",
)


def pytest_xdist_make_scheduler(config, log):
    """--dist loadfile, but each test of a SPREAD module is a unit of its own and the TOGETHER modules share one."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class ModuleScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return nodeid if module in SPREAD else TOGETHER.get(module, module)

    return ModuleScheduling(config, log)


def pytest_collection_modifyitems(config, items):
    """On an xdist worker, longest first (the stable sort keeps the rest in their order); with
    --no-loadscope-reorder the workers take units in this order."""
    if hasattr(config, "workerinput"):
        rank = {prefix: i for i, prefix in enumerate(LONGEST_FIRST)}
        items.sort(key=lambda item: next((i for p, i in rank.items() if item.nodeid.startswith(p)), len(rank)))


@pytest.fixture(scope="module")
def url():
    with streamlit_app() as base:
        yield base
