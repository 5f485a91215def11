"""Attention Lens figures: numpy in, plotly ``go.Figure`` out. Never imports streamlit or torch.

Where each figure lives:
- token text made safe and visible ................................ labels.py
- "screen" / "slides" looks, colour scales ........................ theme.py
- matrix heatmaps: X, W^Q/W^K/W^V, Q, K, V, output ................ heatmaps.py
- blocked cells painted grey; display copies of big matrices ...... blocked.py, blocks.py
- raw / scaled / masked scores and softmax weights ................ scores.py
- own core vs real model, difference map .......................... compare.py
- head grid and layer × head overview; head statistics ............ heads.py, stats.py
- one query row step by step ...................................... query.py
- attention lines between tokens .................................. lines.py
- attention rollout across layers ................................. rollout.py
- pitfalls: variance, saturation, cost .......................... pitfalls.py
- permutation: shuffled input, rows put back ...................... permutation.py
- positional encodings and their similarity ....................... positional.py
- sparse-mask savings and mask shapes ............................. sparse.py
- training lab curves, attention vs recurrence .................... training.py
- every figure / matrix for a ModelTrace (app and export) ......... views.py
- PNG / SVG / HTML / CSV export, zip for the app .................. export.py
- the lesson deck: offline HTML slides and their PDF .............. lesson.py (slides: lesson_*.py)
- per-capture summaries one layer / head at a time ............... summaries.py
- plotly's property-path parser, memoised (a third of build time) . plotly_paths.py
"""

from . import plotly_paths  # noqa: F401 - importing it installs the memoised parser, before any figure is built
from .compare import compare_figure, max_abs_difference
from .export import export_trace, export_zip
from .heads import head_grid, head_overview, statistic_overview
from .heatmaps import matrix_heatmap, token_matrix_heatmap, weight_matrix_heatmap
from .labels import escape_label, plain_labels, tick_labels, visible_label
from .lines import attention_lines
from .pitfalls import cost_figure, permutation_figure, realign, saturation_figure, variance_figure
from .positional import position_similarity, position_similarity_figure, positional_heatmap
from .query import query_contributions, query_step_figure
from .rollout import attention_rollout, rollout_by_layer, rollout_heatmap
from .scores import attention_heatmap, score_heatmap
from .stats import STATISTICS, head_statistic, overview_matrix
from .theme import THEMES, apply_theme
from .views import VIEWS, figures_for_trace, matrices_for_trace

__all__ = [
    "STATISTICS",
    "THEMES",
    "VIEWS",
    "apply_theme",
    "attention_heatmap",
    "attention_lines",
    "attention_rollout",
    "compare_figure",
    "cost_figure",
    "escape_label",
    "export_trace",
    "export_zip",
    "figures_for_trace",
    "head_grid",
    "head_overview",
    "head_statistic",
    "matrices_for_trace",
    "matrix_heatmap",
    "max_abs_difference",
    "overview_matrix",
    "permutation_figure",
    "plain_labels",
    "position_similarity",
    "position_similarity_figure",
    "positional_heatmap",
    "query_contributions",
    "query_step_figure",
    "realign",
    "rollout_by_layer",
    "rollout_heatmap",
    "saturation_figure",
    "score_heatmap",
    "statistic_overview",
    "tick_labels",
    "token_matrix_heatmap",
    "variance_figure",
    "visible_label",
    "weight_matrix_heatmap",
]
