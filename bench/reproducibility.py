"""Does a race's interval hold from run to run? Five identical races, one after another, of the
default CPU race and of the CPU break-even demo, each as the app runs it: queued in a store and
run by the app's worker, a fresh process per race (one bench process running them all would carry
compiled graphs, allocator and thread pools over from race to race, which the app never does).

For each configuration it prints a table (per race: steady speedup, 95% interval, verdict, the
machine's load, and the warning beside the verdict, if any), then checks the goal of issue 23:
- no two races give opposite verdicts (one "slower", another "faster");
- each race's interval covers the median speedup of the other four, in at least 4 of 5 races.
On a busy machine the honest outcome is wider intervals (and a warning), not narrow ones that miss.
Prints, never asserts.

Run from the repo root: python bench/reproducibility.py [--quick] [--races 5] [--only default|demo]
(--quick: a fifth of the steps, to try it; the figures in docs/benchmarks.md are from full runs.)
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
from statistics import median

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from race_process import submitted_race  # noqa: E402

from core.engine.analysis import FASTER, SLOWER  # noqa: E402
from core.view.race_form import CPU_BREAK_EVEN_PRESET, default_spec  # noqa: E402


def configurations(quick: bool) -> dict[str, object]:
    """The default CPU race and the CPU break-even demo, as the Race page launches them."""
    base = default_spec(None)
    demo = dataclasses.replace(base, **CPU_BREAK_EVEN_PRESET)
    if quick:
        base = dataclasses.replace(base, steps_per_epoch=max(10, base.steps_per_epoch // 5))
        demo = dataclasses.replace(demo, steps_per_epoch=max(10, demo.steps_per_epoch // 5))
    return {"default": base, "demo": demo}


def one_race(spec, store_path: str) -> dict:
    """One race as the app runs it (race_process.submitted_race), with the machine's load around it."""
    load_before = os.getloadavg()[0]
    race = submitted_race(spec, store_path)
    s = race["summary"]
    return {
        "speedup": s.get("steady_state_speedup"),
        "ci": s.get("speedup_ci95"),
        "own": s.get("speedup_ci95_within"),
        "verdict": s.get("verdict"),
        "wall_s": race["wall_s"],
        "load": (load_before, os.getloadavg()[0]),
        "warnings": s.get("noise_warnings") or [],
        "error": race["error"],
    }


def check(rows: list[dict], key: str = "ci") -> tuple[bool, int]:
    """(no opposite verdicts, how many races' intervals cover the median of the others); `key`:
    "own" for the race's own interval, before the run-to-run spread widened it."""
    verdicts = {r["verdict"] for r in rows}
    consistent = not (FASTER in verdicts and SLOWER in verdicts)
    covered = 0
    for i, row in enumerate(rows):
        others = [r["speedup"] for j, r in enumerate(rows) if j != i and r["speedup"] is not None]
        if row[key] and others and row[key][0] <= median(others) <= row[key][1]:
            covered += 1
    return consistent, covered


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a fifth of the steps, to try the bench")
    parser.add_argument("--races", type=int, default=5)
    parser.add_argument("--only", choices=("default", "demo"), default=None)
    args = parser.parse_args()
    store_path = os.path.join(tempfile.mkdtemp(prefix="compile-lab-repro-"), "store.sqlite3")
    met = True
    for name, spec in configurations(args.quick).items():
        if args.only and name != args.only:
            continue
        print(f"\n{name}: {spec.model}, batch {spec.batch_size}, {spec.epochs} x {spec.steps_per_epoch} steps, "
              f"schedule {spec.schedule} ({os.cpu_count()} cores)", flush=True)  # fmt: skip
        print(f"{'race':>4}  {'speedup':>8}  {'95% interval':>14}  {'its own':>11}  {'verdict':<20} {'load':>11} "
              f"{'wall':>7}  warning")  # fmt: skip
        rows = []
        for i in range(1, args.races + 1):
            row = one_race(spec, store_path)
            rows.append(row)
            ci = f"{row['ci'][0]:.2f}-{row['ci'][1]:.2f}" if row["ci"] else "-"
            own = f"{row['own'][0]:.2f}-{row['own'][1]:.2f}" if row["own"] else "-"
            sp = f"{row['speedup']:.2f}x" if row["speedup"] else "-"
            load = f"{row['load'][0]:.1f}->{row['load'][1]:.1f}"
            warn = "busy" if any("busy" in w for w in row["warnings"]) else ("drift" if row["warnings"] else "")
            print(f"{i:>4}  {sp:>8}  {ci:>14}  {own:>11}  {str(row['verdict']):<20} {load:>11} {row['wall_s']:>6.0f}s  "
                  f"{warn}{' error: ' + row['error'] if row['error'] else ''}", flush=True)  # fmt: skip
        consistent, covered = check(rows)
        own_covered = check(rows, "own")[1]
        ok = consistent and covered >= len(rows) - 1
        met &= ok
        print(f"opposite verdicts: {'none' if consistent else 'YES'}; intervals covering the others' median: "
              f"{covered} of {len(rows)} (goal: no opposite verdicts, at least {len(rows) - 1}): "
              f"{'met' if ok else 'NOT met'}; each race's own interval alone covers it in {own_covered} of {len(rows)}")  # fmt: skip
    print(f"\ngoal {'met' if met else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
