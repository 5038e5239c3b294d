"""Helpers the tests share (tests/conftest.py keeps only pytest's hooks and fixtures): machine
descriptions for validation, quick race specs, torch-version checks, Inductor's CPU probe built once
for the session, and the process-table readers behind the guard that fails any test leaving a
process running."""

import contextlib
import gc
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import stand_in  # noqa: E402

from core.engine.spec import DeviceCaps, RunSpec  # noqa: E402

TESTS = os.path.join(ROOT, "tests")


def compilation_metric_fields() -> set[str]:
    """The per-compile fields this torch records: older versions lack some (recompile reasons, cache
    counters), and the app then says "not available" instead of 0. Tests check what torch offers."""
    import dataclasses

    import torch._dynamo.utils as du

    return {f.name for f in dataclasses.fields(du.CompilationMetrics)}


# The torch CI runs (requirements.txt: "CI runs the newest this machine has"). From it on, what the
# tests below check is known to be there: a field or behaviour gone missing is a rename to fix in
# the app, never a reason to drop an assertion quietly.
CI_TORCH = (2, 14)


def torch_version() -> tuple[int, int]:
    import torch

    major, minor = torch.__version__.split(".")[:2]
    return int(major), int(minor)


def on_ci_torch() -> bool:
    """Whether this torch is the one CI runs, or newer: there a missing feature fails the test."""
    return torch_version() >= CI_TORCH


def torch_records(field: str) -> bool:
    """Whether this torch records `field` per compile (torch._dynamo.utils.CompilationMetrics).
    Older versions lack some (recompile reasons, cache counters) and the app then says "not
    available" instead of 0, so a test checks what torch offers; on CI's torch a missing field
    fails the test instead of skipping the check."""
    present = field in compilation_metric_fields()
    if not present and on_ci_torch():
        pytest.fail(f"torch {'.'.join(map(str, torch_version()))} has no CompilationMetrics.{field}: renamed?")
    return present


RECOMPILE_REASONS = "recompile_reason"
CACHE_HITS = "inductor_fx_local_cache_hit_count"


def require_model_libraries() -> None:
    """timm and transformers come from requirements-models.txt: CI installs them and must run these
    tests; elsewhere say what is missing."""
    missing = [name for name in ("timm", "transformers") if importlib.util.find_spec(name) is None]
    if missing and os.environ.get("CI"):
        pytest.fail(f"CI must install requirements-models.txt (missing: {', '.join(missing)})")
    if missing:
        pytest.skip(f"needs {' and '.join(missing)}: pip install -r requirements-models.txt")


CPU = DeviceCaps(cuda=False, mps=False)
AMPERE = DeviceCaps(cuda=True, cuda_name="NVIDIA A100", compute_capability=(8, 0), cuda_bf16=True)
VOLTA = DeviceCaps(cuda=True, cuda_name="Tesla V100", compute_capability=(7, 0), cuda_bf16=False)


@contextlib.contextmanager
def process_conditions_kept():
    """A race run in this process (the terminal's `race` called in-process, a race job run directly)
    pins it to the race's cores, sets torch's threads and its compile cache variables, as a race
    process should (core.runs.race_conditions, core.engine.trainer): put back afterwards, as
    monkeypatch puts back a variable, so one test's race does not leave every later test on one core
    (where a worker's share of the machine would be read as nothing to pin) or with its cache."""
    cores = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else None
    environ = dict(os.environ)  # a race or replicate run here sets Inductor's cache folders in it
    # A job run here (core.runs.worker.run_job) ignores SIGTERM as it records its end; an ignored
    # signal is inherited by every process started after it, so a later test's race sent SIGTERM ran on.
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD)}
    try:
        yield
    finally:
        for sig, handler in handlers.items():
            if handler is not None and signal.getsignal(sig) != handler:
                signal.signal(sig, handler)
        for name in set(os.environ) - set(environ):
            del os.environ[name]
        for name, value in environ.items():
            if os.environ.get(name) != value:
                os.environ[name] = value
        if cores is not None and os.sched_getaffinity(0) != cores:
            os.sched_setaffinity(0, cores)
        if torch is not None and threads is not None and torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        if gc.get_freeze_count():
            gc.unfreeze()  # a race's warm-up froze what this process held (core.engine.variant.warm_up_device)
        feed = sys.modules.get("app_pages.run_screen.feed")
        if feed is not None and feed.served():
            # Only `streamlit run` mounts the live feed's routes; a test that built them (a TestClient of
            # feed_routes.routes()) without its own Event left every later AppTest page on the feed's
            # component, with no progress line of its own: the order-dependent failures of stop 37.
            feed._served.clear()


# The same quick race as quick_spec, as command-line flags.
QUICK_CLI = [
    "--model",
    "mlp",
    "--batch-size",
    "8",
    "--epochs",
    "2",
    "--steps-per-epoch",
    "3",
    "--backend",
    "aot_eager",
    "--device",
    "cpu",
    "--replicates",
    "0",
]


def quick_spec(**overrides) -> RunSpec:
    """A race that finishes in about a second on CPU: tiny MLP, aot_eager (no Inductor codegen), its
    first process alone (a test of replicate processes asks for them)."""
    base = dict(
        model="mlp", batch_size=16, epochs=2, steps_per_epoch=4, backend="aot_eager", device="cpu", replicates=0
    )
    base.update(overrides)
    return RunSpec(**base)


def load_factor() -> float:
    """How much busier than one runnable task per core this machine is now (1.0 = not busy)."""
    try:
        return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))
    except OSError:
        return 1.0


def machine_seconds(seconds: float) -> float:
    """A wall-clock bound for this machine as loaded now: `seconds` when it is idle, stretched by its
    load, so a promise like "within 3 s" is checked as strictly as the machine allows, not flaked."""
    return seconds * load_factor()


# -- the explainer demos, measured once ------------------------------------------------------------
# Real results of the demos that compile with Inductor, at small sizes, measured once for the session:
# each demo's own tests (tests/test_explain_*.py) check them, and the Under the hood page test renders
# them (tests/test_explain_page.py). Nothing mutates them. Measured as a test would be: with a data home
# of their own and the process conditions put back (a session fixture is set up before a test's own).
SMALL_FUSION = {"ks": [1, 4], "numel": 65536, "repeats": 3, "warmup": 1, "calls_per_sample": 2}
SMALL_OVERHEAD = {"ks": [1, 4], "batch_sizes": [1, 8], "repeats": 3, "warmup": 2, "calls_per_sample": 5}
SMALL_CACHES = {"model": "mlp", "batch_size": 8, "shapes": [8, 16, 32], "recompile_backend": "eager"}


def measured_once(tmp_path_factory, demo: str, params: dict, **kwargs) -> dict:
    """core.engine.explain.<demo>.run(params, **kwargs), in a data home of its own, conditions put back."""
    import importlib

    with process_conditions_kept():
        os.environ["COMPILE_LAB_DATA"] = str(tmp_path_factory.mktemp(f"{demo}-data"))
        return importlib.import_module(f"core.engine.explain.{demo}").run(params, **kwargs)


# -- nothing left running ----------------------------------------------------------------------
# Every test's processes carry this variable (with a value of their own test): a worker started by a
# CLI that has exited is no child of pytest any more, but it still has the environment it was given.
TEST_ID_VARIABLE = "COMPILE_LAB_TEST_ID"
# Helpers that, once started in pytest's process, serve it to the end (no leak): torch's
# compile-worker pool, and multiprocessing's resource tracker and fork server.
LONG_LIVED = (b"torch._inductor.compile_worker", b"multiprocessing.resource_tracker", b"multiprocessing.forkserver")
LEFT_RUNNING_GRACE_S = 3.0  # a worker recording its last event, a ticker starting the next job


def process_table() -> dict[int, tuple[int, bytes]]:
    """pid -> (parent pid, state) of every process this machine shows, from /proc."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    fields = fh.read().rsplit(b")", 1)[1].split()
                table[int(entry)] = (int(fields[1]), fields[0])
            except (OSError, IndexError, ValueError):
                continue  # gone meanwhile
    return table


def read_proc(pid: int, name: str) -> bytes:
    try:
        with open(f"/proc/{pid}/{name}", "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def command_line(pid: int) -> str:
    return read_proc(pid, "cmdline").replace(b"\0", b" ").decode(errors="replace").strip()


def processes_of_this_test(before: set[int], test_id: str) -> list[int]:
    """Live processes the running test started: pytest's new descendants, and any new process with
    this test's id in its environment (a worker a finished CLI left behind). Zombies are dead."""
    table = process_table()
    me = os.getpid()
    marker = f"{TEST_ID_VARIABLE}={test_id}".encode() + b"\0"

    def descends_from_pytest(pid: int) -> bool:
        seen = set()
        while pid in table and pid not in seen:
            seen.add(pid)
            pid = table[pid][0]
            if pid == me:
                return True
        return False

    def long_lived(pid: int) -> bool:
        while pid in table and pid != me:
            if any(name in read_proc(pid, "cmdline") for name in LONG_LIVED):
                return True
            pid = table[pid][0]
        return False

    found = []
    for pid, (_, state) in table.items():
        if pid in before or pid == me or state in (b"Z", b"X"):
            continue
        if (descends_from_pytest(pid) or marker in read_proc(pid, "environ")) and not long_lived(pid):
            found.append(pid)
    return found


def kill_processes(pids: list[int]) -> None:
    """SIGKILL each (its whole group when it leads one: a worker's own children), then reap our own."""
    for pid in pids:
        try:
            if os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + 5
    for pid in pids:
        while time.monotonic() < deadline:
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    break
            except ChildProcessError:  # not our child: gone, or a zombie its parent will reap
                if process_table().get(pid, (0, b"Z"))[1] in (b"Z", b"X"):
                    break
            time.sleep(0.02)


def warm_servers_of_this_test() -> list[int]:
    """The warm servers (core.runs.warm_server) this test started, found by its id in their environment."""
    test_id = os.environ.get(TEST_ID_VARIABLE, "")
    marker = f"{TEST_ID_VARIABLE}={test_id}".encode() + b"\0"
    return [
        pid
        for pid in process_table()
        if b"core.runs.warm_server" in read_proc(pid, "cmdline")
        and read_proc(pid, "comm").strip() == b"compile-lab-srv"
        and marker in read_proc(pid, "environ")
    ]


def end_run(store, sleepers, run_id, status="done", **fields) -> None:
    """A stand-in worker records its job's end and exits: its lane is free only once it is gone."""
    store.finish_run(run_id, status, **fields)
    for proc in sleepers:
        if proc.args[-1] == str(run_id):
            proc.kill()
            proc.wait()


def use_stand_in_launcher(monkeypatch) -> None:
    """Jobs started from here on, in this process and in those it starts, start tests/stand_in.py's
    sleeper: it is named in COMPILE_LAB_LAUNCHER (core.runs.processes.own_launcher), with this folder
    on PYTHONPATH so a CLI or an agent imports it too."""
    monkeypatch.setenv("COMPILE_LAB_LAUNCHER", stand_in.SETTING)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [TESTS, os.environ.get("PYTHONPATH")])))


# -- Inductor's CPU probe, built once for the session ------------------------------------------
# A machine builds Inductor's CPU probe once (core.engine.device_state.probe_dir, in the data folder:
# about 10 s on a 2-core box) and every later race loads it. Each test has a data folder of its own,
# so each test with a real Inductor race on the CPU would build it again. The tests that start real
# races get the session's probe instead, as a machine's second race has it; the test of the probe
# itself builds its own (tests/test_trainer.py).


def build_cpu_probe(data_home: str) -> str | None:
    """Run the probe in a fresh process with `data_home` as its data folder, as a worker does (this
    process may hold the answer already, and would build nothing); the folder it built, or None where
    it could not build one (no C++ compiler): the tests then build their own."""
    script = (
        "import torch; from core.engine.device_state import probe_cpu_vector_isa, probe_dir; "
        "print(probe_dir() if probe_cpu_vector_isa(torch.device('cpu'), 'inductor') is not None else '')"
    )
    env = {**os.environ, "COMPILE_LAB_DATA": data_home}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    folder = done.stdout.strip().splitlines()[-1] if done.returncode == 0 and done.stdout.strip() else ""
    return folder if folder and os.path.isdir(folder) and os.listdir(folder) else None


def _link_or_copy(source: str, destination: str) -> None:
    try:
        os.link(source, destination)
    except OSError:  # another file system
        shutil.copy2(source, destination)


def share_cpu_probe(probe: str, probe_home: str, data_home: str) -> None:
    """Give `data_home` the probe `build_cpu_probe(probe_home)` built, at the same place under it: hard
    links, so a test that frees its data folder (the disk budget) removes its own names only."""
    target = os.path.join(data_home, os.path.relpath(probe, probe_home))
    shutil.copytree(probe, target, copy_function=_link_or_copy, dirs_exist_ok=True)
