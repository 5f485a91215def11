"""Benchmark: how long the training lab takes at its defaults, and attention against RNN/GRU over n.

Prints tables; asserts nothing (the machine may be shared and noisy, so each number is the best of
``--repeats`` runs, the one least disturbed by other work). Not a section of the report: run it alone.

    python -m benchmarks.training_lab [--threads 2] [--repeats 3] [--steps 300] [--d-k 256]
                                      [--no-recurrence] [--device cpu]
"""

from __future__ import annotations

import argparse
import platform
from collections import deque
from dataclasses import replace

import torch

from attention_core.device import pick_device
from attention_core.recurrence import time_sequence_models, timing_summary
from attention_core.training import TrainingConfig, TrainingSnapshot, summarize, train_side_by_side, variants
from ui.training_verdict import verdict

from .common import interleaved


def time_side_by_side(config: TrainingConfig, repeats: int) -> tuple[float, tuple[TrainingSnapshot, ...]]:
    """Best wall time (s) of training both variants to the end in lockstep, and the last snapshots."""
    last: list[TrainingSnapshot] = []

    def train() -> None:
        last[:] = deque(train_side_by_side(variants(config)), maxlen=1)[0]

    seconds = interleaved({"train": train}, repeats, warmup=0)["train"]
    return min(seconds), tuple(last)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.training_lab", description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads for this process")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=TrainingConfig.steps)
    parser.add_argument("--d-k", type=int, default=TrainingConfig.d_k)
    parser.add_argument("--device", default=None, help="device for the RNN/GRU timing (training runs on CPU)")
    parser.add_argument("--no-recurrence", action="store_true", help="skip the attention vs RNN/GRU timing")
    args = parser.parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    config = replace(TrainingConfig(), steps=args.steps, d_k=args.d_k)
    print(
        f"torch {torch.__version__}, {platform.processor() or platform.machine()}, "
        f"{torch.get_num_threads()} torch thread(s) in the process"
    )
    print(
        f"defaults: d_k={config.d_k} init_scale={config.init_scale} lr={config.learning_rate} "
        f"steps={config.steps} optimizer={config.optimizer} slots={config.num_slots} batch={config.batch_size}"
    )
    print()
    print(
        f"{'training threads':>16} | {'both variants s':>15} | {'ms/step/variant':>15} | "
        f"{'loss scaled':>11} | {'loss unscaled':>13} | verdict"
    )
    for threads in sorted({1, torch.get_num_threads()}):
        seconds, last = time_side_by_side(replace(config, num_threads=threads), args.repeats)
        scaled, unscaled = (summarize(s) for s in last)
        outcome = verdict(config, last).outcome
        per_step = seconds / (2 * config.steps) * 1e3
        print(
            f"{threads:>16} | {seconds:>15.2f} | {per_step:>15.2f} | {scaled.final_loss:>11.4f} | "
            f"{unscaled.final_loss:>13.4f} | {outcome}"
        )
    if args.no_recurrence:
        return
    device = pick_device(args.device)
    report = time_sequence_models((16, 64, 256, 1024), repeats=args.repeats, device=device)
    print()
    print(
        f"one layer forward, batch {report.batch_size}, d_model {report.d_model}, on {report.device} (ms, best of "
        f"{report.repeats})"
    )
    print(f"{'n':>6} | {'core attn':>10} | {'fused attn':>10} | {'RNN':>10} | {'GRU':>10}")
    for row in report.rows:
        print(
            f"{row.n:>6} | {row.core_attention_ms:>10.3f} | {row.fused_attention_ms:>10.3f} | "
            f"{row.rnn_ms:>10.3f} | {row.gru_ms:>10.3f}"
        )
    print(timing_summary(report))


if __name__ == "__main__":
    main()
