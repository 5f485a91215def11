"""``python -m attention_core verify``: replay a real model with the core and check the differences.

    python -m attention_core verify [--model ID_OR_PATH] [--text "..."] [--json] [--tolerance 1e-5]

For every layer it prints max |core - model| of the attention weights and of the per-head outputs,
replaying the model's own q, k, v ("qkv") and, where the core can, the layer's input X through the
layer's own W^Q, W^K, W^V ("from X"). Exit status: 0 when every difference is within the tolerance,
1 when one is not, 2 when the model could not be loaded or the text is unusable. With ``--json``,
stdout holds exactly one JSON object; progress and errors go to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys

from ..request import DEFAULT_TEXT


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the verify options to ``parser`` (a subcommand parser of ``python -m attention_core``)."""
    parser.add_argument(
        "--model", default=None, help="bundled name (minilm, smollm2), hub id or local folder; default: minilm"
    )
    parser.add_argument("--text", default=DEFAULT_TEXT, help="text to run through the model")
    parser.add_argument("--tolerance", type=float, default=1e-5, help="largest allowed difference (default 1e-5)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--revision", default=None, help="hub branch, tag or commit")
    parser.add_argument(
        "--device", default=None, help="cpu, cuda, mps or auto (default: $ATTENTION_LENS_DEVICE or auto)"
    )
    parser.add_argument("--max-tokens", type=int, default=512, help="cut the text after this many tokens")
    parser.add_argument("--models-dir", default=None, help="only allow local model folders inside this directory")
    return parser


def _rows(captured) -> list[dict]:
    from .replay import replay, replay_from_hidden_diff

    rows = []
    for diff in replay(captured):
        row = {"layer": diff.layer, "weights": diff.weights, "output": diff.output}
        try:
            from_x = replay_from_hidden_diff(captured, diff.layer)
            row.update(from_x_weights=from_x.weights, from_x_output=from_x.output)
        except ValueError:
            row.update(from_x_weights=None, from_x_output=None)
        rows.append(row)
    return rows


def _worst(row: dict) -> float:
    return max(v for k, v in row.items() if k != "layer" and v is not None)


def run(args: argparse.Namespace) -> int:
    """Load, capture, replay, print; returns the exit status (0 ok, 1 over tolerance, 2 unusable input)."""
    from . import capture, load_model, tokenize

    # With --json, stdout carries the JSON object and nothing else: progress (the one-time SmolLM2
    # conversion) goes to stderr, and so does anything a library prints while loading.
    quiet = contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext()
    try:
        with quiet:
            loaded = load_model(args.model, revision=args.revision, device=args.device, models_dir=args.models_dir)
            tokens = tokenize(loaded, args.text, max_tokens=args.max_tokens)
            captured = capture(loaded, tokens)
    except ValueError as err:  # ModelLoadError is a ValueError
        print(f"error: {err}", file=sys.stderr)
        return 2
    with quiet:
        rows = _rows(captured)
    failed = [r["layer"] for r in rows if not _worst(r) <= args.tolerance]
    ok = bool(rows) and not failed
    if args.json:
        print(
            json.dumps(
                {
                    "model": loaded.name,
                    "family": loaded.family,
                    "tokens": list(tokens.labels),
                    "tolerance": args.tolerance,
                    "layers": rows,
                    "ok": ok,
                    "failed_layers": failed,
                    "notices": list(captured.notices),
                },
                indent=1,
            )
        )
    else:
        facts = loaded.facts
        print(
            f"{loaded.name}: {facts.family}, {facts.num_layers} layers, {facts.num_heads} heads "
            f"({facts.num_kv_heads} key/value), {tokens.length} tokens, device {loaded.device}"
        )
        print(f"{'layer':>5}  {'weights':>10}  {'output':>10}  {'from X: weights':>15}  {'from X: output':>14}")
        for r in rows:
            fx = "n/a" if r["from_x_weights"] is None else f"{r['from_x_weights']:.3g}"
            fo = "n/a" if r["from_x_output"] is None else f"{r['from_x_output']:.3g}"
            flag = "" if r["layer"] not in failed else "   > tolerance"
            print(f"{r['layer']:>5}  {r['weights']:>10.3g}  {r['output']:>10.3g}  {fx:>15}  {fo:>14}{flag}")
        for notice in captured.notices:
            print(f"note: {notice}")
        verdict = "OK" if ok else ("FAILED" if rows else "NOTHING TO REPLAY")
        print(
            f"{verdict}: max difference {max((_worst(r) for r in rows), default=float('nan')):.3g}, "
            f"tolerance {args.tolerance:g}"
        )
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = add_arguments(
        argparse.ArgumentParser(prog="python -m attention_core verify", description=__doc__.split("\n")[0])
    )
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
