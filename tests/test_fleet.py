"""A fleet on PostgreSQL: two agents (`box-a`, `box-b`) on this machine, each with one CPU lane,
claim races from one store; a race on each finishes; `kill -9` of one agent mid-run fails only its
run ("agent <name> stopped", after the heartbeat timeout) and the other box goes on; a second live
agent of a name is refused. Also what dispatch promises on any backend: one job per lane of each
host, hosts apart."""

import dataclasses
import os
import signal
import subprocess
import sys
import time

import pytest
from support import CPU, QUICK_CLI, ROOT, machine_seconds, quick_spec

from core.runs import fleet, processes, queue
from core.runs.limits import HostLimits

NO_LIMITS = HostLimits(job_time_limit_s=None)
AGENT_TIMEOUT_S = 3


def start_agent(name):
    return subprocess.Popen(
        [sys.executable, "-m", "core", "agent", "--name", name],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def wait_for(what, check, seconds):
    deadline = time.monotonic() + machine_seconds(seconds)
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.stdout.read() if proc.stdout else ""


@pytest.mark.parametrize("backend", ["postgresql"])
def test_two_agents_run_a_race_each_and_a_killed_one_fails_only_its_run(store, monkeypatch):
    monkeypatch.setenv("COMPILE_LAB_AGENT_TIMEOUT_S", str(AGENT_TIMEOUT_S))
    agents = {name: start_agent(name) for name in ("box-a", "box-b")}
    try:
        wait_for("both agents to join", lambda: len(fleet.live_hosts(store)) == 2, 120)
        assert {(h.name, tuple(lane.lane for lane in h.lanes)) for h in fleet.live_hosts(store)} == {
            ("box-a", ("cpu",)),
            ("box-b", ("cpu",)),
        }
        twin = subprocess.run(
            [sys.executable, "-m", "core", "agent", "--name", "box-b"], cwd=ROOT, capture_output=True, text=True
        )
        assert twin.returncode == 2 and "an agent named 'box-b' is already running" in twin.stderr

        # A tiny race on each box: both finish, one per host (a lane runs one job at a time).
        tiny = [queue.enqueue(store, quick_spec(), "ann", limits=NO_LIMITS) for _ in range(2)]
        wait_for("the tiny races", lambda: all(store.get_run(i).finished for i in tiny), 300)
        runs = [store.get_run(i) for i in tiny]
        assert [r.status for r in runs] == ["done", "done"], [r.error for r in runs]
        assert {r.host for r in runs} == {"box-a", "box-b"}
        assert all(store.events_after(r.id) for r in runs)

        # Two long races, one per box; kill -9 the agent of the first.
        long = [
            queue.enqueue(store, quick_spec(epochs=3, steps_per_epoch=4000), "bob", limits=NO_LIMITS) for _ in range(2)
        ]

        def both_measuring():
            runs = [store.get_run(i) for i in long]
            return all(r.status == "running" and store.events_after(r.id, limit=1) for r in runs) and runs

        victim, survivor = both_measuring_runs = wait_for("both long races to measure", both_measuring, 300)
        assert {r.host for r in both_measuring_runs} == {"box-a", "box-b"}
        os.killpg(agents[victim.host].pid, signal.SIGKILL)
        agents[victim.host].wait()
        failed = wait_for(
            "the killed agent's run to fail",
            lambda: (r := store.get_run(victim.id)).finished and r,
            60 + AGENT_TIMEOUT_S,
        )
        assert failed.status == "failed" and failed.error == f"agent {victim.host} stopped"
        assert store.events_after(victim.id)  # what it measured before is kept
        assert store.get_run(survivor.id).status == "running"  # the other box goes on
        queue.cancel(store, survivor.id, "bob")  # from this process, not the survivor's box: its agent stops the worker
        assert store.get_run(survivor.id).status == "cancelled"
        pid = store.get_run(survivor.id).pid
        wait_for("the cancelled worker to stop", lambda: not processes.pid_alive(pid), 30)
        assert agents[survivor.host].poll() is None
    finally:
        for proc in agents.values():
            stop(proc)
    assert not fleet.live_hosts(store)


def test_a_postgresql_restart_mid_run_loses_no_event(monkeypatch, postgresql_server):
    """The server restarts while a worker records a race: the worker keeps its events and writes
    them once the server is back (the pool replaces the cut connections); every step is stored once."""
    import pg_server

    from core.runs.store import Store

    del postgresql_server  # (only for its rule: under CI a missing PostgreSQL fails, never skips)
    url, folder = pg_server.start()  # a server of its own, to restart
    try:
        monkeypatch.setenv("COMPILE_LAB_STORE", url)
        store = Store(url)
        spec = quick_spec(epochs=2, steps_per_epoch=500)
        run_id = queue.enqueue(store, spec, "ann", limits=NO_LIMITS, caps=CPU)
        wait_for("the race to measure", lambda: store.events_after(run_id, limit=1), 300)
        pg_server.restart(folder)
        run = wait_for("the race to end", lambda: (r := Store(url).get_run(run_id)).finished and r, 600)
        assert run.status == "done", run.error
        steps = [e for e in Store(url).events_after(run_id) if e["kind"] == "step" and e["phase"] == "train"]
        keys = [(e["variant"], e["epoch"], e["step"]) for e in steps]
        assert len(keys) == len(set(keys)) == 2 * spec.epochs * spec.steps_per_epoch
    finally:
        from core.runs.store.postgresql import close_pool

        close_pool(url)
        pg_server.stop(folder)


def test_status_lists_the_fleets_hosts_and_lanes_with_their_names_made_inert(store, capsys):
    from core.cli.main import main
    from core.view.host_tables import device_type_lines, fleet_rows, fleet_summary

    gpu = {"lane": "cuda:0", "device_name": "NVIDIA H100 80GB HBM3\x1b[2J", "memory_bytes": 80 * 2**30, "caps": {}}
    fleet.register(store, "h100-box", 1, "lab-7", "2.14.1", [{"lane": "cpu", "device_name": "CPU"}, gpu])
    fleet.register(store, "old-box", 2, "lab-8", "2.6.0", [{"lane": "cpu", "device_name": "CPU"}])
    store._write("UPDATE hosts SET heartbeat_at = heartbeat_at - 3600 WHERE name = 'old-box'")
    run_id = store.create_run("race", quick_spec().to_dict(), "ann", "cuda:0", status="running", host="h100-box")
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert "h100-box  live" in out and "old-box  stopped" in out
    assert f"cuda:0   NVIDIA H100 80GB HBM3[2J, 80 GiB: run {run_id}" in out and "\x1b" not in out
    hosts, runs = fleet.hosts(store), store.list_runs(status=("running",))
    assert fleet_summary(hosts, runs, time.time()) == "Fleet: 1 of 2 hosts live, 2 lanes (1 busy)"
    assert device_type_lines(hosts, runs, time.time()) == [
        "NVIDIA H100 80GB HBM3[2J: 0 free, 1 busy",
        "CPU: 1 free, 0 busy",
    ]
    rows = {(r["host"], r["lane"]): r for r in fleet_rows(hosts, runs, time.time())}
    assert rows[("h100-box", "cuda:0")]["memory (GiB)"] == 80 and rows[("old-box", "cpu")]["state"] == "stopped"
    with pytest.raises(fleet.AgentRefused, match="an agent named 'h100-box' is already running"):
        fleet.register(store, "h100-box", 3, "lab-9", "2.14.1", [])
    fleet.register(store, "old-box", 4, "lab-8", "2.14.1", [])  # a stopped agent's name is free again
    store.finish_run(run_id, "cancelled")


@pytest.mark.parametrize("backend", ["postgresql"])
def test_the_app_on_a_fleets_store_shows_a_run_and_the_fleet(store):
    """The app opens a PostgreSQL store as it opens a file: a finished race on the Race page, the
    fleet's line in the sidebar (its boxes registered by their agents)."""
    from streamlit.testing.v1 import AppTest
    from test_pages import APP, record_probe, record_race

    record_probe(store)
    run_id = record_race(store, "done")
    fleet.register(store, "box-a", 1, "lab", "2.14.1", [{"lane": "cpu", "device_name": "CPU"}])
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["run"] = str(run_id)
    at.run()
    assert not at.exception, at.exception
    assert "Fleet: 1 of 1 hosts live, 1 lanes (0 busy)" in [t.value for t in at.sidebar.text]
    assert at.metric, "the finished race's cards"


def test_race_on_every_gpu_type_queues_one_race_per_device_type_pinned_to_its_box(store, capsys):
    from support import AMPERE

    from core.cli.main import main
    from core.runs.fleet_races import enqueue_on_every_gpu_type

    def gpu(index, name):
        return {"lane": f"cuda:{index}", "device_name": name, "memory_bytes": 80 * 2**30, "caps": AMPERE.to_dict()}

    with pytest.raises(queue.JobError, match="no live GPU lane in this fleet"):
        enqueue_on_every_gpu_type(store, quick_spec(), "ann", NO_LIMITS)
    fleet.register(store, "a100-box", 1, "lab-1", "2.14.1", [{"lane": "cpu", "device_name": "CPU"}, gpu(0, "A100")])
    fleet.register(store, "h100-box", 2, "lab-2", "2.14.1", [gpu(0, "H100"), gpu(1, "H100")])
    runs = enqueue_on_every_gpu_type(store, quick_spec(), "ann", NO_LIMITS)
    assert list(runs) == ["A100", "H100"]
    assert [(store.get_run(i).host, store.get_run(i).device_key) for i in runs.values()] == [
        ("a100-box", "cuda:0"),
        ("h100-box", "cuda:0"),
    ]
    launched = []

    def launch(path, run_id, lane):
        launched.append(run_id)
        return 999_999_999  # no such process: nothing to stop

    queue.dispatch(store, "other-box", ["cuda:0"], AMPERE, launch, side_lanes=False)
    assert launched == []  # pinned to its own box
    queue.dispatch(store, "h100-box", ["cuda:0", "cuda:1"], AMPERE, launch, side_lanes=False)
    assert launched == [runs["H100"]] and store.get_run(runs["H100"]).status == "starting"
    assert main(["submit", "--every-gpu-type", *QUICK_CLI_ON_ANY_DEVICE]) == 0
    assert capsys.readouterr().out.count("run ") == 2
    for run in store.list_runs():
        store.finish_run(run.id, "cancelled")


# conftest's quick race flags without --device cpu: --every-gpu-type picks the devices.
QUICK_CLI_ON_ANY_DEVICE = QUICK_CLI[: QUICK_CLI.index("--device")]


def test_a_race_pinned_to_a_box_that_went_away_moves_to_another_of_its_type_or_fails(store, monkeypatch):
    """Races queued for a chosen GPU type whose box stopped waited forever, counted against their
    owner's limit: after the agent timeout they go to another box of that type, or fail saying why."""
    from support import AMPERE

    from core.runs.fleet_races import pin_to_type

    def gpu(index, name):
        return {"lane": f"cuda:{index}", "device_name": name, "memory_bytes": 80 * 2**30, "caps": AMPERE.to_dict()}

    fleet.register(store, "h100-a", 1, "lab-1", "2.14.1", [gpu(0, "H100")])
    fleet.register(store, "a100-a", 2, "lab-2", "2.14.1", [gpu(0, "A100")])
    spec = dataclasses.replace(quick_spec(), device="cuda")
    h100 = queue.enqueue(store, spec, "ann", limits=NO_LIMITS, caps=AMPERE, **pin_to_type(store, "H100"))
    a100 = queue.enqueue(store, spec, "ann", limits=NO_LIMITS, caps=AMPERE, **pin_to_type(store, "A100"))
    fleet.register(store, "h100-b", 3, "lab-3", "2.14.1", [gpu(0, "H100")])  # a second H100 box joins
    fleet.leave(store, "h100-a", 1)
    fleet.leave(store, "a100-a", 2)
    queue.reconcile(store)
    assert store.get_run(h100).status == store.get_run(a100).status == "queued"  # within the timeout: it may be back
    later = time.time() + fleet.agent_timeout_s() + 1
    monkeypatch.setattr(time, "time", lambda: later)
    fleet.heartbeat(store, "h100-b", 3)  # the second H100 box is alive; the others have been gone for the timeout
    assert queue.reconcile(store, now=later) == [a100]
    moved, failed = store.get_run(h100), store.get_run(a100)
    assert (moved.status, moved.host, moved.device_key) == ("queued", "h100-b", "cuda:0")
    assert failed.status == "failed" and failed.error == (
        "agent a100-a stopped before this race started, and no other box has its device (A100)"
    )
