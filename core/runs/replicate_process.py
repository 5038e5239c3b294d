"""Replicate processes: how a race's first process (a worker, or a terminal's `race`) starts each
replicate and reads back what it measured (core.engine.replicate runs it; core.engine.replicates
says why and how the headline uses it). No torch in the parent.

`start_replicate` is the one place a replicate process is started. Where a warm server for the race
process's own environment is ready (a worker's: core.runs.warm_start), the replicate is forked from
it, torch and the engine already imported, and costs little more than its steps; otherwise it starts
cold, `python -m core.runs.replicate_process`, as before. Either way it inherits its race's process
conditions: the same environment (malloc settings included), the cores and threads the first
process had (core.runs.race_conditions.Conditions, handed over in its job), and the first process's
compile cache.

Either way it ends with its race: a cold one is a child in the first process's process group, so a
cancel (SIGTERM to the group), a time limit (SIGKILL to it) or Ctrl-C in a terminal ends it too; a
warm one leads a session of its own (the server's fork), so it watches the race process (`race_pid`
in its job) and leaves the moment that process is gone, and the race process kills it on a cancel
or its own time limit for it.

`python -m core.runs.replicate_process` reads its job as one JSON object on stdin (a warm one: from
the file named by its one argument) and prints its result as one line, RESULT_PREFIX and JSON, on
stdout.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import IO, Any

from core import PROJECT_ROOT
from core.engine.replicates import ProcessResult
from core.runs import warm_start
from core.runs.race_conditions import Conditions

RESULT_PREFIX = "replicate-result "
WARM_ENTRY = "core.runs.replicate_process:warm_main"


class ReplicateProcess:
    """A started replicate, cold (a Popen) or warm (forked by the warm server, its output in files):
    what run_replicate waits on, as Popen.communicate."""

    def __init__(self, proc: subprocess.Popen | warm_start.WarmProcess, files: tuple[IO, ...] = ()):
        self.proc = proc
        self.files = files  # a warm one's job, stdout and stderr

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def warm(self) -> bool:
        return isinstance(self.proc, warm_start.WarmProcess)

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Its stdout and stderr once it has ended; subprocess.TimeoutExpired past `timeout`."""
        if not self.warm:
            return self.proc.communicate(timeout=timeout)
        code = self.proc.wait(timeout)
        if code is None and warm_start.pid_running(self.pid):
            raise subprocess.TimeoutExpired(WARM_ENTRY, timeout or 0.0)
        _, out, err = self.files
        texts = []
        for f in (out, err):
            f.seek(0)
            texts.append(f.read().decode(errors="replace"))
        self.close()
        return texts[0], texts[1]

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def kill(self) -> None:
        """End it and what it started (a warm one leads its own session: its compile workers too)."""
        if self.warm:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
            self.proc.wait(5.0)
            self.close()
        else:
            self.proc.kill()
            self.proc.wait()

    def close(self) -> None:
        if self.warm:
            self.proc.close()
        for f in self.files:
            f.close()
        self.files = ()


def start_replicate(job: dict[str, Any], env: dict[str, str] | None = None) -> ReplicateProcess:
    """Start one replicate process for `job` (what run_replicate sends): the one way one starts,
    warm where the warm server of `env` is ready, else cold. `env`: the race process's own (its
    malloc settings, its store's environment), the default; a warm-started race process's is the
    one it was forked with, which names the server that forked it."""
    job = {"race_pid": os.getpid(), **job}
    env = warm_start.server_environment() if env is None else env
    warm = _start_warm(job, env)
    if warm is not None:
        return warm
    proc = subprocess.Popen(
        [sys.executable, "-m", "core.runs.replicate_process"],
        cwd=PROJECT_ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(job))
    proc.stdin.close()
    proc.stdin = None  # sent: what is left is to read its result (communicate)
    return ReplicateProcess(proc)


def _start_warm(job: dict[str, Any], env: dict[str, str]) -> ReplicateProcess | None:
    """Fork the replicate from the warm server of this environment; None where none is ready."""
    try:
        if not warm_start.enabled(env):
            return None
    except warm_start.SettingError:
        return None  # said where the setting is read for jobs (the queue's tick); here: start cold
    files = (tempfile.NamedTemporaryFile(suffix=".json"), tempfile.TemporaryFile(), tempfile.TemporaryFile())
    job_file, out, err = files
    job_file.write(json.dumps(job).encode())
    job_file.flush()
    cores = (job.get("conditions") or {}).get("cores")
    proc = warm_start.start(
        WARM_ENTRY, [job_file.name], env, stdout=out, stderr=err, cpus=list(cores) if cores else None, keep=True
    )
    if proc is None:
        for f in files:
            f.close()
        return None
    return ReplicateProcess(proc, files)


def run_replicate(
    spec: Any,
    number: int,
    steps: int,
    cache_dir: str,
    timeout_s: float | None = None,
    *,
    conditions: Conditions | None = None,
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
    proc = start_replicate(job)
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
    last = next((line for line in reversed(err.splitlines()) if line.strip()), f"exit status {proc.returncode}")
    return _failed(number, f"replicate {number} failed: {last.strip()[:300]}", started)


def _failed(number: int, error: str, started: float) -> dict[str, Any]:
    process = ProcessResult(number, None, None, 0, error=error, wall_s=round(time.time() - started, 2))
    return {"process": process.to_dict(), "eager_step_times_s": [], "compiled_step_times_s": []}


def warm_main(argv: list[str]) -> int:
    """A replicate forked by a warm server: its job from the file named in `argv`; it leaves with its
    race process (it is in no process group of the race's)."""
    entered = time.time()
    with open(argv[0], encoding="utf-8") as fh:
        job = json.load(fh)
    leave_with(int(job.get("race_pid") or 0))
    return measure_job(job, entered)


def leave_with(pid: int) -> None:
    """End this process (and its session: its compile workers) the moment process `pid` is gone. A
    thread that blocks on the process's pidfd (Linux 5.3+; elsewhere it looks twice a second): it
    costs the measurement nothing while it waits."""
    if pid <= 0:
        return

    def watch() -> None:
        try:
            fd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            fd = None
        if fd is not None:
            select.select([fd], [], [])
        else:
            while warm_start.pid_running(pid):
                time.sleep(0.5)
        os.killpg(os.getpgrp(), signal.SIGKILL)

    if not warm_start.pid_running(pid):
        os.killpg(os.getpgrp(), signal.SIGKILL)
    threading.Thread(target=watch, name="leave-with-race", daemon=True).start()


def main() -> int:
    """The replicate process: its race's conditions, then the replicate, then one line of result."""
    entered = time.time()
    return measure_job(json.loads(sys.stdin.read()), entered)


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
    result["entered_at"] = entered  # with sent_at and first_step_at: where its start went (bench/launch_latency.py)
    print(RESULT_PREFIX + json.dumps(result, default=float), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
