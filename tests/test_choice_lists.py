"""Every choice list is defined once (attention_core.request, viz.stats, ui.settings) and every option has a label."""

from __future__ import annotations

from attention_core import request
from ui import controls, sidebar
from ui.settings import STATISTICS, UI_CHOICES, VIEW_LABELS, VIEWS
from ui.views.heads import STATISTIC_HELP
from viz import stats, theme


def test_every_option_of_every_sidebar_list_has_a_label():
    for options, labels in (
        (request.SCALINGS, controls.SCALING_LABELS),
        (request.MASKS, controls.MASK_LABELS),
        (request.ENCODINGS, controls.ENCODING_LABELS),
        (request.SOURCES, controls.SOURCE_LABELS),
        (VIEWS, VIEW_LABELS),
        (STATISTICS, STATISTIC_HELP),
    ):
        assert set(labels) == set(options), (options, labels)


def test_the_app_and_the_figures_share_one_list_each():
    assert STATISTICS == tuple(stats.STATISTICS)  # the "diagonal_distance" bug: two names for one statistic
    assert UI_CHOICES["statistic"] is STATISTICS and UI_CHOICES["theme"] is theme.THEMES


def test_a_position_shown_as_its_label_reads_back_as_its_number():
    assert [sidebar.as_position(v) for v in (3, "3: cat", "12:  ", True, "cat", -2)] == [3, 3, 12, 1, 0, 0]
