"""One CPU race in a fresh process, for the benchmarks that compare two ways of running it.

Each race gets its own process so every variant starts from a cold compile cache and a fresh
allocator; the benches only choose the flags and compare the summaries. `race_summary` runs
`python -m core race --json` (the engine alone); `submitted_race` runs it the way the app does,
queued in a store and run by the app's worker (pinned to its cores, with the run-to-run spread
that store's earlier races have shown). `warm_server` readies the CPU lane's warm server first, as
an app's idle tick does, so a submitted race and its replicates start as they would from the app.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def warm_server(timeout_s: float = 180.0) -> str | None:
    """Start the CPU lane's warm server for this environment's workers (as the queue's idle tick does
    for an app) and wait until it forks jobs; why not, or None once it is ready. Stop it with
    stop_warm_server() when the bench is done (an unused one leaves by itself after 15 minutes)."""
    sys.path.insert(0, ROOT)
    from core.runs import processes, warm_start

    env = processes.worker_environment("cpu")
    if not warm_start.enabled(env):
        return f"{warm_start.SETTING} is off"
    processes.prewarm(["cpu"])  # what the app's idle tick calls: the same server, on the same cores
    deadline = time.monotonic() + timeout_s
    while warm_start.server_state(env) != "ready":
        if time.monotonic() > deadline:
            return f"the warm server was not ready within {timeout_s:.0f} s"
        time.sleep(0.2)
    return None


def stop_warm_server() -> None:
    sys.path.insert(0, ROOT)
    from core.runs import processes, warm_start

    warm_start.stop_server(processes.worker_environment("cpu"))


def race_summary(model: str, batch: int, epochs: int, steps: int, *extra: str) -> dict:
    """The summary of one race on the CPU with these flags (`extra` are further CLI flags)."""
    command = [
        sys.executable, "-m", "core", "race", "--json", "--quiet", "--device", "cpu", "--model", model,
        "--batch-size", str(batch), "--epochs", str(epochs), "--steps-per-epoch", str(steps), *extra,
    ]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)["summary"]


def submitted_race(spec, store_path: str) -> dict:
    """One race as the app runs it (`python -m core submit --wait --json` into `store_path`): its
    summary (empty when it failed), wall time from submit to result, and the error, if any."""
    sys.path.insert(0, ROOT)
    from core.cli.races import spec_flags

    start = time.perf_counter()
    command = [sys.executable, "-m", "core", "submit", "--store", store_path, "--wait", "--json", *spec_flags(spec)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    error = None if lines else (done.stderr.strip().splitlines() or ["no result"])[-1]
    summary = json.loads(lines[-1])["summary"] if lines else {}
    return {"summary": summary, "wall_s": time.perf_counter() - start, "error": error}


def compare(results: dict[str, list[dict]]) -> str:
    """Median steady speedup per arm, their ratio (second arm over first), and each arm's
    run-to-run spread: the yardstick a difference between the arms has to beat."""
    (first, a), (second, b) = results.items()
    med_a = statistics.median(s["steady_state_speedup"] for s in a)
    med_b = statistics.median(s["steady_state_speedup"] for s in b)
    lines = [
        f"median steady speedup: {first} {med_a:.3f}x, {second} {med_b:.3f}x; {second}/{first} = {med_b / med_a:.3f}"
    ]
    for name, summaries in results.items():
        values = [s["steady_state_speedup"] for s in summaries]
        lines.append(f"run-to-run spread, {name}: {min(values):.3f}x to {max(values):.3f}x over {len(values)} runs")
    return "\n".join(lines)
