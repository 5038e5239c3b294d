"""Fill a store fast with what a busy host gathers: thousands of finished races (each row a real
recording's, its summary holding every step time as the worker stores it), the device probes and
demos numbered among them, a few deleted runs, and one long race of hundreds of thousands of events.

Rows go in through the store's own insert (Store._insert_run, Store._insert_events) in a few
transactions, so a 6,000-run store is written in seconds. Used by bench/runs_view.py; run alone
it fills a store and prints its size: python bench/store_fill.py [PATH] [RUNS]
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from core.runs.store import Store

RECORDING = os.path.join(ROOT, "assets", "recordings", "cpu-break-even-demo.json")
MODELS = ("mlp", "pointwise_mlp", "small_cnn", "tiny_transformer")
DEVICES = ("AMD EPYC 7B13", "Intel Xeon 8481C", "NVIDIA H100 80GB HBM3")
STATUSES = ("done",) * 8 + ("failed", "cancelled")


def recording() -> dict:
    with open(RECORDING) as fh:
        return json.load(fh)


def fill_runs(store: Store, runs: int, every_other_kind: int = 40, delete_every: int = 97) -> list[int]:
    """`runs` races copied from the recording with their model, device and status varied; every
    `every_other_kind`-th run a probe or a demo, every `delete_every`-th race deleted after (the
    gaps the Runs page explains). Returns the races' ids."""
    base = recording()["run"]
    created = time.time() - runs * 60
    races: list[int] = []
    with store.transaction() as c:
        for i in range(runs):
            if i % every_other_kind == every_other_kind - 1:
                kind = "probe" if (i // every_other_kind) % 2 else "demo"
                store._insert_run(c, _row(base, kind, {}, "system", "done", created + i * 60, {}))
            params = {**base["params"], "model": MODELS[i % len(MODELS)], "batch_size": 2 ** (5 + i % 5)}
            env = {**base["environment"], "device_name": DEVICES[i % len(DEVICES)]}
            status = STATUSES[i % len(STATUSES)]
            races.append(
                store._insert_run(c, _row(base, "race", params, f"visitor:{i % 50}", status, created + i * 60, env))
            )
    for run_id in races[delete_every - 1 :: delete_every]:
        store.delete_run(run_id)
    return [r for i, r in enumerate(races, start=1) if i % delete_every]


def _row(base: dict, kind: str, params: dict, owner: str, status: str, created_at: float, env: dict) -> dict:
    race = kind == "race"
    return {
        "kind": kind,
        "params": params,
        "owner": owner,
        "device_key": "cpu",
        "status": status,
        "created_at": created_at,
        "started_at": created_at + 1,
        "finished_at": created_at + 50,
        "environment": env or None,
        "summary": base["summary"] if race and status == "done" else None,
        "details": base["details"] if race else None,
        "error": "worker stopped unexpectedly" if status == "failed" else None,
        "imported": 1,
    }


def fill_long_run(store: Store, events: int) -> int:
    """One finished race of `events` step events (half eager, half compiled), in batches."""
    base = recording()
    run_id = store.create_run(
        "race", base["run"]["params"], "visitor:long", "cpu", status="running", environment=base["run"]["environment"]
    )
    per_variant = events // 2
    batch = 20_000
    now = time.time()
    for variant in ("eager", "compiled"):
        for start in range(0, per_variant, batch):
            rows = [
                {"kind": "step", "variant": variant, "phase": "train", "epoch": 1 + step // 1000, "step": step + 1,
                 "time_s": 0.01 + (step % 7) * 1e-4, "loss": 2.0, "samples": 64, "recorded_at": now}
                for step in range(start, min(start + batch, per_variant))
            ]  # fmt: skip
            store.append_events(run_id, rows)
    store.finish_run(run_id, "done", summary=base["run"]["summary"])
    return run_id


if __name__ == "__main__":
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(tempfile.mkdtemp(prefix="compile-lab-fill-"), "s.sqlite3")
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 6000
    t = time.perf_counter()
    fill_runs(Store(path), count)
    print(f"{count:,} runs in {time.perf_counter() - t:.1f} s: {path} ({os.path.getsize(path) / 2**20:.0f} MiB)")
