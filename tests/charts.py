"""The charts an AppTest page draws: the views' lens charts (ui/chart.py) and any st.plotly_chart."""

from __future__ import annotations

import json
from dataclasses import dataclass

from ui import plotly_spec

LENS_CHARTS = (
    "attention_lens_chart",
    "attention_lens_chart_click",
    "attention_lens_chart_rows",
)  # ui/chart.py: the chart, the one that reports clicks, the one that asks for a step-through's rows


@dataclass(frozen=True)
class Chart:
    id: str  # the element id; it ends with the chart's key
    spec: str  # plotly's JSON of the figure the browser draws (ui.plotly_spec.unpack of what is sent)

    @property
    def figure(self) -> dict:
        return json.loads(self.spec)

    @property
    def title(self) -> str:
        return self.figure["layout"]["title"]["text"]


def charts(at) -> list[Chart]:
    """Every chart on the page: the lens charts first (in page order), then st.plotly_chart's."""
    drawn = [
        Chart(element.proto.id, json.dumps(plotly_spec.unpack(element.proto.bytes)))
        for element in at.get("bidi_component")
        if element.proto.component_name.endswith(LENS_CHARTS) and element.proto.bytes  # not ui.chart.preload
    ]
    return drawn + [Chart(element.proto.id, element.proto.spec) for element in at.get("plotly_chart")]


def figure(at, key: str) -> dict:
    """The figure of the chart whose key is ``key`` (AssertionError naming the keys there are)."""
    for chart in charts(at):
        if chart.id.endswith(key):
            return chart.figure
    raise AssertionError(f"no figure {key}; have {[c.id.split('-')[-1] for c in charts(at)]}")
