"""What one refresh of the Sweep page costs with 16 finished points and one running point.

A sweep of 6 batch sizes x 3 compile modes (18 points): 16 done (each summary holding 500 steps per
variant, as the worker stores them), one running, one queued.

1. The live fragment's code path (app_pages/sweep.py `live`, without Streamlit): queue tick, the
   sweep and its points from the store, the state line, the points frame and table, the regime
   reading, whole-vs-regional table, the four charts built and serialized (`.to_dict()`), the
   break-even note. 30 refreshes, median and p95, with the stages.
2. The same through Streamlit's AppTest: a session following the sweep, re-run (whole script:
   entry, sidebar, form and the live view).

Goal: a refresh under 300 ms. Prints figures, never asserts. No worker is launched (the launcher is
replaced by one that refuses). Run from the repo root: python bench/sweep_refresh.py
"""

from __future__ import annotations

import logging
import math
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

DATA = tempfile.mkdtemp(prefix="compile-lab-bench-sweep-")
STORE = os.path.join(DATA, "sweep.sqlite3")
os.environ["COMPILE_LAB_DATA"] = DATA
os.environ["COMPILE_LAB_STORE"] = STORE
os.environ.pop("COMPILE_LAB_CONFIG", None)

from streamlit.testing.v1 import AppTest

from core.engine import analysis
from core.engine.spec import DeviceCaps, RunSpec
from core.runs import fleet, processes, queue, sweeps
from core.runs.store import Store
from core.runs.sweeps import Axis, SweepSpec
from core.view.safe_text import markdown_text
from core.view.sweep import (
    _SPEC_CACHE,
    break_even_note,
    chart_specs,
    points_table,
    regime_readings,
    scope_comparison,
    sweep_frame,
    sweep_state,
)

APP = os.path.join(ROOT, "streamlit_app.py")
BATCHES = (64, 128, 256, 512, 1024, 2048)
MODES = ("default", "max-autotune-no-cudagraphs", "reduce-overhead")
STEPS = 500  # per variant, per finished point
REFRESHES, APPTEST_REPEATS = 30, 5
GOAL_MS = 300.0
ELSEWHERE = "bench-worker-host"  # the running point's worker "runs" on another host: judged by heartbeat

LAUNCHES: list[tuple] = []


def _refuse_launch(*args, **kwargs):
    LAUNCHES.append(args)
    raise RuntimeError("bench/sweep_refresh.py: the page tried to start a worker process")


processes.launch_worker = _refuse_launch
processes.launch_ticker = _refuse_launch


def summary(batch: int, rng: random.Random) -> dict:
    eager_s = 0.002 + 1e-5 * batch
    compiled_s = eager_s * rng.uniform(0.7, 1.1)
    eager = [eager_s * (1 + 0.05 * rng.gauss(0, 1)) for _ in range(STEPS)]
    compiled = [rng.uniform(8, 30)] + [compiled_s * (1 + 0.05 * rng.gauss(0, 1)) for _ in range(STEPS - 1)]
    half = STEPS // 2
    s = analysis.summarize(
        eager, compiled, [sum(eager[:half]), sum(eager[half:])], [sum(compiled[:half]), sum(compiled[half:])], batch
    )
    s.update(compile_skipped=None, eager_peak_memory_bytes=2**28, compiled_peak_memory_bytes=2**28)
    return s


def fixture(store: Store) -> int:
    env = {"device_type": "cpu", "device_name": "Bench CPU", "cpu_name": "Bench CPU", "cpu_count": 2, "torch": "2.x"}
    probe = store.create_run("probe", {}, "system", "probe", status="done", host=fleet.HOST)
    store.update_run(probe, summary={"caps": DeviceCaps().to_dict(), "environment": env}, environment=env)
    base = RunSpec(model="pointwise_mlp", epochs=2, steps_per_epoch=STEPS // 2, device="cpu")
    sweep = SweepSpec(base, (Axis("batch_size", BATCHES), Axis("mode", MODES)))
    rng, now = random.Random(0), time.time()
    with store.transaction() as c:
        sweep_id = store.insert_sweep(c, "visitor:someone-else", sweep.to_dict())
    for i, point in enumerate(sweep.points()):
        fields = {"sweep_id": sweep_id, "host": fleet.HOST, "status": "done", "phase": "done", "progress": 1.0}
        if i < 16:
            fields.update(summary=summary(point.batch_size, rng), environment=env, finished_at=now)
        elif i == 16:
            fields = {**fields, "status": "running", "phase": "compiled epoch 1/2", "progress": 0.6,
                      "started_at": now, "heartbeat_at": now, "pid": 4_000_000, "host": ELSEWHERE}  # fmt: skip
        else:
            fields = {**fields, "status": "queued", "phase": "queued", "progress": 0.0, "host": None}
        store.create_run("race", point.to_dict(), "visitor:someone-else", "cpu", **fields)
    return sweep_id


def refresh(store: Store, sweep_id: int, lap, cached: bool) -> None:
    """One live-fragment refresh, as app_pages/sweep.py `live` does it."""
    queue.tick(store)
    store.get_sweep(sweep_id)  # the owner, for the cancel button
    sweep, runs = sweeps.stored_sweep(store, sweep_id)
    sweep_state(store, runs, shown=markdown_text)
    sweeps.sweep_progress(runs)
    lap("tick + sweep and points from the store")
    frame = sweep_frame(sweep, runs, store)
    points_table(frame)
    lap("frame + points table")
    regime_readings(sweep, frame)
    scope_comparison(sweep, frame)
    break_even_note(frame)
    lap("regime + notes")
    if not cached:
        _SPEC_CACHE.clear()  # as if a point had just finished: every chart is new
    chart_specs(sweep, frame)
    lap("4 chart specs" + (" (cached)" if cached else " (built: a point just finished)"))


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def main() -> None:
    logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").addFilter(
        lambda record: "missing ScriptRunContext" not in record.getMessage()
    )
    try:
        store = Store(STORE)
        sweep_id = fixture(store)
        runs = store.sweep_runs(sweep_id)
        print(
            f"fixture: sweep of {len(runs)} points ({len(BATCHES)} batch sizes x {len(MODES)} modes): "
            f"{sum(r.status == 'done' for r in runs)} done ({STEPS} steps per variant each), "
            f"{sum(r.status == 'running' for r in runs)} running, {sum(r.status == 'queued' for r in runs)} queued"
        )
        results = {}
        for cached in (True, False):
            totals, stages = [], {}
            for i in range(REFRESHES + 1):  # the first warms imports and caches
                laps, mark = {}, [time.perf_counter()]

                def lap(name, laps=laps, mark=mark):
                    now = time.perf_counter()
                    laps[name] = (now - mark[0]) * 1000
                    mark[0] = now

                start = mark[0]
                refresh(store, sweep_id, lap, cached)
                if i:
                    totals.append((time.perf_counter() - start) * 1000)
                    for name, ms in laps.items():
                        stages.setdefault(name, []).append(ms)
            results[cached] = (statistics.median(totals), pct(totals, 0.95))
            what = "nothing new finished (the usual second)" if cached else "a point has just finished"
            print(f"\n1{'a' if cached else 'b'}. live-fragment refresh when {what}, the page's code path "
                  f"(no Streamlit), {len(totals)} refreshes:")  # fmt: skip
            print(
                f"   one refresh: median {results[cached][0]:6.1f} ms   p95 {results[cached][1]:6.1f} ms   "
                f"(goal < {GOAL_MS:.0f} ms)"
            )
            for name, samples in stages.items():
                print(f"   {name:<48} median {statistics.median(samples):6.1f} ms")
        med, p95 = results[False]

        firsts, reruns, notes = [], [], set()
        for _ in range(APPTEST_REPEATS + 1):
            at = AppTest.from_file(APP, default_timeout=60)
            at.query_params["sweep"] = str(sweep_id)
            at.switch_page("app_pages/sweep.py")
            t = time.perf_counter()
            at.run()
            firsts.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            at.run()
            reruns.append((time.perf_counter() - t) * 1000)
            if at.exception:
                notes.add(f"the page raised {at.exception[0].message!r}")
            if len(at.get("vega_lite_chart")) != 4:
                notes.add(f"{len(at.get('vega_lite_chart'))} charts drawn, expected 4")
        firsts, reruns = firsts[1:], reruns[1:]  # the first session pays the imports
        print("\n2. AppTest of the Sweep page following the sweep (whole script: entry, sidebar, form, live view):")
        print(f"   first render of a new session: median {statistics.median(firsts):6.0f} ms of {len(firsts)}")
        print(
            f"   re-run (a refresh):            median {statistics.median(reruns):6.0f} ms   "
            f"(goal < {GOAL_MS:.0f} ms: {'met' if statistics.median(reruns) < GOAL_MS else 'NOT met'})"
        )
        for note in sorted(notes):
            print(f"   ! {note}")
        print(
            f"\ngoal: a Sweep page refresh with 16 finished points and one running < {GOAL_MS:.0f} ms: "
            f"fragment {'met' if med < GOAL_MS else 'NOT met'} ({med:.0f} ms median, {p95:.0f} ms p95, a point "
            f"just finished; {results[True][0]:.0f} ms otherwise); "
            f"whole script {'met' if statistics.median(reruns) < GOAL_MS else 'NOT met'} "
            f"({statistics.median(reruns):.0f} ms). Worker launches attempted: {len(LAUNCHES)}; {os.cpu_count()} CPUs"
        )
    finally:
        shutil.rmtree(DATA, ignore_errors=True)


if __name__ == "__main__":
    main()
