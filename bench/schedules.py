"""Sequential vs side by side: does taking turns change the steady speedup a race measures?

The same race (same model, batch, steps and seed) run with --schedule sequential and --schedule
alternating, each in a fresh process with a cold cache, in ABBA order so drift falls on both; prints
both steady speedups with their 95% intervals side by side, their ratio, and the peak memory each
schedule reports (alternating holds both models at once). Expectation: the speedups agree within
run-to-run noise (the intervals overlap).

Run from the repo root: `python bench/schedules.py [--rounds 1] [--model pointwise_mlp]`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def race(model: str, batch: int, epochs: int, steps: int, schedule: str) -> dict:
    """One race in a fresh process (`python -m core race --json`); its summary."""
    command = [
        sys.executable, "-m", "core", "race", "--json", "--quiet", "--device", "cpu", "--model", model,
        "--batch-size", str(batch), "--epochs", str(epochs), "--steps-per-epoch", str(steps),
        "--schedule", schedule, "--profile-steps", "0",
    ]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)["summary"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="pointwise_mlp")
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--steps", type=int, default=60, help="steps per epoch")
    parser.add_argument("--rounds", type=int, default=1, help="each round runs both schedules (ABBA order)")
    args = parser.parse_args()
    results: dict[str, list[dict]] = {"sequential": [], "alternating": []}
    for r in range(args.rounds):
        order = ("sequential", "alternating") if r % 2 == 0 else ("alternating", "sequential")
        for schedule in order:
            s = race(args.model, args.batch_size, args.epochs, args.steps, schedule)
            results[schedule].append(s)
            low, high = s["speedup_ci95"]
            memory = s.get("compiled_peak_memory_bytes")
            print(
                f"round {r + 1} {schedule:<11}: steady {s['steady_state_speedup']:.3f}x [{low:.3f}, {high:.3f}], "
                f"compile {s['compile_time_s']:.1f} s, peak memory {memory / 2**20 if memory else float('nan'):.0f} MiB "
                f"({s.get('memory_kind')})",
                flush=True,
            )
    seq = statistics.median(s["steady_state_speedup"] for s in results["sequential"])
    alt = statistics.median(s["steady_state_speedup"] for s in results["alternating"])
    print(
        f"\nmedian steady speedup: sequential {seq:.3f}x, alternating {alt:.3f}x; alternating/sequential = {alt / seq:.3f}"
    )
    print(
        f"({args.model}, batch {args.batch_size}, {args.epochs} x {args.steps} steps, {args.rounds} rounds, cold caches)"
    )


if __name__ == "__main__":
    main()
