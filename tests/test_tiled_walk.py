"""The tiled walkthrough of one head: exact against the core, running max and sum as defined, the figure."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from attention_core.multihead import init_weights, multi_head_self_attention
from attention_core.positional import alibi_bias
from attention_core.tiled import walk_head
from attention_core.traces import HeadTrace
from tests.export_zips import export_buttons, open_zip, read_csv, read_manifest
from viz.tiled import tile_states, tiled_cost_figure, tiled_figure, tiled_zip

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def head_trace(n: int = 21, *, alibi: bool = False, causal: bool = True) -> HeadTrace:
    x = torch.randn(n, 16, generator=torch.Generator().manual_seed(0))  # (L, D)
    weights = init_weights(16, 8, 2, seed=1, with_output=False)
    mask = torch.ones(n, n, dtype=torch.bool).tril() if causal else torch.ones(n, n, dtype=torch.bool)
    mh = multi_head_self_attention(x, weights, attn_mask=mask, score_bias=alibi_bias(2, n) if alibi else None)
    a = mh.attention
    return HeadTrace(
        q=mh.q[1].numpy(),
        k=mh.k[1].numpy(),
        v=mh.v[1].numpy(),
        scores=a.scores[1].numpy(),
        scaled=a.scaled[1].numpy(),
        masked=a.masked[1].numpy(),
        score_bias=None if a.score_bias is None else a.score_bias[1].numpy(),
        weights=a.weights[1].numpy(),
        output=a.output[1].numpy(),
        mask=mask.numpy(),
        scale=a.scale,
    )


@pytest.mark.parametrize("block", [1, 4, 7, 21, 64])
@pytest.mark.parametrize("alibi", [False, True])
def test_walk_reproduces_the_core_and_its_running_statistics(block, alibi):
    head = head_trace(alibi=alibi)
    walk = walk_head(head, block)
    assert walk.max_abs_diff < 1e-6
    masked = np.asarray(head.logits, dtype=np.float64)  # (L, S) what softmax sees (ALiBi's bias included)
    final_max = np.max(np.where(head.mask, masked, -np.inf), axis=-1)  # (L,)
    final_sum = np.where(head.mask, np.exp(masked - final_max[:, None]), 0.0).sum(-1)  # (L,)
    assert np.allclose(walk.running_max[-1], final_max, atol=1e-5)
    assert np.allclose(walk.running_sum[-1], final_sum, rtol=1e-5)
    assert np.all((walk.rescale[np.isfinite(walk.rescale)] > 0) & (walk.rescale[np.isfinite(walk.rescale)] <= 1))
    assert walk.distance[-1] < 1e-6  # the last step of the last block lands on the output
    assert walk.peak_tile_cells == block * block


def test_causal_tiles_above_the_diagonal_are_never_computed():
    walk = walk_head(head_trace(n=16), 4)
    states = tile_states(walk, len(walk.rows) - 1, 16, 16)
    assert (states[np.triu_indices(4, k=1)] == 3).all()  # never (all blocked)
    assert (states[np.tril_indices(4)] > 0).all()
    assert len(walk.rows) == 10  # 4 + 3 + 2 + 1 tiles on and below the diagonal


def test_figure_marks_the_step_and_rejects_a_wrong_one():
    walk = walk_head(head_trace(n=12, causal=False), 4)
    fig = tiled_figure(walk, 2, length=12, keys=12)
    assert "step 3 of 9" in fig.layout.title.text
    assert (tile_states(walk, 2, 12, 12) == 2).sum() == 1
    with pytest.raises(ValueError, match="out of range"):
        tiled_figure(walk, 9, length=12, keys=12)


def test_the_pitfalls_cost_tab_steps_through_this_head():
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params.update({"text": "The cat sat on the mat because it was tired.", "view": "pitfalls"})
    at.session_state["pitfall"] = "cost"
    at.run()
    assert not at.exception and not at.error
    at.select_slider(key="tiled_block").set_value(4)  # 13 tokens in 4 x 4 tiles: several steps
    at.run()
    assert not at.exception and not at.error
    at.slider(key="tiled_step").set_value(1)
    at.run()
    assert not at.exception and not at.error
    assert any("Max |tiled − full core|" in c.value for c in at.caption)
    assert any("Measured on this server" in c.value for c in at.caption)
    assert len(export_buttons(at)) == 1  # the section's zip (the encoder has no KV-cache step-through)


def test_cost_figure_and_smallest_rescale():
    walk = walk_head(head_trace(n=12, causal=False), 4)
    for step in range(len(walk.rows)):
        row = walk.rescale[step]
        assert walk.smallest_rescale(step) == pytest.approx(np.min(row[np.isfinite(row)]))
    fig = tiled_cost_figure([64, 128], [1e3, 2e3], [4e3, 16e3], [1e-3, 2e-3], [1e-3, 4e-3])
    assert [t.name for t in fig.data] == ["full core (n × n)", "tiled"] * 2
    with pytest.raises(ValueError, match="one value per n"):
        tiled_cost_figure([64, 128], [1e3], [4e3, 16e3], [1e-3, 2e-3], [1e-3, 4e-3])


def test_slides_zip_holds_both_figures_their_numbers_and_the_check():
    walk = walk_head(head_trace(n=12, causal=False), 4)
    cost = ([64, 128], [1e3, 2e3], [4e3, 16e3], [1e-3, 2e-3], [1e-3, 4e-3])
    data = tiled_zip(walk, 2, "html,csv", length=12, keys=12, cost=cost, layer=1, head=0, settings={"seed": 0})
    archive = open_zip(data)
    tables = ["tiled_tiles", "tiled_running", "tiled_distance", "tiled_cost"]
    figures = ["tiled", "tiled_cost"]
    expected = {f"{t}.csv" for t in tables} | {f"{f}.html" for f in figures} | {"plotly.min.js", "manifest.json"}
    assert set(archive.namelist()) == expected
    shown = tiled_figure(walk, 2, length=12, keys=12)  # the step on screen
    cols, rows, tiles = read_csv(archive, "tiled_tiles")
    assert rows == [f"query block {i}" for i in range(3)] and cols == [f"key block {j}" for j in range(3)]
    np.testing.assert_array_equal(tiles, shown.data[0].z)
    np.testing.assert_array_equal(tiles, tile_states(walk, 2, 12, 12))
    cols, rows, running = read_csv(archive, "tiled_running")
    assert cols == ["m after this step", "l after this step", "m at the end", "l at the end"] and len(rows) == 12
    m_end, m_step, l_end, l_step = (np.asarray(t.y, dtype=float) for t in shown.data[1:5])  # end, then this step
    np.testing.assert_array_equal(running, np.stack([m_step, l_step, m_end, l_end], axis=1))  # NaN: not reached
    _, rows, distance = read_csv(archive, "tiled_distance")
    assert rows == [f"step {t}" for t in range(1, 10)]
    np.testing.assert_array_equal(distance[:, 0], shown.data[5].y)
    _, rows, measured = read_csv(archive, "tiled_cost")
    assert rows == ["n = 64", "n = 128"]
    np.testing.assert_array_equal(measured, np.array(cost[1:]).T)
    on_screen = tiled_cost_figure(*cost)
    np.testing.assert_array_equal(measured[:, 0], on_screen.data[1].y)  # tiled bytes
    manifest = read_manifest(archive)
    assert manifest["views"] == ["pitfalls"] and manifest["section"] == "tiled"
    assert (manifest["layer"], manifest["head"], manifest["length"], manifest["keys"]) == (1, 0, 12, 12)
    assert (manifest["tiled_block"], manifest["tiled_step"], manifest["steps"]) == (4, 3, 9)
    assert manifest["max_abs_diff_vs_full"] == walk.max_abs_diff < 1e-6
    assert manifest["smallest_rescale"] == walk.smallest_rescale(2) and manifest["settings"] == {"seed": 0}
    assert manifest["figures"] == figures and manifest["matrices"] == tables and not manifest["warnings"]
    assert manifest["theme"] == "slides" and manifest["versions"]["numpy"] == np.__version__
