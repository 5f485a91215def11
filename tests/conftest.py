"""Suite-wide settings, applied before any test module imports the app's packages."""

from __future__ import annotations

import os

# The app builds the neighbouring heads' figures in the background after each view (ui.prefetch). In the
# suite that would only spend the two cores on figures no test looks at; tests/test_prefetch.py turns it on.
os.environ.setdefault("ATTENTION_LENS_PREFETCH_HEADS", "0")

import pytest

from tests.browser import CHROMIUM_ARGS, chromium_path, streamlit_app


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


@pytest.fixture(scope="module")
def url():
    with streamlit_app() as base:
        yield base
