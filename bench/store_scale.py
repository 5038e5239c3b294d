"""Store reads at scale: with 200 runs and 500k events stored, how long a live view's read takes.

A live page asks for one run's new events and its summary about once a second; this must stay
cheap however much history the store holds. Goal: under 50 ms. Run: python bench/store_scale.py
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from core.runs.store import Store

RUNS, EVENTS = 200, 500_000


def fill(store: Store) -> list[int]:
    ids = []
    summary = {
        "steady_state_speedup": 1.1,
        "eager_step_times_s": [0.01] * 1000,
        "compiled_step_times_s": [0.009] * 1000,
    }
    for r in range(RUNS):
        run_id = store.create_run("race", {"model": "mlp", "batch_size": 64}, f"owner{r % 7}", "cpu", status="done")
        store.update_run(run_id, summary=summary, environment={"device_type": "cpu"})
        ids.append(run_id)
    rng = random.Random(0)
    with store.transaction() as c:  # interleave runs as concurrent workers would
        rows = []
        for i in range(EVENTS):
            run_id = ids[i % RUNS]
            rows.append(
                (run_id, "step", "eager", "train", 1, i // RUNS, rng.random() / 100, None, 2.0, 64, time.time())
            )
        c.executemany(
            "INSERT INTO events (run_id, kind, variant, phase, epoch, step, time_s, eval_time_s, loss, samples, recorded_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
    return ids


def timed(fn, repeat: int = 50) -> float:
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples) * 1000


def main() -> None:
    path = os.path.join(tempfile.mkdtemp(prefix="compile-lab-bench-"), "store.sqlite3")
    t = time.perf_counter()
    ids = fill(Store(path))
    print(
        f"filled {RUNS} runs, {EVENTS:,} events in {time.perf_counter() - t:.1f} s ({os.path.getsize(path) / 2**20:.0f} MiB)"
    )
    reader = Store(path)  # a fresh connection, as a page process would have
    run_id = ids[len(ids) // 2]
    all_events = reader.events_after(run_id)
    tail_after = all_events[-50]["id"]
    new = timed(lambda: (reader.events_after(run_id, tail_after), reader.get_run(run_id)))
    full = timed(lambda: reader.events_after(run_id), repeat=20)
    listing = timed(lambda: reader.list_runs(kind="race", limit=200), repeat=10)
    print(
        f"one run's 50 new events + its summary: median {new:6.2f} ms   (goal < 50 ms: {'met' if new < 50 else 'NOT met'})"
    )
    print(f"one run's whole history ({len(all_events):,} events):  median {full:6.2f} ms")
    print(f"list all {RUNS} runs with summaries:          median {listing:6.2f} ms")


if __name__ == "__main__":
    main()
