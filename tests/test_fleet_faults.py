"""Faults across boxes (issue 27): the database gone for a while mid-run loses nothing; gone past
the worker's limit, the run fails with every step it kept (left in the box's data folder while the
server stays away, delivered by the next reconcile); heartbeats count from a restarted server's
start; an agent stopped on purpose drains, or cancels cleanly on a second stop; a server store's URL
is on no worker's command line. The end-to-end ones run on a real PostgreSQL of their own (the
`postgresql_server` rule: under CI a missing server fails, never skips)."""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
from support import CPU, ROOT, command_line, quick_spec, use_stand_in_launcher
from test_fleet import NO_LIMITS, start_agent, wait_for

from core.runs import fleet, outage, processes, queue
from core.runs.fleet import HOST
from core.runs.store import Store

CPU_LANE = {"torch": "2.14.1", "lanes": [{"lane": "cpu", "device_name": "CPU"}]}


def steps_of(store, run_id):
    steps = [e for e in store.events_after(run_id) if e["kind"] == "step"]
    return [(e["variant"], e["phase"], e["epoch"], e["step"]) for e in steps]


def worker_log(run_id) -> str:
    path = os.path.join(os.environ["COMPILE_LAB_DATA"], "logs", f"run-{run_id}.log")
    return open(path).read() if os.path.exists(path) else ""


def test_a_database_gone_for_a_while_mid_run_loses_no_event_and_its_url_is_on_no_command_line(own_server):
    import pg_server

    url, folder = own_server
    store = Store(url)
    spec = quick_spec(epochs=2, steps_per_epoch=500)
    run_id = queue.enqueue(store, spec, "ann", limits=NO_LIMITS, caps=CPU)
    wait_for("the race to measure", lambda: store.events_after(run_id, limit=1), 300)
    pid = store.get_run(run_id).pid
    worker = command_line(pid)
    assert "core.runs.worker" in worker and f"--run-id {run_id}" in worker
    assert "postgresql" not in worker and url not in worker  # the URL came in its environment

    pg_server.pause(folder)
    time.sleep(4)  # longer than a worker waits for a connection: it finds the server gone
    assert processes.pid_alive(pid)  # its events kept
    pg_server.resume(folder)
    run = wait_for("the race to end", lambda: (r := Store(url).get_run(run_id)).finished and r, 600)
    assert run.status == "done", run.error
    keys = [k for k in steps_of(Store(url), run_id) if k[1] == "train"]
    assert len(keys) == len(set(keys)) == 2 * spec.epochs * spec.steps_per_epoch
    assert "the store is back after" in worker_log(run_id)  # the outage was seen, and waited out


def test_a_database_gone_past_the_limit_fails_the_run_with_every_step_it_kept(own_server, monkeypatch):
    """Past COMPILE_LAB_STORE_LOST_LIMIT_S the worker stops measuring; the server still away, it
    leaves what it kept in the data folder and exits; the next reconcile delivers it, in full."""
    import pg_server

    monkeypatch.setenv(outage.LIMIT_VARIABLE, "2")
    url, folder = own_server
    store = Store(url)
    run_id = queue.enqueue(store, quick_spec(epochs=3, steps_per_epoch=4000), "ann", limits=NO_LIMITS, caps=CPU)
    wait_for("the race to measure", lambda: store.events_after(run_id, limit=1), 300)
    pid = store.get_run(run_id).pid
    pg_server.pause(folder)
    kept_dir = outage.kept_dir(url)

    def kept_files():
        return [n for n in os.listdir(kept_dir) if n.endswith(".json")] if os.path.isdir(kept_dir) else []

    [name] = wait_for("the worker to leave what it kept", kept_files, 120)
    wait_for("the worker to exit", lambda: not processes.pid_alive(pid), 60)
    assert oct(os.stat(os.path.join(kept_dir, name)).st_mode & 0o777) == "0o600"
    with open(os.path.join(kept_dir, name)) as fh:
        kept = json.load(fh)
    error = kept["finish"]["fields"]["error"]
    assert kept["finish"]["status"] == "failed" and "postgresql://" in kept["store"]
    assert re.fullmatch(r"lost the database for \d+ s \(limit 2 s\): kept \d+ steps", error), error
    measured = int(re.search(r"kept (\d+) steps", error).group(1))

    pg_server.resume(folder)
    store = Store(url)
    assert queue.reconcile(store) == []  # delivered first: not "worker stopped unexpectedly"
    run = store.get_run(run_id)
    assert run.status == "failed" and run.error == error
    keys = steps_of(store, run_id)
    assert len(keys) == len(set(keys)) == measured > 0  # every step it measured, once
    assert kept_files() == [] and not os.listdir(kept_dir)


def test_heartbeats_count_from_a_restarted_servers_start(store, monkeypatch):
    """After a restart nobody could heartbeat: neither a box's agent nor a run it began before the
    restart is taken for stopped until the timeout has passed since the server came back."""
    fleet.register(store, "box-a", 1, "lab", "2.14.1", CPU_LANE["lanes"])
    run_id = store.create_run("race", quick_spec().to_dict(), "ann", "cpu", status="running", host="box-a", pid=1)
    long_ago = time.time() - 3600
    store._write("UPDATE hosts SET heartbeat_at = ?, started_at = ?", (long_ago, long_ago))
    store.update_run(run_id, heartbeat_at=long_ago, started_at=long_ago)
    monkeypatch.setattr(store, "up_since", lambda: time.time() - 1)  # the server has just restarted
    assert queue.reconcile(store) == [] and [h.name for h in fleet.live_hosts(store)] == ["box-a"]
    monkeypatch.setattr(store, "up_since", lambda: time.time() - 3000)  # up for long since
    assert queue.reconcile(store) == [run_id]
    assert store.get_run(run_id).error == "agent box-a stopped"


def test_a_worker_that_cannot_reach_its_store_tells_its_box_it_is_alive(store, sleepers):
    run_id = store.create_run("race", quick_spec().to_dict(), "ann", "cpu", status="running", host=HOST)
    pid = processes.launch_worker(store.path, run_id, "cpu")
    long_ago = time.time() - 3600
    store.update_run(run_id, pid=pid, heartbeat_at=long_ago, started_at=time.time())  # (as its process began)
    outage.touch_alive(store.path, run_id)
    assert queue.reconcile(store) == []  # alive and trying: not hung
    os.utime(outage.alive_path(store.path, run_id), (long_ago, long_ago))
    assert queue.reconcile(store) == [run_id]
    assert store.get_run(run_id).error.startswith("worker stopped responding")


def test_kept_events_are_delivered_once_to_their_own_store_and_whole(store):
    run_id = store.create_run("race", quick_spec().to_dict(), "ann", "cpu", status="running", host=HOST)
    rows = [dict(kind="step", variant="eager", phase="train", epoch=1, step=i, time_s=0.01) for i in (1, 2, 3)]
    end = ("failed", {"error": "lost the database for 9 s (limit 5 s): kept 3 steps", "phase": "failed"})
    path = outage.write_kept(store.path, run_id, rows, {"progress": 0.5}, end)
    other = Store(os.path.join(os.path.dirname(store.path), "other.sqlite3"))  # its files in the same folder
    assert outage.deliver_kept(other) == [] and os.path.exists(path)  # another store's file: left alone
    damaged = os.path.join(outage.kept_dir(store.path), "run-999-1.json")
    with open(damaged, "w") as fh:
        fh.write("{not json")
    assert outage.deliver_kept(store) == [run_id] and outage.deliver_kept(store) == []
    run = store.get_run(run_id)
    assert (run.status, run.error, run.progress) == ("failed", end[1]["error"], 0.5)
    assert [e["step"] for e in store.events_after(run_id)] == [1, 2, 3]
    assert sorted(os.listdir(outage.kept_dir(store.path))) == ["run-999-1.json.unreadable"]  # kept for a person


def test_a_claim_on_kept_events_by_a_process_that_died_is_taken_back_and_delivered(store):
    """A process that claimed a file of kept events (renamed it .delivering-<pid>) and died before
    delivering it: the next reconcile takes the claim back, and the one after delivers it. A live
    process's claim is left to it."""
    run_id = store.create_run("race", quick_spec().to_dict(), "ann", "cpu", status="running", host=HOST)
    rows = [dict(kind="step", variant="eager", phase="train", epoch=1, step=i, time_s=0.01) for i in (1, 2)]
    path = outage.write_kept(
        store.path, run_id, rows, {}, ("failed", {"error": "lost the database", "phase": "failed"})
    )
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a process that has exited: its pid names no process now
    os.rename(path, f"{path}{outage.DELIVERING}{gone.pid}")
    assert outage.deliver_kept(store) == []  # taken back: delivered at the next turn
    assert outage.deliver_kept(store) == [run_id] and os.listdir(outage.kept_dir(store.path)) == []
    assert [e["step"] for e in store.events_after(run_id)] == [1, 2] and store.get_run(run_id).status == "failed"
    other = store.create_run("race", quick_spec().to_dict(), "ann", "cpu", status="running", host=HOST)
    path = outage.write_kept(store.path, other, rows, {}, ("failed", {"error": "lost", "phase": "failed"}))
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        os.rename(path, f"{path}{outage.DELIVERING}{alive.pid}")
        assert outage.deliver_kept(store) == [] and outage.deliver_kept(store) == []  # its claim holds
        assert store.events_after(other) == []
    finally:
        alive.kill()
        alive.wait()


@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_server_stores_url_reaches_workers_and_tickers_in_their_environment_only(store, monkeypatch):
    started = []

    class Recorded:
        def __init__(self, args, **options):
            started.append((args, options.get("env")))
            self.pid = 999_999_999

    monkeypatch.setattr(processes.subprocess, "Popen", Recorded)
    monkeypatch.delenv("COMPILE_LAB_STORE")  # what the children get is what the launch gives them
    monkeypatch.delenv("COMPILE_LAB_LAUNCHER", raising=False)
    run_id = store.create_run("race", quick_spec().to_dict(), "ann", "cpu", status="starting")
    processes.launch_worker(store.path, run_id, "cpu")
    processes.launch_ticker(store.path, after_pid=1)
    assert len(started) == 2
    for args, env in started:
        assert not any("postgresql" in arg for arg in args), args
        assert env["COMPILE_LAB_STORE"] == store.path
    assert started[0][0][-4:] == ["-m", "core.runs.worker", "--run-id", str(run_id)]
    started.clear()
    processes.launch_ticker("/data/store.sqlite3")  # a file still says itself: no secret in it
    assert "/data/store.sqlite3" in started[0][0][-1]


def test_a_draining_agent_claims_nothing_and_cancels_its_runs_when_its_stop_timeout_passes(
    store, sleepers, monkeypatch
):
    from core.runs.agent import AGENT_PID_VARIABLE, AGENT_VARIABLE, Agent
    from core.view.host_tables import describe

    for name in (AGENT_VARIABLE, AGENT_PID_VARIABLE):  # what the agent sets for its workers, undone after
        monkeypatch.setenv(name, "")

    said = []
    agent = Agent(store, "box-a", CPU_LANE, say=said.append, stop_timeout_s=0)
    agent.join()
    first = queue.enqueue(store, quick_spec(), "ann", limits=NO_LIMITS, caps=CPU)
    assert agent.step() == [first]
    second = queue.enqueue(store, quick_spec(), "ann", limits=NO_LIMITS, caps=CPU, host="box-a")
    agent.request_stop()
    assert agent.drain() is False  # its stop timeout (0 s) has passed: the run is cancelled
    run = store.get_run(first)
    assert run.status == "cancelled" and run.error == "agent box-a stopped"
    assert describe(store, run) == "cancelled: agent box-a stopped"
    assert store.get_run(second).status == "queued"
    wait_for("the agent to leave", lambda: agent.turn() is None, 30)  # nothing of it runs: it leaves
    assert not fleet.live_hosts(store)
    assert said == [
        f"agent box-a: stopping: claiming no new jobs; waiting for run {first} on cpu to finish "
        "(stop again to cancel now; cancelled in 0 s)",
        f"agent box-a: run {first} cancelled (0 s passed)",
        f"agent box-a: run {first} ended cancelled",
        "agent box-a: left the fleet",
    ]
    store.finish_run(second, "cancelled")


def test_a_draining_agent_claims_nothing_even_where_a_lane_is_free(store, sleepers, monkeypatch):
    """Its loop's turn while it waits for a run on one lane claims nothing for another, idle one (the
    turn the agent's run loop takes; issue 35: a loop that still claimed went unnoticed)."""
    from support import AMPERE

    from core.runs.agent import AGENT_PID_VARIABLE, AGENT_VARIABLE, Agent

    for name in (AGENT_VARIABLE, AGENT_PID_VARIABLE):
        monkeypatch.setenv(name, "")
    gpu = {"lane": "cuda:0", "device_name": "A100", "memory_bytes": 80 * 2**30, "caps": AMPERE.to_dict()}
    agent = Agent(store, "box-a", {"torch": "2.14.1", "lanes": [*CPU_LANE["lanes"], gpu]}, say=lambda _: None)
    agent.caps = AMPERE
    agent.join()
    on_gpu = queue.enqueue(
        store, quick_spec(device="cuda"), "ann", limits=NO_LIMITS, caps=AMPERE, lane="cuda:0", host="box-a"
    )
    assert agent.turn() == [on_gpu]
    agent.request_stop()
    on_cpu = queue.enqueue(store, quick_spec(), "ann", limits=NO_LIMITS, caps=CPU, host="box-a")
    for _ in range(3):
        assert agent.turn() == []  # draining: its CPU lane is idle, and stays so
    assert store.get_run(on_cpu).status == "queued" and fleet.live_hosts(store)
    store.finish_run(on_gpu, "done")
    for proc in sleepers:
        proc.kill()
        proc.wait()
    wait_for("the agent to leave", lambda: agent.turn() is None, 30)
    assert store.get_run(on_cpu).status == "queued" and not fleet.live_hosts(store)
    store.finish_run(on_cpu, "cancelled")


class Output:
    """An agent's terminal, read as it is written."""

    def __init__(self, proc):
        self.lines = []
        self._thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._thread.start()

    def _read(self, proc):
        for line in proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def says(self, text):
        return any(text in line for line in self.lines)


def measuring(store, run_id):
    run = store.get_run(run_id)
    return run.status == "running" and store.events_after(run_id, limit=1)


@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_stopped_agent_lets_its_run_finish_or_on_a_second_stop_cancels_it_and_exits_0(store, monkeypatch):
    # First a stand-in worker (tests/stand_in.py, named in COMPILE_LAB_LAUNCHER): its run ends when
    # the test says, so the stop lands mid-run whatever the machine's speed.
    use_stand_in_launcher(monkeypatch)
    agent = start_agent("box-a")
    monkeypatch.delenv("COMPILE_LAB_LAUNCHER")
    try:
        out = Output(agent)
        wait_for("the agent to join", lambda: fleet.live_hosts(store), 120)
        run_id = queue.enqueue(store, quick_spec(), "ann", limits=NO_LIMITS, caps=CPU)
        pid = wait_for("the agent to start its worker", lambda: store.get_run(run_id).pid, 60)
        agent.send_signal(signal.SIGTERM)
        wait_for("the agent to say it stops", lambda: out.says("stopping: claiming no new jobs"), 30)
        assert out.says(f"waiting for run {run_id} on cpu to finish")
        time.sleep(2)  # four of its turns: it heartbeats (what it claims while draining: the turn test above)
        assert fleet.live_hosts(store) and agent.poll() is None
        store.finish_run(run_id, "done")  # the worker records its end and exits
        os.killpg(pid, signal.SIGKILL)
        assert agent.wait(timeout=60) == 0
        assert out.says(f"run {run_id} ended done") and out.says("left the fleet")
        assert not fleet.live_hosts(store)

        agent = start_agent("box-a")  # the name is free again; a real worker now
        out = Output(agent)
        wait_for("the agent to join again", lambda: fleet.live_hosts(store), 120)  # (else this box runs it)
        long = queue.enqueue(store, quick_spec(epochs=3, steps_per_epoch=4000), "ann", limits=NO_LIMITS, caps=CPU)
        wait_for("the race to measure", lambda: measuring(store, long), 300)
        agent.send_signal(signal.SIGTERM)
        wait_for("the agent to say it stops", lambda: out.says("stopping: claiming no new jobs"), 30)
        assert store.get_run(long).status == "running"  # let be, for now
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(timeout=120) == 0
        run = store.get_run(long)
        assert run.status == "cancelled" and run.error == "agent box-a stopped"
        assert store.events_after(long)  # what it measured is kept
        assert out.says(f"run {long} cancelled (a second stop)") and out.says("left the fleet")
        assert not fleet.live_hosts(store)
    finally:
        if agent.poll() is None:
            os.killpg(agent.pid, signal.SIGKILL)
            agent.wait()
        for run in store.list_runs(status=("queued", "starting", "running")):
            store.finish_run(run.id, "cancelled")


def test_the_agent_command_refuses_a_stop_timeout_that_is_no_number_of_seconds():
    done = subprocess.run(
        [sys.executable, "-m", "core", "agent", "--stop-timeout", "nan"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 2 and "--stop-timeout nan: a number of seconds" in done.stderr
