"""Suite-wide settings, applied before any test module imports the app's packages."""

from __future__ import annotations

import os

# The app builds the neighbouring heads' figures in the background after each view (ui.prefetch). In the
# suite that would only spend the two cores on figures no test looks at; tests/test_prefetch.py turns it on.
os.environ.setdefault("ATTENTION_LENS_PREFETCH_HEADS", "0")
