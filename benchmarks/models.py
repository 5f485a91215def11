"""Section 2: capture + replay against the model's own forward pass with attentions.

For each bundled model and length n, three calls take turns: the base model with
``output_attentions=True`` (the least any attention view costs); ``capture`` (the same pass with every
hook recording X, q, k, v, mask and head outputs); ``capture`` + ``replay`` (the core recomputing every
layer from the captured q, k, v and measuring the difference).
Target: capture + replay at most 1.3x the plain forward.

From the command line, the same three as a quick table (no report), on any device:

    python -m benchmarks.models [--models minilm smollm2] [--sizes 16 128 512] [--repeats 5] [--device cpu]
                                [--threads 1] [--clock cpu]
"""

from __future__ import annotations

import argparse
import gc
import time

from . import plots
from .common import (
    PARAGRAPH,
    Config,
    SectionResult,
    Target,
    code_block,
    cprofile_top,
    interleaved,
    median,
    ms,
    ratio_median,
    table,
    times,
    torch_profile_table,
)

TARGET_RATIO = 1.3


def bench_model(
    name: str, sizes, repeats_for, device: str | None = "cpu", clock=time.perf_counter
) -> tuple[list[dict], object]:
    """Rows of medians for one model, and a function(n) -> the capture+replay call (for a profile)."""
    import torch

    from attention_core.pretrained import capture, load_model, replay, tokenize

    loaded = load_model(name, device=device)
    rows = []
    calls = {}
    for n in sizes:
        tokens = tokenize(loaded, PARAGRAPH * (n // 8 + 4), max_tokens=n)
        ids, mask = tokens.ids.to(loaded.device), tokens.attention_mask.to(loaded.device)

        def forward(ids=ids, mask=mask):
            with torch.no_grad():
                return loaded.runner(input_ids=ids, attention_mask=mask, output_attentions=True)

        def captured(tokens=tokens):
            return capture(loaded, tokens)

        def both(tokens=tokens):
            return replay(capture(loaded, tokens))

        calls[tokens.length] = both
        samples = interleaved({"forward": forward, "capture": captured, "both": both}, repeats_for(n), clock=clock)
        rows.append(
            {
                "model": name,
                "n": tokens.length,
                "repeats": repeats_for(n),
                "forward_s": median(samples["forward"]),
                "capture_s": median(samples["capture"]),
                "capture_replay_s": median(samples["both"]),
                "ratio": ratio_median(samples, "both", "forward"),
                "ratio_capture": ratio_median(samples, "capture", "forward"),
                "samples": samples,
            }
        )
    return rows, calls


def _profile(name: str, row: dict, call) -> str:
    """Why one model missed the target: the times of its worst row, then two profiles of the call."""
    forward_s, capture_s, both_s = (row[k] for k in ("forward_s", "capture_s", "capture_replay_s"))
    return (
        f"{name}, n={row['n']}: the forward with attentions takes {ms(forward_s)} ms, capture "
        f"{ms(capture_s)} ms ({capture_s / forward_s:.2f}x: the hooks cost little), capture + replay "
        f"{ms(both_s)} ms. So replay adds {ms(both_s - capture_s)} ms ({(both_s - capture_s) / forward_s:.2f}x "
        "the forward): it recomputes every layer's attention with the core (two bmm, then scaling, masking "
        "and softmax, each a full pass over (H, n, n)) and compares it with the model's weights "
        "(abs, max): work of the same size as the model's own attention, a growing share of the forward "
        "as n grows. Profiles of one capture + replay call:\n\ntorch.profiler (ops by self CPU time):\n\n"
        + code_block(torch_profile_table(call, row_limit=15, warmup=False))
        + "\n\ncProfile (Python functions by own time):\n\n"
        + code_block(cprofile_top(call, limit=15, warmup=False))
    )


def _table(rows: list[dict]) -> str:
    return table(
        [
            "model",
            "n",
            "rounds",
            "forward + attentions (ms)",
            "capture (ms)",
            "capture + replay (ms)",
            "capture / forward",
            "capture + replay / forward",
            f"<= {TARGET_RATIO}x",
        ],
        [
            [
                r["model"],
                r["n"],
                r["repeats"],
                ms(r["forward_s"]),
                ms(r["capture_s"]),
                ms(r["capture_replay_s"]),
                times(r["ratio_capture"]),
                times(r["ratio"]),
                "yes" if r["ratio"] <= TARGET_RATIO else "**no**",
            ]
            for r in rows
        ],
    )


def run(cfg: Config) -> SectionResult:
    models = cfg.pick(("minilm", "smollm2"), ("minilm",))
    sizes = cfg.pick((16, 64, 128, 256, 512), (16,))

    def repeats_for(n: int) -> int:
        return cfg.pick(5 if n <= 128 else 3, 1)

    result = SectionResult("models", "2. Model capture + replay vs a plain forward with attentions")
    rows: list[dict] = []
    worst: dict[str, dict] = {}
    profiles: dict[str, str] = {}
    for name in models:
        model_rows, calls = bench_model(name, sizes, repeats_for)
        rows += model_rows
        worst[name] = max(model_rows, key=lambda r: r["ratio"])
        if worst[name]["ratio"] > TARGET_RATIO and not cfg.smoke:
            profiles[name] = _profile(name, worst[name], calls[worst[name]["n"]])
        del calls
        gc.collect()

    result.data = {"rows": rows}
    result.body = "\n\n".join(
        [
            "Bundled models on CPU, float32, eager attention; text = the benchmark paragraph cut at n tokens. "
            "Median ms over interleaved rounds (after a warm-up); ratios are medians of per-round ratios.",
            _table(rows),
            "![capture + replay over forward](results/models_ratio.png)",
        ]
    )
    result.figures["models_ratio"] = plots.lines(
        [r["n"] for r in rows if r["model"] == models[0]],
        {name: [r["ratio"] for r in rows if r["model"] == name] for name in models},
        title="capture + replay time / forward-with-attentions time",
        x_title="tokens n",
        y_title="ratio",
        log_y=False,
        guide=(f"target {TARGET_RATIO}x", TARGET_RATIO),
    )
    for name, row in worst.items():
        met = row["ratio"] <= TARGET_RATIO
        missed_at = [r["n"] for r in rows if r["model"] == name and r["ratio"] > TARGET_RATIO]
        result.targets.append(
            Target(
                f"{name}: capture + replay <= 1.3x forward with attentions",
                "<= 1.3x at every n",
                f"worst {row['ratio']:.2f}x at n={row['n']}" + (f"; over at n = {missed_at}" if missed_at else ""),
                met,
                profiles.get(name, ""),
            )
        )
    return result


# ---------------------------------------------------------------- the quick table: python -m benchmarks.models


def main(argv: list[str] | None = None) -> int:
    import torch

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.models",
        description=f"How much capture + replay costs next to the model's own forward pass (target: at most "
        f"{TARGET_RATIO}x).",
    )
    parser.add_argument("--models", nargs="+", default=["minilm", "smollm2"])
    parser.add_argument("--sizes", nargs="+", type=int, default=[16, 128, 512])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default=None)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="wall: elapsed time; cpu: this process's CPU time (steadier on a busy machine; use with --threads 1)",
    )
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.clock} clock")
    print(f"median of {args.repeats} interleaved rounds after a warm-up; ratio: median of per-round ratios")
    print(f"{'model':>8} {'n':>5} {'forward ms':>11} {'capture ms':>11} {'capture+replay ms':>18} {'ratio':>6}")
    for name in args.models:
        rows, _ = bench_model(name, args.sizes, lambda n: args.repeats, args.device, clock)
        for r in rows:
            print(
                f"{r['model']:>8} {r['n']:>5} {r['forward_s'] * 1e3:>11.1f} {r['capture_s'] * 1e3:>11.1f} "
                f"{r['capture_replay_s'] * 1e3:>18.1f} {r['ratio']:>6.2f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
