"""The tests' stand-in worker launcher: a sleeping process that looks like a worker, so dispatch logic
is tested without training anything. The `sleepers` fixture (tests/conftest.py) names it in
COMPILE_LAB_LAUNCHER (core.runs.processes.own_launcher), so it holds in every process a test starts
that starts jobs (a CLI that ticks the queue, a worker's ticker, a fleet's agent): this module needs
nothing but the standard library, as any of them can import it."""

import subprocess
import sys
import time

SLEEPER = "import time; time.sleep(120)"
SETTING = "stand_in:launch_worker"  # COMPILE_LAB_LAUNCHER's value, with this folder on PYTHONPATH
STARTED: list[subprocess.Popen] = []  # the sleepers this process started (the `sleepers` fixture's list)


def launch_worker(store_path: str, run_id: int, device_key: str = "cpu") -> int:
    """A sleeper named like run `run_id`'s worker, in its own session as a worker is; its pid."""
    proc = subprocess.Popen(
        [sys.executable, "-c", SLEEPER, "core.runs.worker", str(run_id)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,  # as a worker writes to its log: never a pipe its starter waits on
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    STARTED.append(proc)
    # Until the child has exec'd, /proc shows the parent's command line and the queue's liveness
    # check (processes.pid_alive) would call the "worker" dead: on a busy machine that is tens of ms.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{proc.pid}/cmdline", "rb") as fh:
                if b"core.runs.worker" in fh.read():
                    break
        except OSError:
            break  # no /proc here: nothing to wait for
        time.sleep(0.005)
    return proc.pid
