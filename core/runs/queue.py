"""The job queue: enqueue (with its room checks), dispatch, reconcile, cancel, delete. No daemon, no torch.

Any process may `tick()`: whoever enqueues, a worker that finishes, a page refreshing, a CLI
waiting. Dispatch is serialised by the store (core.runs.store): on SQLite inside an IMMEDIATE
(write-locked) transaction, on PostgreSQL by an advisory lock on the lane it fills and `FOR UPDATE
SKIP LOCKED` on the job it takes, so two ticks at once (threads, processes, a fleet's boxes) cannot
start the same job or two jobs on one device. What each
kind of job is comes from core.runs.job_kinds; lanes from core.runs.fleet; the worker processes
it starts and stops from core.runs.processes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from core.engine.spec import DeviceCaps, RunSpec, SpecError
from core.runs import disk_space, fleet, outage, processes, warm_start
from core.runs.device_history import estimate_details
from core.runs.fleet import ANY_GPU, HOST, LOOKUP_DEVICE_KEY, PROBE_DEVICE_KEY, device_lanes, known_caps
from core.runs.job_kinds import JOB_KINDS, UNCOUNTED_KINDS, JobKind
from core.runs.limits import HostLimits, load_host_limits
from core.runs.run_files import remove_run_files
from core.runs.store import ACTIVE_STATES, Run, Store

START_GRACE_S = 30.0  # a dispatched job whose worker has not claimed it by then has failed to start
HEARTBEAT_STALE_S = 60.0  # a live pid that has not heartbeaten for this long is hung
PROBE_RETRY_S = 60.0  # a probe that failed is retried after this, not on every page refresh


class JobError(Exception):
    """A request the queue refuses (not yours, queue full, no such run): a message for a person."""


def ensure_probe(store: Store, owner: str = "system", wait_s: float = 0.0) -> DeviceCaps | None:
    """Device facts, probing first if this host has none; waits up to wait_s for the probe."""
    caps = known_caps(store)
    if caps is not None or store.damage:  # (a damaged store is read as it is: no probe is queued in it)
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
        tick(store, prewarm=True)
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
    lane: str | None = None,
    host: str | None = None,
) -> int:
    """Validate and queue a job; returns its run id. Raises SpecError (bad input, over a host
    limit) or JobError (queue full) without writing anything. `address`: the visitor's client
    address where the host limits by it (core.runs.limits); the per-person limit then counts
    every job from that address too. `lane`: one GPU lane (cuda:N) for a CUDA job instead of the
    next idle one (the doctor's recovery check runs on the GPU that ran out of memory); with `host`,
    that lane of one box of a fleet."""
    if store.damage:
        raise JobError(store.damage)
    if kind not in JOB_KINDS:
        raise JobError(f"unknown job kind {kind!r}; known: {', '.join(JOB_KINDS)}")
    job = JOB_KINDS[kind]
    limits = limits or load_host_limits()
    params = params.to_dict() if isinstance(params, RunSpec) else dict(params)
    caps = caps if caps is not None else known_caps(store)
    problems = job.check(params, caps, limits)
    if problems:
        raise SpecError(problems)
    if caps is None and job.counted and params.get("device", "auto") == "auto":
        # Without the probe's answer "auto" cannot be placed in the right device's queue.
        raise JobError("still finding out which device this machine has: try again in a few seconds")
    # A race keeps the estimate it is launched with, so later ones can say how good estimates were.
    details = estimate_details(store, params, caps, host, lane) if kind == "race" else None
    if kind == "race" and limits.max_model_parameters is not None:  # its worker counts the model first
        details = {**(details or {}), "max_model_parameters": limits.max_model_parameters}
    with store.transaction(immediate=True) as c:
        if job.counted:
            check_room(c, owner, limits, address=address)
        elif job.max_waiting_per_asker is not None:
            check_asker_room(c, job, owner, address)
        row = job_row(kind, params, owner, caps, limits, client=address)
        if details is not None:
            row["details"] = details
        if lane is not None:
            if row["device_key"] != ANY_GPU or not lane.startswith("cuda:"):
                raise JobError(f"lane {lane} is not a GPU lane for a job on {row['device_key']}")
            row["device_key"] = lane
        if host is not None:  # one box of a fleet (core.runs.fleet_races): only its agent takes it
            row["host"] = host
        run_id = store._insert_run(c, row)
    tick(store, prewarm=True)
    return run_id


def check_asker_room(conn: Any, job: JobKind, owner: str, address: str | None = None) -> None:
    """Raise JobError when `owner` (or, with `address`, anyone at that client address) already
    has the kind's max_waiting_per_asker jobs of it waiting. Call inside the enqueuing transaction."""
    waiting = Store.waiting_of_asker(conn, job.name, owner, address)
    if job.max_waiting_per_asker is not None and waiting >= job.max_waiting_per_asker:
        raise JobError(
            f"you already have {waiting} {job.plural} waiting (at most {job.max_waiting_per_asker} at once): "
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
    waiting = Store.waiting_jobs(conn, UNCOUNTED_KINDS)  # the app's own lookups and probes do not fill a queue
    if limits.max_queue_length is not None and waiting + adding > limits.max_queue_length:
        if adding == 1 or waiting >= limits.max_queue_length:
            raise JobError(
                f"the queue is full ({waiting} jobs waiting; this host allows {limits.max_queue_length}): try again later"
            )
        raise JobError(
            f"the queue has room for {limits.max_queue_length - waiting} more jobs, not {what}: try fewer points or later"
        )
    mine = Store.unfinished_of_asker(conn, owner, address, UNCOUNTED_KINDS)
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
        "host": HOST if JOB_KINDS[kind].pinned_to_host else None,
        **fields,
    }


def tick(store: Store, launch: Callable[[str, int, str], int] | None = None, *, prewarm: bool = False) -> list[int]:
    """Reconcile, then start the next queued job (fair_order: round-robin across visitors) on every
    idle lane of this box. Safe to call anywhere.

    Lanes: the CPU, and each GPU by index; a CUDA job waits for any idle GPU lane and is pinned to
    it. The device probe never runs beside a job on a device (a second CUDA context during a
    measurement), except when there is no probe result yet, and no job starts while it runs.
    In a fleet (live agents in the store: core.runs.fleet) the agents start the measurements; this
    box starts only its own device probe and model lookups (lanes that measure nothing). With
    `prewarm` (a caller that starts races: the app's pages, a worker ending, an enqueue) and nothing
    running here, it starts the lanes' warm servers (core.runs.warm_start) that are not running yet; a
    read-only caller (the CLI's `status`, `sweeps`, a follow loop) never starts one (each started one
    per differing environment, torch imported, kept for its idle time).
    From a deprioritized thread it does nothing: the next tick of any other (a page's next refresh,
    the sidebar, a worker finishing, the CLI) starts what waits.
    """
    if processes.thread_deprioritized() or store.damage:  # (a damaged store is read, never written)
        return []
    reconcile(store)
    caps = known_caps(store)
    launch = launch or processes.launch_worker
    if fleet.live_hosts(store):  # the agents measure; this box answers only for itself
        return dispatch(store, HOST, [], caps, launch)
    lanes = [lane for lane in device_lanes(caps) if not lane.startswith("cuda:")]
    gpus = [lane for lane in device_lanes(caps) if lane.startswith("cuda:")] or ["cuda:0"]  # before the probe too
    # A lane whose warm server is still importing keeps its job queued until the server is ready (a
    # fresh app's first race or probe): a waiter ticks then, whoever queued it.
    waiting_for = [*device_lanes(caps), *([PROBE_DEVICE_KEY] if caps is None else [])]  # (the probe: the CPU's server)
    held = processes.warming(waiting_for) if launch is _LAUNCH_WORKER else set()
    started = dispatch(store, HOST, lanes + gpus, caps, launch, any_device=True, held=held)
    if held and store.list_runs(status=("queued",), limit=1):
        processes.launch_warm_waiter(store.path, sorted(held))
    if prewarm and not started and launch is _LAUNCH_WORKER and not _running_here(store, HOST):
        processes.prewarm(device_lanes(caps))  # the next job starts warm (core.runs.warm_start)
    return started


_READIED: list[bool] = []  # whether this process readied its lanes (ready_at_start)


def ready_at_start() -> None:
    """Once per app process, as it starts (app.py, its first lines; streamlit_app.py where it runs
    alone): its warm servers made its own (they leave with it) and `ready` in its default store.
    The sooner it runs, the sooner the servers' torch imports are done: they are all a first Launch
    can wait for."""
    if _READIED:
        return
    _READIED.append(True)
    warm_start.owned_by_this_app()
    try:
        ready(Store())
    except Exception as exc:  # noqa: BLE001 - a store that cannot be opened: every page says why
        logging.getLogger("compile_lab").warning("the lanes were not readied at the start: %s", exc)


def ready(store: Store) -> None:
    """What the app does as it starts, before any visitor asks for a race: start its lanes' warm
    servers (torch imported in them, never in the app) and queue the device probe where this host
    has none, so the first Launch finds a server ready and the probe forks from it too (it waits for
    the starting server: tick). Nothing with warm starts off but the probe; nothing at all in a fleet
    (its agents ready their own lanes) or where a job already runs here."""
    if store.damage or fleet.live_hosts(store) or _running_here(store, HOST):
        return
    caps = known_caps(store)
    processes.prewarm(device_lanes(caps))
    if caps is None:
        ensure_probe(store)


# The built-in launcher: a launcher a caller passes to tick, or puts in its place (a bench's that
# refuses to start anything), starts no warm server; a host's own (COMPILE_LAB_LAUNCHER) neither.
_LAUNCH_WORKER = processes.launch_worker


def _running_here(store: Store, host: str) -> bool:
    """Whether a job is starting or running on `host` (a warm server's imports must not overlap it)."""
    return any(run.host == host for run in store.list_runs(status=("starting", "running"), limit=100))


def dispatch(
    store: Store,
    host: str,
    lanes: list[str],
    caps: DeviceCaps | None,
    launch: Callable[[str, int, str], int],
    any_device: bool = False,
    side_lanes: bool = True,
    held: set[str] | frozenset[str] = frozenset(),
) -> list[int]:
    """Start queued jobs on `host`'s idle lanes (fair_order). Each lane and each job is taken under
    a lock (the write lock on SQLite; on PostgreSQL the lane's advisory lock and the job's row,
    FOR UPDATE SKIP LOCKED), and the lane is checked idle again once held: any number of
    dispatchers, on any number of boxes, never start one job twice or two jobs on one lane.
    `lanes`: the measuring lanes this host offers (cpu, cuda:N, mps): a single box (`any_device`)
    also starts a job for a device it did not list (a lane named on enqueue), an agent only its
    own. `side_lanes`: whether it also starts its own device probe and model lookups (an agent
    leaves those to the app's box). `held`: lanes that start nothing now, as if busy (their warm
    server is still starting: tick)."""
    gpu_lanes = [lane for lane in lanes if lane.startswith("cuda:")]
    now = time.time()
    started: list[tuple[int, str]] = []
    paused = store.queue_paused()  # the host's admin paused it: only the device probe may start
    with store.dispatch_transaction() as c:
        busy = Store.busy_lanes(c, host) | _lanes_held_by_exiting_workers(c, host, now) | set(held)
        for row in fair_order(c):
            if row["host"] not in (None, host):
                continue  # pinned to another box (its device probe)
            key = row["device_key"]
            if key in (PROBE_DEVICE_KEY, LOOKUP_DEVICE_KEY) and not side_lanes:
                continue
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
            elif key in busy or (key != LOOKUP_DEVICE_KEY and key not in lanes and not any_device):
                continue
            if not store.lock_lane(c, host, key) or key in Store.busy_lanes(c, host):
                busy.add(key)  # another dispatcher of this host holds the lane, or it just got a job
                continue
            if not store.lock_queued(c, row["id"]):
                continue  # another box is taking this job right now: the lane may still take the next
            if store.start_queued(c, int(row["id"]), host, key, now):
                busy.add(key)
                started.append((int(row["id"]), key))
    for run_id, key in started:
        try:
            pid = launch(store.path, run_id, key)
        except OSError as exc:
            store.finish_run(run_id, "failed", error=f"could not start a worker process: {exc}")
            continue
        # The worker records its own pid when it claims the job; this covers the gap before that.
        store.launched(run_id, pid)
    return [run_id for run_id, _ in started]


def fair_order(conn: Any) -> list[Any]:
    """The queued jobs in the order they start: round-robin across visitors, not first come first
    served, so a visitor who queues many delays only themselves. A job's turn is how many jobs of
    its visitor were ahead of it when it was queued (still waiting, running, or finishing later):
    first by client address where the host keeps one (a flood of browser identities from one
    address is one visitor), then by owner; among equal turns, the older job first. The app's own
    lookups and probes keep their queue order."""
    rows = Store.queue_context(conn)  # what can have been ahead of a waiting job: unfinished then, or since
    counted = [row for row in rows if row["kind"] not in UNCOUNTED_KINDS]
    turns = []
    for row in rows:
        if row["status"] != "queued":
            continue
        turn = (0, 0)
        if row["kind"] not in UNCOUNTED_KINDS:
            ahead = [
                i for i in counted
                if i["id"] < row["id"] and (i["finished_at"] is None or i["finished_at"] > row["created_at"])
            ]  # fmt: skip
            address = row["client"] or row["owner"]
            turn = (
                sum(1 for i in ahead if (i["client"] or i["owner"]) == address),
                sum(1 for i in ahead if i["owner"] == row["owner"]),
            )
        turns.append((turn, row["id"], row))
    return [row for _, _, row in sorted(turns, key=lambda t: (t[0], t[1]))]


EXITING_WORKER_WINDOW_S = 600.0  # a worker still alive this long after its job ended is hung: not looked for


def _lanes_held_by_exiting_workers(c: Any, host: str, now: float) -> set[str]:
    """Lanes whose last job has ended but whose worker process on this host is still alive. A job's
    end is recorded before its process exits (and a cancelled or timed-out worker takes a moment to
    die), and until it has, it holds its device's memory: after an out-of-memory, most of the GPU.
    So a lane is free only when its process is gone."""
    ended = Store.ended_workers(c, host, now - EXITING_WORKER_WINDOW_S)
    return {lane for lane, pid in ended if processes.pid_alive(pid)}


def reconcile(store: Store, now: float | None = None, host: str = HOST) -> list[int]:
    """Find active jobs whose worker died, hung, overran its limit or was asked to cancel, or whose
    agent stopped (core.runs.fleet); end them.

    Returns the ids it ended. A job on another host is judged by its heartbeat (and its agent's) alone.
    What a worker of this box kept while the store was lost is delivered first (core.runs.outage).
    A run found ending is judged again on its row once that row is held for the write (the store may
    have been locked meanwhile, by a backup or a sqlite3 shell: the worker that waited for the same
    lock has written its heartbeat first), and its worker is stopped only where this call ended it.
    """
    try:
        outage.deliver_kept(store)
    except Exception as exc:
        if not disk_space.is_store_locked(exc):
            raise  # (a locked store: the files stay for the next tick, which judges too)
        return []
    offset = 0.0 if now is None else now - time.time()  # a caller's clock (tests, the fleet's checks)
    ended: list[int] = []
    active = store.list_runs(status=ACTIVE_STATES)
    stopped = fleet.stopped_agents(store) if any(run.host not in (None, host) for run in active) else {}
    up_since = store.up_since() if active else 0.0
    for run in active:
        if _outcome(store, run, time.time() + offset, host, stopped, up_since) is None:
            continue
        try:
            with store.run_held(run.id) as (c, held):
                outcome = None if held is None or held.finished else _outcome(
                    store, held, time.time() + offset, host, stopped, up_since
                )  # fmt: skip
                if outcome is None:
                    continue
                (status, reason), alive = outcome
                # The outcome first: a worker stopped by SIGTERM would otherwise call it "cancelled".
                error = None if status == "cancelled" else reason
                if not store.finish_run(run.id, status, conn=c, error=error, phase=reason):
                    continue
        except Exception as exc:
            if not disk_space.is_store_locked(exc):
                raise
            break  # another program holds the store past the wait: judged at the next tick, not now
        ended.append(run.id)
        if alive:
            processes.terminate_group(held.pid)
    return ended + _move_stranded(store, host, time.time() + offset)


def _outcome(
    store: Store, run: Run, now: float, host: str, stopped: dict[str, Any], up_since: float
) -> tuple[tuple[str, str], bool | None] | None:
    """How an active run must end now ((status, reason), whether its worker of this box is alive),
    or None while it is fine."""
    local = run.host == host
    alive = processes.pid_alive(run.pid) if (local and run.pid) else None
    # No heartbeat could reach a server that restarted during the run; a worker of this box whose
    # heartbeats cannot reach the store (lost, or locked by another program) says it is alive in a file.
    restarted = up_since if up_since > (run.started_at or 0.0) else 0.0
    heartbeat = max(run.heartbeat_at or 0.0, restarted, outage.alive_at(store.path, run.id) if alive else 0.0)
    ran_for, silent_for = (now - run.started_at if run.started_at else 0.0), now - heartbeat
    age = processes.process_age_s(run.pid) if (alive and run.started_at) else None
    if age is not None:  # a worker of this box: judged by the boot clock too, which no clock step moves
        then = run.started_at + age  # now, on the wall clock the run began with (its process started after)
        ran_for = min(ran_for, age)
        if heartbeat <= then:  # written before any step forward: its age on that clock
            silent_for = min(silent_for, then - heartbeat)
    if run.cancel_requested:
        outcome = ("cancelled", "cancelled")
    elif not local and run.host in stopped:
        outcome = ("failed", f"agent {run.host} stopped")
    elif alive is False:
        outcome = ("failed", "worker stopped unexpectedly")
    elif run.pid is None and run.started_at and now - run.started_at > START_GRACE_S:
        outcome = ("failed", f"worker did not start within {START_GRACE_S:.0f} s")
    elif run.time_limit_s and run.started_at and ran_for > run.time_limit_s:
        outcome = ("failed", f"timed out after {run.time_limit_s:.0f} s")
    elif run.heartbeat_at and silent_for > HEARTBEAT_STALE_S:
        outcome = ("failed", f"worker stopped responding (no heartbeat for {silent_for:.0f} s)")
    else:
        return None
    return outcome, alive


def _move_stranded(store: Store, host: str, now: float) -> list[int]:
    """Queued jobs pinned to a fleet box whose agent has been gone past its heartbeat timeout (a
    race on a chosen GPU type): moved to a live lane of the same device type, else failed saying so.
    Left alone, they waited forever, counted against their owner's limit. Returns those it failed."""
    queued = [run for run in store.list_runs(status=("queued",)) if run.host not in (None, host)]
    if not queued:
        return []
    boxes = {box.name: box for box in fleet.hosts(store)}
    live_lanes = [lane for box in boxes.values() if box.live(now) for lane in box.lanes]
    failed = []
    for run in queued:
        box = boxes.get(run.host)  # not an agent's name (another app box's own jobs): not judged here
        if box is None or box.live(now) or now - box.heartbeat_at <= fleet.agent_timeout_s():
            continue
        device = next((lane.device_name for lane in box.lanes if lane.lane == run.device_key), run.device_key)
        kind = run.device_key.split(":")[0]
        other = next((lane for lane in live_lanes if lane.device_name == device and lane.lane.startswith(kind)), None)
        if other is not None:
            store.move_queued(run.id, other.host, other.lane)
            continue
        reason = f"agent {run.host} stopped before this race started, and no other box has its device ({device})"
        if store.finish_run(run.id, "failed", error=reason, phase=reason):
            failed.append(run.id)
    return failed


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
            processes.terminate_group(run.pid)  # recorded first, so the worker's own ending cannot overwrite it
    tick(store)
    return store.get_run(run_id).status


def delete(store: Store, run_id: int, owner: str) -> None:
    """Delete a run of `owner` and its events, cancelling it first if it is still active."""
    run = _owned(store, run_id, owner, "delete")
    if not run.finished:
        cancel(store, run_id, owner)
    store.delete_run(run_id)
    remove_run_files(store.path, [run_id])  # its traces and its worker's log


def queue_position(store: Store, run_id: int) -> int | None:
    """1 = next to start on its device (in fair_order: a visitor who queued many later may find
    another's job ahead of theirs); None when the run is not waiting."""
    run = store.get_run(run_id)
    if run is None or run.status != "queued":
        return None
    with store.transaction() as c:
        waiting = [row["id"] for row in fair_order(c) if row["device_key"] == run.device_key]
    return waiting.index(run_id) + 1 if run_id in waiting else None
