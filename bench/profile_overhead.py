"""Profiling happens after the timing: does turning it on change the measured steady speedup?

A race with per-step profiling on (profile_steps > 0) compiles its CPU kernels with Inductor's
per-kernel profiler scopes so the profile can count them, and profiles a few steps after its timed
epochs. Neither may move the numbers the race reports. This script runs the same race with
profiling off and on, alternating (off, on, on, off, ...), each in a fresh process with a cold
cache, and prints both steady speedups with their 95% intervals side by side, and their ratio.
Expectation: the on/off ratio within run-to-run noise (the intervals overlap).

Run from the repo root: `python bench/profile_overhead.py [--rounds 2] [--model pointwise_mlp]`.
"""

from __future__ import annotations

import argparse

from race_process import compare, race_summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="pointwise_mlp")
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=150, help="steps per epoch (2 epochs)")
    parser.add_argument("--rounds", type=int, default=2, help="each round runs off and on once (ABBA order)")
    args = parser.parse_args()
    results: dict[int, list[dict]] = {0: [], 3: []}
    for r in range(args.rounds):
        order = (0, 3) if r % 2 == 0 else (3, 0)
        for profile_steps in order:
            summary = race_summary(args.model, args.batch_size, 2, args.steps, "--profile-steps", str(profile_steps))
            results[profile_steps].append(summary)
            low, high = summary["speedup_ci95"]
            label = "on " if profile_steps else "off"
            print(
                f"round {r + 1} profiling {label}: steady {summary['steady_state_speedup']:.3f}x "
                f"[{low:.3f}, {high:.3f}], compile {summary['compile_time_s']:.1f} s",
                flush=True,
            )
    print("\n" + compare({"profiling off": results[0], "profiling on": results[3]}))
    print(f"({args.model}, batch {args.batch_size}, 2 x {args.steps} steps, {args.rounds} rounds, cold caches)")


if __name__ == "__main__":
    main()
