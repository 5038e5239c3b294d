"""The job queue: enqueue, dispatch, cancel, reconcile. No daemon, no torch.

Any process may `tick()`: whoever enqueues, a worker that finishes, a page refreshing, a CLI
waiting. Dispatch runs inside an IMMEDIATE (write-locked) SQLite transaction, so two ticks at
once cannot start the same job or two jobs on one device, across threads and processes.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core import PROJECT_ROOT
from core.engine.spec import DeviceCaps, Problem, RunSpec, SpecError, resolve_device, validate
from core.runs.limits import HostLimits, load_host_limits
from core.runs.store import ACTIVE_STATES, FINAL_STATES, Run, Store

HOST = socket.gethostname()
START_GRACE_S = 30.0  # a dispatched job whose worker has not claimed it by then has failed to start
HEARTBEAT_STALE_S = 60.0  # a live pid that has not heartbeaten for this long is hung
TERMINATE_WAIT_S = 2.0  # SIGTERM, then SIGKILL after this: cancel completes within 3 s
PROBE_DEVICE_KEY = "probe"
PROBE_RETRY_S = 60.0  # a probe that failed is retried after this, not on every page refresh  # the probe only asks what the device is; it times nothing
LOOKUP_DEVICE_KEY = "lookup"  # model lookups: a lane of their own, beside measurements (see JOB_KINDS)


class JobError(Exception):
    """A request the queue refuses (not yours, queue full, no such run): a message for a person."""


@dataclass(frozen=True)
class JobKind:
    """How the queue handles one kind of job; the worker holds the code that runs it."""

    name: str
    check: Callable[[dict[str, Any], DeviceCaps | None, HostLimits], list[Problem]]
    device_key: Callable[[dict[str, Any], DeviceCaps | None], str]


def _race_problems(params: dict[str, Any], caps: DeviceCaps | None, limits: HostLimits) -> list[Problem]:
    try:
        spec = RunSpec.from_dict(params)
    except SpecError as exc:
        return exc.problems
    except TypeError as exc:
        return [Problem("spec", str(exc))]
    problems = validate(spec, caps)
    return problems + [p for p in limits.problems(spec) if p.field not in {q.field for q in problems}]


ANY_GPU = "cuda"  # a queued CUDA job's key until dispatch picks an idle GPU lane: cuda:0 .. cuda:N-1


def _race_device_key(params: dict[str, Any], caps: DeviceCaps | None) -> str:
    return resolve_device(params.get("device", "auto"), caps or DeviceCaps())


def same_device(run_key: str, key: str) -> bool:
    """Is a run on `run_key` ('cuda:3') on the device `key` names ('cuda' = any GPU lane)?"""
    return run_key == key or (key == ANY_GPU and run_key.startswith("cuda:"))


def device_lanes(caps: DeviceCaps | None) -> list[str]:
    """The queue's lanes on this machine: the CPU, and one per GPU (each runs one job at a time)."""
    gpus = caps.cuda_lanes if caps is not None and caps.cuda else 0
    return ["cpu"] + [f"cuda:{i}" for i in range(gpus)] + (["mps"] if caps is not None and caps.mps else [])


def _demo_problems(params: dict[str, Any], caps: DeviceCaps | None, limits: HostLimits) -> list[Problem]:
    from core.engine.explain import demo_device_problem, demo_problems

    problems = [Problem("demo", message) for message in demo_problems(params)]
    device = demo_device_problem(params.get("demo", ""), caps) if not problems else None
    return problems + ([Problem("device", device)] if device else [])


def _demo_device_key(params: dict[str, Any], caps: DeviceCaps | None) -> str:
    """Demos time things too: they take the device's turn like a race."""
    return _race_device_key({"device": "auto"}, caps)


def _lookup_problems(params: dict[str, Any], caps: DeviceCaps | None, limits: HostLimits) -> list[Problem]:
    from core.runs.model_catalog import lookup_problems

    return lookup_problems(params, limits)


# A lookup (a model's parameters and input, timm's list of names) builds a model on the meta
# device in a worker that sees no GPU: it never waits behind a race, and takes no GPU. It runs
# niced on one thread, on the core a CPU race leaves to the app (COMPILE_LAB_WORKER_THREADS).
JOB_KINDS: dict[str, JobKind] = {
    "race": JobKind("race", _race_problems, _race_device_key),
    "demo": JobKind("demo", _demo_problems, _demo_device_key),
    "probe": JobKind("probe", lambda params, caps, limits: [], lambda params, caps: PROBE_DEVICE_KEY),
    "lookup": JobKind("lookup", _lookup_problems, lambda params, caps: LOOKUP_DEVICE_KEY),
}
UNCOUNTED_KINDS = ("probe", "lookup")  # the app's own questions: no visitor's queue limit applies
# ...but a visitor typing names could still queue lookups without end (each builds a model): at
# most this many of one asker's lookups wait at once, whatever the host's limits say.
MAX_QUEUED_LOOKUPS = 4


def latest_probe(store: Store) -> Run | None:
    """This host's most recent finished device probe."""
    for run in store.list_runs(kind="probe", status=["done"], limit=20):
        if run.host == HOST and run.summary and "caps" in run.summary:
            return run
    return None


def stored_demo(store: Store, demo: str, params: dict[str, Any]) -> Run | None:
    """The newest finished (or still running) measurement of this demo with exactly these
    parameters, on this machine's device and torch version: what the page shows without re-measuring."""
    probe = latest_probe(store)
    torch_version = (probe.summary or {}).get("environment", {}).get("torch") if probe else None
    caps = DeviceCaps.from_dict(probe.summary["caps"]) if probe else None
    key = _demo_device_key({}, caps)
    for run in store.list_runs(kind="demo", limit=200):
        if (
            run.params != {"demo": demo, "params": params}
            or not same_device(run.device_key, key)
            or run.status == "cancelled"
        ):
            continue
        if run.finished and run.environment and torch_version and run.environment.get("torch") != torch_version:
            continue
        return run
    return None


def known_caps(store: Store) -> DeviceCaps | None:
    """What the latest device probe recorded (None before any probe has finished)."""
    probe = latest_probe(store)
    return DeviceCaps.from_dict(probe.summary["caps"]) if probe else None


def ensure_probe(store: Store, owner: str = "system", wait_s: float = 0.0) -> DeviceCaps | None:
    """Device facts, probing first if this host has none; waits up to wait_s for the probe."""
    caps = known_caps(store)
    if caps is not None:
        return caps
    recent = [
        r
        for r in store.list_runs(kind="probe", limit=5)
        if r.host in (None, HOST) and (not r.finished or (r.finished_at or 0) > time.time() - PROBE_RETRY_S)
    ]
    if not recent:  # none waiting, running, or failed a moment ago: probe (again)
        enqueue(store, {}, owner, kind="probe", limits=HostLimits())  # even when the host's config is broken
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        time.sleep(0.2)
        tick(store)
        caps = known_caps(store)
        if caps is not None:
            return caps
    return None


def enqueue(
    store: Store,
    params: RunSpec | dict[str, Any],
    owner: str,
    kind: str = "race",
    limits: HostLimits | None = None,
    caps: DeviceCaps | None = None,
    address: str | None = None,
) -> int:
    """Validate and queue a job; returns its run id. Raises SpecError (bad input, over a host
    limit) or JobError (queue full) without writing anything. `address`: the visitor's client
    address where the host limits by it (core.runs.identity); the per-person limit then counts
    every job from that address too."""
    if kind not in JOB_KINDS:
        raise JobError(f"unknown job kind {kind!r}; known: {', '.join(JOB_KINDS)}")
    job = JOB_KINDS[kind]
    limits = limits or load_host_limits()
    params = params.to_dict() if isinstance(params, RunSpec) else dict(params)
    caps = caps if caps is not None else known_caps(store)
    problems = job.check(params, caps, limits)
    if problems:
        raise SpecError(problems)
    if caps is None and kind not in UNCOUNTED_KINDS and params.get("device", "auto") == "auto":
        # Without the probe's answer "auto" cannot be placed in the right device's queue.
        raise JobError("still finding out which device this machine has: try again in a few seconds")
    with store.transaction(immediate=True) as c:
        if kind not in UNCOUNTED_KINDS:
            check_room(c, owner, limits, address=address)
        elif kind == "lookup":
            check_lookup_room(c, owner, address)
        run_id = store._insert_run(c, job_row(kind, params, owner, caps, limits, client=address))
    tick(store)
    return run_id


def check_lookup_room(conn: Any, owner: str, address: str | None = None) -> None:
    """Raise JobError when `owner` (or, with `address`, anyone at that client address) already
    has MAX_QUEUED_LOOKUPS lookups waiting. Call inside the enqueuing transaction."""
    waiting = conn.execute(
        "SELECT COUNT(*) FROM runs WHERE kind = 'lookup' AND status = 'queued' "
        "AND (owner = ? OR (? IS NOT NULL AND client = ?))",
        (owner, address, address),
    ).fetchone()[0]
    if waiting >= MAX_QUEUED_LOOKUPS:
        raise JobError(
            f"you already have {waiting} model lookups waiting (at most {MAX_QUEUED_LOOKUPS} at once): "
            "this one is asked once they are answered"
        )


def check_room(
    conn: Any, owner: str, limits: HostLimits, adding: int = 1, what: str = "", address: str | None = None
) -> None:
    """Raise JobError when `adding` more jobs of `owner` (`what` they are, for the message) would
    overfill the queue or pass the owner's share (with `address`, every job from that client address
    counts as the owner's too). Call inside the enqueuing transaction, so the counts cannot change
    meanwhile."""
    what = what or f"these {adding} jobs"
    waiting = conn.execute(  # the app's own lookups and probes do not fill a visitor's queue
        "SELECT COUNT(*) FROM runs WHERE status = 'queued' AND kind NOT IN ('probe', 'lookup')"
    ).fetchone()[0]
    if limits.max_queue_length is not None and waiting + adding > limits.max_queue_length:
        if adding == 1 or waiting >= limits.max_queue_length:
            raise JobError(
                f"the queue is full ({waiting} jobs waiting; this host allows {limits.max_queue_length}): try again later"
            )
        raise JobError(
            f"the queue has room for {limits.max_queue_length - waiting} more jobs, not {what}: try fewer points or later"
        )
    mine = conn.execute(
        "SELECT COUNT(*) FROM runs WHERE (owner = ? OR (? IS NOT NULL AND client = ?)) "
        "AND status IN ('queued', 'starting', 'running') AND kind NOT IN ('probe', 'lookup')",
        (owner, address, address),
    ).fetchone()[0]
    if limits.max_queued_per_owner is not None and mine + adding > limits.max_queued_per_owner:
        if adding == 1:
            raise JobError(
                f"you already have {mine} jobs queued or running"
                + (" (counting every browser at your address)" if address else "")
                + f"; this host allows {limits.max_queued_per_owner} per person"
            )
        raise JobError(
            f"{what} and your {mine} jobs queued or running would pass this host's limit of "
            f"{limits.max_queued_per_owner} per person: try fewer points"
        )


def job_row(
    kind: str, params: dict[str, Any], owner: str, caps: DeviceCaps | None, limits: HostLimits, **fields: Any
) -> dict[str, Any]:
    """The run row of a newly queued job (already validated)."""
    return {
        "kind": kind,
        "params": params,
        "owner": owner,
        "device_key": JOB_KINDS[kind].device_key(params, caps),
        "status": "queued",
        "phase": "queued",
        "created_at": time.time(),
        "time_limit_s": limits.job_time_limit_s,
        "host": HOST if kind == "probe" else None,
        **fields,
    }


def worker_environment(device_key: str, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a worker for one lane: a GPU lane's worker sees only its own GPU (as
    cuda:0), so two races never share a GPU and a job cannot wander to another one. Indices are
    positions in the host's own CUDA_VISIBLE_DEVICES when it sets one."""
    env = dict(os.environ if environ is None else environ)
    if device_key == LOOKUP_DEVICE_KEY:
        env["CUDA_VISIBLE_DEVICES"] = ""  # a lookup builds on the meta device: it must not touch a GPU
        env["COMPILE_LAB_LANE"] = device_key
    if device_key.startswith("cuda:"):
        index = int(device_key.split(":", 1)[1])
        visible = [d.strip() for d in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
        env["CUDA_VISIBLE_DEVICES"] = visible[index] if index < len(visible) else str(index)
        env["COMPILE_LAB_LANE"] = device_key
    return env


def run_files_dir(store_path: str, run_id: int) -> str:
    """Where a run's files live (profiler traces, torch's compile trace): beside the store."""
    return os.path.join(os.path.dirname(os.path.abspath(store_path)), "traces", f"run-{run_id}")


def compile_trace_dir(store_path: str, run_id: int) -> str:
    return os.path.join(run_files_dir(store_path, run_id), "torch_trace")


def launch_worker(store_path: str, run_id: int, device_key: str = "cpu") -> int:
    """Start `python -m core.runs.worker` for one job in its own session, so it outlives its parent."""
    log_dir = os.path.join(os.path.dirname(store_path), "logs")
    os.makedirs(log_dir, exist_ok=True)
    env = worker_environment(device_key)
    run = Store(store_path).get_run(run_id)
    if run is not None and run.kind == "race" and (run.params or {}).get("compile_trace") is True:
        # torch reads TORCH_TRACE when it is imported: it must be in the worker's environment.
        env["TORCH_TRACE"] = compile_trace_dir(store_path, run_id)
    command = [sys.executable, "-m", "core.runs.worker", "--store", store_path, "--run-id", str(run_id)]
    if os.environ.get("COMPILE_LAB_TEST_LAUNCHER") == "sleep":  # the tests' stand-in, in every process
        command = [sys.executable, "-c", "import time; time.sleep(120)", "core.runs.worker", str(run_id)]
    with open(os.path.join(log_dir, f"run-{run_id}.log"), "ab") as log:
        proc = subprocess.Popen(
            command,
            cwd=PROJECT_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return proc.pid


def launch_ticker(store_path: str) -> None:
    """A short-lived detached process that ticks once: used by a worker that is about to die."""
    subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"from core.runs.jobs import tick; from core.runs.store import Store; tick(Store({store_path!r}))",
        ],
        cwd=PROJECT_ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def thread_deprioritized() -> bool:
    """Whether this thread runs at a lower CPU priority than its process (a viewer's refresh in the
    app: core.view.live_board.yield_to_measurements). A worker started from it would inherit that
    priority and measure its race with it, and a thread cannot raise its priority back."""
    if not sys.platform.startswith("linux"):  # priorities are per process there; a thread id is no pid
        return False
    try:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) > os.getpriority(os.PRIO_PROCESS, os.getpid())
    except OSError:
        return False


def tick(store: Store, launch: Callable[[str, int, str], int] | None = None) -> list[int]:
    """Reconcile, then start the oldest queued job on every idle lane. Safe to call anywhere.

    Lanes: the CPU, and each GPU by index; a CUDA job waits for any idle GPU lane and is pinned to
    it. The device probe never runs beside a job on a device (a second CUDA context during a
    measurement), except when there is no probe result yet, and no job starts while it runs.
    From a deprioritized thread it does nothing: the next tick of any other (a page's next refresh,
    the sidebar, a worker finishing, the CLI) starts what waits.
    """
    if thread_deprioritized():
        return []
    launch = launch or launch_worker
    reconcile(store)
    caps = known_caps(store)
    gpu_lanes = [lane for lane in device_lanes(caps) if lane.startswith("cuda:")] or ["cuda:0"]
    now = time.time()
    started: list[tuple[int, str]] = []
    paused = store.queue_paused()  # the host's admin paused it: only the device probe may start
    with store.transaction(immediate=True) as c:
        busy = {
            row[0] for row in c.execute("SELECT DISTINCT device_key FROM runs WHERE status IN ('starting', 'running')")
        }
        for row in c.execute("SELECT id, kind, device_key FROM runs WHERE status = 'queued' ORDER BY id").fetchall():
            key = row["device_key"]
            if key == PROBE_DEVICE_KEY:
                if key in busy or (caps is not None and busy):
                    continue
            elif paused or (PROBE_DEVICE_KEY in busy and caps is not None):
                continue
            elif key == ANY_GPU:
                free = [lane for lane in gpu_lanes if lane not in busy]
                if not free:
                    continue
                key = free[0]
            elif key in busy:
                continue
            busy.add(key)
            c.execute(
                "UPDATE runs SET status = 'starting', phase = 'starting', started_at = ?, heartbeat_at = ?, host = ?, "
                "device_key = ? WHERE id = ? AND status = 'queued'",
                (now, now, HOST, key, row["id"]),
            )
            started.append((int(row["id"]), key))
    for run_id, key in started:
        try:
            pid = launch(store.path, run_id, key)
        except OSError as exc:
            store.finish_run(run_id, "failed", error=f"could not start a worker process: {exc}")
            continue
        # The worker records its own pid when it claims the job; this covers the gap before that.
        with store.transaction() as c:
            c.execute("UPDATE runs SET pid = ? WHERE id = ? AND pid IS NULL", (pid, run_id))
    return [run_id for run_id, _ in started]


def reconcile(store: Store, now: float | None = None) -> list[int]:
    """Find active jobs whose worker died, hung, overran its limit or was asked to cancel; end them.

    Returns the ids it ended. A job on another host is judged by its heartbeat alone.
    """
    now = time.time() if now is None else now
    ended: list[int] = []
    for run in store.list_runs(status=ACTIVE_STATES):
        local = run.host == HOST
        alive = pid_alive(run.pid) if (local and run.pid) else None
        if run.cancel_requested:
            outcome = ("cancelled", "cancelled")
        elif alive is False:
            outcome = ("failed", "worker stopped unexpectedly")
        elif run.pid is None and run.started_at and now - run.started_at > START_GRACE_S:
            outcome = ("failed", f"worker did not start within {START_GRACE_S:.0f} s")
        elif run.time_limit_s and run.started_at and now - run.started_at > run.time_limit_s:
            outcome = ("failed", f"timed out after {run.time_limit_s:.0f} s")
        elif run.heartbeat_at and now - run.heartbeat_at > HEARTBEAT_STALE_S:
            outcome = ("failed", f"worker stopped responding (no heartbeat for {now - run.heartbeat_at:.0f} s)")
        else:
            continue
        status, reason = outcome
        # Record the outcome first: a worker stopped by SIGTERM would otherwise call it "cancelled".
        if store.finish_run(run.id, status, error=None if status == "cancelled" else reason, phase=reason):
            ended.append(run.id)
        if alive:
            terminate_group(run.pid)
    return ended


def pid_alive(pid: int | None) -> bool:
    """Is `pid` a live Compile Lab worker? (Reaps it if it is our exited child; a reused pid
    running something else counts as dead.)"""
    if not pid:
        return False
    try:
        os.waitpid(pid, os.WNOHANG)
    except (ChildProcessError, OSError):
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            if fh.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                return False
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            command = fh.read()
        if b"core.runs.worker" in command:
            return True
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


def _owned(store: Store, run_id: int, owner: str, action: str) -> Run:
    run = store.get_run(run_id)
    if run is None:
        raise JobError(f"there is no run {run_id}")
    if run.owner != owner:
        raise JobError(f"run {run_id} belongs to someone else: you can {action} only your own runs")
    return run


def cancel(store: Store, run_id: int, owner: str) -> str:
    """Cancel a queued or running job of `owner`; returns the run's resulting status."""
    run = _owned(store, run_id, owner, "cancel")
    if run.finished:
        return run.status
    if run.status == "queued" and store.finish_run(run_id, "cancelled", phase="cancelled"):
        return "cancelled"
    if store.finish_run(run_id, "cancelled", phase="cancelled", cancel_requested=1):
        run = store.get_run(run_id)
        if run and run.pid and run.host == HOST:
            terminate_group(run.pid)  # recorded first, so the worker's own ending cannot overwrite it
    tick(store)
    return store.get_run(run_id).status


def delete(store: Store, run_id: int, owner: str) -> None:
    """Delete a run of `owner` and its events, cancelling it first if it is still active."""
    run = _owned(store, run_id, owner, "delete")
    if not run.finished:
        cancel(store, run_id, owner)
    store.delete_run(run_id)
    shutil.rmtree(run_files_dir(store.path, run_id), ignore_errors=True)


def queue_position(store: Store, run_id: int) -> int | None:
    """1 = next to start on its device; None when the run is not waiting."""
    run = store.get_run(run_id)
    if run is None or run.status != "queued":
        return None
    return store.queued_ahead(run) + 1


def compile_failed(run: Run) -> str | None:
    """Why torch.compile could not handle this race's model (a finding: eager ran), else None."""
    reason = (run.summary or {}).get("compile_failed") if isinstance(run.summary, dict) else None
    return reason if isinstance(reason, str) else None


def compile_skipped(run: Run) -> str | None:
    """Why this race's compiled variant ran no compiled code, once the worker knows (else None)."""
    for record in (run.summary, run.details):
        if isinstance(record, dict) and isinstance(record.get("compile_skipped"), str):
            return record["compile_skipped"]
    return None


def describe(store: Store, run: Run) -> str:
    """The run's state as a person reads it: 'queued (position 2)', 'compiled epoch 2/3', ..."""
    if run.status == "queued":
        paused = "; the host has paused the queue" if store.queue_paused() else ""
        return f"queued (position {queue_position(store, run.id)}{paused})"
    skipped, failed = compile_skipped(run), compile_failed(run)
    suffix = f" (compile did not happen: {skipped})" if skipped else ""
    suffix = f" (compile failed on this model: {failed}; eager ran)" if failed else suffix
    if run.status in ACTIVE_STATES:
        return (run.phase or run.status) + suffix
    if run.status == "failed":
        return f"failed: {run.error}{suffix}"
    return run.status + suffix


__all__ = [
    "FINAL_STATES",
    "JOB_KINDS",
    "JobError",
    "cancel",
    "delete",
    "describe",
    "enqueue",
    "ensure_probe",
    "known_caps",
    "queue_position",
    "reconcile",
    "tick",
]
