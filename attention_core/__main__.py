"""Command line: ``python -m attention_core {verify,tiled,kvcache,contributions} ...`` (a composition root).

Benchmarks live in ``benchmarks/`` (``python -m benchmarks``; the quick core-vs-torch table is
``python -m benchmarks.core_sdpa``): the core never imports them.
"""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    from . import kvcache_cli, tiled
    from .pretrained import verify

    parser = argparse.ArgumentParser(
        prog="python -m attention_core",
        description="Attention Lens core: verify the from-scratch attention against a real model, tile it, cache it.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    verify_parser = sub.add_parser(
        "verify", help="replay a model's q, k, v through the core; exit 1 if any layer differs beyond tolerance"
    )
    verify.add_arguments(verify_parser)
    verify_parser.set_defaults(run=verify.run)
    tiled_parser = sub.add_parser(
        "tiled", help="attention tile by tile (online softmax) against the full core: difference, peak memory, time"
    )
    tiled.add_arguments(tiled_parser)
    tiled_parser.set_defaults(run=tiled.run)
    kvcache_parser = sub.add_parser(
        "kvcache", help="greedy decoding step by step with a key/value cache, checked against a full pass"
    )
    kvcache_cli.add_arguments(kvcache_parser)
    kvcache_parser.set_defaults(run=kvcache_cli.run)
    from . import contributions_cli

    contributions_parser = sub.add_parser(
        "contributions",
        help="one layer per head: weights vs value-weighted contributions, ablation effect, and the check that "
        "the heads add up to the model's attention output (exit 1 if not)",
    )
    contributions_cli.add_arguments(contributions_parser)
    contributions_parser.set_defaults(run=contributions_cli.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help()
        return 0
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
