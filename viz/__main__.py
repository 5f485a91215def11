"""Command line: ``python -m viz export --text "..." --out DIR --format png,svg,html,csv``;
``python -m viz lesson --text "..." [--model M] [--layer L] [--head H] --out DIR`` (``viz.lesson``).

A composition root: it builds ``attention_core.pipeline.TraceRequest`` from the arguments (and an
optional ``--settings`` JSON file or string), runs ``run_trace``, and hands the trace to
``viz.export.export_trace``. Command-line flags win over ``--settings``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from .export import FORMATS, export_trace, parse_formats, parse_views
from .stats import STATISTICS
from .theme import THEMES
from .views import VIEWS


def load_settings(value: str | None) -> dict:
    """``--settings`` as a dict: a path to a JSON file, or a JSON object given inline."""
    if not value:
        return {}
    path = Path(value)
    text = path.read_text(encoding="utf-8") if path.is_file() else value
    try:
        settings = json.loads(text)
    except json.JSONDecodeError as error:
        raise SystemExit(f"--settings is neither a JSON file nor a JSON object: {error}") from None
    if not isinstance(settings, dict):
        raise SystemExit(f"--settings must be a JSON object, got {type(settings).__name__}")
    return settings


def request_fields(args: argparse.Namespace) -> dict:
    """TraceRequest fields: --settings first, then the flags that were given."""
    fields = load_settings(args.settings)
    for name in ("text", "model", "layer", "head"):
        value = getattr(args, name)
        if value is not None:
            fields[name] = value
    return fields


def typed_fields(request_class, raw: dict) -> tuple[dict, list[str]]:
    """Loose values (JSON lists, strings) turned into the request's field types, plus notices.

    Uses ``attention_core.request.coerce_fields``: the same rules as the app's URL settings.
    """
    from attention_core.request import coerce_fields

    return coerce_fields(request_class, raw)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m viz", description="Attention Lens figures for slides.")
    commands = parser.add_subparsers(dest="command", required=True)
    export = commands.add_parser("export", help="write figures (PNG/SVG/HTML) and matrices (CSV) for one text")
    export.add_argument("--text", help="the text to run through the model")
    export.add_argument("--model", help="model name (as the app names it)")
    export.add_argument("--layer", type=int, help="layer index")
    export.add_argument("--head", type=int, help="head index")
    export.add_argument("--query", type=int, help="query position for the step-through (default: last token)")
    export.add_argument("--settings", help="JSON file or inline JSON object of TraceRequest fields")
    export.add_argument("--view", default="all", help=f"one or more of {', '.join(VIEWS)} (comma-separated) or all")
    export.add_argument("--statistic", choices=tuple(STATISTICS), help="heads overview statistic (default: all)")
    export.add_argument("--theme", default="slides", choices=THEMES)
    export.add_argument("--out", required=True, help="output folder")
    export.add_argument("--format", default=",".join(FORMATS), help="comma-separated: png,svg,html,csv")
    lesson = commands.add_parser("lesson", help="write DIR/lesson.html (offline slide deck) and DIR/lesson.pdf")
    lesson.add_argument("--text", help="the sentence the lesson walks through")
    lesson.add_argument("--model", help="model name (as the app names it)")
    lesson.add_argument("--layer", type=int, help="layer index")
    lesson.add_argument("--head", type=int, help="head index")
    lesson.add_argument("--settings", help="JSON file or inline JSON object of TraceRequest fields")
    lesson.add_argument("--out", required=True, help="output folder")
    lesson.add_argument("--no-pdf", action="store_true", help="write the HTML only")
    return parser


def run_export(args: argparse.Namespace) -> int:
    formats = parse_formats(args.format)
    views = parse_views(args.view)
    from attention_core.pipeline import TraceRequest, run_trace

    fields, notices = typed_fields(TraceRequest, request_fields(args))
    for notice in notices:
        print(f"warning: {notice}", file=sys.stderr)
    request = TraceRequest(**fields)
    trace = run_trace(request)
    manifest = export_trace(
        trace,
        args.out,
        formats,
        view=views,
        theme=args.theme,
        head=args.head,
        query=args.query,
        statistic=args.statistic,
        settings=dataclasses.asdict(request),
    )
    for warning in manifest["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    print(f"wrote {len(manifest['files'])} files to {args.out} (manifest.json lists them)")
    return 0


def run_lesson(args: argparse.Namespace) -> int:
    """``python -m viz lesson``: bad input (empty text, a layer or head the model lacks, a model that does
    not load) is one line on stderr and exit code 2, never a traceback."""
    from attention_core import lab
    from attention_core.pipeline import TraceRequest, run_trace
    from attention_core.readouts import step_readouts

    from .lesson import write_lesson

    fields, notices = typed_fields(TraceRequest, request_fields(args))
    for notice in notices:
        print(f"warning: {notice}", file=sys.stderr)
    request = TraceRequest(**fields)
    if not request.text.strip():
        print("error: the text is empty: give --text with a sentence to build the lesson on.", file=sys.stderr)
        return 2
    try:
        trace = run_trace(request)
    except ValueError as error:  # ModelLoadError, text that gives no tokens: the message says what to do
        print(f"error: {error}", file=sys.stderr)
        return 2
    facts = trace.facts
    if trace.layer != request.layer:
        print(
            f"error: {facts.name} has {facts.num_layers} layers (0..{facts.num_layers - 1}); "
            f"there is no layer {request.layer}. Choose --layer 0..{facts.num_layers - 1}.",
            file=sys.stderr,
        )
        return 2
    if trace.head != request.head:
        heads = trace.core.num_heads
        print(
            f"error: layer {trace.layer} of {facts.name} has {heads} heads (0..{heads - 1}); "
            f"there is no head {request.head}. Choose --head 0..{heads - 1}.",
            file=sys.stderr,
        )
        return 2
    for notice in trace.notices:  # e.g. the text was cut to the token limit (the first slide says so too)
        print(f"note: {notice}", file=sys.stderr)
    head = trace.core.head(trace.head)
    files = write_lesson(
        trace,
        args.out,
        pdf=not args.no_pdf,
        text=request.text,
        readouts=step_readouts(head),
        temperature=lab.head_temperature_curve(head) if head.mask.any() else None,
    )
    if files.message:
        print(f"warning: {files.message}", file=sys.stderr)
    wrote = [str(files.html)] + ([str(files.pdf)] if files.pdf else [])
    print(f"wrote a {files.slides}-slide lesson: {', '.join(wrote)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "export":
        return run_export(args)
    if args.command == "lesson":
        return run_lesson(args)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
