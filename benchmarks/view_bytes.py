"""What each view's figures weigh when sent: their packed bytes (``ui.plotly_spec``), with the float64 arrays whose
every value is a float32 sent as float32 (``ui.narrow``, session 38) and, beside it, as they went before (every
array as plotly typed it).

    .venv/bin/python -m benchmarks.view_bytes [--models minilm,smollm2] [--sizes 16,64,256,512] [--json out.json]

Builds every figure of the derivation, Core vs model, Heads & layers and the Query inspector (its step-through's
rows included) for a text of each size (``benchmarks.interactivity.text_for``), packs each figure both ways and
prints the totals per view. No browser, no server: what a first visit of the view sends at most (the page sends a
view's charts as they come near the screen, and a chart's rows once a page). Used for report section 7,
"thirty-eighth".
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .common import table, write_json

VIEWS = ("derivation", "compare", "heads", "query")


def view_bytes(trace, view: str, narrow: bool) -> int:
    """The bytes of every figure of ``view`` for ``trace`` as ``ui.chart`` sends them (rows included)."""
    from ui import plotly_spec
    from viz.views import figures_for_trace

    total = 0
    real = plotly_spec.narrowed
    plotly_spec.narrowed = real if narrow else (lambda dtype, raw: None)
    plotly_spec._ROWS_PACKED.clear()  # rows are packed once per rows dict: pack them again the other way
    try:
        for fig in figures_for_trace(trace, view).values():
            spec, rows = plotly_spec._sendable(fig)
            total += len(plotly_spec.pack(spec)) + (len(rows) if rows is not None else 0)
    finally:
        plotly_spec.narrowed = real
        plotly_spec._ROWS_PACKED.clear()
    return total


def run(models: list[str], sizes: list[int]) -> list[dict]:
    from attention_core.pipeline import run_trace
    from attention_core.request import TraceRequest

    from .interactivity import text_for

    rows = []
    for model in models:
        for n in sizes:
            trace = run_trace(TraceRequest(model=model, text=text_for(n), max_tokens=n))
            for view in VIEWS:
                before, after = view_bytes(trace, view, narrow=False), view_bytes(trace, view, narrow=True)
                rows.append({"model": model, "n": len(trace.tokens), "view": view, "before": before, "after": after})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.view_bytes", description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="minilm")
    parser.add_argument("--sizes", default="16,64,256,512")
    parser.add_argument("--json", type=Path, help="write the numbers here")
    args = parser.parse_args(argv)
    rows = run(args.models.split(","), [int(n) for n in args.sizes.split(",")])
    print(
        table(
            [
                "model",
                "tokens",
                "view",
                "every array as plotly typed it (kB)",
                "float32 values as float32 (kB)",
                "saved",
            ],
            [
                [
                    r["model"],
                    r["n"],
                    r["view"],
                    f"{r['before'] / 1e3:.0f}",
                    f"{r['after'] / 1e3:.0f}",
                    f"{1 - r['after'] / r['before']:.0%}",
                ]
                for r in rows
            ],
        )
    )
    if args.json:
        write_json(args.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
