"""Two looks for every figure: "screen" (the app) and "slides" (export: white, large type).

Colour scales are colour-blind safe: ColorBrewer's RdBu (reversed: blue negative, red positive)
for signed values centred on 0, Viridis for 0..1 weights, Cividis for other sequential values.
Masked cells get a neutral grey that appears in neither scale.

Importing this module registers both looks with plotly (``attention_lens_screen`` / ``_slides``) and
makes the screen look plotly's default template for the process: every ``go.Figure()`` starts from it
instead of copying plotly's own large default template, which was most of the cost of creating a figure
(60,000 Python calls for an empty 16 x 16 heatmap, 2,300 with ours). ``apply_theme`` still sets the
template of every figure, so what a figure shows does not depend on the default (tests/test_viz_figures.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

THEMES = ("screen", "slides")

DIVERGING = "RdBu_r"  # signed values: scores, Q/K/V, differences (blue < 0 < red)
SEQUENTIAL = "Viridis"  # attention weights, 0..1
SEQUENTIAL_OTHER = "Cividis"  # other non-negative values (statistics, similarity magnitudes)
MASK_COLOUR = "#8c8c8c"  # masked (blocked) cells
LINE_COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9")  # Okabe-Ito
FONT_FAMILY = "Helvetica Neue, Helvetica, Arial, sans-serif"


@dataclass(frozen=True)
class ThemeSpec:
    """Sizes for one theme; width/height are the default export size in pixels."""

    font_size: int
    title_size: int
    subtitle_size: int
    axis_title_size: int
    tick_size: int
    cell_text_size: int
    margin: dict
    width: int
    height: int


SPECS = {
    "screen": ThemeSpec(
        font_size=13,
        title_size=17,
        subtitle_size=14,
        axis_title_size=14,
        tick_size=12,
        cell_text_size=11,
        margin=dict(l=70, r=30, t=70, b=60),
        width=900,
        height=600,
    ),
    "slides": ThemeSpec(
        font_size=18,
        title_size=26,
        subtitle_size=20,
        axis_title_size=20,
        tick_size=16,
        cell_text_size=15,
        margin=dict(l=110, r=40, t=100, b=90),
        width=1280,
        height=720,
    ),
}


def theme_spec(theme: str) -> ThemeSpec:
    """The sizes of ``theme``; ValueError for an unknown name."""
    if theme not in SPECS:
        raise ValueError(f"unknown theme {theme!r}; choose one of {THEMES}")
    return SPECS[theme]


def _template(spec: ThemeSpec) -> go.layout.Template:
    axis = dict(
        showline=True,
        linecolor="#444",
        ticks="outside",
        tickcolor="#444",
        gridcolor="#e6e6e6",
        zeroline=False,
        title_font=dict(size=spec.axis_title_size),
        tickfont=dict(size=spec.tick_size),
        automargin=True,
        # plotly's default for array ticks ("hide past div") measures every tick label's box on each draw to
        # hide those past the figure's edge: about 40% of a 64-token heatmap's redraw in Chromium. The margins
        # are automatic, so no label can run past the edge anyway.
        ticklabeloverflow="allow",
    )
    return go.layout.Template(
        layout=dict(
            font=dict(family=FONT_FAMILY, size=spec.font_size, color="#222"),
            paper_bgcolor="white",
            plot_bgcolor="white",
            colorway=list(LINE_COLOURS),
            xaxis=axis,
            yaxis=axis,
            hoverlabel=dict(font_size=spec.font_size),
            legend=dict(font=dict(size=spec.tick_size)),
        )
    )


def apply_theme(fig: go.Figure, theme: str = "screen") -> go.Figure:
    """Restyle ``fig`` in place for ``theme`` ("screen" or "slides") and return it.

    Safe to apply again with another theme: every size it sets is set explicitly. Titles stay
    inside the figure (automargin), subplot titles take the theme's subtitle size.
    """
    spec = theme_spec(theme)
    if not _has_template(fig, theme):
        fig.layout.template = pio.templates[f"attention_lens_{theme}"]  # built once (below), copied here
    fig.update_layout(_layout_style(spec))
    fig.update_xaxes(_axis_style(spec))
    fig.update_yaxes(_axis_style(spec))
    for annotation in fig.layout.annotations:
        if annotation.name != "fixed-size":
            annotation.font.size = spec.subtitle_size
    for trace in fig.data:
        if _has_cell_text(trace.type, trace.texttemplate, trace.name):
            trace.textfont.size = spec.cell_text_size
    meta = dict(fig.layout.meta) if isinstance(fig.layout.meta, dict) else {}
    meta["theme"] = theme
    fig.layout.meta = meta
    return fig


def themed_figure(traces: list, layout: dict, theme: str = "screen", *, validate: bool = True) -> go.Figure:
    """``go.Figure(traces, layout)`` styled as ``apply_theme`` would style it, in one construction.

    Building a heatmap by ``add_trace``, ``update_xaxes`` and ``update_layout`` and then ``apply_theme`` went
    through plotly's property machinery a few hundred times (about 20 ms a figure on a 2-core machine); the
    same figure from plain dicts costs about a third of that. ``traces`` are dicts or plotly trace objects,
    ``layout`` a dict; both are changed in place. The result equals the step-by-step figure's ``to_dict()``
    (tests/test_viz_themed.py). ``validate=False``: traces and layout are taken as given (``unvalidated_figure``)."""
    spec = theme_spec(theme)
    traces = [trace if isinstance(trace, dict) else trace.to_plotly_json() for trace in traces]
    merge(layout, _layout_style(spec))
    for name in ("xaxis", "yaxis", *(key for key in layout if key[1:5] == "axis" and key[5:].isdigit())):
        merge(layout.setdefault(name, {}), _axis_style(spec))
    for annotation in layout.get("annotations", ()):
        if annotation.get("name") != "fixed-size":
            merge(annotation, dict(font=dict(size=spec.subtitle_size)))
    for trace in traces:
        if _has_cell_text(trace.get("type"), trace.get("texttemplate"), trace.get("name")):
            merge(trace, dict(textfont=dict(size=spec.cell_text_size)))
    layout["meta"] = {**(layout.get("meta") if isinstance(layout.get("meta"), dict) else {}), "theme": theme}
    if theme != "screen" or pio.templates.default != "attention_lens_screen":
        layout["template"] = pio.templates[f"attention_lens_{theme}"]
    return go.Figure(data=traces, layout=layout) if validate else unvalidated_figure(traces, layout)


def unvalidated_figure(traces: list[dict], layout: dict) -> go.Figure:
    """``go.Figure(data=traces, layout=layout)`` with the traces and the layout taken as given, not through plotly's
    validators (``_validate=False``): numpy arrays are copied and named colour scales made lists, as the
    validators do, and the theme's template set as a plain dict.

    Validating every property was most of a many-trace figure's build (71 of 81 ms for the attention lines'
    hundred traces at 16 tokens; then the layout's slider steps and a grid's twelve subplots). What is given must be
    what the validated build keeps, property for property: the tests compare the JSON with the validated,
    step-by-step figures (tests/test_viz_lines.py, test_viz_grid.py, test_viz_overview.py). The arrays are copies, so
    a figure kept in the store holds no view of a trace."""
    for trace in traces:
        for name, value in trace.items():
            if isinstance(value, np.ndarray):
                trace[name] = np.array(value)
    for name, axis in layout.items():
        if name.startswith("coloraxis") and isinstance(axis, dict) and isinstance(axis.get("colorscale"), str):
            axis["colorscale"] = [list(stop) for stop in _named_colorscale(axis["colorscale"])]
    template = layout.get("template")
    if template is not None and not isinstance(template, dict):
        layout["template"] = template.to_plotly_json()
    return go.Figure(data=traces, layout=layout, _validate=False)


@lru_cache(maxsize=16)
def _named_colorscale(name: str) -> tuple:
    """A named colour scale as plotly's validator makes it ([[0.0, colour], ...]), once per name."""
    return tuple(tuple(stop) for stop in go.layout.Coloraxis(colorscale=name).colorscale)


def _layout_style(spec: ThemeSpec) -> dict:
    """What a theme sets on a figure's layout (fonts, the title's place and size, margins, white)."""
    title = dict(font=dict(size=spec.title_size), x=0.5, xanchor="center", xref="paper", y=0.985, yanchor="top")
    return dict(
        font=dict(family=FONT_FAMILY, size=spec.font_size, color="#222"),
        title=dict(title, yref="container"),
        margin=dict(spec.margin),
        paper_bgcolor="white",
        plot_bgcolor="white",
    )


def _axis_style(spec: ThemeSpec) -> dict:
    """What a theme sets on every x and y axis."""
    return dict(title=dict(font=dict(size=spec.axis_title_size)), tickfont=dict(size=spec.tick_size))


def _has_cell_text(kind: str | None, texttemplate, name: str | None) -> bool:
    """A trace whose text takes the theme's cell size: a heatmap with values written in, or the masked values."""
    return bool((kind == "heatmap" and texttemplate) or (kind == "scatter" and (name or "").endswith("masked values")))


def merge(target: dict, updates: dict) -> None:
    """``updates`` into ``target`` as plotly's ``update`` does: nested dicts merged, other values replaced."""
    for key, value in updates.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            merge(target[key], value)
        else:
            target[key] = value


def _has_template(fig: go.Figure, theme: str) -> bool:
    """True when ``fig`` already carries ``theme``'s template: a figure never themed gets plotly's default
    template when it is created, and that default is the screen look (``_register_templates``). Assigning
    the same template again was about a tenth of a figure's build (plotly builds, validates and copies it)."""
    themed = isinstance(fig.layout.meta, dict) and "theme" in fig.layout.meta
    return theme == "screen" and not themed and pio.templates.default == "attention_lens_screen"


def export_size(fig: go.Figure, theme: str = "slides") -> tuple[int, int]:
    """(width, height) in pixels for a static image: the figure's own size, else the theme's."""
    spec = theme_spec(theme)
    return int(fig.layout.width or spec.width), int(fig.layout.height or spec.height)


def _register_templates() -> None:
    """Both looks as named plotly templates; the screen look becomes the default for new figures."""
    for name in THEMES:
        pio.templates[f"attention_lens_{name}"] = _template(theme_spec(name))
    pio.templates.default = "attention_lens_screen"


_register_templates()
