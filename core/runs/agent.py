"""An agent per box (`python -m core agent`): joins a shared store's fleet with its host and lanes,
heartbeats, and claims jobs for its own lanes, each run in a worker process exactly as a single
box runs them (core.runs.worker). No torch in this process: the lanes are found by a short-lived
child (`devices_json`), so the agent never holds a CUDA context beside a measurement.

A worker an agent starts knows its agent (COMPILE_LAB_AGENT: its host; COMPILE_LAB_AGENT_PID) and
stops itself when the agent is gone; the rest of the fleet then fails its run after the agent's
heartbeat timeout with "agent <name> stopped" (core.runs.queue.reconcile).
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
from core.runs.seal import seal_from_workers
from core.runs.store import Store

POLL_S = 0.5  # how often an agent looks for work (and heartbeats): the fleet's dispatch latency
LOST_STORE_RETRY_S = 2.0  # a store server gone (a restart): the agent waits and tries again
CANCEL_WINDOW_S = 600.0  # a cancelled run's worker still alive this long after is looked for no more
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
                "caps": {**caps.to_dict(), "cuda_name": gpu["name"], "gpu_count": 1},
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


def worker_launcher(name: str) -> Callable[[str, int, str], int]:
    """launch_worker for this agent's jobs: the worker's host is the agent's name."""

    def launch(store_path: str, run_id: int, device_key: str) -> int:
        os.environ[AGENT_VARIABLE], os.environ[AGENT_PID_VARIABLE] = name, str(os.getpid())
        return processes.launch_worker(store_path, run_id, device_key)

    return launch


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
    """One box's agent on a store."""

    def __init__(self, store: Store, name: str, lanes: dict[str, Any], say: Callable[[str], None] = print):
        self.store, self.name, self.found, self.say = store, name, lanes, say
        self.pid = os.getpid()
        self.lanes = [lane["lane"] for lane in lanes["lanes"]]
        self.caps = None
        self._stop = threading.Event()

    def join(self) -> None:
        """Register (fleet.AgentRefused while another live agent has the name)."""
        fleet.register(self.store, self.name, self.pid, socket.gethostname(), self.found["torch"], self.found["lanes"])

    def stop(self, *_: Any) -> None:
        self._stop.set()

    def step(self) -> list[int]:
        """Heartbeat, end what died, start what waits on an idle lane; the ids started."""
        if not fleet.heartbeat(self.store, self.name, self.pid):
            self.say(f"agent {self.name}: another agent took this name; stopping")
            self._stop.set()
            return []
        reconcile(self.store, host=self.name)
        self.stop_cancelled()
        return dispatch(self.store, self.name, self.lanes, self.caps, worker_launcher(self.name), side_lanes=False)

    def stop_cancelled(self) -> None:
        """Stop the workers of this box's runs cancelled elsewhere (a page or CLI on another box
        cannot signal a process here)."""
        since = time.time() - CANCEL_WINDOW_S
        for run in self.store.list_runs(status=("cancelled",), limit=50):
            if run.host == self.name and run.cancel_requested and run.pid and (run.finished_at or 0) > since:
                if processes.pid_alive(run.pid):
                    processes.terminate_group(run.pid)

    def run(self) -> int:
        seal_from_workers()  # its workers' code cannot read the agent's environment (the store's URL)
        self.join()
        self.say(f"agent {self.name}: lanes {', '.join(self.lanes)} on {shown(self.store.path)}")
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self.stop)
        try:
            while not self._stop.is_set():
                try:
                    for run_id in self.step():
                        self.say(f"agent {self.name}: started run {run_id}")
                except Exception as exc:
                    if not disk_space.is_store_lost(exc):
                        raise
                    self.say(f"agent {self.name}: the store is unreachable, retrying ({type(exc).__name__})")
                    self._stop.wait(LOST_STORE_RETRY_S)
                self._stop.wait(POLL_S)
        finally:
            self.leave()
        return 0

    def leave(self) -> None:
        """Stop this agent's workers (their runs fail: "agent <name> stopped") and free the name."""
        for run in self.store.list_runs(status=("starting", "running")):
            if run.host == self.name:
                if self.store.finish_run(run.id, "failed", error=f"agent {self.name} stopped", phase="agent stopped"):
                    self.say(f"agent {self.name}: run {run.id} failed (agent stopped)")
                if run.pid:
                    processes.terminate_group(run.pid)
        fleet.leave(self.store, self.name, self.pid)


def shown(location: str) -> str:
    from core.runs.store.records import shown_location

    return shown_location(location)
