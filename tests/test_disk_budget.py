"""The data folder's disk: deleting or purging a run removes its files (traces, logs), files whose run
is gone are swept, and past the host's disk budget the oldest finished runs' files go first, then the
warm Inductor cache; never a running run's files, the store, kept events or model files. What is
freed is logged and noted for the Admin page."""

import logging
import os
import time

from streamlit.testing.v1 import AppTest
from support import CPU, quick_spec
from test_pages import APP, record_probe, record_race

from core.engine.spec import data_home
from core.runs import admin, disk_budget, queue, sweeps, worker
from core.runs.limits import HostLimits
from core.runs.outage import kept_dir
from core.runs.run_files import run_files_dir, run_paths
from core.view.host_tables import disk_line, last_freed_line, purge_line

BOTH_BACKENDS = True  # each test using `store` runs on SQLite and on PostgreSQL (tests/conftest.py)
TRACE_BYTES = 40_000
LOG_BYTES = 1_000


def leave_files(store, run_id: int) -> int:
    """What a race's worker leaves: a profiler trace, a compile trace, its log. Returns their bytes."""
    folder = run_files_dir(store.path, run_id)
    os.makedirs(os.path.join(folder, "torch_trace"), exist_ok=True)
    with open(os.path.join(folder, "eager.trace.json"), "wb") as fh:
        fh.write(b"t" * TRACE_BYTES)
    with open(os.path.join(folder, "torch_trace", "dedicated_log_torch_trace_1.log"), "wb") as fh:
        fh.write(b"c" * TRACE_BYTES)
    logs = os.path.join(store.files_dir, "logs")
    os.makedirs(logs, exist_ok=True)
    with open(os.path.join(logs, f"run-{run_id}.log"), "wb") as fh:
        fh.write(b"l" * LOG_BYTES)
    return 2 * TRACE_BYTES + LOG_BYTES


def has_files(store, run_id: int) -> bool:
    return any(os.path.exists(path) for path in run_paths(store.path, run_id))


def leave(path: str, size: int) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(b"x" * size)
    return path


def finished(store, age_days: float = 0.0) -> int:
    run_id = record_race(store, "done")
    store.update_run(run_id, finished_at=time.time() - age_days * 86400)
    return run_id


def test_a_purge_removes_the_purged_runs_files_and_those_of_runs_already_gone(store, sleepers):
    old = [finished(store, 40) for _ in range(3)]
    recent = finished(store)
    running = record_race(store, "running")
    for run_id in (*old, recent, running, 999):  # 999: a run deleted before its files were removed
        leave_files(store, run_id)
    kept = leave(os.path.join(kept_dir(store.path), f"run-{recent}-1.kept.json"), 100)  # events on their way
    purged = admin.purge_older_than(store, 30)
    assert purged.runs == 3 and sorted(purged.freed.runs) == sorted([*old, 999])
    assert purged.freed.files == 4 * 3 and purged.freed.bytes == 4 * (2 * TRACE_BYTES + LOG_BYTES)
    assert not any(has_files(store, i) for i in (*old, 999))
    assert has_files(store, recent) and has_files(store, running) and os.path.exists(kept)
    assert purge_line(purged).startswith("Deleted 3 runs and their events; freed 12 files (")
    assert "purge of 3 runs" in last_freed_line(disk_budget.last_freed(store.path))


def test_deleting_a_run_or_a_sweep_removes_its_traces_and_logs(store, sleepers):
    run_id = finished(store)
    store.update_run(run_id, owner="ann")
    leave_files(store, run_id)
    queue.delete(store, run_id, "ann")
    assert not has_files(store, run_id)
    spec = sweeps.SweepSpec(quick_spec(), (sweeps.Axis("batch_size", (8, 16)),))
    sweep = sweeps.enqueue_sweep(store, spec, "ann", limits=HostLimits(), caps=CPU)
    points = [run.id for run in store.sweep_runs(sweep)]
    for point in points:
        leave_files(store, point)
    sweeps.delete_sweep(store, sweep, "ann")
    assert not any(has_files(store, point) for point in points)


def test_past_the_budget_the_oldest_finished_runs_files_go_first(store, sleepers):
    oldest, older, newest = finished(store, 3), finished(store, 2), finished(store, 1)
    for run_id in (oldest, older, newest):
        each = leave_files(store, run_id)
    used = disk_budget.disk_use(store.path, None).total
    freed = disk_budget.keep_within_budget(store, used - each // 2)  # one run's files are enough
    assert freed.runs == (oldest,) and freed.bytes == each
    assert not has_files(store, oldest) and has_files(store, older) and has_files(store, newest)
    assert disk_budget.keep_within_budget(store, used).files == 0  # within it: nothing goes


def test_a_running_runs_files_and_the_store_are_never_freed_and_the_cache_goes_last(store, sleepers, caplog):
    done = finished(store, 1)
    running = record_race(store, "running")
    for run_id in (done, running):
        leave_files(store, run_id)
    warm = leave(os.path.join(disk_budget.warm_cache_root(), "cpu-torch2.x", "fx", "entry"), 50_000)
    kept = leave(os.path.join(kept_dir(store.path), f"run-{done}-1.kept.json"), 100)
    model = leave(os.path.join(data_home(), "model-files", "0123-mine.py"), 100)
    caplog.set_level(logging.WARNING, logger="compile_lab")
    freed = disk_budget.keep_within_budget(store, 1)  # far over: everything that may go, goes
    assert freed.runs == (done,) and freed.others == ()  # the warm cache waits: a job of this box runs
    assert has_files(store, running) and os.path.exists(warm)
    store.finish_run(running, "done")
    freed = disk_budget.keep_within_budget(store, 1)
    assert freed.runs == (running,) and freed.others == (disk_budget.WARM_CACHE,) and not os.path.exists(warm)
    assert os.path.exists(kept) and os.path.exists(model)
    assert store.get_run(done).summary and store.events_after(done)  # what was measured stays
    use = disk_budget.disk_use(store.path, 1)
    assert use.over and use.run_files == 0 and use.warm_cache == 0 and (use.store > 0 or store.backend == "postgresql")
    assert "over: the next job's end frees files" in disk_line(use)
    assert "freed 4 files (" in caplog.text and f"run {running}; the warm Inductor cache" in caplog.text
    assert "the disk budget, 1 B" in last_freed_line(disk_budget.last_freed(store.path))


def test_a_job_ending_keeps_the_data_folder_within_the_budget(store, sleepers, monkeypatch):
    """The worker frees files as a job ends (its own end recorded first), with the host's budget."""
    old = finished(store, 5)
    leave_files(store, old)
    job = store.create_run("race", quick_spec().to_dict(), "ann", "cpu", status="starting")
    monkeypatch.setenv("COMPILE_LAB_DISK_BUDGET", "1")
    monkeypatch.setattr(worker, "runner_of", lambda kind: lambda params, sink: ("done", {}))
    monkeypatch.setattr(worker, "started_by_agent", lambda: True)  # (starts nothing after it)
    assert worker.run_job(store.path, job) == 0
    assert store.get_run(job).status == "done" and not has_files(store, old)


def test_a_broken_host_config_leaves_the_files_and_the_job_its_end(store, sleepers, monkeypatch, caplog):
    old = finished(store, 5)
    leave_files(store, old)
    monkeypatch.setenv("COMPILE_LAB_DISK_BUDGET", "lots")
    caplog.set_level(logging.WARNING, logger="compile_lab")
    assert disk_budget.after_job(store) is None and has_files(store, old)
    assert "not checked against the disk budget: COMPILE_LAB_DISK_BUDGET must be a size" in caplog.text


def test_the_admin_page_shows_the_data_folder_and_frees_it_to_the_budget(store, sleepers, monkeypatch):
    monkeypatch.setenv("COMPILE_LAB_ADMIN_TOKEN", "correct-horse-battery-staple-42")
    monkeypatch.setenv("COMPILE_LAB_DISK_BUDGET", "1")
    record_probe(store)
    old = finished(store, 5)
    leave_files(store, old)
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state["admin_unlocked"] = True
    at.run()
    at.switch_page("app_pages/admin.py").run()
    assert not at.exception
    assert any("of a 1 B budget (over: the next job's end frees files)" in c.value for c in at.caption)
    [b for b in at.button if b.label == "Free files to the disk budget now"][0].click().run()
    assert [s.value for s in at.success] == [f"Freed 3 files (79.1 KiB): run {old}."] and not has_files(store, old)
    assert any(c.value.startswith("Last ") and "for the disk budget, 1 B: freed 3 files" in c.value for c in at.caption)
