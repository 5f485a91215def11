"""A query picked in the Query inspector, on the server alone: the change until the server's "script finished".

    .venv/bin/python -m benchmarks.query_pick [--tokens 64] [--model minilm] [--changes 12] [--gap 2.0]
                                              [--stride 17] [--app-dir DIR] [--json out.json]

One session of Streamlit's own protocol (``benchmarks/load_protocol.py``'s client: no browser, so nothing else
uses the cores) opens the Query inspector on a text of ``--tokens`` tokens and changes the "Query token" box
``--changes`` times, ``--stride`` options on each time (a reader picking a word: not one of the queries next to
the one shown, which the server builds ahead while the page is read, ``ui/prefetch.py``), ``--gap`` seconds
apart. Prints each change's seconds and the median of all but the first. Used for report section 7,
"twenty-ninth" (a new query's step-through filled into the frame of the last one, ``viz/query_frames.py``),
run against both commits one after the other.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from pathlib import Path

from .common import write_json


def pick_order(options: list, stride: int) -> tuple:
    """The box's options in the order they are picked: ``stride`` on each time, round the list."""
    return tuple(options[(k * stride) % len(options)] for k in range(len(options)))


async def _picks(ws_url: str, model: str, tokens: int, changes: int, gap: float, stride: int) -> list[float]:
    from .interactivity import text_for
    from .load_protocol import Client, query_string

    client = Client(
        ws_url,
        query_string(text_for(tokens), max_tokens=tokens, model=None if model == "minilm" else model, view="query"),
        120.0,
    )
    await client.connect()
    try:
        run, _ = await client.run()
        if run.errors or "Query token" not in client.widgets:
            raise RuntimeError(f"the Query inspector did not open: {run.errors or sorted(client.widgets)}")
        order = pick_order(list(client.widgets["Query token"].options), stride)
        seconds = []
        for _ in range(changes):
            run, elapsed, _ = await client.change("Query token", order)
            if run is None or run.errors:
                raise RuntimeError(f"a query change failed: {run and run.errors}")
            seconds.append(elapsed)
            await asyncio.sleep(gap)
        return seconds
    finally:
        await client.close()


def run(app_dir: str | None, model: str, tokens: int, changes: int, gap: float, stride: int) -> dict:
    from .appserver import app_server

    with app_server(app_dir) as server:
        seconds = asyncio.run(_picks(server.ws_url, model, tokens, changes, gap, stride))
    return {
        "app_dir": str(app_dir or ""),
        "model": model,
        "tokens": tokens,
        "gap_s": gap,
        "stride": stride,
        "seconds": seconds,
        "median_s": statistics.median(seconds[1:] if len(seconds) > 1 else seconds),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.query_pick", description=__doc__.split("\n")[0])
    parser.add_argument("--app-dir", help="checkout whose app.py runs (default: $ATTENTION_LENS_APP_DIR or this repo)")
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--changes", type=int, default=12)
    parser.add_argument("--gap", type=float, default=2.0, help="seconds between changes")
    parser.add_argument("--stride", type=int, default=17, help="options on from the query shown, each change")
    parser.add_argument("--json", type=Path, help="write the numbers here")
    args = parser.parse_args(argv)
    result = run(args.app_dir, args.model, args.tokens, args.changes, args.gap, args.stride)
    print(
        f"{args.model} {args.tokens} tokens, query picked {args.stride} on: change -> script finished, median "
        f"{result['median_s']:.3f} s ({', '.join(f'{s:.3f}' for s in result['seconds'])})"
    )
    if args.json:
        write_json(args.json, result)
    return 0


if __name__ == "__main__":
    root = str(Path(__file__).resolve().parents[1])
    if root not in sys.path:
        sys.path.insert(0, root)
    raise SystemExit(main())
