"""Shared fixtures: machine descriptions for validation, and quick race specs."""

import importlib.util
import os
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from core.engine.spec import DeviceCaps, RunSpec  # noqa: E402


def compilation_metric_fields() -> set[str]:
    """The per-compile fields this torch records: older versions lack some (recompile reasons, cache
    counters), and the app then says "not available" instead of 0. Tests check what torch offers."""
    import dataclasses

    import torch._dynamo.utils as du

    return {f.name for f in dataclasses.fields(du.CompilationMetrics)}


TORCH_RECORDS_RECOMPILE_REASONS = "recompile_reason" in compilation_metric_fields()
TORCH_RECORDS_CACHE_HITS = "inductor_fx_local_cache_hit_count" in compilation_metric_fields()


# Nothing in the tests may reach the network: Hugging Face libraries read these when imported.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


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


@pytest.fixture(autouse=True)
def _private_data_home(tmp_path, monkeypatch):
    """Warm caches and stores go to a per-test folder, never the user's data directory."""
    monkeypatch.setenv("COMPILE_LAB_DATA", str(tmp_path / "data"))


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
]


def quick_spec(**overrides) -> RunSpec:
    """A race that finishes in about a second on CPU: tiny MLP, aot_eager (no Inductor codegen)."""
    base = dict(model="mlp", batch_size=16, epochs=2, steps_per_epoch=4, backend="aot_eager", device="cpu")
    base.update(overrides)
    return RunSpec(**base)


@pytest.fixture
def sleepers(monkeypatch):
    """A stand-in worker launcher: a sleeping process that looks like a worker, so dispatch
    logic can be tested without training anything."""
    procs = []

    def launch(store_path, run_id, device_key="cpu"):
        proc = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(120)", "core.runs.worker", str(run_id)],
            start_new_session=True,
        )
        procs.append(proc)
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

    from core.runs import processes

    monkeypatch.setattr(processes, "launch_worker", launch)
    yield procs
    for proc in procs:
        proc.kill()
        proc.wait()
