"""A fleet's queue on PostgreSQL vs SQLite, side by side in one run: enqueue-to-claimed latency (of
the first wave of races, one per idle lane),
event-to-readable latency (p50/p95), queue throughput with N agents of one CPU lane each (tiny
aot_eager races), and whether any job was claimed twice.

Each backend gets the same agents (`python -m core agent --name bench-i`, real workers) and the same
races. PostgreSQL is a throwaway server (tests/pg_server.py: initdb on the PATH) unless --pg-url
names one. Goals: event-to-readable p95 under 1 s on both; no job claimed twice.
Run from the repo root: python bench/fleet.py [--agents 8 --races 16]
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

from core.engine.spec import RunSpec
from core.runs import fleet, queue
from core.runs.limits import HostLimits
from core.runs.store import Store


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))] if values else float("nan")


def measure(location: str, data: str, agents: int, races: int, steps: int) -> dict[str, float]:
    env = {**os.environ, "COMPILE_LAB_STORE": location, "COMPILE_LAB_DATA": data, "COMPILE_LAB_WORKER_THREADS": "1"}
    os.environ.update(COMPILE_LAB_STORE=location, COMPILE_LAB_DATA=data)
    store = Store(location)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "core", "agent", "--name", f"bench-{i}"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )  # fmt: skip
        for i in range(agents)
    ]
    try:
        while len(fleet.live_hosts(store)) < agents:
            time.sleep(0.2)
        spec = RunSpec(model="mlp", batch_size=8, epochs=1, steps_per_epoch=steps, backend="aot_eager", device="cpu")
        limits = HostLimits(job_time_limit_s=None, max_queue_length=None, max_queued_per_owner=None)
        began = time.time()
        ids = [queue.enqueue(store, spec, f"bench-{i}", limits=limits) for i in range(races)]
        seen: dict[int, int] = dict.fromkeys(ids, 0)
        readable: list[float] = []
        while True:
            runs = [store.get_run(i) for i in ids]
            for run in runs:
                for event in store.events_after(run.id, seen[run.id]):
                    seen[run.id] = event["id"]
                    readable.append(time.time() - event["recorded_at"])
            if all(r.finished for r in runs):
                break
            time.sleep(0.05)
        wall = time.time() - began
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        logs = [proc.communicate(timeout=60)[0] for proc in procs]
    started = [int(n) for log in logs for n in re.findall(r"started run (\d+)", log)]
    # The first wave found an idle lane each: its wait is the dispatch itself, not the queue.
    claimed = [r.started_at - r.created_at for r in runs[:agents] if r.started_at]
    return {
        "done": sum(r.status == "done" for r in runs),
        "claimed twice": len(started) - len(set(started)),
        "enqueue-to-claimed p50 s": statistics.median(claimed),
        "enqueue-to-claimed p95 s": percentile(claimed, 0.95),
        "event-to-readable p50 s": statistics.median(readable),
        "event-to-readable p95 s": percentile(readable, 0.95),
        "races per minute": races / wall * 60,
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--agents", type=int, default=8)
    p.add_argument("--races", type=int, default=16)
    p.add_argument("--steps", type=int, default=20, help="steps per epoch of each tiny race (default 20)")
    p.add_argument("--pg-url", default=None, help="a PostgreSQL server to use (default: a throwaway one)")
    args = p.parse_args(argv)
    import pg_server

    url, folder = (args.pg_url, None) if args.pg_url else pg_server.start()
    results = {}
    try:
        for name, location in (("sqlite", None), ("postgresql", url)):
            data = tempfile.mkdtemp(prefix=f"compile-lab-bench-fleet-{name}-")
            results[name] = measure(
                location or os.path.join(data, "store.sqlite3"), data, args.agents, args.races, args.steps
            )
    finally:
        if folder:
            pg_server.stop(folder)
    print(f"{args.agents} agents of one CPU lane, {args.races} tiny aot_eager races ({args.steps} steps):")
    print(f"{'':28}{'SQLite':>12}{'PostgreSQL':>12}{'PG/SQLite':>11}")
    for key in results["sqlite"]:
        a, b = results["sqlite"][key], results["postgresql"][key]
        ratio = f"{b / a:.2f}x" if isinstance(a, float) and a else ""
        print(f"{key:28}{a:>12.3f}{b:>12.3f}{ratio:>11}" if isinstance(a, float) else f"{key:28}{a:>12}{b:>12}")


if __name__ == "__main__":
    main()
