"""Every door runs a race the same way: the terminal's `race`, `submit`, the app's Launch, a sweep
point and the benchmarks give the race's process the same conditions (malloc settings, cores,
threads, compile caches of its own), record them with the run, and the reading names what shapes the
number; a replicate runs under its first process's conditions (its caches: what that one left). The doctor queues its races through the same queue and worker
as the app's Launch (core.runs.doctor), on a GPU only.

These start real processes: tiny aot_eager races (no Inductor), each in the process its door gives it.
"""

import json
import os
import subprocess
import sys
import time

import pytest
from support import QUICK_CLI, ROOT, quick_spec

from core.engine import reading
from core.runs import queue, race_conditions
from core.runs.limits import HostLimits
from core.runs.store import Store

sys.path.insert(0, os.path.join(ROOT, "bench"))
import race_process  # noqa: E402 - the benchmarks' own way in

STANDARD = race_conditions.STEADY_MALLOC


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "core", *args], cwd=ROOT, capture_output=True, text=True, timeout=600, env=env
    )


def finished_run(store: Store, run_id: int, timeout: float = 300.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        queue.tick(store)
        run = store.get_run(run_id)
        if run.finished:
            return run
        time.sleep(0.3)
    raise AssertionError(f"run {run_id} did not finish within {timeout:.0f} s")


def test_every_door_records_the_same_process_conditions(tmp_path, monkeypatch):
    path = str(tmp_path / "store.sqlite3")
    monkeypatch.setenv("COMPILE_LAB_STORE", path)
    for name in [k for k in os.environ if k.startswith("MALLOC_") or k == race_conditions.MALLOC_SETTING]:
        monkeypatch.delenv(name)  # a standard host: the doors set the malloc thresholds themselves
    recorded = {}
    terminal = cli("race", "--json", "--quiet", *QUICK_CLI)
    assert terminal.returncode == 0, terminal.stderr
    recorded["terminal race"] = json.loads(terminal.stdout)["environment"]["conditions"]
    submitted = cli("submit", "--store", path, "--wait", "--json", *QUICK_CLI)
    assert submitted.returncode == 0, submitted.stderr
    store = Store(path)
    recorded["submit"] = store.list_runs(kind="race")[0].environment["conditions"]
    swept = cli("sweep", "--store", path, "--batch-sizes", "8,16", *QUICK_CLI)
    assert swept.returncode == 0, swept.stderr
    point = next(r for r in store.list_runs(kind="race") if r.sweep_id is not None)
    recorded["sweep point"] = point.environment["conditions"]
    launched = queue.enqueue(store, quick_spec(), "visitor:page", limits=HostLimits())  # what Launch calls
    recorded["app Launch"] = finished_run(store, launched).environment["conditions"]
    recorded["bench (terminal)"] = race_process.race_summary(
        "mlp", 16, 2, 4, "--backend", "aot_eager", "--replicates", "0"
    )["conditions"]
    recorded["bench (worker)"] = race_process.submitted_race(quick_spec(), path)["summary"]["conditions"]

    share = race_conditions.this_host()
    expected = {
        "machine_cores": os.cpu_count(),
        "cores": list(share.worker) if share.worker else None,
        "malloc": STANDARD,
        "differs": [],
        "caches": "cold: a fresh folder of its own",  # read back from the variables Inductor and Triton use
    }
    for door, conditions in recorded.items():
        assert {k: conditions[k] for k in expected} == expected, door
    assert len({json.dumps(c, sort_keys=True) for c in recorded.values()}) == 1, recorded


def test_a_replicate_runs_under_its_first_process_conditions(tmp_path):
    done = cli("race", "--json", "--quiet", *QUICK_CLI[:-2], "--replicates", "1", "--steps-per-epoch", "10")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    (replicate,) = result["replicates"]
    first = result["environment"]["conditions"]
    assert replicate["conditions"] == {**first, "caches": race_conditions.REPLICATE_CACHES}
    assert first["caches"] == "cold: a fresh folder of its own"
    assert replicate["eager_step_times_s"] and replicate["compiled_step_times_s"]  # every step kept
    process = result["summary"]["replicates"][0]
    assert process["number"] == 2 and process["steps"] == len(replicate["compiled_step_times_s"]) - 5


def test_a_host_setting_that_differs_is_recorded_and_said(tmp_path, monkeypatch):
    monkeypatch.setenv("MALLOC_ARENA_MAX", "2")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    done = cli("race", "--json", "--quiet", *QUICK_CLI, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["summary"]["conditions"]["differs"] == ["MALLOC_ARENA_MAX=2", "OMP_NUM_THREADS=1"]
    assert "Unlike a standard race here: MALLOC_ARENA_MAX=2; OMP_NUM_THREADS=1." in data["reading"]


@pytest.mark.parametrize(
    ("environ", "differs"),
    [
        ({}, ["glibc's moving malloc thresholds (this process was not started as a race process)"]),
        (dict(STANDARD), []),
        ({**STANDARD, "MALLOC_ARENA_MAX": "2"}, ["MALLOC_ARENA_MAX=2"]),
        ({"MALLOC_MMAP_THRESHOLD_": "65536"}, ["MALLOC_MMAP_THRESHOLD_=65536"]),  # the host's own thresholds
        (
            {race_conditions.MALLOC_SETTING: "glibc"},
            ["glibc's moving malloc thresholds (COMPILE_LAB_WORKER_MALLOC=glibc)"],
        ),
        ({**STANDARD, race_conditions.CPUS_SETTING: "off"}, ["COMPILE_LAB_WORKER_CPUS=off"]),
        ({**STANDARD, race_conditions.CPUS_SETTING: "auto", "MKL_NUM_THREADS": "4"}, ["MKL_NUM_THREADS=4"]),
        ({**STANDARD, "TORCHINDUCTOR_FX_GRAPH_CACHE": "0"}, ["TORCHINDUCTOR_FX_GRAPH_CACHE=0"]),  # a cold replicate
        ({**STANDARD, "TORCHINDUCTOR_CACHE_DIR": "/elsewhere"}, []),  # each race's caches are its own regardless
    ],
)
def test_what_differs_from_a_standard_race(environ, differs):
    assert race_conditions.differences(environ) == differs


def test_the_reading_names_the_cores_and_threads():
    one = {"machine_cores": 2, "cores": [1], "threads": 1, "malloc": STANDARD, "differs": [], "device": "cpu"}
    assert reading.conditions_note(one) == " Measured on 1 of this machine's 2 cores, 1 thread."
    unpinned = {**one, "cores": None, "threads": 8, "machine_cores": 8}
    assert reading.conditions_note(unpinned) == " Measured on 8 cores, unpinned, 8 threads."
    assert reading.conditions_note(None) == ""  # a race stored before conditions were kept
    gpu = {**one, "device": "cuda", "differs": ["MALLOC_ARENA_MAX=2"]}
    assert reading.conditions_note(gpu) == " Unlike a standard race here: MALLOC_ARENA_MAX=2."
