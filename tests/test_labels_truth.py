"""The derivation's words and formulas state what is computed for the chosen settings."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def page(params: dict) -> tuple[str, str]:
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params.update({"text": "The cat sat on the mat.", **params})
    at.run()
    assert not at.exception and not at.error
    return " ".join(m.value for m in at.markdown), " ".join(x.value for x in at.latex)


@pytest.mark.parametrize(
    "params, words, formula",
    [
        ({}, "multiply by 0.1768", r"\sqrt{d_k}"),
        ({"scaling": "none"}, "none (the control is off)", r"\tilde{S} = QK^T"),
        ({"scaling": "custom", "temperature": "2.5"}, "temperature t = 2.5", r"\frac{QK^T}{t}"),
        ({"fill": "-1e9"}, "blocked keys get -1e9", r"-10^9"),
        ({"encoding": "alibi"}, "ALiBi adds its distance penalty", r"-\infty"),
    ],
)
def test_scaling_and_masking_steps_say_what_is_computed(params, words, formula):
    markdown, latex = page(params)
    assert words in markdown
    assert formula in latex
    if params.get("scaling") in ("none", "custom"):
        assert r"\frac{QK^T}{\sqrt{d_k}}" not in latex  # the article's divisor is not claimed when not used


def test_alibi_bias_is_its_own_step_after_the_mask():
    markdown, latex = page({"encoding": "alibi"})
    assert "5b. Position bias (ALiBi)" in markdown and "This head's slope m = " in markdown
    assert r"\tilde{S}_{ij} \leftarrow \tilde{S}_{ij} - m_h\,|i - j|" in latex
    assert not any(ord(c) < 32 and c != "\n" for c in latex)  # no tab (a raw string once held one for \t)
    masking = markdown.split("**5. Masking**")[1].split("**5b.")[0]
    assert "ALiBi" not in masking  # the masked map holds the mask alone
