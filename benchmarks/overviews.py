"""Heads & layers' overviews (every statistic of every head of every layer, ``viz.summaries.overviews_by_head``) on
weights shaped as the bundled models' at their full context, in the server's allocation regime: seconds.

    .venv/bin/python -m benchmarks.overviews [--shapes minilm:512,smollm2:1024] [--repeats 3] [--app-dir DIR]
                                             [--json out.json]

The server asks glibc to map every allocation over 128 kB on its own (``ui.sizes.return_freed_memory``, app.py), so
that freed arrays go back to the system; a fresh temporary is then a new mapping whose pages are faulted in as they
are written. This process asks the same first. The weights are random rows that sum to 1 (MiniLM: 6 layers x 12
heads, every key allowed; SmolLM2: 30 x 9, causal). ``--app-dir``: the checkout whose ``viz`` is timed (a
``git worktree`` of the commit before a change), as the other benchmarks take it. Prints the median of
``--repeats`` per shape. Used for report section 7, "thirty-ninth".
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

SHAPES = {"minilm": (6, 12, False), "smollm2": (30, 9, True)}  # layers, heads, causal


def weights(model: str, tokens: int, seed: int = 0) -> np.ndarray:
    """(layers, H, L, L) float32 rows that sum to 1, zero above the diagonal for a causal model."""
    layers, heads, causal = SHAPES[model]
    drawn = np.random.default_rng(seed).random((layers, heads, tokens, tokens), dtype=np.float32)
    if causal:
        drawn *= np.tril(np.ones((tokens, tokens), dtype=np.float32))
    drawn /= drawn.sum(-1, keepdims=True)
    return drawn


def run(shapes: list[tuple[str, int]], repeats: int) -> list[dict]:
    from ui.sizes import return_freed_memory
    from viz.stats import STATISTICS
    from viz.summaries import overviews_by_head

    mapped = return_freed_memory()
    rows = []
    for model, tokens in shapes:
        attentions = weights(model, tokens)
        seconds = []
        for _ in range(repeats):
            started = time.perf_counter()
            overviews_by_head(attentions, tuple(STATISTICS))
            seconds.append(time.perf_counter() - started)
        rows.append({"model": model, "tokens": tokens, "mapped": mapped, "seconds": seconds,
                     "median_s": statistics.median(seconds)})  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.overviews", description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", default="minilm:512,smollm2:1024", help="model:tokens, comma-separated")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--app-dir", help="checkout whose viz is timed (default: this repository)")
    parser.add_argument("--json", type=Path, help="write the numbers here")
    args = parser.parse_args(argv)
    if args.app_dir:
        sys.path.insert(0, str(Path(args.app_dir).resolve()))
    shapes = [(model, int(tokens)) for model, tokens in (part.split(":") for part in args.shapes.split(","))]
    rows = run(shapes, args.repeats)
    for row in rows:
        print(f"{row['model']} {row['tokens']} tokens: {row['median_s'] * 1000:.0f} ms (median of {args.repeats})")
    if args.json:
        from .common import write_json

        write_json(args.json, {"app_dir": args.app_dir or "", "rows": rows})
    return 0


if __name__ == "__main__":
    root = str(Path(__file__).resolve().parents[1])
    if root not in sys.path:
        sys.path.insert(0, root)
    raise SystemExit(main())
