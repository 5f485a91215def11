"""A step-through filled into a kept frame (viz/query_frames.py) is the figure built from scratch, JSON for JSON
(parsed: the same keys and values, arrays as their exact bytes and dtype; the order of keys aside)."""

from __future__ import annotations

import json

import numpy as np
import plotly.io as pio
import pytest

import viz.query as query
from ui.plotly_spec import Sent
from viz.query import query_step_figure
from viz.query_frames import Frames

N, EV = 20, 5
TOKENS = [f"w{j}" for j in range(N)]


def _head(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    q, k, v = rng.normal(size=(N, EV)), rng.normal(size=(N, EV)), rng.normal(size=(N, EV))
    scores = q @ k.T  # (N, N)
    mask = np.tril(np.ones((N, N), dtype=bool))  # causal: query i sees keys 0..i
    scaled = np.where(mask, scores / np.sqrt(EV), -np.inf)
    e = np.exp(scaled - scaled.max(axis=1, keepdims=True))
    return dict(scores=scores, scaled=scaled, weights=e / e.sum(axis=1, keepdims=True), v=v, mask=mask)


def spec(fig) -> dict:
    return json.loads(pio.to_json(fig))


def _figure(head: dict, i: int, **options):
    return query_step_figure(
        head["scores"][i],
        head["scaled"][i],
        head["weights"][i],
        head["v"],
        TOKENS,
        query_token=TOKENS[i],
        query_index=i,
        mask_row=head["mask"][i],
        **options,
    )


@pytest.mark.parametrize("theme", ["screen", "slides"])
@pytest.mark.parametrize("show_values", [None, True, False])
def test_every_query_filled_into_a_frame_is_the_figure_built_from_scratch(monkeypatch, theme, show_values):
    head = _head()
    options = dict(theme=theme, show_values=show_values)
    monkeypatch.setattr(query, "FRAMES", Frames(kept=0))  # nothing kept: every figure built from scratch
    built = {i: spec(_figure(head, i, **options)) for i in range(N)}
    frames = Frames()
    monkeypatch.setattr(query, "FRAMES", frames)
    # in an order that fills every query from another one's frame (rows with blocked keys and the last, without)
    for i in (3, 0, 7, N - 1, 12, 1, N - 2):
        assert spec(_figure(head, i, **options)) == built[i], i
    assert len(frames) == 2  # one frame with blocked keys, one without (the last query sees every key)


def test_a_frame_is_left_as_it_was_and_the_title_and_a_new_head_come_through(monkeypatch):
    frames = Frames()
    monkeypatch.setattr(query, "FRAMES", frames)
    first, other = _head(0), _head(1)
    shown = spec(_figure(first, 4))
    filled = _figure(other, 5, title="mine")
    assert filled.layout.title.text == "mine" and len(frames) == 1
    assert np.array_equal(np.asarray(filled.data[0].y, float), other["scores"][5])
    assert spec(_figure(first, 4)) == shown  # the frame's own numbers were not overwritten
    monkeypatch.setattr(query, "FRAMES", Frames(kept=0))
    built = spec(_figure(other, 5, title="mine"))
    assert spec(filled) == built
    assert spec(Sent(filled).figure()) == built  # what the page is sent (ui.compute.figures keeps it so)


def test_a_new_set_of_keys_or_a_value_that_is_not_finite_is_built_from_scratch(monkeypatch):
    frames = Frames(kept=2)
    monkeypatch.setattr(query, "FRAMES", frames)
    head = _head()
    _figure(head, 4)
    fewer = query_step_figure(
        head["scores"][4][:5], head["scaled"][4][:5], head["weights"][4][:5], head["v"][:5], TOKENS[:5]
    )
    assert len(frames) == 2 and len(fewer.data[0].y) == 5
    broken = dict(head, v=np.where(np.arange(N)[:, None] == 2, np.inf, head["v"]))
    made = _figure(broken, 4)  # its contribution cells at key 2 are drawn blocked: a trace the frame lacks
    assert len(frames) == 2 and "contributions masked" in [t.name for t in made.data]
    _figure(head, N - 1)  # a third frame: the oldest goes
    assert len(frames) == 2
