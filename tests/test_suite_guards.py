"""The suite's own guards: a test that leaves a process running fails (and what it left is killed),
the stand-in worker holds in a subprocess that ticks the queue, and the torch CI runs records what
the version-dependent checks need."""

import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest
from support import CACHE_HITS, RECOMPILE_REASONS, ROOT, command_line, compilation_metric_fields, on_ci_torch

from core.runs.store import Store

LEAKY_TEST = textwrap.dedent(
    """
    import subprocess, sys

    def test_leaves_a_sleeper(tmp_path):
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", "left-behind"])
        (tmp_path.parent.parent / "leaked.pid").write_text(str(proc.pid))

    def test_cleans_up():
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        proc.kill()
        proc.wait()
    """
)


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except OSError:
        return True


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="the guard reads /proc")
def test_a_test_that_leaves_a_process_running_fails_naming_it_and_the_process_is_killed(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    for name in ("conftest.py", "support.py", "stand_in.py"):  # the hooks, and the helpers they import
        shutil.copy(os.path.join(ROOT, "tests", name), suite / name)
    (suite / "test_leaky.py").write_text(LEAKY_TEST)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--basetemp={tmp_path / 'base'}", str(suite)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": ROOT},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "2 passed, 1 error" in done.stdout, done.stdout  # the leak is an error at its teardown
    assert "test_leaky.py::test_leaves_a_sleeper left 1 process(es) running (now killed)" in done.stdout
    assert "left-behind" in done.stdout  # the process named by its command line
    pid = int((tmp_path / "leaked.pid").read_text())
    assert gone(pid), command_line(pid)


def test_the_stand_in_worker_holds_in_a_cli_that_ticks_the_queue(tmp_path, sleepers):
    store = Store(str(tmp_path / "store.sqlite3"))
    run_id = store.create_run("race", {"model": "mlp"}, "cli:ann", "cpu", status="queued")
    done = subprocess.run(
        [sys.executable, "-m", "core", "status", "--store", store.path],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    run = store.get_run(run_id)
    assert run.status == "starting" and run.pid  # the CLI's tick dispatched it ...
    deadline = time.monotonic() + 10
    while "core.runs.worker" not in command_line(run.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert command_line(run.pid).endswith(f"import time; time.sleep(120) core.runs.worker {run_id}")  # ... to a sleeper
    assert not sleepers  # started by the CLI, not in this process: the fixture still ends it


def test_the_torch_ci_runs_records_recompile_reasons_and_cache_counters():
    """The checks that depend on these (tests/test_explain_caches.py, tests/test_why_per_step.py)
    fail rather than skip on CI's torch; this names the cause in a fast test."""
    if not on_ci_torch():
        pytest.skip("an older torch than CI's: it may lack these fields (the app says 'not available')")
    assert {RECOMPILE_REASONS, CACHE_HITS} <= compilation_metric_fields()
