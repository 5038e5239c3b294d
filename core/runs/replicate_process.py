"""Replicate processes: how a race's first process (a worker, or a terminal's `race`) starts each
replicate and reads back what it measured (core.engine.replicate runs it; core.engine.replicates
says why and how the headline uses it). No torch in the parent.

`start_replicate` is the one place a replicate process is started, through the one way any fresh
process with captured output starts (core.runs.warm_start.start_fresh, as the Under the hood demos'
do). Where a warm server for the race process's own environment is ready (a worker's: the app's
lane's; a terminal's `race`: one of its own, OwnWarmServer), the replicate is forked from it, torch
and the engine already imported, and costs little more than its steps; otherwise it starts cold,
`python -m core.runs.replicate_process`, as before. Either way it inherits its race's process
conditions: the same environment (malloc settings included), the cores and threads the first
process had (core.runs.race_conditions.Conditions, handed over in its job), and the first process's
compile cache.

Either way it ends with its race: it watches the race process (`race_pid` in its job) and leaves
the moment that process is gone, however it went (a kill -9 of the worker alone, a crash, a
terminal's race ended by SIGTERM or SIGKILL), and the race process kills it on a cancel or its own
time limit for it. A cold one is also a child in the first process's process group, so a cancel
(SIGTERM to the group), a time limit (SIGKILL to it) or Ctrl-C in a terminal reach it at once; a
warm one leads a session of its own (the server's fork), which no group signal of the race reaches.

`python -m core.runs.replicate_process` (and a warm one alike) reads its job as one JSON object on
stdin and prints its result as one line, RESULT_PREFIX and JSON, on stdout.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from core.engine.replicates import ProcessResult
from core.runs import warm_start
from core.runs.pids import pid_running, readable
from core.runs.race_conditions import Conditions

RESULT_PREFIX = "replicate-result "
WARM_ENTRY = "core.runs.replicate_process:warm_main"


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
        "core.runs.replicate_process",
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
        from core.runs import worker_cores

        try:
            if not (warm_start.supported() and warm_start.enabled(self.env)) or "TORCH_TRACE" in self.env:
                return  # a traced race's replicates start cold, as a traced worker does: torch reads it at import
            self._started = warm_start.ensure_server(
                self.env, os.path.join(data_home(), "logs"), worker_cores.unpinned_cores()
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
    from core.engine.replicate import run_replicate as measure
    from core.engine.spec import RunSpec
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
