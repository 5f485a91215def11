"""Command line: ``python -m attention_core contributions --model M --text T --layer L [--json]``.

For one layer of a real model, per head: its attention weights and its value-weighted contributions at a
position (each as shares over the keys), its share of the block's output there, the effect of switching it
off (``--ablation zero|mean``), and for decoders its direct logit attribution to the top next token. Then
the check that the per-head parts plus b^O add up to the model's own attention output, run on a float64 copy
of the model fed the same tokens (``contributions_check``): ``sum_check_max_abs_diff`` is that plain float64
max |difference|, held to 1e-5; the same comparison on the float32 model, which its rounding alone puts above
1e-5 on SmolLM2, is printed beside it for information (``sum_check_float32_max_abs_diff``). Exit 0 when the
check holds, 1 when it does not, 2 for unusable input (a layer out of range, empty text, a model that cannot
load or whose heads cannot be taken apart, "scratch").
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys

from .ablation import (
    ABLATIONS,
    Reference,
    ablate_layer,
    check_layer,
    default_position,
    direct_logit_attribution,
    metric_name,
    reference_run,
)
from .contributions import SUM_CHECK_TOLERANCE, LayerContributions, layer_contributions
from .contributions_check import sum_check_float64
from .request import DEFAULT_TEXT


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="minilm", help="minilm (default), smollm2, a hub id or a local folder")
    parser.add_argument("--text", default=DEFAULT_TEXT, help="the text")
    parser.add_argument("--layer", type=int, default=0, help="the layer to take apart (0-based)")
    parser.add_argument(
        "--position", type=int, default=None, help="the token whose row is reported (default: the last real token)"
    )
    parser.add_argument("--ablation", choices=ABLATIONS, default="zero", help="switch a head off by zero or its mean")
    parser.add_argument("--max-tokens", type=int, default=128, help="cap on tokens fed to the model")
    parser.add_argument(
        "--tolerance",
        type=float,
        default=SUM_CHECK_TOLERANCE,
        help="largest |sum of heads + b^O - the model's attention output| accepted, both in float64 (a float64 copy)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--device", default=None, help="cpu, cuda, mps or auto")
    parser.add_argument("--models-dir", default=None, help="only allow local model folders inside this directory")


def _number(value: float) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


def report(
    loaded, tokens, layer: int, *, position: int | None = None, mode: str = "zero", capture=None, wide=None
) -> dict:
    """Everything the command prints, as one JSON-ready dict (``capture``: a ``pretrained.Capture`` of
    ``tokens`` if one was made already; ``wide``: a float64 copy of ``loaded`` if one was made already)."""
    from .kvcache_checks import float64_copy
    from .pretrained import capture as run_capture

    check_layer(loaded, layer)
    position = default_position(tokens) if position is None else position
    if not 0 <= position < tokens.length:
        raise ValueError(f"position {position} is out of range 0..{tokens.length - 1}")
    captured = run_capture(loaded, tokens) if capture is None else capture
    reference: Reference = reference_run(loaded, tokens)
    parts: LayerContributions = layer_contributions(captured.layer(layer), reference.attn_outputs[layer])
    ablations = ablate_layer(loaded, tokens, layer, mode=mode, position=position, reference=reference)
    dla = direct_logit_attribution(loaded, reference, parts, position) if reference.decoder else None
    checked = sum_check_float64(float64_copy(loaded) if wide is None else wide, tokens, (layer,))[layer]
    shares = parts.contribution_shares()[:, position]  # (H, S)
    output_shares = parts.head_shares()[:, position]  # (H,)
    heads = []
    for h in range(parts.num_heads):
        row = {
            "head": h,
            "kv_head": parts.kv_head(h),
            "weight_share": [float(w) for w in parts.weights[h, position]],
            "contribution_share": [float(c) for c in shares[h]],
            "output_share": float(output_shares[h]),
            "ablation_effect": float(ablations[h].effect),
        }
        if dla is not None:
            row["direct_logit"] = float(dla.heads[h])
        heads.append(row)
    first = ablations[0]
    result = {
        "model": loaded.name,
        "family": loaded.family,
        "layer": layer,
        "position": position,
        "tokens": list(tokens.labels),
        "num_heads": parts.num_heads,
        "num_kv_heads": parts.num_kv_heads,
        "ablation": mode,
        "ablation_metric": metric_name(reference.decoder),
        "heads": heads,
        "sum_check_max_abs_diff": checked,  # float64 model, float64 sum
        "sum_check_precision": "float64",
        "sum_check_float32_max_abs_diff": parts.sum_check_max_abs_diff,  # the float32 model: for information
    }
    if reference.decoder:
        result["next_token"] = {
            "id": first.target.token_id,
            "text": first.target.label,
            "log_prob": first.target.log_prob,
        }
        result["top_before"] = [{"id": t.token_id, "text": t.label, "log_prob": t.log_prob} for t in first.top_before]
    if dla is not None:
        result["direct_logit_attribution"] = {
            "token": dla.token.label,
            "logit": dla.logit,
            "heads_total": float(dla.heads.sum()),
            "bias": dla.bias,
            "rest": dla.rest,
            "constant": dla.constant,
            "reconstruction_diff": dla.check,
            "norm_scale": dla.scale,
        }
    return result


def _print_table(result: dict, ok: bool, tolerance: float) -> None:
    tokens = result["tokens"]
    position = result["position"]
    print(
        f"{result['model']} ({result['family']}), layer {result['layer']}, position {position} "
        f"{json.dumps(tokens[position])}, {result['num_heads']} heads / {result['num_kv_heads']} key/value heads"
    )
    print(f"ablation: {result['ablation']}; effect = {result['ablation_metric']}")
    dla = "direct_logit" in result["heads"][0]
    print(
        f"{'head':>4} {'kv':>3}  {'top key (weight)':<26} {'top key (contribution)':<26} {'output':>7} {'effect':>9}"
        + (f" {'DLA':>8}" if dla else "")
    )
    for row in result["heads"]:
        w, c = row["weight_share"], row["contribution_share"]
        jw, jc = max(range(len(w)), key=w.__getitem__), max(range(len(c)), key=c.__getitem__)
        top_w = f"{json.dumps(tokens[jw])[:14]} {w[jw]:.2f}"
        top_c = f"{json.dumps(tokens[jc])[:14]} {c[jc]:.2f}"
        line = f"{row['head']:>4} {row['kv_head']:>3}  {top_w:<26} {top_c:<26} {row['output_share']:>7.3f} {row['ablation_effect']:>9.2e}"
        print(line + (f" {row['direct_logit']:>8.3f}" if dla else ""))
    if "next_token" in result:
        print(
            f"next token (unablated): {json.dumps(result['next_token']['text'])} log p = {result['next_token']['log_prob']:.3f}"
        )
    if "direct_logit_attribution" in result:
        d = result["direct_logit_attribution"]
        print(
            f"logit {d['logit']:.3f} = heads {d['heads_total']:.3f} + b^O {d['bias']:.3f} + rest {d['rest']:.3f} "
            f"+ constant {d['constant']:.3f} (reconstruction off by {d['reconstruction_diff']:.1e})"
        )
    print(
        f"sum check on a float64 copy: max |sum of heads + b^O - model| = {result['sum_check_max_abs_diff']:.2e} "
        f"(tolerance {tolerance:g}): {'OK' if ok else 'FAILED'}; "
        f"on the float32 model {result['sum_check_float32_max_abs_diff']:.2e} (its rounding, for information)"
    )


def run(args: argparse.Namespace) -> int:
    """Load, take the layer apart, print; exit 0 when the sum check holds, 1 when not, 2 for unusable input."""
    if args.model == "scratch":
        print("error: contributions need a pretrained model (minilm, smollm2, a hub id or a folder)", file=sys.stderr)
        return 2
    from .pretrained import load_model, tokenize

    quiet = contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext()
    try:
        with quiet:
            loaded = load_model(args.model, device=args.device, models_dir=args.models_dir)
            check_layer(loaded, args.layer)
            tokens = tokenize(loaded, args.text, max_tokens=args.max_tokens)
            result = report(loaded, tokens, args.layer, position=args.position, mode=args.ablation)
    except ValueError as err:  # ModelLoadError is a ValueError; so are a bad layer, position or text
        print(f"error: {err}", file=sys.stderr)
        return 2
    diff = result["sum_check_max_abs_diff"]
    ok = not math.isnan(diff) and diff <= args.tolerance
    if args.json:
        result.update(tolerance=args.tolerance, ok=ok)
        result["sum_check_max_abs_diff"] = _number(diff)
        result["sum_check_float32_max_abs_diff"] = _number(result["sum_check_float32_max_abs_diff"])
        print(json.dumps(result, indent=1))
    else:
        _print_table(result, ok, args.tolerance)
    return 0 if ok else 1
