"""viz.plotly_paths: the memoised property-path parser gives plotly's own answers, and is the one in use."""

from __future__ import annotations

import plotly.basedatatypes as plotly_base
import pytest

import viz  # noqa: F401 - importing viz installs the parser
from viz import plotly_paths

PATHS = [
    "",
    "title",
    "title_text",
    "title.font.size",
    "xaxis.title.text",
    "xaxis2_tickfont_size",
    "coloraxis3.showscale",
    "error_x.thickness",
    "marker.colorbar.title_side",
    "annotations[2].font.size",
    "updatemenus[0].buttons[4].args",
    "a__b_",
    "_leading",
]


@pytest.mark.parametrize("path", PATHS)
def test_memoised_parser_answers_as_plotly_does(path):
    expected = plotly_paths._ORIGINAL(path)
    for _ in range(2):  # first call fills the memo, the second reads it
        got = plotly_paths.str_to_dict_path_full(path)
        assert got == expected and type(got[1]) is type(expected[1])
    got[1].append(99)  # a caller's change to the list it got never reaches the next caller
    assert plotly_paths.str_to_dict_path_full(path) == expected


def test_installed_and_figures_still_build():
    assert plotly_base._str_to_dict_path_full is plotly_paths.str_to_dict_path_full
    import plotly.graph_objects as go

    fig = go.Figure(go.Heatmap(z=[[1, 2]])).update_layout(title_text="t", xaxis_title_font_size=9)
    assert fig.layout.title.text == "t" and fig.layout.xaxis.title.font.size == 9
    with pytest.raises(ValueError):
        fig.update_layout(xaxis_not_a_property=1)
