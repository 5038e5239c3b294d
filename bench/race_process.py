"""One CPU race in a fresh process, for the benchmarks that compare two ways of running it.

Each race gets its own `python -m core race --json` process so every variant starts from a cold
compile cache and a fresh allocator; the benches only choose the flags and compare the summaries.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def race_summary(model: str, batch: int, epochs: int, steps: int, *extra: str) -> dict:
    """The summary of one race on the CPU with these flags (`extra` are further CLI flags)."""
    command = [
        sys.executable, "-m", "core", "race", "--json", "--quiet", "--device", "cpu", "--model", model,
        "--batch-size", str(batch), "--epochs", str(epochs), "--steps-per-epoch", str(steps), *extra,
    ]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)["summary"]


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
