"""An agent per box (`python -m core agent`): joins a shared store's fleet with its host and lanes,
heartbeats, and claims jobs for its own lanes, each run in a worker process exactly as a single
box runs them (core.runs.worker). No torch in this process: the lanes are found by a short-lived
child (`devices_json`), so the agent never holds a CUDA context beside a measurement.

A worker an agent starts knows its agent (COMPILE_LAB_AGENT: its host; COMPILE_LAB_AGENT_PID) and
stops itself when the agent is gone; the rest of the fleet then fails its run after the agent's
heartbeat timeout with "agent <name> stopped" (core.runs.queue.reconcile). An agent stopped by a
signal drains instead (Agent). One that loses the store retries, and once it is back delivers what
its workers kept meanwhile (core.runs.outage, through reconcile) before anything else.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from core import PROJECT_ROOT
from core.runs import disk_space, fleet, processes
from core.runs.queue import dispatch, reconcile
from core.runs.race_conditions import seal_from_workers
from core.runs.store import ACTIVE_STATES, Store

POLL_S = 0.5  # how often an agent looks for work (and heartbeats): the fleet's dispatch latency
LOST_STORE_RETRY_S = 2.0  # a store server gone (a restart): the agent waits and tries again
CANCEL_WINDOW_S = 600.0  # a cancelled run's worker still alive this long after is looked for no more
STOP_TIMEOUT_S = 600.0  # a stopped agent's running jobs may finish this long before they are cancelled
CANCEL_WAIT_S = 30.0  # a cancelled worker records what it measured this long before it is killed
AGENT_VARIABLE, AGENT_PID_VARIABLE = "COMPILE_LAB_AGENT", "COMPILE_LAB_AGENT_PID"


def devices_json() -> str:
    """This box's lanes as JSON (run in a child process: it imports torch)."""
    import platform

    import torch

    from core.engine.environment import gpu_inventory
    from core.engine.spec import detect_device_caps

    caps = detect_device_caps()
    cpu = platform.processor() or platform.machine() or "CPU"
    cpu_caps = {**caps.to_dict(), "cuda": False, "mps": False}
    lanes = [{"lane": "cpu", "device_name": f"CPU ({cpu}, {os.cpu_count()} cores)", "caps": cpu_caps}]
    for gpu in gpu_inventory():
        lanes.append(
            {
                "lane": f"cuda:{gpu['index']}",
                "device_name": gpu["name"],
                "memory_bytes": gpu["memory_bytes"],
                "caps": {
                    **caps.to_dict(),
                    "cuda_name": gpu["name"],
                    "gpu_count": 1,
                    "cuda_memory_bytes": gpu["memory_bytes"],
                },
            }
        )
    return json.dumps({"torch": torch.__version__, "lanes": lanes})


def find_lanes() -> dict[str, Any]:
    """{"torch": version, "lanes": [{"lane", "device_name", "memory_bytes", "caps"}, ...]}."""
    out = subprocess.run(
        [sys.executable, "-c", "from core.runs.agent import devices_json; print(devices_json())"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if out.returncode:
        raise RuntimeError(f"could not find this box's devices: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def started_by_agent() -> bool:
    """In a worker: whether a fleet agent started it. Its agent then starts the next job; the
    worker must not (a tick of its own, run as the agent's host, would start one as a lone box's)."""
    return bool(os.environ.get(AGENT_PID_VARIABLE))


def watch_agent(on_gone: Callable[[], None], every_s: float = 1.0) -> None:
    """In a worker: call `on_gone` once the agent that started it is gone (killed, crashed)."""
    pid = int(os.environ.get(AGENT_PID_VARIABLE) or 0)
    if not pid:
        return

    def watch() -> None:
        while True:
            time.sleep(every_s)
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                on_gone()
                return
            except PermissionError:
                pass

    threading.Thread(target=watch, name="agent-watch", daemon=True).start()


class Agent:
    """One box's agent on a store.

    Stopped (SIGTERM, Ctrl-C: `request_stop`) it drains: it claims nothing more and goes on
    heartbeating while its running jobs finish, then leaves the fleet and exits 0. A second stop,
    or `stop_timeout_s` passing, cancels them cleanly: each run ends cancelled, "agent NAME stopped",
    with what it measured (its worker is asked to stop, as a cancel asks, and waited for).
    """

    def __init__(
        self,
        store: Store,
        name: str,
        lanes: dict[str, Any],
        say: Callable[[str], None] = print,
        stop_timeout_s: float = STOP_TIMEOUT_S,
    ):
        self.store, self.name, self.found, self.say = store, name, lanes, say
        self.stop_timeout_s = stop_timeout_s
        self.pid = os.getpid()
        self.lanes = [lane["lane"] for lane in lanes["lanes"]]
        self.caps = None
        self.pids: set[int] = set()  # the workers it started that still run
        self.started: set[int] = set()  # the runs it started
        self._stops = 0  # how many times it was asked to stop
        self._draining_since: float | None = None
        self._cancelled = False
        self._name_lost = False
        self._left = False
        self._waiting_for: set[int] = set()  # the runs a drain waits for
        self._lost_since: float | None = None  # when the store was lost, while it is

    def join(self) -> None:
        """Register (fleet.AgentRefused while another live agent has the name)."""
        fleet.register(self.store, self.name, self.pid, socket.gethostname(), self.found["torch"], self.found["lanes"])

    def request_stop(self, *_: Any) -> None:
        """A signal handler: the first stop drains, the next cancels what runs (the loop says so).
        It only counts: a lock taken in a handler could be the one its own thread holds."""
        self._stops += 1

    def launch(self, store_path: str, run_id: int, device_key: str) -> int:
        """launch_worker for this agent's jobs: the worker's host is the agent's name."""
        self._agent_environment()
        pid = processes.launch_worker(store_path, run_id, device_key)
        self.pids.add(pid)
        return pid

    def _agent_environment(self) -> None:
        """What this agent's workers (and their warm servers) have in their environment: its name, its pid."""
        os.environ[AGENT_VARIABLE], os.environ[AGENT_PID_VARIABLE] = self.name, str(self.pid)

    def step(self, claim: bool = True) -> list[int]:
        """Heartbeat, end what died, start what waits on an idle lane (unless draining); the ids started."""
        if not fleet.heartbeat(self.store, self.name, self.pid):
            self.say(f"agent {self.name}: another agent took this name; stopping")
            self._name_lost = True
            return []
        reconcile(self.store, host=self.name)
        self.stop_cancelled()
        self.pids = {pid for pid in self.pids if processes.pid_alive(pid)}  # (reaped once they exit)
        if not claim:
            return []
        started = dispatch(self.store, self.name, self.lanes, self.caps, self.launch, side_lanes=False)
        self.started.update(started)
        if not started and not self.running():  # nothing measures here: the lanes' warm servers may start
            self._agent_environment()
            processes.prewarm(self.lanes)
        return started

    def turn(self) -> list[int] | None:
        """One turn of the agent's loop: stopping, drain (claim nothing; None once it has left);
        else step. The ids it started."""
        if self._stops and self.drain():
            return None
        return self.step(claim=not self._stops)

    def stop_cancelled(self) -> None:
        """Stop the workers of this box's runs cancelled elsewhere (a page or CLI on another box
        cannot signal a process here)."""
        since = time.time() - CANCEL_WINDOW_S
        for run in self.store.list_runs(status=("cancelled",), limit=50):
            if run.host == self.name and run.cancel_requested and run.pid and (run.finished_at or 0) > since:
                if processes.pid_alive(run.pid):
                    processes.terminate_group(run.pid)

    def running(self) -> list[Any]:
        """This box's runs that have not ended."""
        return [run for run in self.store.list_runs(status=ACTIVE_STATES) if run.host == self.name]

    def run(self) -> int:
        seal_from_workers()  # its workers' code cannot read the agent's environment (the store's URL)
        self.join()
        self.say(f"agent {self.name}: lanes {', '.join(self.lanes)} on {shown(self.store.path)}")
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self.request_stop)
        try:
            while not self._name_lost:
                try:
                    if self._lost_since is not None:
                        self.store.reconnect()  # raises while the server is still away
                    started = self.turn()
                    if started is None:
                        break
                    for run_id in started:
                        self.say(f"agent {self.name}: started run {run_id}")
                    if self._lost_since is not None:
                        self.say(f"agent {self.name}: the store is back after {time.time() - self._lost_since:.0f} s")
                        self._lost_since = None
                except Exception as exc:
                    if not disk_space.is_store_lost(exc):
                        raise
                    if self._lost_since is None:
                        self._lost_since = time.time()
                        self.say(f"agent {self.name}: the store is unreachable, retrying ({type(exc).__name__})")
                    time.sleep(LOST_STORE_RETRY_S)
                time.sleep(POLL_S)  # (a signal cuts no sleep short: it is seen at the next turn)
        finally:
            if not self._left:  # an error, or the name taken by another agent: no drain
                self.abandon()
        return 0

    def drain(self) -> bool:
        """Stopping: True once nothing of this box runs any more and the agent has left the fleet."""
        if self._draining_since is None:
            self._draining_since = time.monotonic()
            self._waiting_for = {r.id for r in self.running()}
            waiting = ", ".join(f"run {r.id} on {r.device_key}" for r in self.running())
            self.say(
                f"agent {self.name}: stopping: claiming no new jobs"
                + (
                    f"; waiting for {waiting} to finish (stop again to cancel now; cancelled in {self.stop_timeout_s:.0f} s)"
                    if waiting
                    else ""
                )
            )
        mine = self.running()
        for run_id in sorted(self._waiting_for - {r.id for r in mine}):
            self._waiting_for.discard(run_id)
            ended = self.store.get_run(run_id)
            if ended is not None:
                self.say(f"agent {self.name}: run {run_id} ended {ended.status}")
        late = time.monotonic() - self._draining_since >= self.stop_timeout_s
        if mine and not self._cancelled and (self._stops > 1 or late):
            self.cancel_all(mine, "a second stop" if self._stops > 1 else f"{self.stop_timeout_s:.0f} s passed")
        self.pids = {pid for pid in self.pids if processes.pid_alive(pid)}
        if mine or self.pids:
            return False  # (a worker that recorded its end exits a moment later)
        fleet.leave(self.store, self.name, self.pid)
        self._left = True
        self.say(f"agent {self.name}: left the fleet")
        return True

    def cancel_all(self, runs: list[Any], why: str) -> None:
        """End each run cancelled, "agent NAME stopped", then ask its worker to stop (it records what
        it measured and exits), waiting a while before killing what remains."""
        self._cancelled = True
        reason = f"agent {self.name} stopped"
        for run in runs:
            if self.store.finish_run(run.id, "cancelled", phase=f"cancelled: {reason}", error=reason):
                self.say(f"agent {self.name}: run {run.id} cancelled ({why})")
            if run.pid:
                try:
                    os.killpg(run.pid, signal.SIGTERM)
                except (ProcessLookupError, PermissionError):
                    pass
        for run in runs:
            if run.pid:
                processes.terminate_group(run.pid, wait_s=CANCEL_WAIT_S)

    def abandon(self) -> None:
        """Leaving without a drain (an error, or the name taken by another agent): stop this agent's
        workers (their runs fail: "agent <name> stopped") and free the name if it is still ours."""
        for run in self.running():
            if run.id not in self.started:
                continue  # not started by this agent (the name's new agent's, say)
            if self.store.finish_run(run.id, "failed", error=f"agent {self.name} stopped", phase="agent stopped"):
                self.say(f"agent {self.name}: run {run.id} failed (agent stopped)")
            if run.pid:
                processes.terminate_group(run.pid)
        fleet.leave(self.store, self.name, self.pid)


def shown(location: str) -> str:
    from core.runs.store.records import shown_location

    return shown_location(location)
