"""Do fixed malloc thresholds make races agree from run to run? The CPU break-even demo raced with
glibc's own malloc (its mmap threshold moving as the process frees large blocks) against the
worker's default fixed thresholds (core.runs.race_conditions.STEADY_MALLOC), alternating A B A B, each
race through the app's worker in a fresh process.

Per race: the steady speedup, eager's and compiled's median step per epoch; per arm, the spread
of the speedups (max/min) and of eager's epoch medians within races. Goal: the fixed thresholds
narrow the run-to-run spread of the speedup. Prints, never asserts.

Run from the repo root: python bench/steady_malloc.py [--races 3] [--steps 200] [--config demo|default]
(default: the Race page's default race, pointwise_mlp, 3 x 100 unless --steps.)
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile

from race_process import ROOT, submitted_race

sys.path.insert(0, ROOT)

from core.runs.race_conditions import MALLOC_SETTING
from core.view.race_form import CPU_BREAK_EVEN_PRESET, default_spec

ARMS = {"glibc": "glibc", "fixed": "steady"}


def epoch_medians(times: list[float], epochs: int, per_epoch: int) -> list[float]:
    """Median step (ms) of each epoch, its first 10 steps left out (the compile, the warm-up)."""
    return [statistics.median(times[i * per_epoch + 10 : (i + 1) * per_epoch]) * 1000 for i in range(epochs)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--races", type=int, default=3, help="races per arm")
    parser.add_argument("--steps", type=int, default=None, help="steps per epoch (default: the race's own)")
    parser.add_argument("--config", choices=("demo", "default"), default="demo")
    args = parser.parse_args()
    spec = default_spec(None)
    if args.config == "demo":
        spec = dataclasses.replace(spec, **CPU_BREAK_EVEN_PRESET)
    if args.steps:
        spec = dataclasses.replace(spec, steps_per_epoch=args.steps)
    stores = {arm: os.path.join(tempfile.mkdtemp(prefix=f"compile-lab-malloc-{arm}-"), "s.sqlite3") for arm in ARMS}
    results: dict[str, list[float]] = {arm: [] for arm in ARMS}
    shifts: dict[str, list[float]] = {arm: [] for arm in ARMS}
    print(f"{spec.model}, batch {spec.batch_size}, {spec.epochs} x {spec.steps_per_epoch}, {spec.schedule}")
    for i in range(args.races):
        for arm, setting in ARMS.items():
            os.environ[MALLOC_SETTING] = setting
            race = submitted_race(spec, stores[arm])
            s = race["summary"]
            if not s:
                print(f"{arm:<6} race {i + 1}: failed: {race['error']}")
                continue
            eager = epoch_medians(s["eager_step_times_s"], spec.epochs, spec.steps_per_epoch)
            compiled = epoch_medians(s["compiled_step_times_s"], spec.epochs, spec.steps_per_epoch)
            results[arm].append(s["steady_state_speedup"])
            shifts[arm].append(max(eager) / min(eager))
            print(f"{arm:<6} race {i + 1}: {s['steady_state_speedup']:.3f}x  eager ms/epoch "
                  f"{', '.join(f'{m:.1f}' for m in eager)}  compiled {', '.join(f'{m:.1f}' for m in compiled)}  "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
    os.environ.pop(MALLOC_SETTING, None)
    for arm, values in results.items():
        if values:
            print(f"{arm:<6}: speedups {min(values):.3f}-{max(values):.3f}x (max/min {max(values) / min(values):.3f}), "
                  f"eager's epochs within a race differ by up to {max(shifts[arm]):.3f}x")  # fmt: skip
    if all(results.values()):
        spread = {arm: max(v) / min(v) for arm, v in results.items()}
        print(f"run-to-run spread fixed/glibc: {(spread['fixed'] - 1) / (spread['glibc'] - 1):.2f} of glibc's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
