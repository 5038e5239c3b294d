"""Do warm starts change what a race measures? The default race and the CPU break-even demo, each raced
by workers started cold (COMPILE_LAB_WARM_START=off: a fresh `python -m core.runs.worker`) and by
workers forked from a warm server (core.runs.warm_start), alternating A B A B, each race through the
app's queue and worker (`python -m core submit --wait`), each arm with a store of its own.

Before each warm race the warm server is started (if none runs) and waited for while nothing runs,
as the queue's idle tick does; every race's recorded `process_start` shows which way it started.

Per race: the steady speedup with its interval (widened to the run-to-run spread; the race's own in
brackets), the compile time and the machine's load. Per configuration: each arm's median speedup,
whether it lies inside every interval of the other arm's races, and the compile times' ratio
(warm over cold medians). Goal (issue 36): the speedups within each other's intervals, the compile
times within 10%. Prints, never asserts.

Run from the repo root: python bench/warm_measurement.py [--races 3] [--config both|default|demo] [--quick]
(--quick: 1 race per arm and configuration, a shorter demo: a first look.)
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile

from race_process import ROOT, submitted_race, warm_server

sys.path.insert(0, ROOT)

from core.runs import processes, warm_start
from core.runs.store import Store
from core.view.race_form import CPU_BREAK_EVEN_PRESET, default_spec

ARMS = {"cold": "off", "warm": "on"}
GOAL_COMPILE = 0.10


def race(spec, store_path: str, arm: str) -> dict:
    os.environ[warm_start.SETTING] = ARMS[arm]
    problem = warm_server() if arm == "warm" else None
    if problem:
        return {"error": problem}
    result = submitted_race(spec, store_path)
    s = result["summary"]
    runs = Store(store_path).list_runs(kind="race", limit=1)
    started = (runs[0].environment or {}).get("process_start", "?") if runs else "?"
    return {
        "speedup": s.get("steady_state_speedup"),
        "ci": s.get("speedup_ci95"),
        "own": s.get("speedup_ci95_within"),
        "compile_s": s.get("compile_time_s"),
        "started": started,
        "load": os.getloadavg()[0],
        "error": result["error"],
    }


def span(interval) -> str:
    return f"{interval[0]:.3f}-{interval[1]:.3f}" if interval else "-"


def inside(value: float, interval) -> bool:
    return bool(interval) and interval[0] <= value <= interval[1]


def report(name: str, results: dict[str, list[dict]]) -> None:
    done = {arm: [r for r in rows if r.get("speedup")] for arm, rows in results.items()}
    if not all(done.values()):
        print(f"{name}: not enough finished races to compare")
        return
    med = {arm: statistics.median(r["speedup"] for r in rows) for arm, rows in done.items()}
    comp = {arm: statistics.median(r["compile_s"] for r in rows if r["compile_s"]) for arm, rows in done.items()}
    print(
        f"\n{name}: median speedup cold {med['cold']:.3f}x, warm {med['warm']:.3f}x (warm/cold {med['warm'] / med['cold']:.3f})"
    )
    for arm, other in (("warm", "cold"), ("cold", "warm")):
        widened = sum(inside(med[arm], r["ci"]) for r in done[other])
        own = sum(inside(med[arm], r["own"]) for r in done[other])
        print(f"  {arm}'s median inside {widened} of {len(done[other])} {other} intervals ({own} of their own)")
    ratio = comp["warm"] / comp["cold"]
    verdict = "met" if abs(ratio - 1) <= GOAL_COMPILE else "NOT met"
    print(
        f"  compile: cold {comp['cold']:.2f} s, warm {comp['warm']:.2f} s (warm/cold {ratio:.3f}; within 10%: {verdict})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--races", type=int, default=3, help="races per arm and configuration")
    parser.add_argument("--config", choices=("both", "default", "demo"), default="both")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    os.environ["COMPILE_LAB_DATA"] = tempfile.mkdtemp(prefix="compile-lab-warm-measurement-")
    configs = {
        "default race": default_spec(None),
        "CPU break-even demo": dataclasses.replace(default_spec(None), **CPU_BREAK_EVEN_PRESET),
    }
    if args.config != "both":
        configs = {k: v for k, v in configs.items() if k.startswith("default" if args.config == "default" else "CPU")}
    if args.quick:
        args.races = 1
        configs = {k: dataclasses.replace(v, steps_per_epoch=min(v.steps_per_epoch, 100)) for k, v in configs.items()}
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} before starting")
    try:
        for name, spec in configs.items():
            print(
                f"{name}: {spec.model}, batch {spec.batch_size}, {spec.epochs} x {spec.steps_per_epoch}, {spec.schedule}"
            )
            stores = {
                arm: os.path.join(tempfile.mkdtemp(prefix=f"compile-lab-warm-{arm}-"), "s.sqlite3") for arm in ARMS
            }
            results: dict[str, list[dict]] = {arm: [] for arm in ARMS}
            for i in range(args.races):
                for arm in ARMS:
                    r = race(spec, stores[arm], arm)
                    results[arm].append(r)
                    if r.get("error") or not r.get("speedup"):
                        print(f"  {arm} race {i + 1}: failed: {r.get('error')}", flush=True)
                        continue
                    print(
                        f"  {arm} race {i + 1} ({r['started']} start): {r['speedup']:.3f}x ({span(r['ci'])}; own "
                        f"{span(r['own'] or r['ci'])}), compile {r['compile_s'] or 0:.2f} s, load {r['load']:.1f}",
                        flush=True,
                    )
            report(name, results)
    finally:
        os.environ[warm_start.SETTING] = "on"
        warm_start.stop_server(processes.worker_environment("cpu"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
