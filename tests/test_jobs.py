"""The queue and its workers: dispatch, faults, cancellation, limits. Real processes on CPU."""

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time

import pytest
from support import AMPERE, CPU, ROOT, machine_seconds, quick_spec

from core.engine.reading import reading
from core.engine.spec import SpecError
from core.runs import fleet, outage, processes, queue
from core.runs.limits import HostLimits
from core.runs.store import Store
from core.view.host_tables import describe

NO_LIMITS = HostLimits(job_time_limit_s=None)


BOTH_BACKENDS = True  # each test using `store` runs on SQLite and on PostgreSQL (tests/conftest.py)


@pytest.fixture
def store(store):
    s = store
    yield s
    for run in s.list_runs(status=("starting", "running")):
        if run.pid:
            processes.terminate_group(run.pid, wait_s=1)


def wait_for(predicate, timeout=120.0, every=0.2, store=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if store is not None:
            queue.tick(store)
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"condition not met within {timeout} s")


def finished(store, run_id):
    return lambda: store.get_run(run_id).finished


def step_events(store, run_id):
    return [e for e in store.events_after(run_id) if e["kind"] == "step"]


# -- enqueue and dispatch (stand-in workers) ----------------------------------------------------


def test_a_spec_that_fails_validation_is_never_enqueued(store, sleepers):
    with pytest.raises(SpecError) as info:
        queue.enqueue(store, quick_spec(batch_size=0, precision="amp-fp16"), "ann", limits=NO_LIMITS, caps=CPU)
    assert {p.field for p in info.value.problems} == {"batch_size", "precision"}
    assert store.list_runs() == [] and sleepers == []


def test_a_request_over_a_host_limit_is_refused_with_the_limit(store, sleepers):
    limits = HostLimits(allowed_models=("mlp", "gpt"), max_batch_size=64, max_epochs=2, max_steps=10)
    with pytest.raises(SpecError) as info:
        queue.enqueue(
            store,
            quick_spec(model="resnet18", batch_size=128, epochs=3, steps_per_epoch=5),
            "ann",
            limits=limits,
            caps=CPU,
        )
    messages = {p.field: p.message for p in info.value.problems}
    assert "allows only: mlp, gpt" in messages["model"]
    assert "at most 64" in messages["batch_size"]
    assert "at most 2" in messages["epochs"]
    assert "at most 10 steps" in messages["steps_per_epoch"]
    assert store.list_runs() == []


def test_queue_length_and_per_owner_limits(store, sleepers):
    limits = HostLimits(max_queued_per_owner=2, max_queue_length=2, job_time_limit_s=None)
    queue.enqueue(store, quick_spec(), "ann", limits=limits, caps=CPU)  # starts at once
    queue.enqueue(store, quick_spec(), "ann", limits=limits, caps=CPU)  # waits
    with pytest.raises(queue.JobError, match="allows 2 per person"):
        queue.enqueue(store, quick_spec(), "ann", limits=limits, caps=CPU)
    queue.enqueue(store, quick_spec(), "bob", limits=limits, caps=CPU)
    with pytest.raises(queue.JobError, match="queue is full"):
        queue.enqueue(store, quick_spec(), "cat", limits=limits, caps=CPU)
    assert len(store.list_runs()) == 3


def test_one_job_per_device_in_fifo_order_with_queue_positions(store, sleepers):
    ids = [queue.enqueue(store, quick_spec(), "ann", limits=NO_LIMITS, caps=CPU) for _ in range(3)]
    assert [store.get_run(i).status for i in ids] == ["starting", "queued", "queued"]
    assert [queue.queue_position(store, i) for i in ids] == [None, 1, 2]
    assert describe(store, store.get_run(ids[2])) == "queued (position 2)"
    gpu = queue.enqueue(store, quick_spec(device="cuda"), "ann", limits=NO_LIMITS, caps=AMPERE)
    assert store.get_run(gpu).device_key == "cuda:0" and store.get_run(gpu).status == "starting"
    store.finish_run(ids[0], "done")
    sleepers[0].kill()  # a lane is free once its worker process is gone (tests/test_lanes.py)
    sleepers[0].wait()
    queue.tick(store)
    assert [store.get_run(i).status for i in ids] == ["done", "starting", "queued"]


def test_concurrent_ticks_never_start_two_jobs_on_one_device(store, sleepers):
    for _ in range(4):
        store.create_run("race", quick_spec().to_dict(), "ann", "cpu")
    threads = [threading.Thread(target=lambda: queue.tick(Store(store.path))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(sleepers) == 1
    assert [r.status for r in store.list_runs()].count("starting") == 1


def test_dispatchers_of_many_hosts_at_once_start_one_job_per_lane_and_none_twice(store):
    """A fleet's agents dispatch at once (queue.dispatch: FOR UPDATE SKIP LOCKED on PostgreSQL):
    each host's lane gets one job, and no job is started by two of them."""
    jobs = [store.create_run("race", quick_spec().to_dict(), "ann", "cpu") for _ in range(6)]
    started, lock = [], threading.Lock()

    def dispatcher(host):
        ids = queue.dispatch(Store(store.path), host, ["cpu"], CPU, lambda *_: os.getpid(), side_lanes=False)
        with lock:
            started.extend(ids)

    threads = [threading.Thread(target=dispatcher, args=(f"box-{i % 3}",)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(started) == len(set(started)) == 3
    runs = [store.get_run(i) for i in jobs]
    assert sorted(r.host for r in runs if r.status == "starting") == ["box-0", "box-1", "box-2"]
    assert [r.status for r in runs].count("queued") == 3
    for run_id in jobs:  # (no worker stands behind the pids given: nothing for the fixture to stop)
        store.finish_run(run_id, "cancelled")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread priorities are Linux's")
def test_a_viewers_low_priority_refresh_never_starts_a_worker(store, sleepers):
    """A worker inherits the priority of the thread that starts it, and a thread cannot raise its
    own back: a viewer's refresh (yield_to_measurements) must leave the queue to another tick."""
    from core.view.run_screen.shared_board import VIEWER_NICE, yield_to_measurements

    run_id = store.create_run("race", quick_spec().to_dict(), "ann", "cpu")
    seen = {}

    def viewer_refresh():
        seen["lowered"] = yield_to_measurements()
        seen["deprioritized"] = processes.thread_deprioritized()
        seen["started"] = queue.tick(Store(store.path))

    thread = threading.Thread(target=viewer_refresh)
    thread.start()
    thread.join()
    assert seen == {"lowered": True, "deprioritized": True, "started": []}
    assert store.get_run(run_id).status == "queued" and not sleepers
    assert not processes.thread_deprioritized()  # the test's own thread, as the page's next refresh
    if threading.current_thread() is threading.main_thread():  # the process's own priority is never lowered
        assert yield_to_measurements() is False and not processes.thread_deprioritized()
    assert queue.tick(store) == [run_id] and len(sleepers) == 1
    assert os.getpriority(os.PRIO_PROCESS, sleepers[0].pid) < VIEWER_NICE  # started at the process's priority


def test_cancel_a_queued_job_and_refuse_someone_elses(store, sleepers):
    first = queue.enqueue(store, quick_spec(), "ann", limits=NO_LIMITS, caps=CPU)
    second = queue.enqueue(store, quick_spec(), "ann", limits=NO_LIMITS, caps=CPU)
    with pytest.raises(queue.JobError, match="belongs to someone else"):
        queue.cancel(store, second, "bob")
    assert store.get_run(second).status == "queued"
    assert queue.cancel(store, second, "ann") == "cancelled"
    with pytest.raises(queue.JobError, match="belongs to someone else"):
        queue.delete(store, first, "bob")
    with pytest.raises(queue.JobError, match="no run 999"):
        queue.cancel(store, 999, "ann")


def test_a_dead_worker_is_found_by_the_next_tick(store, sleepers):
    run_id = queue.enqueue(store, quick_spec(), "ann", limits=NO_LIMITS, caps=CPU)
    sleepers[0].kill()
    sleepers[0].wait()
    queue.tick(store)
    run = store.get_run(run_id)
    assert run.status == "failed" and run.error == "worker stopped unexpectedly"


def test_a_worker_that_never_started_and_one_that_stopped_heartbeating_fail(store, sleepers):
    never = store.create_run("race", {}, "ann", "cpu", status="starting", started_at=time.time() - 100, host=fleet.HOST)
    hung = queue.enqueue(store, quick_spec(device="cuda"), "ann", limits=NO_LIMITS, caps=AMPERE)
    store.update_run(hung, heartbeat_at=time.time() - 500)
    queue.reconcile(store)
    assert store.get_run(never).error.startswith("worker did not start")
    assert store.get_run(hung).error.startswith("worker stopped responding")
    wait_for(lambda: sleepers[0].poll() is not None, timeout=5)  # the hung worker was killed


def test_a_wall_clock_stepped_forward_fails_no_healthy_run(store, sleepers):
    """The wall clock jumps an hour (an NTP step, a resumed VM): its heartbeat and its start, written
    on the old clock, looked an hour old, and a healthy worker failed "timed out" or "stopped
    responding". A worker of this box is judged by the boot clock too, which no step moves."""
    run_id = queue.enqueue(store, quick_spec(), "ann", limits=HostLimits(job_time_limit_s=600), caps=CPU)
    assert queue.reconcile(store, now=time.time() + 3600) == []
    assert store.get_run(run_id).status == "starting" and sleepers[0].poll() is None
    store.update_run(run_id, heartbeat_at=time.time() - 500)  # silent for long on either clock: hung
    assert queue.reconcile(store, now=time.time() + 3600) == [run_id]
    assert store.get_run(run_id).error.startswith("worker stopped responding")


# -- real workers ------------------------------------------------------------------------------


def test_a_worker_runs_a_race_and_stores_events_environment_and_summary_and_a_cancel_after_changes_nothing(store):
    run_id = queue.enqueue(
        store, quick_spec(epochs=2, steps_per_epoch=3, eval_steps=1), "ann", limits=NO_LIMITS, caps=CPU
    )
    wait_for(finished(store, run_id), store=store)
    run = store.get_run(run_id)
    assert run.status == "done", run.error
    assert run.progress == pytest.approx(1.0) and run.phase == "done"
    assert run.environment["device_type"] == "cpu"
    assert run.summary["steady_state_speedup"] > 0 and "reading" not in run.summary  # derived, never stored
    # a verdict, or on a machine busy at that moment (the suite shares it) the busy words instead of one
    assert reading(run.summary).startswith(("Compiled steps", "No clear difference", "The machine was busy"))
    assert run.details["compile"]["graphs"] >= 1
    events = store.events_after(run_id)
    assert len([e for e in events if e["kind"] == "step"]) == 2 * (6 + 2)
    assert len([e for e in events if e["kind"] == "epoch"]) == 4
    assert store.events_after(run_id, after_id=events[-3]["id"]) == events[-2:]
    wait_for(lambda: not processes.pid_alive(run.pid), timeout=15)  # the worker exits after recording
    # Cancelling a finished run changes nothing (the same race: a worker's start costs a torch import).
    assert queue.cancel(store, run_id, "ann") == "done"
    assert store.get_run(run_id).status == "done"


def test_kill_9_mid_run_fails_the_run_keeps_its_events_and_the_queue_moves_on(store):
    """Nobody ticks here (no page, no CLI waiting): the worker's watcher, which outlives it, ends its
    run and starts the next job the moment it is gone. Before, the run stayed running until a page ticked."""
    long = queue.enqueue(store, quick_spec(epochs=1, steps_per_epoch=5000), "ann", limits=NO_LIMITS, caps=CPU)
    nxt = queue.enqueue(store, quick_spec(epochs=1, steps_per_epoch=2), "ann", limits=NO_LIMITS, caps=CPU)
    wait_for(lambda: len(step_events(store, long)) >= 5)
    before = len(step_events(store, long))
    os.kill(store.get_run(long).pid, signal.SIGKILL)
    wait_for(lambda: store.get_run(nxt).status != "queued", timeout=60)  # (wait_for without store: no tick)
    run = store.get_run(long)
    assert run.status == "failed" and run.error == "worker stopped unexpectedly"
    assert len(step_events(store, long)) >= before
    wait_for(finished(store, nxt), store=store)
    assert store.get_run(nxt).status == "done"


def test_a_sigterm_from_outside_the_app_ends_the_run_cancelled_saying_so(store):
    """Nobody cancelled it here (a kill, a shutdown): the run says what stopped it, and keeps what
    it measured. A cancel from the app still reads as a plain cancel (its end is recorded first)."""
    run_id = queue.enqueue(store, quick_spec(epochs=1, steps_per_epoch=5000), "ann", limits=NO_LIMITS, caps=CPU)
    wait_for(lambda: len(step_events(store, run_id)) >= 3)
    os.kill(store.get_run(run_id).pid, signal.SIGTERM)
    wait_for(finished(store, run_id), timeout=30)
    run = store.get_run(run_id)
    assert (run.status, run.error) == ("cancelled", "stopped by SIGTERM from outside the app")
    assert describe(store, run) == "cancelled: stopped by SIGTERM from outside the app"
    assert run.summary is not None and len(step_events(store, run_id)) >= 3


def test_cancel_a_running_job_stops_its_process_group_within_3_s(store):
    run_id = queue.enqueue(store, quick_spec(epochs=1, steps_per_epoch=5000), "ann", limits=NO_LIMITS, caps=CPU)
    wait_for(lambda: len(step_events(store, run_id)) >= 3)
    pid = store.get_run(run_id).pid
    with pytest.raises(queue.JobError):
        queue.cancel(store, run_id, "bob")
    started = time.monotonic()
    assert queue.cancel(store, run_id, "ann") == "cancelled"
    assert time.monotonic() - started < machine_seconds(3)  # README: "the whole worker group stops within 3 s"
    assert not processes.pid_alive(pid)  # and it has stopped when cancel returns
    assert len(step_events(store, run_id)) >= 3


def test_a_job_past_its_time_limit_is_stopped(store):
    limits = HostLimits(job_time_limit_s=6)
    run_id = queue.enqueue(store, quick_spec(epochs=1, steps_per_epoch=100000), "ann", limits=limits, caps=CPU)
    wait_for(lambda: store.get_run(run_id).pid, timeout=machine_seconds(10))
    pid = store.get_run(run_id).pid
    wait_for(finished(store, run_id), timeout=machine_seconds(30))
    run = store.get_run(run_id)
    assert run.status == "failed" and run.error == "timed out after 6 s"
    wait_for(lambda: not processes.pid_alive(pid), timeout=machine_seconds(5))
    assert 6 <= run.finished_at - run.started_at < 6 + machine_seconds(6)  # not before its limit, soon after


def test_a_corrupt_spec_row_fails_that_job_not_the_dispatcher(store):
    bad = store.create_run("race", {}, "ann", "cpu")
    store._write("UPDATE runs SET params = '{not json' WHERE id = ?", (bad,))
    wrong = store.create_run("race", {"model": "mlp", "batch_size": "many"}, "ann", "cpu")
    good = queue.enqueue(store, quick_spec(epochs=1, steps_per_epoch=2), "ann", limits=NO_LIMITS, caps=CPU)
    wait_for(finished(store, good), store=store)
    assert store.get_run(bad).status == "failed" and "not valid JSON" in store.get_run(bad).error
    assert store.get_run(wrong).status == "failed" and "batch_size" in store.get_run(wrong).error
    assert store.get_run(good).status == "done"


ENQUEUE_ONE = """
import sys
from core.runs import queue
from core.engine.spec import DeviceCaps, RunSpec
from core.runs.limits import HostLimits
from core.runs.store import Store
spec = RunSpec(model="mlp", batch_size=8, epochs=1, steps_per_epoch=2, backend="eager", device="cpu", replicates=0)
print(queue.enqueue(Store(sys.argv[1]), spec, "p" + sys.argv[2], limits=HostLimits(job_time_limit_s=None), caps=DeviceCaps()))
"""


def test_eight_concurrent_enqueues_from_processes_all_run_one_at_a_time(store, warm_starts):
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", ENQUEUE_ONE, store.path, str(i)], cwd=ROOT, stdout=subprocess.PIPE, text=True
        )
        for i in range(8)
    ]
    ids = sorted(int(p.communicate(timeout=120)[0]) for p in procs)
    assert len(set(ids)) == 8
    wait_for(lambda: all(store.get_run(i).finished for i in ids), timeout=300, store=store)
    runs = [store.get_run(i) for i in ids]
    assert [r.status for r in runs] == ["done"] * 8, [r.error for r in runs]
    spans = sorted((r.started_at, r.finished_at) for r in runs)
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert start >= end, "two jobs overlapped on the CPU"


def test_the_device_probe_records_what_the_machine_has(store):
    caps = queue.ensure_probe(store, wait_s=60)
    assert caps is not None and caps.cuda is False
    probe = store.list_runs(kind="probe")[0]
    assert probe.status == "done" and probe.summary["environment"]["cpu_count"] == os.cpu_count()
    assert fleet.known_caps(store) == caps


def test_a_new_process_finds_a_running_job_and_follows_it(store):
    run_id = queue.enqueue(store, quick_spec(epochs=1, steps_per_epoch=60), "ann", limits=NO_LIMITS, caps=CPU)
    wait_for(lambda: store.get_run(run_id).status == "running")
    restarted = Store(store.path)  # what an app restart sees
    assert [r.id for r in restarted.list_runs(status=("starting", "running"))] == [run_id]
    seen, last = [], 0
    while not restarted.get_run(run_id).finished:
        new = restarted.events_after(run_id, last)
        seen += new
        last = new[-1]["id"] if new else last
        queue.tick(restarted)
        time.sleep(0.2)
    seen += restarted.events_after(run_id, last)
    assert len([e for e in seen if e["kind"] == "step"]) == 120


def test_a_job_for_the_automatic_device_waits_until_the_probe_has_answered(store, sleepers):
    with pytest.raises(queue.JobError, match="still finding out which device"):
        queue.enqueue(store, quick_spec(device="auto"), "ann", limits=NO_LIMITS)
    assert store.list_runs() == []
    run_id = queue.enqueue(store, quick_spec(device="cpu"), "ann", limits=NO_LIMITS)  # an explicit device can go
    assert store.get_run(run_id).device_key == "cpu"


def test_a_failed_probe_is_retried_after_a_while_not_on_every_refresh(store, sleepers):
    probe = store.create_run("probe", {}, "system", "probe", status="running", host=fleet.HOST)
    store.finish_run(probe, "failed", error="boom")
    queue.ensure_probe(store)
    queue.ensure_probe(store)
    assert len(store.list_runs(kind="probe")) == 1
    store.update_run(probe, finished_at=time.time() - queue.PROBE_RETRY_S - 1)
    queue.ensure_probe(store)
    assert len(store.list_runs(kind="probe")) == 2


def test_a_timed_out_run_stays_failed_even_though_its_worker_stops_cleanly_on_sigterm(store):
    run_id = queue.enqueue(store, quick_spec(epochs=1, steps_per_epoch=100000), "ann", limits=NO_LIMITS, caps=CPU)
    wait_for(lambda: len(step_events(store, run_id)) >= 3)
    store.update_run(run_id, time_limit_s=1)  # the worker's own watchdog was armed without a limit
    assert queue.reconcile(store) == [run_id]
    run = store.get_run(run_id)
    wait_for(lambda: not processes.pid_alive(run.pid), timeout=10)
    time.sleep(0.5)
    run = store.get_run(run_id)
    assert run.status == "failed" and run.error == "timed out after 1 s"
    assert run.summary is not None and len(step_events(store, run_id)) >= 3  # what it measured is kept


def test_a_worker_caught_in_its_exec_is_not_called_dead(monkeypatch):
    """While a just-launched worker is in execve, /proc shows an empty command line: another
    session's tick took that for a dead worker and failed the race 10 ms after it started (seen
    in the e2e). Empty counts as alive; someone else's command line still does not."""
    import io

    real_open = open
    command = {"text": b""}

    def fake_open(path, *args, **kwargs):
        if str(path).endswith("/cmdline") and str(path) != "/proc/self/cmdline":
            return io.BytesIO(command["text"])
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(processes, "open", fake_open, raising=False)
    assert processes.pid_alive(os.getpid())
    command["text"] = b"bash\x00-c\x00sleep 5\x00"
    assert not processes.pid_alive(os.getpid())


# -- a store another program holds locked (a backup, a sqlite3 shell) ----------------------------


def test_a_run_is_judged_again_on_its_row_once_that_row_is_held(store, sleepers, monkeypatch):
    """A store locked past the heartbeat timeout: reconcile read a stale heartbeat, and while it
    waited for the lock the worker, waiting for the same lock, wrote first. Judged on the row as it
    is once held, the healthy worker runs on; a worker whose run ended meanwhile is not signalled."""
    healthy = queue.enqueue(store, quick_spec(), "ann", limits=NO_LIMITS, caps=AMPERE)
    ending = queue.enqueue(store, quick_spec(device="cuda"), "ann", limits=NO_LIMITS, caps=AMPERE)
    for run_id in (healthy, ending):
        store.update_run(run_id, heartbeat_at=time.time() - 500)
    really_held = getattr(store, "run_held", None)

    def worker_writes_first(run_id):
        if run_id == healthy:
            store.update_run(healthy, heartbeat_at=time.time())  # its heartbeat, once the lock was free
        else:
            store.finish_run(ending, "done")  # its own end
        return really_held(run_id)

    monkeypatch.setattr(store, "run_held", worker_writes_first, raising=False)
    assert queue.reconcile(store) == []
    assert store.get_run(healthy).status == "starting" and store.get_run(ending).status == "done"
    assert [proc.poll() for proc in sleepers] == [None, None]  # neither worker was signalled


@pytest.mark.sqlite_only
def test_a_worker_waiting_for_a_locked_store_is_not_taken_for_hung_and_loses_nothing(store):
    run_id = queue.enqueue(store, quick_spec(epochs=1, steps_per_epoch=100000), "ann", limits=NO_LIMITS, caps=CPU)
    wait_for(lambda: len(step_events(store, run_id)) >= 3)
    alive_file = outage.alive_path(store.path, run_id)
    shell = sqlite3.connect(store.path, timeout=30, isolation_level=None)  # a sqlite3 shell holding the lock
    # Its heartbeat as old as a long hold makes it, then the write lock held (one call: no write between).
    shell.executescript(
        f"BEGIN IMMEDIATE; UPDATE runs SET heartbeat_at = {time.time() - 500} WHERE id = {run_id}; "
        "COMMIT; BEGIN IMMEDIATE;"
    )
    try:
        assert store.get_run(run_id).heartbeat_at < time.time() - 400
        wait_for(lambda: os.path.exists(alive_file), timeout=30)  # the worker says it waits, alive
        assert queue.reconcile(store) == []
    finally:
        shell.execute("ROLLBACK")
        shell.close()
    wait_for(lambda: store.get_run(run_id).heartbeat_at > time.time() - 30, timeout=30)
    wait_for(lambda: not os.path.exists(alive_file), timeout=10)
    seen = len(step_events(store, run_id))
    wait_for(lambda: len(step_events(store, run_id)) > seen)
    assert queue.cancel(store, run_id, "ann") == "cancelled"
    wait_for(lambda: not processes.pid_alive(store.get_run(run_id).pid), timeout=30)
    by_variant = {}
    for event in step_events(store, run_id):
        by_variant.setdefault(event["variant"], []).append(event["step"])
    for steps in by_variant.values():  # every step it measured, the ones timed under the lock too, once
        assert steps == list(range(steps[0], steps[0] + len(steps)))
