"""`python -m core.runs.worker --store PATH --run-id N`: run one job and record everything it measures.

One process per job, in its own session (core.runs.processes.launch_worker), so it outlives the UI that
started it. Events are flushed from a background thread in small transactions (every 0.25 s),
which also heartbeats, so a reader sees a step within a fraction of a second and a long compile
is not mistaken for a hang. SIGTERM (cancel) stops training cleanly; whatever was measured stays.
A store server lost mid-run is waited out, with the events kept, up to a limit (core.runs.outage).
What a job of each kind runs is the runner its row in core.runs.job_kinds names (core.runs.job_kinds).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from typing import Any

from core.engine import events
from core.engine.events import StartEvent, StatusEvent, StepEvent
from core.engine.machine_faults import machine_fault
from core.engine.spec import RunSpec, SpecError
from core.runs import disk_budget, disk_space, outage
from core.runs.agent import started_by_agent, watch_agent
from core.runs.device_history import keep_estimate
from core.runs.fleet import HOST
from core.runs.job_kinds import JOB_KINDS, runner_of
from core.runs.processes import launch_ticker, launch_watcher
from core.runs.queue import tick
from core.runs.store import Store

FLUSH_EVERY_S = 0.25
HEARTBEAT_EVERY_S = 1.0
LOST_AFTER_S = 3.0  # a write that waits this long for a connection (or a file's lock) finds the store lost (or locked)


class EventSink:
    """Buffers trainer events and writes them from a background thread, with heartbeats.

    The trainer's callback only appends to a list under a lock, so the timed loop never waits
    on the disk; the writer thread owns its own connection. While the store's server is lost it
    keeps every event, tries again each flush through a fresh connection, and past the limit
    calls `on_limit` (the worker stops measuring: core.runs.outage says why).
    """

    def __init__(self, store_path: str, run_id: int, total_steps: int, flush_every_s: float = FLUSH_EVERY_S):
        self.run_id = run_id
        self.store_path = store_path
        self.total_steps = max(total_steps, 1)
        self.flush_every_s = flush_every_s
        self._store = Store(store_path, wait_s=LOST_AFTER_S)
        self._lock = threading.Lock()
        self._rows: list[dict[str, Any]] = []
        self._fields: dict[str, Any] = {}
        self._steps_done = 0
        self._last_write = 0.0
        self._live: dict[str, Any] = {}  # what the page shows beside the phase while the run goes on
        self.deadline: float | None = None  # the job's time limit, as a time.time(), where it has one
        self._where: Any = None
        self.stored = 0  # events written to the store so far
        self.why_unstored = "disk full"  # what kept the last events out of the store, if any
        self.lost_since: float | None = None  # when the store's server was lost, while it is
        self.lost_s = 0.0  # how long it was away, once it is back
        self.stopped_at_limit = False
        self.on_limit: Any = None  # called once, from the writer thread, when the limit passes
        self._complained = 0.0
        self._said_alive = False  # whether the alive file says this worker waits for a locked store
        self._stop = threading.Event()
        self._flush_lock = threading.Lock()  # the writer thread and the watchdog both flush
        self._thread = threading.Thread(target=self._loop, name="event-writer", daemon=True)
        self._thread.start()

    def __call__(self, event: Any) -> None:
        now = time.time()
        with self._lock:
            row = events.to_row(event, now)
            if row is not None:  # a step, an epoch, a compile, a busy stretch, a replicate process
                self._rows.append(row)
                if isinstance(event, StepEvent):
                    self._steps_done += 1
                    self._fields["progress"] = min(self._steps_done / self.total_steps, 1.0)
            elif isinstance(event, StatusEvent) and event.state == "compile_skipped":
                # Kept beside the phase (which moves on) until the final details replace it.
                self._live["compile_skipped"] = event.message
                self._fields["details"] = dict(self._live)
            elif isinstance(event, StatusEvent) and event.state == "compile_phase":
                self._compile_phase(event, now)
            elif isinstance(event, StatusEvent):
                self._where = event
                self._fields["phase"] = phase_text(event)
                if event.state != "compiling" and self._live.pop("compile_phase", None) is not None:
                    self._fields["details"] = dict(self._live)  # the compile is over: its clock with it
            elif isinstance(event, StartEvent):
                self._fields["environment"] = event.environment

    def _compile_phase(self, event: Any, now: float) -> None:
        """'compiling (compiled epoch 1/3): AOT autograd', with when the compile and the phase
        began, so a page can show the elapsed time; back to the plain phase when it ends."""
        if event.message:
            live = self._live.get("compile_phase") or {"compile_started": now}
            self._live["compile_phase"] = {**live, "phase": event.message, "since": now}
            where = f"{event.variant} epoch {event.epoch}/{event.epochs}"
            self._fields["phase"] = f"compiling ({where}): {event.message}"
        elif self._where is not None and self._where.state == "compiling" and "compile_phase" in self._live:
            # Between two graphs of one compile (the forward's, then the backward's at the first
            # backward): the compile goes on, and so does its clock ("51 s so far" never goes back).
            self._live["compile_phase"] = {**self._live["compile_phase"], "phase": None, "since": now}
            self._fields["phase"] = phase_text(self._where)
        else:
            self._live.pop("compile_phase", None)
            if self._where is not None:
                self._fields["phase"] = phase_text(self._where)
        self._fields["details"] = dict(self._live)

    def update(self, **fields: Any) -> None:
        with self._lock:
            self._fields.update(fields)

    def flush(self) -> None:
        with self._flush_lock:
            with self._lock:
                rows, fields = self._rows, self._fields
                self._rows, self._fields = [], {}
            now = time.time()
            if not (rows or fields or now - self._last_write >= HEARTBEAT_EVERY_S):
                return
            try:
                if self.lost_since is not None:
                    self._store.reconnect()  # raises while the server is still away
                self._store.append_events(self.run_id, rows, {**fields, "heartbeat_at": now})
                self.stored += len(rows)
            except Exception as exc:
                with self._lock:  # keep what was measured for the next attempt
                    self._rows[:0] = rows
                    self._fields = {**fields, **self._fields}
                if disk_space.is_store_lost(exc):
                    self.lost_since = self.lost_since or now
                    outage.touch_alive(self.store_path, self.run_id)
                elif disk_space.is_store_locked(exc):  # another program holds the file: alive, waiting
                    self._said_alive = True
                    outage.touch_alive(self.store_path, self.run_id)
                raise
            if self.lost_since is not None:
                self.lost_s, self.lost_since = now - self.lost_since, None
                print(
                    f"event writer: the store is back after {self.lost_s:.0f} s; kept events written", file=sys.stderr
                )
                outage.clear_alive(self.store_path, self.run_id)
            elif self._said_alive:
                self._said_alive = False
                outage.clear_alive(self.store_path, self.run_id)
            self._last_write = now

    @property
    def steps(self) -> int:
        return self._steps_done

    def lost_for_s(self) -> float:
        """How long the store has been (or last was) away."""
        return time.time() - self.lost_since if self.lost_since is not None else self.lost_s

    def leave_kept(self, finish: tuple[str, dict[str, Any]], measured: dict[str, Any] | None = None) -> str:
        """The store is still away and this worker must go: what it kept, and how the run ends, to a
        file in this box's data folder (core.runs.outage delivers it). Returns its path."""
        with self._flush_lock, self._lock:
            rows, fields = self._rows, {**self._fields, **(measured or {})}
            self._rows, self._fields = [], {}
        for name in ("heartbeat_at", "phase"):  # the end says the phase
            fields.pop(name, None)
        path = outage.write_kept(self.store_path, self.run_id, rows, fields, finish)
        outage.clear_alive(self.store_path, self.run_id)
        return path

    def _loop(self) -> None:
        while not self._stop.wait(self.flush_every_s):
            try:
                self.flush()
            except Exception as exc:  # noqa: BLE001 - keep the writer alive; the next flush retries
                if time.monotonic() - self._complained >= 10:  # not four lines a second while a server is away
                    self._complained = time.monotonic()
                    print(f"event writer: {str(exc).strip() or type(exc).__name__}", file=sys.stderr)
            if self.lost_since is not None and not self.stopped_at_limit:
                if time.time() - self.lost_since > outage.store_lost_limit_s():
                    self.stopped_at_limit = True
                    print(f"event writer: {outage.lost_reason(self.lost_for_s(), self.steps)}", file=sys.stderr)
                    if self.on_limit is not None:
                        self.on_limit()

    def close(self) -> int:
        """Write what is left. On a full disk or a lost store server, keep it and retry for up to
        DISK_FULL_WAIT_S (space or the server may come back: then nothing measured is lost; a
        server is waited for outage.end_wait_s). Returns how many events could not be stored."""
        self._stop.set()
        self._thread.join(timeout=5)
        began = time.monotonic()
        while True:
            try:
                self.flush()
                break
            except Exception as exc:
                if not disk_space.worth_waiting(exc):
                    raise
                wait = outage.end_wait_s() if disk_space.is_store_lost(exc) else disk_space.DISK_FULL_WAIT_S
                if time.monotonic() - began >= wait:
                    self.why_unstored = _why_unstored(exc)
                    print(f"event writer: {self.why_unstored}, {len(self._rows)} events not stored", file=sys.stderr)
                    break
                time.sleep(disk_space.DISK_FULL_RETRY_EVERY_S)
        self._store.close()
        return len(self._rows)


def _why_unstored(exc: BaseException) -> str:
    if disk_space.is_store_locked(exc):
        return STORE_LOCKED
    return STORE_UNREACHABLE if disk_space.is_store_lost(exc) else "disk full"


STORE_UNREACHABLE = "store unreachable"
STORE_LOCKED = "store locked by another program"
KEPT_FOR_LATER = (STORE_UNREACHABLE, STORE_LOCKED)  # what this box delivers once it can (core.runs.outage)


def _kept_for_later(exc: BaseException) -> bool:
    """Whether a run's end could not be written for a reason that passes (a lost server, a lock)."""
    return disk_space.is_store_lost(exc) or disk_space.is_store_locked(exc)


def phase_text(event: Any) -> str:
    """'eager epoch 2/3', 'compiling (compiled epoch 1/3)', 'evaluating ...': what the UI shows."""
    where = f"{event.variant} epoch {event.epoch}/{event.epochs}"
    if event.state == "replicating":
        return f"{event.message}: both variants again in a new process"
    return {
        "starting": f"{event.variant}: starting",
        "compiling": f"compiling ({where})",
        "training": where,
        "evaluating": f"{where}, evaluating",
        "done": f"{event.variant}: done",
        "compile_failed": f"compile failed on this model: {event.message}; eager ran",
        "failed": f"{event.variant}: failed",
    }.get(event.state, event.state)


def _total_steps(params: dict[str, Any]) -> int:
    spec = RunSpec.stored(params)
    return spec.recorded_steps if spec is not None else 1  # a bad spec fails properly in the runner


def _watchdog(
    store_path: str, run_id: int, limit_s: float, remaining_s: float, sink: EventSink, done: threading.Event
) -> None:
    """Enforce the job's time limit from inside, so no outside ticker is needed for it. With the
    store's server away, what was measured and the ending wait in this box's data folder."""
    if done.wait(remaining_s):
        return  # the job ended in time
    reason = f"timed out after {limit_s:.0f} s"
    try:
        try:
            sink.flush()
        finally:
            Store(store_path).finish_run(run_id, "failed", error=reason, phase="timed out")
        if not started_by_agent():
            launch_ticker(store_path, after_pid=os.getpid())
    except Exception as exc:
        if _kept_for_later(exc) or sink.lost_since is not None:
            sink.leave_kept(("failed", {"error": reason, "phase": "timed out"}))
    finally:
        os.killpg(os.getpgrp(), signal.SIGKILL)


def _agent_gone(sink: EventSink) -> None:
    """The agent that started this worker is gone: keep what was measured and stop. The fleet fails
    the run after the agent's heartbeat timeout ("agent <name> stopped"); with the store away too,
    what was measured waits in this box's data folder for the next agent (core.runs.outage)."""
    try:
        sink.flush()
    except Exception as exc:
        if disk_space.is_store_lost(exc):
            reason = f"agent {HOST} stopped"
            sink.leave_kept(("failed", {"error": reason, "phase": reason}))
    finally:
        os.killpg(os.getpgrp(), signal.SIGKILL)


_STOPPED_BY: list[str] = []  # the signal that stopped this job, by name ('SIGTERM')


def _raise_interrupt(signum, frame):  # noqa: ARG001
    _STOPPED_BY.append(signal.Signals(signum).name)
    raise KeyboardInterrupt


def stopped_from_outside(signal_name: str) -> str:
    """Why a run ends cancelled that nobody cancelled: a cancel, a time limit, reconcile and an agent
    record the run's end before they signal its worker, so a signal that finds the run still active
    came from outside the app (a kill, a shutdown, a container stopped)."""
    return f"stopped by {signal_name} from outside the app"


def run_job(store_path: str, run_id: int) -> int:
    """Claim a dispatched job, run it, record the outcome, then start the next queued job."""
    store = Store(store_path)
    run = store.get_run(run_id)
    if run is None or run.status != "starting":
        print(f"run {run_id} is not waiting for a worker ({run.status if run else 'missing'})", file=sys.stderr)
        return 1
    if not store.claim_run(run_id, os.getpid(), HOST):
        print(f"run {run_id} was cancelled or ended before this worker started", file=sys.stderr)
        return 1
    signal.signal(signal.SIGTERM, _raise_interrupt)
    # Whoever outlives this process ticks the queue the moment it exits (an agent's worker: its agent).
    watched = not started_by_agent() and launch_watcher(store_path, os.getpid())
    sink = EventSink(store_path, run_id, _total_steps(run.params))
    sink.on_limit = lambda: os.kill(os.getpid(), signal.SIGTERM)  # the store lost too long: stop measuring
    watch_agent(lambda: _agent_gone(sink))  # started by a fleet agent: not to outlive it
    if (run.details or {}).get("estimate") is not None:  # kept in every details the sink writes
        sink._live["estimate"] = run.details["estimate"]
    done = threading.Event()
    if run.time_limit_s:
        remaining = max(run.time_limit_s - (time.time() - (run.started_at or time.time())), 0.0)
        sink.deadline = time.time() + remaining  # no replicate is started too close to it (runners)
        threading.Thread(
            target=_watchdog, args=(store_path, run_id, run.time_limit_s, remaining, sink, done), daemon=True
        ).start()
    status, fields = "failed", {}
    try:
        if run.kind not in JOB_KINDS:
            fields = {"error": f"unknown job kind {run.kind!r}"}
        elif "__corrupt__" in run.params:
            fields = {"error": "the stored job description is not valid JSON"}
        else:
            status, fields = runner_of(run.kind)(run.params, sink)
            if "details" in fields:  # the estimate the race was queued with stays beside what it measured
                fields["details"] = keep_estimate(run.details, fields["details"])
    except SpecError as exc:
        fields = {"error": f"invalid job: {exc}"}
    except KeyboardInterrupt:
        status, fields = "cancelled", {}
    except Exception as exc:  # noqa: BLE001 - the job fails with a reason, the queue moves on
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        fields = {"error": machine_fault(exc) or f"{type(exc).__name__}: {first}"}
    finally:
        done.set()  # no timeout and no SIGTERM may interrupt the recording below
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        lost = sink.close()
    if status == "cancelled" and _STOPPED_BY:  # (a cancel's own end is recorded first and stays)
        fields = {**fields, "error": stopped_from_outside(_STOPPED_BY[0])}
    if sink.stopped_at_limit:
        status, fields = "failed", {**fields, "error": outage.lost_reason(sink.lost_for_s(), sink.steps)}
    if lost and sink.why_unstored in KEPT_FOR_LATER:  # still away or locked: left for this box to deliver
        path = sink.leave_kept(*_ending(status, fields))
        print(f"run {run_id}: {sink.why_unstored}; {lost} measured events and the run's end kept in {path}")
        return 1
    if lost:
        status, fields = (
            "failed",
            {
                **fields,
                "error": f"{sink.why_unstored}: {lost} measured events could not be stored "
                f"(the {sink.stored} before them are kept)",
            },
        )
    try:
        _record_end(store, run_id, status, fields)
        disk_budget.after_job(store)  # its files and older runs' within the host's disk budget
        if not started_by_agent():  # (an agent's worker: its agent starts what comes next)
            tick(store, prewarm=True)  # other lanes' jobs start now; this lane's next one once this process is gone:
            if not watched:  # (the watcher ticks then)
                launch_ticker(store_path, after_pid=os.getpid())
    except Exception as exc:
        if not disk_space.worth_waiting(exc):
            raise
        if _kept_for_later(exc):
            path = sink.leave_kept(*_ending(status, fields))
            print(f"run {run_id}: {_why_unstored(exc)}; the run's end kept in {path}", file=sys.stderr)
        else:
            print(f"run {run_id}: {disk_space.disk_full_message(store_path)}", file=sys.stderr)
        return 1
    return 0


def _ending(status: str, fields: dict[str, Any]) -> tuple[tuple[str, dict[str, Any]], dict[str, Any]]:
    """((status, the end's fields), what was measured): how a run's outcome is recorded."""
    measured = {k: v for k, v in fields.items() if k in ("summary", "details", "environment") and v is not None}
    error = fields.get("error")
    if status == "cancelled" and error == "cancelled":  # (the trainer's word for it: no reason)
        error = None
    phase = "done" if status == "done" else f"{status}: {error}" if error else status
    return (status, {"phase": phase, "error": error}), measured


def _record_end(store: Store, run_id: int, status: str, fields: dict[str, Any]) -> None:
    """The run's outcome, retried while the disk is full or the store's server away (for up to
    DISK_FULL_WAIT_S). What was measured is stored whatever the final status: a run that
    reconcile or a cancel already ended keeps its summary too."""
    (status, end), measured = _ending(status, fields)
    deadline = time.monotonic() + disk_space.DISK_FULL_WAIT_S
    while True:
        try:
            with store.transaction() as conn:
                if measured:
                    store.update_run(run_id, conn=conn, **measured)
                store.finish_run(run_id, status, conn=conn, **end)
            return
        except Exception as exc:
            if not disk_space.worth_waiting(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(disk_space.DISK_FULL_RETRY_EVERY_S)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.runs.worker", description="Run one queued Compile Lab job.")
    parser.add_argument("--store", default=None, help="default: COMPILE_LAB_STORE (a server's URL comes that way)")
    parser.add_argument("--run-id", type=int, required=True)
    args = parser.parse_args(argv)
    store = args.store or os.environ.get("COMPILE_LAB_STORE")
    if not store:
        parser.error("no store: give --store or set COMPILE_LAB_STORE")
    return run_job(store, args.run_id)


if __name__ == "__main__":
    sys.exit(main())
