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

from race_process import compare, race_summary


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
            s = race_summary(
                args.model, args.batch_size, args.epochs, args.steps, "--schedule", schedule, "--profile-steps", "0"
            )
            results[schedule].append(s)
            low, high = s["speedup_ci95"]
            memory = s.get("compiled_peak_memory_bytes")
            print(
                f"round {r + 1} {schedule:<11}: steady {s['steady_state_speedup']:.3f}x [{low:.3f}, {high:.3f}], "
                f"compile {s['compile_time_s']:.1f} s, peak memory {memory / 2**20 if memory else float('nan'):.0f} MiB "
                f"({s.get('memory_kind')})",
                flush=True,
            )
    print("\n" + compare(results))
    print(
        f"({args.model}, batch {args.batch_size}, {args.epochs} x {args.steps} steps, {args.rounds} rounds, cold caches)"
    )


if __name__ == "__main__":
    main()
