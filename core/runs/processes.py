"""The processes behind the queue: a job's worker (and a last tick), whether a worker is alive, and
the replicate processes a race's first process starts and reads back. No torch in the parent.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from core import PROJECT_ROOT
from core.engine.intervals import ProcessResult
from core.engine.spec import data_home
from core.runs import race_conditions, warm_start
from core.runs.fleet import LOOKUP_DEVICE_KEY
from core.runs.race_conditions import Conditions, malloc_settings, secret_name
from core.runs.run_files import compile_trace_dir
from core.runs.store import Store, is_server_url, store_files_dir
from core.runs.warm_start import pid_running, readable

# ----------------------------------------------------------------------
# The processes behind the queue: starting a job's worker (and a last tick), knowing whether a
# worker's pid is still that worker, and stopping its process group. No torch.
#
# Each job runs in a `python -m core.runs.worker` process in its own session, so it outlives the
# page or CLI that started it, or in the same worker forked from a warm server that has already
# imported torch (core.runs.warm_start; cold when none is ready); a pid in the store is trusted only
# while it still runs a worker.
# A server store's URL (its password with it) reaches a worker or a ticker through its environment,
# never its command line: any user of the box reads a command line (`ps`, /proc/<pid>/cmdline), only
# the same user reads an environment (and not at all from the sealed app and agents: core.runs.race_conditions).

TERMINATE_WAIT_S = 2.0  # SIGTERM, then SIGKILL after this: cancel completes within 3 s


# What a worker inherits from the server's environment, and nothing else: a worker runs model code
# (a host that allows model files runs a visitor's), so the admin token, a cloud key or a library
# token never reaches it. Names: exact ones, then prefixes (torch, CUDA, the thread pools, locale).
WORKER_VARIABLES = frozenset(
    (
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TEMP", "TMP",
        "PYTHONPATH", "PYTHONUNBUFFERED", "PYTHONIOENCODING", "PYTHONDONTWRITEBYTECODE", "PYTHONWARNINGS",
        "VIRTUAL_ENV", "CONDA_PREFIX", "LD_LIBRARY_PATH", "CC", "CXX", "XDG_CACHE_HOME",
        "HF_HOME", "HF_HUB_CACHE", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE",
        "TRANSFORMERS_CACHE", "HF_HUB_DISABLE_TELEMETRY",
        # the Compile Lab settings a worker reads (its store: store_arguments)
        "COMPILE_LAB_DATA", "COMPILE_LAB_STORE", "COMPILE_LAB_WORKER_THREADS", "COMPILE_LAB_WORKER_CPUS",
        "COMPILE_LAB_STORE_LOST_LIMIT_S", "COMPILE_LAB_WORKER_MALLOC", "COMPILE_LAB_WARM_START", "COMPILE_LAB_WARM_IDLE_S",
        "COMPILE_LAB_APP_PID",  # whose warm servers a worker's ticker starts (core.runs.warm_start)
        # libpq's own ways to a server without a password in the URL (~/.pgpass is found through HOME)
        "PGPASSFILE", "PGSERVICE", "PGSERVICEFILE", "PGSSLMODE", "PGSSLROOTCERT", "PGSSLCERT", "PGSSLKEY",
        "COMPILE_LAB_AGENT", "COMPILE_LAB_AGENT_PID", "COMPILE_LAB_AGENT_TIMEOUT_S",  # a fleet agent's workers
        "COMPILE_LAB_LAUNCHER",  # a worker's ticker starts the next job the host's way (own_launcher)
    )
)  # fmt: skip
WORKER_PREFIXES = (
    "LC_", "CUDA_", "NVIDIA_", "CUBLAS_", "CUDNN_", "NCCL_", "TORCH_", "TORCHINDUCTOR_", "TORCHDYNAMO_",
    "INDUCTOR_", "TRITON_", "PYTORCH_", "OMP_", "KMP_", "MKL_", "GOMP_", "OPENBLAS_", "MALLOC_",
    "COMPILE_LAB_TEST_",  # the tests' own: their process guard's marker
)  # fmt: skip


# Nothing a worker runs reaches the Hugging Face hub, whatever the server's own settings: with
# local_files_only an unknown hub id still asked the hub (huggingface_hub's registry fetch).
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def inherited(name: str) -> bool:
    """Whether a worker inherits this variable of the server's environment: a name on the list, or
    one with an allowed prefix unless its name says it is a secret (PGSSLKEY names a file: listed)."""
    if name in WORKER_VARIABLES:
        return True
    return name.startswith(WORKER_PREFIXES) and not secret_name(name)


def worker_environment(device_key: str, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a worker for one lane: the allowlisted part of the server's (`inherited`:
    no secrets). A GPU lane's worker sees only its own GPU (as cuda:0), so two races never share a
    GPU and a job cannot wander to another one. Indices are positions in the host's own
    CUDA_VISIBLE_DEVICES when it sets one."""
    env = {k: v for k, v in (os.environ if environ is None else environ).items() if inherited(k)}
    if device_key == LOOKUP_DEVICE_KEY:
        env["CUDA_VISIBLE_DEVICES"] = ""  # a lookup builds on the meta device: it must not touch a GPU
        env["COMPILE_LAB_LANE"] = device_key
    if device_key.startswith("cuda:"):
        index = int(device_key.split(":", 1)[1])
        visible = [d.strip() for d in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
        env["CUDA_VISIBLE_DEVICES"] = visible[index] if index < len(visible) else str(index)
        env["COMPILE_LAB_LANE"] = device_key
    env.update(malloc_settings(dict(os.environ if environ is None else environ)))  # core.runs.race_conditions
    env.update(OFFLINE)
    return env


def store_arguments(store_path: str, env: dict[str, str]) -> list[str]:
    """How a child is told its store: a file on its command line (`--store PATH`, as `ps` shows
    it), a server's URL in its environment (COMPILE_LAB_STORE), where only this user can read it."""
    if is_server_url(store_path):
        env["COMPILE_LAB_STORE"] = store_path
        return []
    return ["--store", store_path]


# A host's own way to start a job's worker, "module:function" (a wrapper for a batch scheduler, or
# the tests' stand-in that trains nothing), called as launch_worker is and returning the worker's pid.
# An environment setting, so it holds in every process that starts jobs: the app, a CLI that ticks
# the queue, a worker's ticker, a fleet's agent. Such jobs never fork from a warm server, so none is
# started or waited for (prewarm, warming).
LAUNCHER_SETTING = "COMPILE_LAB_LAUNCHER"


def own_launcher() -> Callable[[str, int, str], int] | None:
    """The launcher COMPILE_LAB_LAUNCHER names, or None for the built-in one (launch_worker)."""
    value = os.environ.get(LAUNCHER_SETTING, "").strip()
    if not value:
        return None
    module, _, name = value.partition(":")
    try:
        return getattr(importlib.import_module(module), name or "launch_worker")
    except (ImportError, AttributeError) as exc:
        raise RuntimeError(f"{LAUNCHER_SETTING}={value!r}: {exc}") from exc


def launch_worker(store_path: str, run_id: int, device_key: str = "cpu") -> int:
    """Start `python -m core.runs.worker` for one job in its own session, so it outlives its parent
    (or the host's own launcher: own_launcher)."""
    launcher = own_launcher()
    if launcher is not None:
        return launcher(store_path, run_id, device_key)
    log_dir = os.path.join(store_files_dir(store_path), "logs")
    os.makedirs(log_dir, exist_ok=True)
    env = worker_environment(device_key)
    env.pop("TORCH_TRACE", None)  # a ticker started by a traced worker has its run's: never the next run's
    run = Store(store_path).get_run(run_id)
    if run is not None and run.kind == "race" and (run.params or {}).get("compile_trace") is True:
        # torch reads TORCH_TRACE when it is imported: it must be in the worker's environment (so it
        # starts cold: no warm server has it).
        env["TORCH_TRACE"] = compile_trace_dir(store_path, run_id)
    arguments = [*store_arguments(store_path, env), "--run-id", str(run_id)]
    command = [sys.executable, "-m", "core.runs.worker", *arguments]
    with open(os.path.join(log_dir, f"run-{run_id}.log"), "ab") as log:
        warm = _start_warm("core.runs.worker:main", arguments, env, log)
        if warm is not None:
            return warm
        proc = subprocess.Popen(
            command,
            cwd=PROJECT_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    race_conditions.unpin_child(proc.pid)  # started by a pinned worker: not only its race's cores
    return proc.pid


def _start_warm(entry: str, arguments: list[str], env: dict[str, str], log: Any) -> int | None:
    """The job forked from its environment's warm server (core.runs.warm_start), its pid; None: start it cold."""
    try:
        started = warm_start.start(entry, arguments, env, stdout=log, stderr=log)
    except warm_start.SettingError as exc:
        log.write(f"starting cold: {exc}\n".encode())
        return None
    return started.pid if started is not None else None


PREWARM_EVERY_S = 5.0  # a page ticks every second: its process looks for missing servers at most this often
_PREWARMED: dict[str, float] = {}  # server key -> when this process last looked for it


def prewarm(device_keys: list[str]) -> list[int]:
    """Start the warm server of each lane's worker environment where none runs or starts; the pids
    started. Called only while nothing runs on this host, so a server's imports never overlap a
    measurement (core.runs.queue.tick, a fleet's agent)."""
    if os.environ.get(LAUNCHER_SETTING, "").strip():
        return []
    started = []
    for key in device_keys:
        env = worker_environment(key)
        try:
            if not warm_start.enabled(env):
                continue
            server = warm_start.server_key(env)
            if time.monotonic() - _PREWARMED.get(server, -PREWARM_EVERY_S) < PREWARM_EVERY_S:
                continue  # looked for lately (or another lane's environment is the same)
            _PREWARMED[server] = time.monotonic()
            lane = warm_start.lane_name(key, data_home())  # one server per lane: the lane's others leave
            if not warm_start.make_room(lane, server, warm_start.owner_of(env)):
                continue  # a live app's server holds this lane: a terminal's jobs start cold
            pid = warm_start.ensure_server(
                env, os.path.join(data_home(), "logs"), race_conditions.unpinned_cores(), lane
            )
        except (warm_start.SettingError, OSError):
            continue  # a setting it cannot read, a data dir it cannot write: jobs start cold
        if pid is not None:
            race_conditions.unpin_child(pid)
            started.append(pid)
            _STARTED_SERVERS[server] = (pid, time.monotonic())  # starting before it holds its name: warming
    return started


# A lane whose warm server is still importing torch holds its next job this long into the server's
# life at most: started cold beside that import, on the same cores, the job would import torch too
# and start later than it does forked once the server is ready (a fresh app's first race).
WARM_WAIT_S = 30.0
_WAITERS: dict[tuple[str, ...], float] = {}  # held lanes -> when this process last started their waiter
_STARTED_SERVERS: dict[str, tuple[int, float]] = {}  # server key -> (pid, when) this process started it


def warming(device_keys: list[str]) -> set[str]:
    """The lanes among `device_keys` whose jobs would fork from a warm server that is still starting
    (it holds its name, importing torch), for at most WARM_WAIT_S of that server's life: their next
    job waits in the queue for it (core.runs.queue.tick). None with warm starts off, or with a launcher
    of the host's own (own_launcher)."""
    if os.environ.get(LAUNCHER_SETTING, "").strip():
        return set()
    held = set()
    for key in device_keys:
        env = worker_environment(key)
        try:
            if not warm_start.enabled(env):
                continue
            server, state = warm_start.server_key(env), warm_start.server_state(env)
            if state == "starting":
                ages = [process_age_s(pid) for pid in warm_start.key_servers(server)]
            elif state is None and server in _STARTED_SERVERS:  # started here, its Python not at its name yet
                pid, when = _STARTED_SERVERS[server]
                ages = [time.monotonic() - when] if pid_running(pid) else []
            else:
                continue
        except (warm_start.SettingError, OSError):
            continue
        if any(age is not None and age < WARM_WAIT_S for age in ages):
            held.add(key)
    return held


def wait_warming(device_keys: list[str], timeout_s: float = WARM_WAIT_S) -> None:
    """Wait until none of `device_keys` is held by a starting warm server (or `timeout_s` passed)."""
    deadline = time.monotonic() + timeout_s
    while warming(device_keys) and time.monotonic() < deadline:
        time.sleep(0.1)


def launch_warm_waiter(store_path: str, device_keys: list[str]) -> None:
    """A detached process that ticks once the lanes' starting warm servers are ready (wait_warming),
    so a job held for one starts the moment it can, whichever page or terminal queued it. One per
    set of lanes in this process at most every WARM_WAIT_S."""
    lanes = tuple(sorted(device_keys))
    if time.monotonic() - _WAITERS.get(lanes, -WARM_WAIT_S) < WARM_WAIT_S:
        return
    _WAITERS[lanes] = time.monotonic()
    with contextlib.suppress(OSError):
        _launch_tick(store_path, f"from core.runs import processes; processes.wait_warming({list(lanes)!r})\n")


TICKER_WAIT_S = 120.0  # how long a ticker waits for the worker it follows to exit


def launch_ticker(store_path: str, after_pid: int | None = None) -> None:
    """A short-lived detached process that ticks once: used by a worker that is about to die. With
    `after_pid` it first waits for that worker to exit: its lane is free only when it is gone."""
    wait = f"from core.runs import processes; processes.wait_for_exit({after_pid!r}, {TICKER_WAIT_S!r})\n"
    _launch_tick(store_path, wait)


def launch_watcher(store_path: str, pid: int) -> bool:
    """A detached process that sleeps until worker `pid` exits, however it ends (its pidfd: no
    polling, no CPU while the job runs), then ticks once: a worker killed outright (kill -9, the
    out-of-memory killer) has its run ended and its lane's next job started at once, not at some
    page's next tick. It imports the queue only then, so nothing of it overlaps a measurement.
    False where the system has no pidfd (the worker's own ticker at its end does the same)."""
    if not hasattr(os, "pidfd_open"):
        return False
    wait = (
        "import os, select\n"
        "try:\n"
        f"    select.select([os.pidfd_open({int(pid)})], [], [])\n"
        "except ProcessLookupError:\n"
        "    pass\n"
    )
    try:
        _launch_tick(store_path, wait)
    except OSError:
        return False
    return True


def _launch_tick(store_path: str, wait: str) -> None:
    """A detached process, in a session of its own (it outlives the worker's process group: a
    cancel, a time limit), that runs `wait` and then ticks once, starting what races (prewarm)."""
    env = dict(os.environ)
    where = "None" if is_server_url(store_path) else repr(store_path)  # None: COMPILE_LAB_STORE
    store_arguments(store_path, env)
    code = (
        wait
        + f"from core.runs.queue import tick; from core.runs.store import Store; tick(Store({where}), prewarm=True)"
    )
    ticker = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=PROJECT_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    race_conditions.unpin_child(ticker.pid)  # the worker it follows is pinned; what it starts must not be


def process_age_s(pid: int) -> float | None:
    """How long process `pid` has run, by this box's boot clock (which no step of the wall clock
    moves: an NTP step, a resumed VM); None where /proc cannot say."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            started_ticks = int(fh.read().rsplit(b")", 1)[1].split()[19])  # field 22, starttime
        return max(time.clock_gettime(time.CLOCK_BOOTTIME) - started_ticks / os.sysconf("SC_CLK_TCK"), 0.0)
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def wait_for_exit(pid: int | None, timeout_s: float) -> bool:
    """Wait until worker `pid` is gone (True) or `timeout_s` passed (False)."""
    deadline = time.monotonic() + timeout_s
    while pid_alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def thread_deprioritized() -> bool:
    """Whether this thread runs at a lower CPU priority than its process (a viewer's refresh in the
    app: core.view.run_screen.shared_board.yield_to_measurements). A worker started from it would inherit that
    priority and measure its race with it, and a thread cannot raise its priority back."""
    if not sys.platform.startswith("linux"):  # priorities are per process there; a thread id is no pid
        return False
    try:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) > os.getpriority(os.PRIO_PROCESS, os.getpid())
    except OSError:
        return False


def pid_alive(pid: int | None) -> bool:
    """Is `pid` a live Compile Lab worker? (Reaps it if it is our exited child; a reused pid
    running something else counts as dead.)"""
    if not pid:
        return False
    try:
        os.waitpid(pid, os.WNOHANG)
    except (ChildProcessError, OSError):
        pass
    if not pid_running(pid):
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            command = fh.read()
        if b"core.runs.worker" in command:
            return True
        if b"core.runs.warm_server" in command:  # a warm server, or a job it forked (core.runs.warm_start)
            with open(f"/proc/{pid}/comm", "rb") as fh:
                return fh.read().strip() == warm_start.JOB_NAME.encode()
        if not command:  # in execve (or a kernel thread, never a reused worker pid): not dead yet
            return True
        # A worker this process just launched, between fork and exec, still shows our command line.
        with open("/proc/self/cmdline", "rb") as fh:
            return command == fh.read()
    except (OSError, IndexError):
        return True  # no /proc (macOS): trust kill(0)


def terminate_group(pid: int, wait_s: float = TERMINATE_WAIT_S) -> None:
    """SIGTERM the worker's process group (it leads its own session), SIGKILL what remains."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if not pid_alive(pid):
                return
            time.sleep(0.05)


# ----------------------------------------------------------------------
# Replicate processes: how a race's first process (a worker, or a terminal's `race`) starts each
# replicate and reads back what it measured (core.engine.trainer runs it; core.engine.intervals
# says why and how the headline uses it). No torch in the parent.
#
# `start_replicate` is the one place a replicate process is started, through the one way any fresh
# process with captured output starts (core.runs.warm_start.start_fresh, as the Under the hood demos'
# do). Where a warm server for the race process's own environment is ready (a worker's: the app's
# lane's; a terminal's `race`: one of its own, OwnWarmServer), the replicate is forked from it, torch
# and the engine already imported, and costs little more than its steps; otherwise it starts cold,
# `python -m core.runs.processes`, as before. Either way it inherits its race's process
# conditions: the same environment (malloc settings included), the cores and threads the first
# process had (core.runs.race_conditions.Conditions, handed over in its job), and the first process's
# compile cache.
#
# Either way it ends with its race: it watches the race process (`race_pid` in its job) and leaves
# the moment that process is gone, however it went (a kill -9 of the worker alone, a crash, a
# terminal's race ended by SIGTERM or SIGKILL), and the race process kills it on a cancel or its own
# time limit for it. A cold one is also a child in the first process's process group, so a cancel
# (SIGTERM to the group), a time limit (SIGKILL to it) or Ctrl-C in a terminal reach it at once; a
# warm one leads a session of its own (the server's fork), which no group signal of the race reaches.
#
# `python -m core.runs.processes` (and a warm one alike) reads its job as one JSON object on
# stdin and prints its result as one line, RESULT_PREFIX and JSON, on stdout.

RESULT_PREFIX = "replicate-result "
WARM_ENTRY = "core.runs.processes:warm_main"


def start_replicate(job: dict[str, Any], env: dict[str, str] | None = None) -> warm_start.FreshProcess:
    """Start one replicate process for `job` (what run_replicate sends), on its stdin: the one way
    one starts, warm where the warm server of `env` is ready (on the race's cores), else cold.
    `env`: the race process's own (its malloc settings, its store's environment), the default; a
    warm-started race process's is the one it was forked with, which names the server that forked it."""
    job = {"race_pid": os.getpid(), **job}
    env = warm_start.server_environment() if env is None else env
    cores = (job.get("conditions") or {}).get("cores")
    return warm_start.start_fresh(
        WARM_ENTRY,
        "core.runs.processes",
        [],
        env,
        stdin_text=json.dumps(job),
        cpus=list(cores) if cores else None,
    )


def run_replicate(
    spec: Any,
    number: int,
    steps: int,
    cache_dir: str,
    timeout_s: float | None = None,
    *,
    conditions: Conditions | None = None,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Run replicate `number` of the race `spec` in a process of its own and wait for it: what it
    measured ({"process": ..., "eager_step_times_s": ..., "compiled_step_times_s": ...}), or a
    process that says why it failed (its error, its last line on stderr)."""
    started = time.time()
    job = {
        "spec": spec.to_dict(),
        "number": number,
        "steps": steps,
        "cache_dir": cache_dir,
        "conditions": conditions.to_dict() if conditions is not None else None,
        "sent_at": started,
    }
    proc = start_replicate(job, env)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except BaseException as exc:  # a cancel, Ctrl-C, or the time limit: the replicate goes with it
        proc.kill()
        if isinstance(exc, subprocess.TimeoutExpired):
            return _failed(number, f"replicate {number} took over {timeout_s:.0f} s", started)
        raise
    for line in reversed(out.splitlines()):
        if line.startswith(RESULT_PREFIX):
            result = json.loads(line[len(RESULT_PREFIX) :])
            result["process"]["wall_s"] = round(time.time() - started, 2)
            return result
    return _failed(number, ended_why(number, proc.returncode, err), started)


def ended_why(number: int, code: int | None, err: str) -> str:
    """Why replicate `number` gave no result: the signal that killed it (its last line on stderr is
    then whatever it printed before, a warning, not why it ended), else its last line on stderr."""
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"replicate {number} was killed by {name}"
    last = next((line for line in reversed(err.splitlines()) if line.strip()), f"exit status {code}")
    return f"replicate {number} failed: {last.strip()[:300]}"


SERVER_READY_WAIT_S = 30.0  # how long a race outside the app waits for its own warm server to serve


class OwnWarmServer:
    """The replicates of a race outside the app (the terminal's `race`), forked from a warm server
    of its own, as the app's worker forks them from the lane's.

    The terminal has no warm server to fork from, and a replicate started cold pays 6-7 s of imports
    here before its first step (0.4 s forked). So before the first replicate, once the first process
    has ended and nothing is being measured, this starts a server for the race process's environment,
    waits until it serves (its imports take about what one cold start does), and stops it when the
    race ends (`close`); it leaves with the race process too, should that be killed. Where warm starts
    are off, unsupported, the race is traced (`--compile-trace`), or the server does not come up in
    time, replicates start cold, as before."""

    def __init__(self, conditions: Conditions | None):
        self.conditions = conditions
        self.env = {**warm_start.server_environment(), warm_start.APP_PID_VARIABLE: str(os.getpid())}
        self._asked = False
        self._started: int | None = None

    def __call__(self, spec: Any, number: int, steps: int, cache_dir: str, timeout_s: float | None = None):
        if not self._asked:
            self._asked = True
            self._start_server()
        return run_replicate(spec, number, steps, cache_dir, timeout_s, conditions=self.conditions, env=self.env)

    def _start_server(self) -> None:
        from core.engine.spec import data_home
        from core.runs import race_conditions

        try:
            if not (warm_start.supported() and warm_start.enabled(self.env)) or "TORCH_TRACE" in self.env:
                return  # a traced race's replicates start cold, as a traced worker does: torch reads it at import
            self._started = warm_start.ensure_server(
                self.env, os.path.join(data_home(), "logs"), race_conditions.unpinned_cores()
            )
        except (warm_start.SettingError, OSError):
            return  # a setting it cannot read, a data folder it cannot write: replicates start cold
        deadline = time.monotonic() + SERVER_READY_WAIT_S
        while warm_start.server_state(self.env) != "ready":
            if self._started is not None and not pid_running(self._started):
                return  # it left (its log says why): cold
            if time.monotonic() > deadline:  # still importing: it must not import beside a replicate's steps
                if self._started is not None:
                    with contextlib.suppress(OSError):
                        os.kill(self._started, signal.SIGKILL)
                    self._started = None
                return
            time.sleep(0.1)

    def close(self) -> None:
        """Stop the server this race started (its children, the replicates, run on)."""
        if self._started is not None:
            warm_start.stop_server(self.env)
            self._started = None


def _failed(number: int, error: str, started: float) -> dict[str, Any]:
    process = ProcessResult(number, None, None, 0, error=error, wall_s=round(time.time() - started, 2))
    return {"process": process.to_dict(), "eager_step_times_s": [], "compiled_step_times_s": []}


def warm_main(argv: list[str]) -> int:
    """A replicate forked by a warm server: its job on its stdin, as a cold one's; it leaves with its
    race process (it is in no process group of the race's)."""
    entered = time.time()
    job = json.loads(sys.stdin.read())
    leave_with(int(job.get("race_pid") or 0))
    return measure_job(job, entered)


def leave_with(pid: int) -> None:
    """End this process the moment process `pid` is gone: with its session (its compile workers)
    where it leads one (a warm replicate), else itself alone (a cold one, in its race's process
    group, which may hold a terminal's other processes; its compile workers watch it and leave). A
    thread that blocks on the process's pidfd (Linux 5.3+; elsewhere it looks twice a second): it
    costs the measurement nothing while it waits."""
    if pid <= 0:
        return

    def leave() -> None:
        if os.getpgrp() == os.getpid():
            os.killpg(os.getpgrp(), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)

    def watch() -> None:
        try:
            fd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            fd = None
        if fd is not None:
            readable([fd])
        else:
            while pid_running(pid):
                time.sleep(0.5)
        leave()

    if not pid_running(pid):
        leave()
    threading.Thread(target=watch, name="leave-with-race", daemon=True).start()


def main() -> int:
    """The replicate process started cold: its race's conditions, then the replicate, then one line
    of result; it leaves with its race process, as a warm one does."""
    entered = time.time()
    job = json.loads(sys.stdin.read())
    leave_with(int(job.get("race_pid") or 0))
    return measure_job(job, entered)


def measure_job(job: dict[str, Any], entered: float) -> int:
    """`entered`: when this process's own code began (a cold one has started Python by then)."""
    from core.engine.spec import RunSpec
    from core.engine.trainer import measure_replicate as measure
    from core.runs import race_conditions

    given = Conditions.from_dict(job.get("conditions"))
    applied = race_conditions.apply_given(given) if given is not None else None
    result = measure(
        RunSpec.from_dict(job["spec"]), int(job["number"]), int(job["steps"]), job["cache_dir"], job.get("sent_at")
    )
    result["conditions"] = applied.to_dict() if applied is not None else None
    result["process"]["started"] = warm_start.how_started()
    result["entered_at"] = entered  # with sent_at and first_step_at: where its start went
    print(RESULT_PREFIX + json.dumps(result, default=float), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
