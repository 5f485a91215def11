"""Head contributions, ablation and direct logit attribution (issue 17, items 1, 2 and 5).

References, none of them the code under test:
- a two-head example (grouped-query: both heads read one value head) worked out by hand below;
- the real model's own attention output, hooked from its output projection (MiniLM, SmolLM2), on a float64
  copy of the model for the sum check (the float32 model's own rounding reaches 5e-5 on SmolLM2);
- ablation against a copy of the model whose W^O columns for the head are zeroed by hand;
- direct logit attribution against the model's own logit.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import zipfile
from dataclasses import replace

import numpy as np
import pytest
import torch

from attention_core import __main__ as cli
from attention_core.ablation import (
    ABLATIONS,
    ablate_layer,
    ablation_map,
    baseline_readout,
    default_position,
    direct_logit_attribution,
    metric_name,
    reference_run,
)
from attention_core.contributions import contribution_terms, contributions, layer_contributions
from attention_core.contributions_check import float64_layer, sum_check_float64
from attention_core.kvcache_checks import float64_copy
from attention_core.pretrained import capture, load_model, tokenize
from tests.browser import chromium_path
from tests.charts import charts
from tests.tiny_models import build_tiny_model
from viz.contributions import (
    CONTRIBUTION_MODES,
    ablation_bars,
    ablation_map_figure,
    contribution_grid,
    direct_logit_figure,
    head_share_figure,
    next_token_figure,
    row_comparison,
)
from viz.contributions_panels import DirectParts, ShownContributions, contributions_zip, shown_panels
from viz.labels import plain_labels, visible_label

TEXT = "The cat sat on the mat."


# --- a two-head example, by hand ----------------------------------------------------------------------
# H = 2 query heads share Hkv = 1 value head (Ev = 1), D = 2.
#   v = [2, 4]                     W^O = [[1, 0],   (head 0's row)     b^O = [0.5, -1]
#                                         [0, 3]]   (head 1's row)
#   alpha head 0 = [[1, 0], [.5, .5]]      alpha head 1 = [[.25, .75], [0, 1]]
# v_j W^O_h:     head 0: [2, 0], [4, 0] (norms 2, 4);   head 1: [0, 6], [0, 12] (norms 6, 12)
# ||alpha v W||: head 0: [[2, 0], [1, 2]];              head 1: [[1.5, 9], [0, 12]]
# head outputs:  head 0: [2, 0], [3, 0];                head 1: [0, 10.5], [0, 12]
# block output:  [2.5, 9.5], [3.5, 11]
# head shares per token: token 0: 2 / 12.5 = .16, 10.5 / 12.5 = .84; token 1: 3 / 15 = .2, 12 / 15 = .8


def _hand_example():
    weights = torch.tensor([[[1.0, 0.0], [0.5, 0.5]], [[0.25, 0.75], [0.0, 1.0]]])  # (H, L, S)
    v = torch.tensor([[[2.0], [4.0]]])  # (Hkv, S, Ev)
    w_o = torch.tensor([[1.0, 0.0], [0.0, 3.0]])  # (H*Ev, D)
    b_o = torch.tensor([0.5, -1.0])
    return weights, v, w_o, b_o


def test_two_heads_by_hand():
    weights, v, w_o, b_o = _hand_example()
    model_output = torch.tensor([[2.5, 9.5], [3.5, 11.0]])
    parts = contributions(weights, v, w_o, b_o, model_output=model_output)
    np.testing.assert_allclose(parts.value_norms, [[2, 4], [6, 12]])
    np.testing.assert_allclose(parts.contribution_norms, [[[2, 0], [1, 2]], [[1.5, 9], [0, 12]]])
    np.testing.assert_allclose(parts.head_outputs, [[[2, 0], [3, 0]], [[0, 10.5], [0, 12]]])
    np.testing.assert_allclose(parts.block_output, [[2.5, 9.5], [3.5, 11]])
    np.testing.assert_allclose(parts.head_shares(), [[0.16, 0.2], [0.84, 0.8]])
    np.testing.assert_allclose(parts.contribution_shares()[0], [[1, 0], [1 / 3, 2 / 3]])
    np.testing.assert_allclose(parts.contribution_shares()[1], [[1 / 7, 6 / 7], [0, 1]])
    assert parts.sum_check_max_abs_diff == 0.0 and parts.sum_check_ok
    assert parts.kv_head(0) == parts.kv_head(1) == 0
    terms = contribution_terms(weights, v, w_o)  # (H, L, S, D): the terms themselves
    assert terms.shape == (2, 2, 2, 2)
    np.testing.assert_allclose(terms[1, 0, 1].numpy(), [0, 9])  # 0.75 * [0, 12]
    np.testing.assert_allclose(terms.sum(dim=(0, 2)).numpy() + b_o.numpy(), [[2.5, 9.5], [3.5, 11]])


def test_the_check_catches_a_wrong_output_and_a_bad_shape():
    weights, v, w_o, b_o = _hand_example()
    wrong = contributions(weights, v, w_o, b_o, model_output=torch.tensor([[2.5, 9.5], [3.5, 11.01]]))
    assert wrong.sum_check_max_abs_diff == pytest.approx(0.01, rel=1e-4) and not wrong.sum_check_ok
    assert np.isnan(contributions(weights, v, w_o).sum_check_max_abs_diff)
    with pytest.raises(ValueError, match="rows"):
        contributions(weights, v, w_o[:1], b_o)


# --- the real models: the heads add up to what the model computed --------------------------------------


@pytest.fixture(scope="module")
def bundled():
    made = {}

    def get(name):
        if name not in made:
            loaded = load_model(name)
            tokens = tokenize(loaded, TEXT)
            made[name] = (loaded, tokens, capture(loaded, tokens), reference_run(loaded, tokens))
        return made[name]

    return get


@pytest.fixture(scope="module")
def wide(bundled):
    """A float64 copy of each bundled model, made once for the module."""
    made = {}

    def get(name):
        if name not in made:
            made[name] = float64_copy(bundled(name)[0])
        return made[name]

    return get


@pytest.mark.parametrize("name", ["minilm", "smollm2"])
def test_heads_add_up_to_the_models_attention_output(bundled, wide, name):
    """The raw float64 check, every layer: Σ heads + b^O against the float64 model's own attention output."""
    loaded, tokens, captured, reference = bundled(name)
    checked = sum_check_float64(wide(name), tokens)  # one forward of the float64 copy, every layer
    assert list(checked) == list(range(len(loaded.sites)))
    assert max(checked.values()) <= 1e-5, checked  # measured: MiniLM ~1e-15, SmolLM2 ~1e-13
    biggest = max(range(len(loaded.sites)), key=lambda i: float(reference.attn_outputs[i].abs().max()))
    if name == "smollm2":  # layer 24: attention outputs near 180, where float32 alone rounds by ~5e-5
        assert biggest == 24 and float(reference.attn_outputs[24].abs().max()) > 100
    parts = layer_contributions(captured.layer(biggest), reference.attn_outputs[biggest])  # the float32 model
    assert parts.model_output.shape == (tokens.length, loaded.facts.d_model)
    assert parts.sum_check_max_abs_diff <= 1e-5 * float(np.abs(parts.model_output).max())  # its rounding, no more
    assert checked[biggest] < parts.sum_check_max_abs_diff  # the float64 check sees past that rounding
    np.testing.assert_allclose(parts.head_shares().sum(axis=0), 1.0, rtol=1e-9)
    assert not np.allclose(parts.contribution_shares(), parts.weights)  # value norms do reweight


@pytest.mark.parametrize("name", ["minilm", "smollm2"])
def test_the_float64_copy_takes_apart_the_same_computation(bundled, wide, name):
    """The float64 layer is the float32 capture's layer at higher precision: same weights, same head shares."""
    loaded, tokens, captured, reference = bundled(name)
    layer = 24 if name == "smollm2" else 3
    found = float64_layer(wide(name), tokens, layer)
    assert found.weights.dtype == found.v.dtype == found.w_o.dtype == found.output.dtype == torch.float64
    np.testing.assert_allclose(found.weights.numpy(), captured.layer(layer).attentions.numpy(), atol=1e-4)
    np.testing.assert_allclose(found.output.numpy(), reference.attn_outputs[layer].numpy(), atol=1e-2, rtol=1e-3)
    parts = found.parts()
    assert parts.sum_check_ok and parts.sum_check_max_abs_diff <= 1e-5
    float32_parts = layer_contributions(captured.layer(layer), reference.attn_outputs[layer])
    np.testing.assert_allclose(parts.head_shares(), float32_parts.head_shares(), atol=1e-3)


def test_smollm2_heads_share_their_value_head(bundled):
    loaded, _, captured, reference = bundled("smollm2")
    parts = layer_contributions(captured.layer(2), reference.attn_outputs[2])
    assert (parts.num_heads, parts.num_kv_heads) == (9, 3)
    assert [parts.kv_head(h) for h in range(9)] == [0, 0, 0, 1, 1, 1, 2, 2, 2]


@pytest.mark.parametrize(("name", "index"), [("minilm", 1), ("smollm2", 24)])
def test_the_check_is_not_lenient_a_slip_in_the_sum_fails_it(bundled, wide, name, index):
    """The raw float64 check on the float64 copy's own layer: right, it passes; each slip misses by far."""
    tokens = bundled(name)[1]
    layer = float64_layer(wide(name), tokens, index)
    weights, v, w_o, b_o = layer.weights, layer.v, layer.w_o, layer.b_o
    assert layer.parts().sum_check_max_abs_diff <= 1e-5
    slips = {  # each a mistake one could make taking the block apart
        "value heads in the wrong order": (weights, v.roll(1, dims=0), w_o, b_o),
        "W^O's heads in the wrong order": (weights, v, w_o.roll(w_o.shape[0] // 3, dims=0), b_o),
        "one head left out": (weights * (torch.arange(weights.shape[0]) != 1)[:, None, None], v, w_o, b_o),
    }
    if b_o is not None:
        slips["b^O left out"] = (weights, v, w_o, None)
    assert ("b^O left out" in slips) == (name == "minilm")  # BERT has b^O; Llama has none
    for slip, args in slips.items():
        wrong = contributions(*args, model_output=layer.output)
        assert wrong.sum_check_max_abs_diff > 1e-3, (name, slip, wrong.sum_check_max_abs_diff)
        assert not wrong.sum_check_ok


# --- ablation ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["minilm", "smollm2"])
def test_switching_off_nothing_changes_nothing_and_a_head_changes_something(bundled, name):
    loaded, tokens, _, reference = bundled(name)
    found = ablate_layer(loaded, tokens, 1, heads=[None, 0, 3], reference=reference)
    nothing, zero_0, zero_3 = found
    assert abs(nothing.effect) <= 1e-5
    assert abs(zero_0.effect) > 1e-4 and abs(zero_3.effect) > 1e-4 and zero_0.effect != zero_3.effect
    if reference.decoder:
        assert nothing.target.token_id == nothing.top_after[0].token_id
        assert nothing.target_after == pytest.approx(nothing.target.log_prob, abs=1e-5)
        assert zero_0.top_before == nothing.top_before and len(zero_0.top_after) == 5
    else:
        assert nothing.cosine == pytest.approx(1.0, abs=1e-6) and zero_0.cosine < 1.0
    mean_0 = ablate_layer(loaded, tokens, 1, heads=[0], mode="mean", reference=reference)[0]
    assert mean_0.effect != pytest.approx(zero_0.effect, abs=1e-7)


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    loaded = load_model(str(build_tiny_model("llama", tmp_path_factory.mktemp("llama"))))
    return loaded, tokenize(loaded, "the cat sat on the mat")


def test_zero_ablation_equals_a_model_with_that_heads_w_o_columns_zeroed(tiny_llama):
    loaded, tokens = tiny_llama
    layer, head = 1, 2
    hooked = ablate_layer(loaded, tokens, layer, heads=[head], top_k=3)[0]
    edited = copy.deepcopy(loaded.model)
    o_proj = edited.model.layers[layer].self_attn.o_proj
    head_dim = o_proj.in_features // loaded.sites[layer].num_heads
    with torch.no_grad():
        o_proj.weight[:, head * head_dim : (head + 1) * head_dim] = 0.0  # W^O_h = 0 by hand
        log_probs = edited(input_ids=tokens.ids).logits[0, -1].log_softmax(-1)
    assert hooked.target_after == pytest.approx(float(log_probs[hooked.target.token_id]), abs=1e-5)
    assert [t.token_id for t in hooked.top_after] == log_probs.topk(3).indices.tolist()


def test_the_layer_by_head_map_reports_each_layer(tiny_llama):
    loaded, tokens = tiny_llama
    heard = []
    found = ablation_map(loaded, tokens, mode="mean", progress=lambda message, fraction: heard.append(fraction))
    assert found.effects.shape == (2, 4) and np.isfinite(found.effects).all() and found.decoder
    assert heard[0] == 0.0 and heard[-1] == 1.0 and len(heard) == 3
    one = ablate_layer(loaded, tokens, 1, mode="mean")
    np.testing.assert_allclose(found.effects[1], [a.effect for a in one], atol=1e-6)
    assert found.mode in ABLATIONS and "log-probability" in found.metric


def test_a_bad_layer_mode_or_position_is_refused(tiny_llama):
    loaded, tokens = tiny_llama
    with pytest.raises(ValueError, match="out of range"):
        ablate_layer(loaded, tokens, 7)
    with pytest.raises(ValueError, match="ablation"):
        ablate_layer(loaded, tokens, 0, mode="half")
    with pytest.raises(ValueError, match="position"):
        ablate_layer(loaded, tokens, 0, position=99)


# --- direct logit attribution -----------------------------------------------------------------------


def test_direct_logits_add_up_to_the_models_logit_smollm2(bundled):
    loaded, tokens, captured, reference = bundled("smollm2")
    position = default_position(tokens)
    parts = layer_contributions(captured.layer(3), reference.attn_outputs[3])
    dla = direct_logit_attribution(loaded, reference, parts, position)
    assert dla.heads.shape == (9,) and dla.bias == 0.0 and dla.constant == 0.0  # Llama: no b^O, no norm bias
    assert dla.check <= 1e-4 * max(1.0, abs(dla.logit))
    assert dla.token.token_id == int(baseline_readout(loaded, reference, position).argmax())  # the top next token
    other = direct_logit_attribution(loaded, reference, parts, position, token_id=dla.token.token_id + 1)
    assert other.check <= 1e-4 * max(1.0, abs(other.logit)) and other.logit != dla.logit


def test_direct_logits_through_a_layer_norm_with_bias(tmp_path):
    loaded = load_model(str(build_tiny_model("gpt2", tmp_path / "gpt2")))
    torch.manual_seed(1)
    with torch.no_grad():  # biases start at zero: draw them (in place, so the loaded projections see them too)
        for name, parameter in loaded.model.named_parameters():
            if name.endswith("bias"):
                parameter.normal_(0.0, 0.2)
    tokens = tokenize(loaded, "the cat sat on the mat")
    reference = reference_run(loaded, tokens)
    parts = layer_contributions(capture(loaded, tokens).layer(0), reference.attn_outputs[0])
    assert parts.sum_check_ok and parts.bias is not None and np.abs(parts.bias).max() > 0  # c_proj's bias
    checked = sum_check_float64(float64_copy(loaded), tokens)  # GPT-2's fused c_attn and Conv1D W^O, in float64
    assert list(checked) == [0, 1] and max(checked.values()) <= 1e-12
    no_bias = float64_layer(float64_copy(loaded), tokens, 0)
    assert (
        contributions(no_bias.weights, no_bias.v, no_bias.w_o, None, model_output=no_bias.output).sum_check_max_abs_diff
        > 1e-3
    )
    dla = direct_logit_attribution(loaded, reference, parts, tokens.length - 1)
    assert dla.bias != 0.0 and dla.constant != 0.0  # b^O's term; ln_f's bias through the unembedding
    assert dla.check <= 1e-4 * max(1.0, abs(dla.logit))


def test_direct_logits_need_a_decoder(bundled):
    loaded, tokens, captured, reference = bundled("minilm")
    parts = layer_contributions(captured.layer(0), reference.attn_outputs[0])
    with pytest.raises(ValueError, match="decoder"):
        direct_logit_attribution(loaded, reference, parts, 0)


# --- the command line ----------------------------------------------------------------------------------


def test_cli_json_minilm(capsys):
    status = cli.main(["contributions", "--model", "minilm", "--text", TEXT, "--layer", "1", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert status == 0 and report["ok"] is True
    assert report["sum_check_max_abs_diff"] <= 1e-5 and report["layer"] == 1
    assert report["sum_check_precision"] == "float64" and "sum_check_scaled_diff" not in report
    assert 0 <= report["sum_check_max_abs_diff"] < report["sum_check_float32_max_abs_diff"] < 1e-5
    assert len(report["heads"]) == 12 and report["ablation"] == "zero"
    first = report["heads"][0]
    assert {"weight_share", "contribution_share", "ablation_effect", "output_share"} <= set(first)
    assert len(first["weight_share"]) == len(report["tokens"])
    assert sum(first["weight_share"]) == pytest.approx(1.0, abs=1e-5)
    assert sum(first["contribution_share"]) == pytest.approx(1.0, abs=1e-9)
    assert sum(h["output_share"] for h in report["heads"]) == pytest.approx(1.0)


def test_cli_json_smollm2_has_the_next_token_and_direct_logits(capsys):
    argv = ["contributions", "--model", "smollm2", "--text", "The capital of France is", "--layer", "24", "--json"]
    status = cli.main([*argv, "--ablation", "mean"])
    report = json.loads(capsys.readouterr().out)
    assert status == 0 and report["num_kv_heads"] == 3 and len(report["heads"]) == 9
    # the layer whose outputs reach ~180: the raw float64 check passes where float32's rounding alone is 5e-5
    assert report["ok"] is True and report["sum_check_max_abs_diff"] <= 1e-5
    assert report["sum_check_float32_max_abs_diff"] > 1e-5 > report["sum_check_max_abs_diff"]
    assert report["ablation"] == "mean" and "direct_logit" in report["heads"][0]
    assert report["next_token"]["text"] and report["direct_logit_attribution"]["reconstruction_diff"] < 1e-3


def test_cli_exit_codes(capsys):
    assert cli.main(["contributions", "--model", "minilm", "--layer", "6"]) == 2
    assert "layer 6 is out of range" in capsys.readouterr().err
    assert cli.main(["contributions", "--model", "scratch"]) == 2
    assert "pretrained" in capsys.readouterr().err
    assert cli.main(["contributions", "--model", "minilm", "--text", "A cat.", "--tolerance", "-1"]) == 1
    assert "FAILED" in capsys.readouterr().out


# --- figures ---------------------------------------------------------------------------------------------


def test_figures_draw_what_they_are_given():
    weights, v, w_o, b_o = _hand_example()
    parts = contributions(weights, v, w_o, b_o)
    tokens = ["a", "<b>"]
    for mode in CONTRIBUTION_MODES:
        grid = contribution_grid(parts.weights, parts.contribution_shares(), tokens, mode=mode, layer=0, selected=1)
        expected = parts.weights[1] if mode == "weights" else parts.contribution_shares()[1]
        np.testing.assert_allclose(np.asarray(grid.data[[d.name for d in grid.data].index("head 1")].z), expected)
    with pytest.raises(ValueError, match="mode"):
        contribution_grid(parts.weights, parts.contribution_shares(), tokens, mode="both")
    row = row_comparison(parts.weights[1, 0], parts.contribution_shares()[1, 0], tokens, query_index=0, head=1)
    np.testing.assert_allclose(row.data[1].y, [1 / 7, 6 / 7])
    shares = head_share_figure(parts.head_shares(), tokens, layer=0, selected=0)
    np.testing.assert_allclose(shares.data[1].y, [0.84, 0.8])
    assert "&lt;b&gt;" in str(shares.layout.xaxis.ticktext)  # token text escaped
    assert ablation_bars(np.array([0.1, -0.2]), metric="m", layer=0, decoder=True).data[0].y.tolist() == [0.1, -0.2]
    grid_map = ablation_map_figure(np.array([[0.1, -0.3], [0.0, 0.2]]), metric="m", decoder=True, selected=(1, 1))
    assert grid_map.layout.coloraxis.cmin == -0.3 and grid_map.layout.coloraxis.cmax == 0.3
    tokens_fig = next_token_figure([(" Paris", -0.1), (" the", -3.0)], [(" the", -0.5), (" a", -2.0)])
    assert list(tokens_fig.data[0].x) == pytest.approx([np.exp(-0.1), np.exp(-3.0), None], nan_ok=True)
    dla = direct_logit_figure(
        np.array([1.0, -0.5]), bias=0.1, rest=2.0, constant=0.0, logit=2.6, token="x", layer=0, position=1
    )
    assert sum(dla.data[0].y) == pytest.approx(2.6)


# --- the app: settings in the link, the view on a real model and on scratch weights -------------------


def test_the_views_settings_ride_in_the_link():
    from ui.settings import VIEW_ONLY, from_query_params, to_query_params

    settings, notices = from_query_params(
        {"view": "contributions", "contribution_mode": "contributions", "ablation": "mean"}
    )
    assert not notices and (settings.view, settings.contribution_mode, settings.ablation) == (
        "contributions",
        "contributions",
        "mean",
    )
    assert to_query_params(settings) == {
        "view": "contributions",
        "contribution_mode": "contributions",
        "ablation": "mean",
    }
    fixed, notices = from_query_params({"contribution_mode": "both", "ablation": "half"})
    assert (fixed.contribution_mode, fixed.ablation) == ("weights", "zero") and len(notices) == 2
    assert {"contribution_mode", "ablation"} <= set(VIEW_ONLY)


def test_the_view_draws_on_minilm_and_explains_scratch():
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    app = str(Path(__file__).resolve().parents[1] / "app.py")
    at = AppTest.from_file(app, default_timeout=300)
    at.query_params.update({"text": TEXT, "max_tokens": "16", "view": "contributions", "ablation": "mean"})
    at.run()
    assert not at.exception and not at.error, ([e.message for e in at.exception], [e.value for e in at.error])
    assert at.radio(key="ablation").value == "mean" and at.radio(key="contribution_mode").value == "weights"
    (check,) = [m for m in at.metric if m.label.startswith("Σ heads")]
    assert check.label.endswith("(float64)") and float(check.value) <= 1e-5  # the raw float64 number
    assert "float64 copy" in check.proto.help and "for information only" in check.proto.help
    drawn = len(charts(at))
    assert drawn == 4  # grid, row, head shares, this layer's ablation
    slides = [b for b in at.get("download_button") if b.proto.label.startswith("⬇ Export this view for slides")]
    assert len(slides) == 1  # the view's zip, built on a click (tested above without Streamlit)
    at.button(key="contrib_map_go").click()
    at.run()
    assert not at.exception and not at.error and len(charts(at)) == drawn + 1
    at.radio(key="source").set_value("scratch")
    at.run()
    assert not at.exception and not at.error
    assert any("pretrained model" in box.value for box in at.info)


# --- the view's slides zip (issue 17: contributions export like every other view) ----------------------


def _csv(archive: zipfile.ZipFile, name: str) -> tuple[list[str], list[str], np.ndarray]:
    """(column labels, row labels, numbers) of ``name``.csv in the zip."""
    header, *rows = csv.reader(io.StringIO(archive.read(f"{name}.csv").decode("utf-8")))
    return header[1:], [row[0] for row in rows], np.array([[float(v) for v in row[1:]] for row in rows])


def _shown(loaded, tokens, captured, reference, layer: int, head: int, mode: str = "zero", **more):
    """What the view computes for ``layer``/``head`` at the default position, as the view hands it to viz."""
    position = default_position(tokens)
    parts = layer_contributions(captured.layer(layer), reference.attn_outputs[layer])
    found = ablate_layer(loaded, tokens, layer, mode=mode, position=position, reference=reference)
    shown = ShownContributions(
        tokens=list(tokens.labels),
        layer=layer,
        head=head,
        position=position,
        mode="contributions",
        weights=parts.weights,
        shares=parts.contribution_shares(),
        head_shares=parts.head_shares(),
        decoder=reference.decoder,
        ablation=mode,
        metric=metric_name(reference.decoder),
        effects=np.array([a.effect for a in found]),
        sum_check={"max_abs_diff": parts.sum_check_max_abs_diff, "ok": parts.sum_check_ok},
        **more,
    )
    return shown, parts, found


def test_the_slides_zip_holds_every_figure_of_the_view_and_its_numbers(bundled):
    loaded, tokens, captured, reference = bundled("minilm")
    shown, parts, found = _shown(loaded, tokens, captured, reference, layer=1, head=2, mode="mean")
    panels = ["contributions_grid", "contributions_row", "contributions_head_shares", "contributions_ablation_layer"]
    assert list(shown_panels(shown)) == panels  # what the view draws for an encoder, before the map is computed
    archive = zipfile.ZipFile(io.BytesIO(contributions_zip(shown, "html,csv", settings={"model": "minilm"})))
    expected = {f"{p}.{ext}" for p in panels for ext in ("html", "csv")} | {"plotly.min.js", "manifest.json"}
    assert set(archive.namelist()) == expected

    cols, rows, grid = _csv(archive, "contributions_grid")  # the selected head's contribution shares
    assert cols == rows == plain_labels(tokens.labels) and len(rows) == tokens.length
    np.testing.assert_array_equal(grid, parts.contribution_shares()[2])  # exact: shortest round-trip repr
    cols, _, row = _csv(archive, "contributions_row")
    assert cols == ["weight", "contribution_share"]
    np.testing.assert_array_equal(row[:, 0].astype(np.float32), parts.weights[2, shown.position])
    np.testing.assert_array_equal(row[:, 1], parts.contribution_shares()[2, shown.position])
    _, rows, head_shares = _csv(archive, "contributions_head_shares")
    assert rows == [f"head {h}" for h in range(12)]
    np.testing.assert_array_equal(head_shares, parts.head_shares())
    _, _, effects = _csv(archive, "contributions_ablation_layer")
    np.testing.assert_array_equal(effects[:, 0], [a.effect for a in found])

    manifest = json.loads(archive.read("manifest.json"))
    assert manifest["views"] == ["contributions"] and manifest["settings"] == {"model": "minilm"}
    assert (manifest["layer"], manifest["head"], manifest["query"], manifest["ablation"]) == (
        1,
        2,
        shown.position,
        "mean",
    )
    assert manifest["sum_check"] == {"max_abs_diff": parts.sum_check_max_abs_diff, "ok": True}
    assert manifest["versions"]["numpy"] == np.__version__ and manifest["figures"] == panels
    assert manifest["theme"] == "slides" and not manifest["warnings"]
    assert '"size":26' in archive.read("contributions_grid.html").decode("utf-8")  # the slides theme's titles

    with_map = replace(shown, ablation_map=np.arange(72.0).reshape(6, 12) / 100)  # once the map is computed
    archive = zipfile.ZipFile(io.BytesIO(contributions_zip(with_map, "csv")))
    assert set(archive.namelist()) == {f"{p}.csv" for p in panels} | {"contributions_ablation_map.csv", "manifest.json"}
    _, rows, effects_map = _csv(archive, "contributions_ablation_map")
    assert rows == [f"layer {i}" for i in range(6)]
    np.testing.assert_array_equal(effects_map, with_map.ablation_map)

    if chromium_path():
        archive = zipfile.ZipFile(io.BytesIO(contributions_zip(shown, "png")))
        assert {f"{p}.png" for p in panels} <= set(archive.namelist())
        assert all(archive.read(f"{p}.png").startswith(b"\x89PNG") for p in panels)
        assert not json.loads(archive.read("manifest.json"))["warnings"]


def test_the_slides_zip_of_a_decoder_has_the_next_tokens_and_direct_logits(bundled):
    loaded, tokens, captured, reference = bundled("smollm2")
    shown, parts, found = _shown(loaded, tokens, captured, reference, layer=3, head=4)
    dla = direct_logit_attribution(loaded, reference, parts, shown.position)
    chosen = found[4]
    shown = replace(
        shown,
        top_before=tuple((t.label, t.log_prob) for t in chosen.top_before),
        top_after=tuple((t.label, t.log_prob) for t in chosen.top_after),
        direct=DirectParts(dla.heads, dla.bias, dla.rest, dla.constant, dla.logit, dla.token.label, dla.check),
    )
    archive = zipfile.ZipFile(io.BytesIO(contributions_zip(shown, "csv")))
    _, rows, next_tokens = _csv(archive, "contributions_next_token")
    assert rows[0] == f"before: {visible_label(chosen.top_before[0].label)}" and len(rows) == 10
    np.testing.assert_array_equal(next_tokens[:, 0], [t.log_prob for t in (*chosen.top_before, *chosen.top_after)])
    _, rows, logit_parts = _csv(archive, "contributions_direct_logits")
    assert rows[-3:] == ["b_O", "rest", "constant"]
    np.testing.assert_array_equal(logit_parts[:9, 0], dla.heads)
    assert logit_parts.sum() == pytest.approx(dla.logit, abs=1e-3)
    manifest = json.loads(archive.read("manifest.json"))
    assert manifest["direct_logit_check"] == {
        "token": dla.token.label,
        "logit": dla.logit,
        "reconstruction_diff": dla.check,
    }
