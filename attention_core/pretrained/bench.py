"""How much capture + replay costs next to the model's own forward pass (target: at most 1.3x).

    python -m attention_core.pretrained.bench [--models minilm smollm2] [--sizes 16 128 512] [--repeats 5]

For each model and length n it times (the fastest of ``repeats`` runs, after one warm-up, taking
turns so that other work on the machine slows each alike):
- forward: the base model alone with ``output_attentions=True`` (the least any attention view costs),
- capture: the same pass with every hook recording X, q, k, v, mask and head outputs,
- capture + replay: plus the core replaying every layer and measuring the differences.
"""

from __future__ import annotations

import argparse
import time

import torch

PARAGRAPH = (
    "Attention lets every token look at every other token and decide how much each one matters. "
    "The query asks, the keys answer, and the values carry what is passed along. "
)


def _best_s(fns: dict, repeats: int, clock=time.perf_counter) -> dict[str, float]:
    """Fastest of ``repeats`` runs of each function, run in turn (a busy machine slows all alike)."""
    for fn in fns.values():
        fn()  # warm-up
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            started = clock()
            fn()
            times[name].append(clock() - started)
    return {name: min(values) for name, values in times.items()}


def bench_model(
    name: str, sizes: list[int], repeats: int, device: str | None = None, clock=time.perf_counter
) -> list[dict]:
    from . import capture, load_model, replay, tokenize

    loaded = load_model(name, device=device)
    rows = []
    for n in sizes:
        tokens = tokenize(loaded, PARAGRAPH * (n // 8 + 4), max_tokens=n)
        ids, mask = tokens.ids.to(loaded.device), tokens.attention_mask.to(loaded.device)

        def forward(ids=ids, mask=mask):
            with torch.no_grad():
                loaded.runner(input_ids=ids, attention_mask=mask, output_attentions=True)

        best = _best_s(
            {
                "forward": forward,
                "capture": lambda tokens=tokens: capture(loaded, tokens),
                "both": lambda tokens=tokens: replay(capture(loaded, tokens)),
            },
            repeats,
            clock,
        )
        forward_s, capture_s, both_s = best["forward"], best["capture"], best["both"]
        rows.append(
            {
                "model": name,
                "n": tokens.length,
                "forward_ms": forward_s * 1e3,
                "capture_ms": capture_s * 1e3,
                "capture_replay_ms": both_s * 1e3,
                "ratio": both_s / forward_s,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m attention_core.pretrained.bench", description=__doc__.split("\n")[0]
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
    print(f"{'model':>8} {'n':>5} {'forward ms':>11} {'capture ms':>11} {'capture+replay ms':>18} {'ratio':>6}")
    for name in args.models:
        for r in bench_model(name, args.sizes, args.repeats, args.device, clock):
            print(
                f"{r['model']:>8} {r['n']:>5} {r['forward_ms']:>11.1f} {r['capture_ms']:>11.1f} "
                f"{r['capture_replay_ms']:>18.1f} {r['ratio']:>6.2f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
