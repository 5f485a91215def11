"""Command line: ``python -m attention_core {verify,bench,analysis} ...`` (a composition root)."""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    from . import bench, kvcache, tiled
    from .pretrained import verify

    parser = argparse.ArgumentParser(
        prog="python -m attention_core",
        description="Attention Lens core: verify the from-scratch attention against a real model, benchmark it.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    verify_parser = sub.add_parser(
        "verify", help="replay a model's q, k, v through the core; exit 1 if any layer differs beyond tolerance"
    )
    verify.add_arguments(verify_parser)
    verify_parser.set_defaults(run=verify.run)
    bench_parser = sub.add_parser("bench", help="time the core against torch's SDPA (math and default backends)")
    bench.add_arguments(bench_parser)
    bench_parser.set_defaults(run=bench.run)
    tiled_parser = sub.add_parser(
        "tiled", help="attention tile by tile (online softmax) against the full core: difference, peak memory, time"
    )
    tiled.add_arguments(tiled_parser)
    tiled_parser.set_defaults(run=tiled.run)
    kvcache_parser = sub.add_parser(
        "kvcache", help="greedy decoding step by step with a key/value cache, checked against a full pass"
    )
    kvcache.add_arguments(kvcache_parser)
    kvcache_parser.set_defaults(run=kvcache.run)
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
