"""What one view of the Runs page costs the server with 6,000 stored runs, and what reopening one
long run (390,000 events) costs each session that opens it: as the page read them before, and now.

1. The table. Before: the 1,000 newest races whole (every summary holds each step time), a table row
   each, then 5,000 runs of any kind whole for the numbering note. Now: core.view.compare.runs_page
   (three small columns of every run, the settings of races not seen yet, one page whole), cold (a
   fresh process) and warm (any later view, from any session), unfiltered and filtered.
2. A long run reopened. Before: each session read all its events into a view of its own and built
   its bundle (tens of MB of JSON) for the download button on every view. Now: the live board's
   shared snapshot (app_pages.common.run_view), the bundle built only when clicked.
3. With --page: the whole Runs page script through Streamlit's AppTest (sidebar included).

CPU is this process's (time.process_time), memory the peak of Python's allocations during one view
(tracemalloc, measured on a separate call). Prints figures, never asserts. Stores are filled in a
temp dir (bench/store_fill.py). Run: python bench/runs_view.py [--runs 6000] [--events 390000 (0: none)] [--page]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import tracemalloc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

import pandas as pd
from store_fill import fill_long_run, fill_runs

from core.runs.bundle import export_bundle
from core.runs.store import Store
from core.view import compare
from core.view.compare import shown_columns, table_row
from core.view.run_screen.shared_board import LiveBoard, RunView, expected_steps


def cost(fn, repeat: int = 3) -> tuple[float, float]:
    """(median CPU seconds of `repeat` calls, peak MiB of Python allocations in one more)."""
    cpu = []
    for _ in range(repeat):
        t = time.process_time()
        fn()
        cpu.append(time.process_time() - t)
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return statistics.median(cpu), peak


def table_before(store: Store) -> None:
    """The Runs page's reads as they were: 1,000 races whole, then 5,000 runs whole, and the note."""
    races = store.list_runs(kind="race", limit=1000)
    rows = [table_row(r) for r in races]
    shown_columns(pd.DataFrame(rows).to_dict("records"))
    kinds = {r.id: r.kind for r in store.list_runs(limit=5000)}
    ids = sorted(r.id for r in races)
    [i for i in range(1, ids[-1]) if i not in set(ids) and kinds.get(i) != "race"]  # its gaps, as it found them


def table_now(store: Store, wanted: dict | None = None, page: int = 1, cold: bool = False) -> None:
    if cold:
        compare._SETTINGS.clear()  # a fresh process: no race's settings read yet
    compare.runs_page(store, wanted or {}, page)


def reopen_before(store: Store, run_id: int) -> None:
    """A session opening a stored run: a view of its own, read whole, and the bundle built."""
    run = store.get_run(run_id)
    view = RunView(run_id)
    view.thin_steps(expected=expected_steps(run.params))
    view.poll(store)
    view.frames()
    json.dumps(export_bundle(store, run_id))


def line(what: str, before: tuple[float, float] | None, now: tuple[float, float]) -> None:
    was = f"{before[0] * 1000:9.0f} ms {before[1]:7.1f} MiB" if before else " " * 22
    ratio = f"{before[0] / now[0]:7.0f}x less CPU" if before and now[0] > 0 else ""
    print(f"{what:<46} {was}   {now[0] * 1000:8.1f} ms {now[1]:7.1f} MiB   {ratio}")


def page_views(path: str, views: int = 3) -> float:
    """Median CPU seconds of one Runs page script run through AppTest (a fresh session each)."""
    os.environ["COMPILE_LAB_STORE"] = path
    from streamlit.testing.v1 import AppTest

    cpu = []
    for _ in range(views):
        at = AppTest.from_file(os.path.join(ROOT, "streamlit_app.py"), default_timeout=300)
        at.run()
        t = time.process_time()
        at.switch_page("app_pages/runs.py").run()
        cpu.append(time.process_time() - t)
        assert not at.exception, at.exception
    return statistics.median(cpu)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=6000)
    parser.add_argument("--events", type=int, default=390_000)
    parser.add_argument("--page", action="store_true", help="also the whole page through AppTest")
    args = parser.parse_args()
    data = tempfile.mkdtemp(prefix="compile-lab-bench-runs-")
    os.environ["COMPILE_LAB_DATA"] = data
    path = os.path.join(data, "runs.sqlite3")
    t = time.perf_counter()
    store = Store(path)
    fill_runs(store, args.runs)
    print(f"filled {args.runs:,} runs in {time.perf_counter() - t:.1f} s ({os.path.getsize(path) / 2**20:.0f} MiB)")
    print(f"{'':<46} {'before: CPU, peak memory':>22}   {'now: CPU, peak memory':>21}")
    before = cost(lambda: table_before(store), repeat=2)
    line(f"Runs table, {args.runs:,} runs, first view", before, cost(lambda: table_now(store, cold=True)))
    line("  a later view (any session)", before, cost(lambda: table_now(store)))
    wanted = {"model": ["mlp"], "device": ["AMD EPYC 7B13"]}
    line("  page 5, filtered by model and device", None, cost(lambda: table_now(store, wanted, 5)))
    if args.page:
        print(f"the whole Runs page (AppTest), CPU per view: {page_views(path) * 1000:.0f} ms")

    if not args.events:
        return
    t = time.perf_counter()
    run_id = fill_long_run(store, args.events)
    print(f"filled one run of {args.events:,} events in {time.perf_counter() - t:.1f} s")
    board = LiveBoard(path, viewer_max_age_s=0.0)  # a read on every view: what a view a while later costs
    before = cost(lambda: reopen_before(store, run_id), repeat=2)
    first = cost(lambda: LiveBoard(path).snapshot(run_id), repeat=1)
    board.snapshot(run_id)
    line(f"a run of {args.events:,} events, first session", before, first)
    line("  each later session", before, cost(lambda: board.snapshot(run_id)))


if __name__ == "__main__":
    main()
