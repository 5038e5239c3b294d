"""Replicate processes: how a race's first process (a worker, or a terminal's `race`) starts each
replicate and reads back what it measured (core.engine.replicate runs it; core.engine.replicates
says why and how the headline uses it). No torch in the parent.

`start_replicate` is the one place a replicate process is started, so a faster start (a warm fork
server forking clean workers) can take its place there alone. A replicate inherits its race's
process conditions: the same environment (malloc settings included), the cores and threads the
first process had (core.runs.race_conditions.Conditions, handed over in its job), and the first
process's compile cache. It is a child in the first process's process group, so cancelling the
race (SIGTERM to the group), a time limit (SIGKILL to it) or Ctrl-C in a terminal ends it too.

`python -m core.runs.replicate_process` reads its job as one JSON object on stdin and prints its
result as one line, RESULT_PREFIX and JSON, on stdout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

from core import PROJECT_ROOT
from core.engine.replicates import ProcessResult
from core.runs.race_conditions import Conditions

RESULT_PREFIX = "replicate-result "


def start_replicate(job: dict[str, Any]) -> subprocess.Popen:
    """Start one replicate process for `job` (what run_replicate sends): the one way one starts."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "core.runs.replicate_process"],
        cwd=PROJECT_ROOT,
        env=dict(os.environ),  # the race process's own: its malloc settings, its store's environment
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(job))
    proc.stdin.close()
    proc.stdin = None  # sent: what is left is to read its result (communicate)
    return proc


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
        proc.wait()
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


def main() -> int:
    """The replicate process: its race's conditions, then the replicate, then one line of result."""
    job = json.loads(sys.stdin.read())
    from core.engine.replicate import run_replicate as measure
    from core.engine.spec import RunSpec
    from core.runs import race_conditions

    given = Conditions.from_dict(job.get("conditions"))
    applied = race_conditions.apply_given(given) if given is not None else None
    result = measure(
        RunSpec.from_dict(job["spec"]), int(job["number"]), int(job["steps"]), job["cache_dir"], job.get("sent_at")
    )
    result["conditions"] = applied.to_dict() if applied is not None else None
    print(RESULT_PREFIX + json.dumps(result, default=float), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
