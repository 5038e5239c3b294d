"""Warm starts (core.runs.warm_start, core.runs.warm_server): a job forked from a server that has
imported torch is as clean as a fresh process, gets its own settings, and only a server started with
exactly those settings and this code may fork it; with none ready, a job starts cold. Real servers
and processes (each server imports torch: about 10-20 s on the 2-core box)."""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from types import SimpleNamespace

import pytest
from support import (
    QUICK_CLI,
    ROOT,
    TEST_ID_VARIABLE,
    command_line,
    machine_seconds,
    process_table,
    processes_of_this_test,
    quick_spec,
    warm_servers_of_this_test,
)

from core.engine.device_state import CACHE_VARIABLES
from core.engine.spec import DeviceCaps
from core.runs import fleet, processes, queue, warm_server, warm_start
from core.runs.limits import HostLimits
from core.runs.race_conditions import STEADY_MALLOC
from core.runs.warm_start import pid_running

NO_LIMITS = HostLimits(job_time_limit_s=None)
STATE = "core.runs.warm_server:report_state"


def wait_until(what, check, seconds):
    deadline = time.monotonic() + machine_seconds(seconds)
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what} not within {seconds} s (load-stretched)")


def ready_server(env):
    """Start the warm server for `env` and wait until it forks jobs."""
    pid = warm_start.ensure_server(env, os.path.join(os.environ["COMPILE_LAB_DATA"], "logs"))
    assert pid is not None
    wait_until("the warm server to be ready", lambda: warm_start.server_state(env) == "ready", 90)
    return pid


def cold_state(env):
    code = "import sys; from core.runs.warm_server import report_state; sys.exit(report_state([]))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def warm_state(env, **kwargs):
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = warm_start.start(STATE, [], env, stdout=out, stderr=err, keep=True, **kwargs)
        assert proc is not None, "no warm server took the job"
        assert proc.wait(60) == 0
        out.seek(0)
        err.seek(0)
        text = out.read().decode()
        assert text, err.read().decode()
    return json.loads(text.strip().splitlines()[-1]), proc.pid


def test_a_warm_child_is_as_clean_as_a_fresh_process_and_gets_the_jobs_settings(warm_starts, tmp_path):
    env = processes.worker_environment("cpu")
    server = ready_server(env)
    assert warm_start.ensure_server(env, str(tmp_path)) is None  # one server per settings
    assert not processes.pid_alive(server)  # the server is no job's worker
    cache = str(tmp_path / "inductor")
    job = {**env, "TORCHINDUCTOR_CACHE_DIR": cache}  # a cache folder of its own: read lazily, so allowed
    warm, pid = warm_state(job)
    cold = cold_state(job)
    assert warm["started"] == "warm" and cold["started"] == "cold"
    for state in (warm, cold):
        assert state["cuda_initialized"] is False and state["bad_fork"] is False  # no CUDA context
        assert state["dynamo_counters"] == {} and state["compile_times"] == 0  # nothing compiled, no Dynamo cache
        assert set(state["first_compile_caches"].values()) == {0}  # no cache dir chosen, no CPU probe run
        assert state["inductor_cache_dir"] == cache  # the cache folder the job asked for
        assert state["malloc"] == STEADY_MALLOC
        assert state["malloc_maps_8mib"] is False  # glibc runs with the fixed thresholds, not its own
        assert state["python_threads"] == 1
    assert warm["tasks"] == 1  # no OpenMP pool, no thread: a fork copies one (cold counts before torch)
    assert warm["own_session"] is True  # it outlives the server, the app and the terminal
    assert (warm["torch_threads"], warm["cpus"], warm["nice"]) == (cold["torch_threads"], cold["cpus"], cold["nice"])
    assert warm_state(job, cpus=[warm["cpus"][-1]])[0]["cpus"] == [warm["cpus"][-1]]  # pinned as asked
    assert not processes.pid_alive(pid)  # it ended, and the server reaped it
    # Another malloc setting is another server's: this one never forks it.
    other = {**env, "MALLOC_MMAP_THRESHOLD_": str(1024 * 1024)}
    assert warm_start.start(STATE, [], other) is None
    assert warm_start.stop_server(env)
    assert warm_start.server_state(env) is None
    assert warm_start.start(STATE, [], job) is None  # no server: the caller starts it cold


def test_a_race_starts_warm_through_the_queue_and_the_next_one_too(warm_starts, store):
    """An idle box's tick starts the warm server; a race then forks from it (and says so), is pinned
    as a cold one is, and the race its ticker starts is warm too, its replicate as well."""
    assert queue.tick(store, prewarm=True) == []  # the app's tick, nothing to run: it starts the CPU lane's server
    env = processes.worker_environment("cpu")
    wait_until("the warm server", lambda: warm_start.server_state(env) == "ready", 90)
    # The device probe's and the demos' workers start through the same launcher with this environment.
    assert processes.worker_environment(fleet.PROBE_DEVICE_KEY) == env
    first = queue.enqueue(store, quick_spec(), "ann", limits=NO_LIMITS, caps=DeviceCaps())
    second = queue.enqueue(  # with a replicate, forked from the same server as its worker
        store, quick_spec(replicates=1, steps_per_epoch=10), "ann", limits=NO_LIMITS, caps=DeviceCaps()
    )
    pid = store.get_run(first).pid
    assert pid and processes.pid_alive(pid)  # a warm child counts as its run's worker
    with open(f"/proc/{pid}/comm") as fh:
        assert fh.read().strip() == warm_start.JOB_NAME
    for run_id in (first, second):
        wait_until(f"run {run_id}", lambda r=run_id: store.get_run(r).finished, 120)
        run = store.get_run(run_id)
        assert run.status == "done", run.error
        assert run.environment["process_start"] == "warm"
        assert run.environment["malloc"] == STEADY_MALLOC
        if len(os.sched_getaffinity(0)) >= 2:
            assert run.environment["worker_cpus"] == sorted(os.sched_getaffinity(0))[1:]
    (replicate,) = store.get_run(second).summary["replicates"]
    assert replicate["started"] == "warm" and replicate["error"] is None and replicate["steps"] > 0
    wait_until("the last worker to exit", lambda: not processes.pid_alive(store.get_run(second).pid), 30)
    time.sleep(machine_seconds(2))  # its ticker, which finds the lane idle and the server there
    (server,) = warm_servers_of_this_test()
    os.kill(server, signal.SIGTERM)  # a host stopping it: it leaves cleanly, its name free at once
    _, status = os.waitpid(server, 0)  # (started by this process's tick)
    assert os.waitstatus_to_exitcode(status) == 0
    assert warm_start.server_state(env) is None


def test_with_warm_starts_off_or_no_server_a_job_starts_cold(monkeypatch, tmp_path):
    env = processes.worker_environment("cpu")
    monkeypatch.setenv(warm_start.SETTING, "on")
    assert warm_start.start(STATE, [], env) is None  # nothing holds its name: cold, at once
    monkeypatch.setenv(warm_start.SETTING, "off")
    assert not warm_start.enabled()
    assert warm_start.ensure_server(processes.worker_environment("cpu"), str(tmp_path)) is None
    monkeypatch.setenv(warm_start.SETTING, "sometimes")
    with pytest.raises(warm_start.SettingError, match="COMPILE_LAB_WARM_START"):
        warm_start.enabled()
    monkeypatch.setenv(warm_start.IDLE_SETTING, "-3")
    with pytest.raises(warm_start.SettingError, match="COMPILE_LAB_WARM_IDLE_S"):
        warm_start.idle_s()


def test_a_server_is_found_only_by_jobs_with_exactly_its_settings_and_code(tmp_path, monkeypatch):
    monkeypatch.setattr(warm_start, "FINGERPRINT_KEPT_S", 0.0)  # no second's reuse of the files' digest here
    env = {"PATH": "/bin", **STEADY_MALLOC}
    key = warm_start.server_key(env)
    assert warm_start.server_key({**env, "TORCHINDUCTOR_CACHE_DIR": "/x", "TRITON_CACHE_DIR": "/y"}) == key
    for changed in (
        {"MALLOC_MMAP_THRESHOLD_": "1"},
        {"CUDA_VISIBLE_DEVICES": "1"},
        {"OMP_NUM_THREADS": "1"},
        {"TORCH_TRACE": "/t"},
    ):
        assert warm_start.server_key({**env, **changed}) != key
    assert warm_start.server_key(env, code="another") != key
    code = tmp_path / "mod.py"
    code.write_text("x = 1\n")
    before = warm_start.code_fingerprint(str(tmp_path))
    code.write_text("x = 22\n")
    assert warm_start.code_fingerprint(str(tmp_path)) != before
    # The variables a job may set for itself are the ones a race's cache folders use.
    assert set(warm_start.LAZY_VARIABLES) == set(CACHE_VARIABLES)


@pytest.mark.parametrize("cause", ["the code changed", "the app that started it is gone"])
def test_a_server_leaves_when_the_code_changes_or_its_app_exits_and_frees_its_name(warm_starts, tmp_path, cause):
    code_root = tmp_path / "code"
    code_root.mkdir()
    (code_root / "a.py").write_text("a = 1\n")
    app = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])  # stands in for the app
    env = {**processes.worker_environment("cpu"), warm_start.APP_PID_VARIABLE: str(app.pid)}
    key = warm_start.server_key(env, warm_start.code_fingerprint(str(code_root)))
    log = open(tmp_path / "server.log", "wb")
    server = subprocess.Popen(
        [sys.executable, "-m", warm_start.SERVER_MODULE, "--key", key, "--code-root", str(code_root)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    wait_until("it to be ready", lambda: b"ready in" in (tmp_path / "server.log").read_bytes(), 90)
    if cause == "the code changed":
        (code_root / "a.py").write_text("a = 2  # edited\n")
    else:
        app.kill()
    assert server.wait(timeout=machine_seconds(20)) == 0
    app.kill()
    app.wait()
    log.close()
    assert f"leaving: {cause}".encode() in (tmp_path / "server.log").read_bytes()
    with socket.socket(socket.AF_UNIX) as probe:
        probe.bind(warm_start.address(key))  # the name is free for a new server
    # No app left to start jobs: nothing starts a server for its settings again.
    if cause != "the code changed":
        assert warm_start.ensure_server(env, str(tmp_path)) is None


def test_an_unused_server_leaves_and_a_job_with_other_settings_is_refused(monkeypatch):
    """Unit: the loop's rules, without forking. The server's process has one thread; pytest's may
    have more (an earlier test's daemon), so the count the rule reads is set here."""
    threads = [1]
    monkeypatch.setattr(warm_server.threading, "active_count", lambda: threads[0])
    server = warm_server.Server(None, "k", idle_s=5.0, problem=None, code_root=warm_start.CODE_ROOT, code="c")
    server.last_used -= 10
    server.check_leaving()
    assert server.leaving == "unused for 5 s"
    refusing = warm_server.Server(None, "k", 5.0, problem=None, code_root=warm_start.CODE_ROOT, code="c")
    request = {"entry": STATE, "env": {"PATH": "/bin"}}
    assert "settings" in refusing.refusal(request, [0, 1, 2])
    request["env"] = {"X": "1"}
    refusing.key = warm_start.server_key(request["env"], "c")
    assert refusing.refusal(request, [0, 1, 2]) is None
    assert "core." in refusing.refusal({**request, "entry": "os:system"}, [0, 1, 2])
    assert refusing.refusal({**request, "entry": "bench.launch_latency:main"}, [0, 1, 2]) is None
    assert "stdin" in refusing.refusal(request, [1])
    threads[0] = 2  # a thread started in the server since it was ready: a fork would copy a half-held lock
    assert refusing.refusal(request, [0, 1, 2]) == "a thread started in the server"
    threads[0] = 1
    unclean = warm_server.Server(None, "k", 5.0, problem="CUDA was initialised", code_root="", code="c")
    assert "not clean" in unclean.refusal(request, [0, 1, 2])


def test_a_check_names_what_makes_a_process_unclean():
    clean = {
        "cuda_initialized": False,
        "bad_fork": False,
        "dynamo_counters": {},
        "compile_times": 0,
        "first_compile_caches": {"a": 0},
        "python_threads": 1,
        "tasks": 1,
    }
    assert warm_server.problems(clean) == []
    assert warm_server.problems({**clean, "bad_fork": True}) == ["CUDA was initialised before the fork"]
    assert warm_server.problems({**clean, "dynamo_counters": {"stats": {"unique_graphs": 1}}}) == [
        "something was compiled before the fork"
    ]
    assert warm_server.problems({**clean, "first_compile_caches": {"a": 1}}) == [
        "torch's first-compile caches are filled"
    ]
    assert "threads" in warm_server.problems({**clean, "tasks": 3})[0]


def test_a_traced_race_starts_cold_and_a_ticker_never_passes_its_trace_on(monkeypatch, store):
    """TORCH_TRACE is read when torch is imported: a traced race cannot be forked from a server
    (its settings differ), and a worker started by a traced worker's ticker gets no trace of its own."""
    launched = {}

    class Recorded:
        pid = 999_999_999

        def __init__(self, command, env, **kwargs):
            launched["env"] = env

    monkeypatch.setattr(processes.subprocess, "Popen", Recorded)
    monkeypatch.setenv("TORCH_TRACE", "/somewhere/run-5")
    run_id = store.create_run("race", quick_spec().to_dict(), "ann", "cpu", status="starting")
    processes.launch_worker(store.path, run_id, "cpu")
    assert "TORCH_TRACE" not in launched["env"]
    traced = store.create_run("race", quick_spec(compile_trace=True).to_dict(), "ann", "cpu", status="starting")
    processes.launch_worker(store.path, traced, "cpu")
    assert launched["env"]["TORCH_TRACE"].endswith(str(traced)) or str(traced) in launched["env"]["TORCH_TRACE"]


def test_the_cache_demos_fresh_processes_start_through_the_warm_path(monkeypatch):
    """The Under the hood cache demo compiles cold and warm in fresh processes: its worker hands it
    warm_start.run_fresh, which forks them from the worker's own warm server (their cache folders
    set per process, the only settings a fork may add); the engine alone starts them cold."""
    import inspect

    from core.engine.explain import caches
    from core.runs import job_kinds

    calls = []

    def fresh(entry, module, argv, env, timeout):
        calls.append((entry, module, argv, {k: env.get(k) for k in warm_start.LAZY_VARIABLES}))
        line = json.dumps({"first_step_s": 2.0, "steady_step_s": 0.5, "compile_s": 1.5, "phases": {}})
        return subprocess.CompletedProcess([entry], 0, line + "\n", "")

    monkeypatch.setattr(caches, "recompiles", lambda *args: [])
    result = caches.run({"model": "mlp", "batch_size": 8}, "cpu", fresh_process=fresh)
    assert result["warm_saves"] == 1.0 and len(calls) == 2
    (entry, module, argv, lazy), (_, _, _, lazy_again) = calls
    assert (entry, module, argv[:4]) == (
        "core.engine.explain.compile_once:entry",
        "core.engine.explain.compile_once",
        ["mlp", "8", "cpu", "--save"],  # the cold compile saves its artifacts (a stand-in saves none)
    )
    assert lazy == lazy_again and all(lazy.values())  # the same fresh cache folder, filled by the cold run
    assert inspect.signature(caches.run).parameters["fresh_process"].default is caches.run_fresh
    # The worker's runner hands a demo that takes one the warm path (the caches demo, here stood in for).
    handed = {}

    def stand_in(params, device="cpu", fresh_process=None):
        handed["fresh_process"] = fresh_process
        return {}

    monkeypatch.setattr("core.engine.explain.demo_module", lambda name: SimpleNamespace(run=stand_in))
    status, _ = job_kinds.run_demo_job({"demo": "caches", "params": {}}, SimpleNamespace(update=lambda **kw: None))
    assert status == "done" and handed["fresh_process"] is warm_start.run_fresh


def test_a_warm_child_ends_as_a_process_ends_even_with_a_thread_pool_left_open(tmp_path):
    """Its exit (warm_server.exit_quickly) stops what a cold exit stops: a thread pool left open
    (Inductor's compile pool after a real compile) ends, a non-daemon thread is joined, atexit runs.
    (Joining the pool's threads before threading's exit hooks waited forever: a worker held its lane.)"""
    code = (
        "import atexit, threading, time; from concurrent.futures import ThreadPoolExecutor\n"
        "pool = ThreadPoolExecutor(2); pool.submit(lambda: 1).result()\n"
        "threading.Thread(target=lambda: (time.sleep(0.3), print('joined', flush=True))).start()\n"
        "atexit.register(lambda: print('atexit ran', flush=True))\n"
        "from core.runs.warm_server import exit_quickly; exit_quickly(3)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr
    assert done.stdout.split() == ["joined", "atexit", "ran"]


def test_a_replicate_forks_from_its_race_process_server_and_leaves_with_its_race(warm_starts, tmp_path):
    """A race's replicate starts from the warm server of the race process's environment (a worker's),
    measures as a cold one does and says it started warm; in a session of its own, it still ends the
    moment its race process is gone (a time limit's SIGKILL to the worker's group does not reach it)."""
    from core.runs import processes

    env = processes.worker_environment("cpu")
    ready_server(env)
    race = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])  # the race process
    try:
        job = {
            "spec": quick_spec().to_dict(),
            "number": 2,
            "steps": 20,
            "cache_dir": str(tmp_path / "cache"),
            "conditions": None,
            "sent_at": time.time(),
            "race_pid": race.pid,
        }
        done = processes.start_replicate(job, env)
        assert done.warm
        out, err = done.communicate(machine_seconds(120))
        line = next(x for x in out.splitlines() if x.startswith(processes.RESULT_PREFIX))
        process = json.loads(line[len(processes.RESULT_PREFIX) :])["process"]
        assert process["started"] == "warm" and process["error"] is None, err[-2000:]
        assert process["steps"] == 20 and process["speedup"] > 0
        endless = processes.start_replicate({**job, "steps": 10**7, "sent_at": time.time()}, env)
        assert endless.warm
        time.sleep(machine_seconds(1))
        assert pid_running(endless.pid)  # measuring
        race.kill()
        race.wait()
        wait_until("the replicate to leave with its race", lambda: not pid_running(endless.pid), 10)
        endless.close()
    finally:
        race.kill()
        race.wait()


def endless_replicate_job(tmp_path, race_pid):
    return {
        "spec": quick_spec().to_dict(),
        "number": 2,
        "steps": 10**7,
        "cache_dir": str(tmp_path / "cache"),
        "conditions": None,
        "sent_at": time.time(),
        "race_pid": race_pid,
    }


def test_a_cold_replicate_leaves_with_its_race_as_a_warm_one_does(tmp_path):
    """A replicate started cold (no warm server: a traced race, a cold worker) watches its race
    process as a warm one does: a kill -9 of the worker alone (not its group) ends it at once, so it
    never shares the cores with the next race (it ran on for 14-50 s)."""
    from core.runs import processes

    env = {**processes.worker_environment("cpu"), "COMPILE_LAB_WARM_START": "off"}
    race = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])  # the race process
    try:
        endless = processes.start_replicate(endless_replicate_job(tmp_path, race.pid), env)
        assert not endless.warm
        time.sleep(machine_seconds(2))  # importing torch, or measuring: either way, its race is alive
        assert endless.proc.poll() is None
        race.kill()
        race.wait()
        wait_until("the cold replicate to leave with its race", lambda: endless.proc.poll() is not None, 5)
        assert endless.returncode == -signal.SIGKILL
        endless.close()
    finally:
        race.kill()
        race.wait()


def servers_started_by_this_test(before):
    """Warm server processes this test started, importing or serving (found by the test's id)."""
    test_id = os.environ[TEST_ID_VARIABLE]
    return [pid for pid in processes_of_this_test(before, test_id) if "core.runs.warm_server" in command_line(pid)]


def test_read_only_commands_start_no_warm_server_and_only_a_ticker_that_starts_races_does(
    warm_starts, store, monkeypatch
):
    """`status`, `sweeps`, `runs` read the store: each started a 0.7 GB warm server (one per distinct
    environment) that stayed for its idle time; nor does a rejected race start one. Only a tick that
    starts races (the app's, a worker's last, an enqueue's) starts the lanes' servers."""
    from core.cli.main import main

    monkeypatch.setattr(processes, "_PREWARMED", {})  # a server looked for by an earlier test: looked for again
    before = set(process_table())
    for i, command in enumerate((["status"], ["sweeps"], ["runs"], ["status"], ["sweeps"])):
        monkeypatch.setenv("LC_PAPER", f"C.{i}")  # a terminal's differing locale: another server each, before
        assert main([*command, "--store", store.path]) == 0
    assert main(["race", "--model", "resnet81"]) == 2  # a rejected race starts nothing either
    assert servers_started_by_this_test(before) == []
    queue.tick(store, prewarm=True)  # the app's tick: its lanes' next job starts warm
    assert len(servers_started_by_this_test(before)) == 1


def warm_lanes_pids(lane):
    return [pid for pid, _, _ in warm_start.lane_servers(lane)]


def test_a_lane_keeps_one_warm_server_whatever_environment_asked_for_it(warm_starts, monkeypatch):
    """A server for a lane asks the lane's servers of other environments to leave, but one that belongs
    to a live app; a terminal's (no app) is then not started beside it: one server per lane."""
    lane = warm_start.lane_name("cpu", os.environ["COMPILE_LAB_DATA"])

    def server(paper, app=None):
        """What a tick that starts races does, from a terminal with LC_PAPER=paper (or the app `app`)."""
        monkeypatch.setenv("LC_PAPER", paper)
        if app is None:
            monkeypatch.delenv(warm_start.APP_PID_VARIABLE, raising=False)
        else:
            monkeypatch.setenv(warm_start.APP_PID_VARIABLE, str(app))
        monkeypatch.setattr(processes, "_PREWARMED", {})
        started = processes.prewarm(["cpu"])
        for pid in started:  # named (and so found) once it holds its socket, before it imports
            wait_until("the server to hold its name", lambda pid=pid: pid in warm_lanes_pids(lane), 30)
        return started[0] if started else None

    first = server("C.1")
    second = server("C.2")
    assert second is not None
    wait_until("the lane's first server to leave", lambda: not pid_running(first), 10)
    app = server("C.3", app=os.getpid())  # an app's: the terminal's one leaves
    wait_until("the terminal's server to leave", lambda: not pid_running(second), 10)
    assert server("C.4") is None  # a terminal's beside a live app's: none started
    assert warm_lanes_pids(lane) == [app]
    assert warm_start.lane_servers(warm_start.lane_name("cpu", "/elsewhere")) == []


@pytest.mark.parametrize("interrupt", ["timeout", "cancel"])
def test_a_fresh_process_is_ended_with_what_it_started_when_its_wait_is_cut_short(warm_starts, monkeypatch, interrupt):
    """run_fresh (the cache demo's fresh processes) ends its warm child, compile workers and all,
    whatever cuts its wait short: its time limit, or a cancel (any exception) while it runs."""
    env = processes.worker_environment("cpu")
    ready_server(env)
    started = []
    real_start = warm_start.start_fresh

    def start_fresh(*args, **kwargs):
        started.append(real_start(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(warm_start, "start_fresh", start_fresh)
    if interrupt == "cancel":

        def cancelled(self, timeout=None):
            time.sleep(machine_seconds(1))  # it is compiling by now
            raise KeyboardInterrupt

        monkeypatch.setattr(warm_start.FreshProcess, "communicate", cancelled)
    job = {**env, "TORCHINDUCTOR_CACHE_DIR": os.path.join(os.environ["COMPILE_LAB_DATA"], f"cold-{interrupt}")}
    with pytest.raises(subprocess.TimeoutExpired if interrupt == "timeout" else KeyboardInterrupt):
        warm_start.run_fresh(
            "core.engine.explain.compile_once:entry", "core.engine.explain.compile_once", ["mlp", "8", "cpu"], job, 1.0
        )
    (proc,) = started
    assert proc.warm  # forked from the server: in a session of its own, which no group kill of ours reaches
    assert not pid_running(proc.pid)


def test_a_terminal_race_forks_its_replicates_from_a_server_of_its_own_and_stops_it(warm_starts):
    """The terminal's `race` has no app's server to fork from: after its first process it starts one
    for its own environment, forks every replicate from it (as the app's worker does) and stops it
    as the race ends, so nothing is left running."""
    flags = list(QUICK_CLI)
    flags[flags.index("--replicates") + 1] = "2"
    done = subprocess.run(
        [sys.executable, "-m", "core", "race", "--json", "--quiet", *flags],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=machine_seconds(300),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    replicates = json.loads(done.stdout)["summary"]["replicates"]
    assert [(p["number"], p["started"], p["error"]) for p in replicates] == [(2, "warm", None), (3, "warm", None)]
    assert warm_servers_of_this_test() == []  # stopped with its race


# Runs a terminal's race as its child subreaper (what the race leaves is re-parented here, so its
# exit status is read, not guessed), ends the race with a signal once a replicate runs, and reports,
# as one JSON line, how each of the race's processes ended and how long after the signal.
ENDED_RACE = r"""
import ctypes, json, os, signal, subprocess, sys, time
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
# A Ctrl-C reaches the race as at a terminal, even where the suite itself runs with SIGINT ignored (a
# shell's background job): an ignored SIGINT is inherited, and the race would never see it.
signal.signal(signal.SIGINT, signal.SIG_DFL)
sig = getattr(signal, sys.argv[1])
race = subprocess.Popen([sys.executable, "-m", "core", "race", "--quiet", *sys.argv[2:]], stdout=subprocess.DEVNULL)
seen, gone, codes = {}, {}, {}

def read(pid, name):
    try:
        with open(f"/proc/{pid}/{name}", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""

def look():
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = read(entry, "stat")
            if stat:
                fields = stat.rsplit(")", 1)[1].split()
                table[int(entry)] = (int(fields[1]), fields[0])
    for pid, (parent, state) in table.items():
        chain, p = set(), parent
        while p in table and p not in chain and p != os.getpid():
            chain.add(p)
            p = table[p][0]
        if p == os.getpid() and state not in ("Z", "X"):  # named again while it runs (a server names itself)
            comm = read(pid, "comm")
            role = "replicate" if "core.runs.processes" in read(pid, "cmdline") or comm == "compile-lab-job" else comm
            role = "race" if pid == race.pid else "server" if comm == "compile-lab-srv" else role
            seen[pid] = role if pid not in seen or role in ("race", "server", "replicate") else seen[pid]
    for pid in seen:
        if pid not in gone and table.get(pid, (0, "Z"))[1] in ("Z", "X"):
            gone[pid] = time.monotonic()

deadline = time.monotonic() + 600
while "replicate" not in seen.values():
    if race.poll() is not None or time.monotonic() > deadline:
        print(json.dumps({"error": f"no replicate ran (race: {race.poll()})"}))
        sys.exit(1)
    look()
    time.sleep(0.05)
time.sleep(0.5)  # measuring
look()
race.send_signal(sig)
killed = time.monotonic()
while time.monotonic() < killed + 120:
    look()
    try:
        while True:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            codes[pid] = os.waitstatus_to_exitcode(status)
            gone.setdefault(pid, time.monotonic())
    except ChildProcessError:
        pass
    if race.pid in codes and all(pid in gone for pid in seen):  # (a zombie leader may wait on its threads)
        break
    time.sleep(0.05)
left = [pid for pid in seen if pid not in gone]
for pid in left:
    os.kill(pid, signal.SIGKILL)
ended = [  # (what had gone before the signal, a server's check child, was no part of the race's end)
    {"role": seen[p], "code": codes.get(p), "after_s": round(gone[p] - killed, 2)}
    for p in seen
    if p in gone and gone[p] >= killed
]
print(json.dumps({"race": codes.get(race.pid), "ended": ended, "left": [seen[p] for p in left]}))
"""


@pytest.mark.parametrize("how, warm", [("SIGKILL", "off"), ("SIGTERM", "off"), ("SIGTERM", "on"), ("SIGINT", "on")])
def test_a_terminal_race_ended_any_way_leaves_nothing_running(how, warm, monkeypatch):
    """Whatever ends a terminal's race once its replicates run (kill -9, SIGTERM, Ctrl-C), with its
    replicates cold or forked from a server of its own, nothing it started runs on: each replicate
    is ended (SIGKILL: it left with its race, never ran to its end beside the next race) and its
    server leaves, none left after the signal."""
    monkeypatch.setenv("COMPILE_LAB_WARM_START", warm)
    flags = list(QUICK_CLI)
    flags[flags.index("--replicates") + 1] = "2"
    done = subprocess.run(
        [sys.executable, "-c", ENDED_RACE, how, *flags],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=machine_seconds(600),
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert "error" not in report, done.stderr[-2000:]
    assert report["left"] == []
    assert report["race"] == {"SIGKILL": -9, "SIGTERM": -15, "SIGINT": 130}[how]
    replicates = [p for p in report["ended"] if p["role"] == "replicate"]
    print(json.dumps(report))  # how long each took to go (the issue note's figures)
    assert replicates and all(p["code"] in (None, -signal.SIGKILL) for p in replicates), report
    assert [p["code"] for p in report["ended"] if p["role"] == "server"] in ([], [0]), report
    if warm == "off":  # a cold one is the race's child: its own status comes here
        assert [p["code"] for p in replicates] == [-signal.SIGKILL], report


def test_a_traced_terminal_race_starts_no_server_of_its_own():
    # torch reads TORCH_TRACE when it is imported: a server started with it would trace its own import.
    from core.runs.processes import OwnWarmServer

    own = OwnWarmServer(None)
    own.env.update({"COMPILE_LAB_WARM_START": "on", "TORCH_TRACE": "/nonexistent/trace"})
    own._start_server()
    assert own._started is None and warm_start.server_state(own.env) is None


@pytest.mark.parametrize("setting", ["on", "off"])
def test_an_app_readies_its_lanes_as_it_starts_unless_the_host_turned_warm_starts_off(store, monkeypatch, setting):
    """Issue 43: a fresh app's first Launch started its race cold (its lane's warm server was started
    only by a page's tick). The app's start (queue.ready) starts the lanes' servers and queues the
    device probe; with COMPILE_LAB_WARM_START=off it starts no server, and the probe is not held."""
    monkeypatch.setenv(warm_start.SETTING, setting)
    monkeypatch.setattr(processes, "_PREWARMED", {})
    asked, launched = [], []
    monkeypatch.setattr(warm_start, "ensure_server", lambda env, *a, **k: asked.append(env) and None)
    monkeypatch.setattr(processes, "launch_worker", lambda path, run_id, key="cpu": launched.append(run_id) or 0)
    monkeypatch.setattr(queue, "_LAUNCH_WORKER", processes.launch_worker)  # the launcher the queue holds lanes for
    queue.ready(store)
    probes = store.list_runs(kind="probe")
    assert len(probes) == 1  # queued before any page asked
    if setting == "on":
        assert [processes.worker_environment("cpu")] == asked  # the CPU lane's server, before any Launch
    else:
        assert asked == []  # the host said no: no server
    assert launched == [probes[0].id]  # no server starting to wait for: the probe starts at once


def test_a_job_waits_for_its_lanes_starting_warm_server_and_starts_warm_once_it_is_ready(
    warm_starts, store, monkeypatch
):
    """While a lane's warm server imports torch, the lane's next job (a fresh app's probe, its first
    race) stays queued rather than starting cold beside that import; a waiter ticks once the server
    is ready, and the job forks from it."""
    monkeypatch.setattr(processes, "_PREWARMED", {})
    env = processes.worker_environment("cpu")
    queue.ready(store)  # what the app does as it starts: the server, and the probe
    assert warm_start.server_state(env) is not None or processes.warming(["cpu"]) == {"cpu"}
    if warm_start.server_state(env) != "ready":  # (started, or still importing torch)
        assert processes.warming(["cpu"]) == {"cpu"}
        probe = store.list_runs(kind="probe")[0]
        assert probe.status == "queued"  # held for the server, not started cold
    wait_until("the probe, forked once the server is ready", lambda: fleet.known_caps(store), 120)
    assert warm_start.server_state(env) == "ready" and processes.warming(["cpu"]) == set()
    run_id = queue.enqueue(store, quick_spec(), "ann", limits=NO_LIMITS, caps=DeviceCaps())
    wait_until("the race", lambda: store.get_run(run_id).finished, 120)
    assert store.get_run(run_id).environment["process_start"] == "warm"


def test_a_freshly_started_app_has_a_warm_server_and_the_device_probe_before_any_launch(warm_starts, tmp_path):
    """`streamlit run app.py` on a fresh data folder, no browser: the app readies its CPU lane's warm
    server and answers the device probe on its own, so the first Launch forks its race."""
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = tmp_path / "data"
    env = {**os.environ, "COMPILE_LAB_DATA": str(data), "COMPILE_LAB_STORE": str(data / "store.sqlite3")}
    command = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port)]
    command += ["--server.address", "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false"]
    with open(tmp_path / "streamlit.log", "w") as log:
        app = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until("the app", lambda: _healthy(f"http://127.0.0.1:{port}/_stcore/health", urllib.request), 60)
        from core.runs.store import Store

        store = Store(str(data / "store.sqlite3"))
        wait_until("the device probe, queued by the app itself", lambda: fleet.known_caps(store), 120)
        lane = warm_start.lane_name("cpu", str(data))
        servers = warm_start.lane_servers(lane)
        assert [owner for _, _, owner in servers] == [str(app.pid)]  # the app's, leaving with it
        key = servers[0][1]
        wait_until("the server ready", lambda: _connects(warm_start.address(key)), 60)
        assert not store.list_runs(kind="race")  # all of it before any Launch
    finally:
        os.killpg(app.pid, signal.SIGTERM)
        app.wait(timeout=30)


def _healthy(url, request) -> bool:
    try:
        return request.urlopen(url, timeout=2).status == 200
    except OSError:
        return False


def _connects(name: str) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(name)
            return True
        except OSError:
            return False
