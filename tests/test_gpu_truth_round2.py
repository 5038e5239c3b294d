"""GPU defects read from torch's source, each simulated on a CPU: the condition torch creates on a
GPU is built here by hand, and the test fails on the code as it was before the fix."""

import collections
import dataclasses
import subprocess

import pytest
import torch
import torch._dynamo.utils as du

from core.engine import compile_stats, environment
from core.engine.compile_stats import CompileWatch
from core.runs.doctor import OK, judge
from core.runs.doctor_plan import Check
from core.runs.store import Run
from core.view.report import tf32_in_force


@dataclasses.dataclass
class Record:
    """The fields of torch's CompilationMetrics that the watch reads."""

    co_name: str = "forward"
    is_forward: bool | None = True
    is_runtime: bool | None = False
    recompile_reason: str | None = None
    compile_id: str | None = "0/0"


@pytest.fixture
def torch_records(monkeypatch):
    """torch's record deque, as torch keeps it: 64 at most, the oldest dropped."""
    records = collections.deque(maxlen=du.DEFAULT_COMPILATION_METRICS_LIMIT)
    monkeypatch.setattr(du, "get_compilation_metrics", lambda: list(records))
    return records


def test_torch_still_files_runtime_records_beside_compiles_and_keeps_only_64():
    assert "is_runtime" in {f.name for f in dataclasses.fields(du.CompilationMetrics)}
    assert du.DEFAULT_COMPILATION_METRICS_LIMIT == 64


def test_a_runtime_record_is_not_a_compile(torch_records):
    watch = CompileWatch()
    torch_records.append(Record())
    assert watch.new_compiles() == ["forward graph compiled"]
    # CUDA-graph recording at step 2 files a runtime record (cudagraph_trees.py): no compile.
    torch_records.append(Record(is_runtime=True, compile_id="0/0"))
    assert watch.new_compiles() == []


def test_compiles_are_seen_after_torch_deque_is_full(torch_records):
    torch_records.extend(Record(compile_id=f"{i}/0") for i in range(64))
    watch = CompileWatch()
    torch_records.append(Record(recompile_reason="0/1: tensor 'x' size mismatch at index 0", compile_id="0/1"))
    assert len(torch_records) == 64  # the deque did not grow: its oldest record was dropped
    assert watch.new_compiles() == ["recompile: tensor 'x' size mismatch at index 0"]
    assert watch.new_compiles() == []


def test_the_race_totals_leave_runtime_records_out(monkeypatch):
    compiled = dataclasses.replace(du.CompilationMetrics(), recompile_reason="0/1: guard failed", compile_id="0/1")
    runtime = dataclasses.replace(
        du.CompilationMetrics(), is_runtime=True, recompile_reason="runtime", compile_id="0/1"
    )
    monkeypatch.setattr(du, "get_compilation_metrics", lambda: [compiled, runtime])
    assert compile_stats.read_compile_stats().recompiles == 1


def test_a_reset_keeps_more_than_64_records_for_the_totals():
    compile_stats.reset_compile_state()
    try:
        assert du._compilation_metrics.maxlen == compile_stats.COMPILATION_RECORDS_KEPT > 64
    finally:
        du.set_compilation_metrics_limit(du.DEFAULT_COMPILATION_METRICS_LIMIT)


def test_precision_flags_never_raise_and_record_the_new_api():
    saved = torch.backends.cuda.matmul.fp32_precision
    try:
        torch.backends.cuda.matmul.fp32_precision = "tf32"  # a model file may do this
        with pytest.raises(RuntimeError):
            torch.get_float32_matmul_precision()  # what the old code called, outside any handler
        flags = environment.precision_flags()
    finally:
        torch.backends.cuda.matmul.fp32_precision = saved
    assert flags["cuda_matmul_fp32_precision"] == "tf32"
    assert flags["float32_matmul_precision"] is None
    assert "matmul fp32 precision tf32" in tf32_in_force(flags)


def test_legacy_flags_still_read_where_the_new_api_is_untouched():
    flags = {"float32_matmul_precision": "high", "cudnn_allow_tf32": True}
    assert tf32_in_force(flags) == "matmul high, cudnn tf32 on"


def test_the_driver_version_comes_from_nvidia_smi_when_torch_has_no_reader(monkeypatch):
    assert not hasattr(torch._C, "_cuda_getDriverVersion")  # torch 2.14: the old reader is gone
    header = "| NVIDIA-SMI 570.86.15     Driver Version: 570.86.15     CUDA Version: 12.8     |\n"
    monkeypatch.setattr(environment.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(environment.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, stdout=header))
    assert environment.cuda_driver_version() == "12.8"


def test_the_driver_version_is_unknown_only_when_nothing_tells_it(monkeypatch):
    monkeypatch.setattr(environment.shutil, "which", lambda name: None)
    monkeypatch.setattr(environment, "_driver_version_from_nvml", lambda: None)
    assert environment.cuda_driver_version() is None
    monkeypatch.setattr(environment, "_driver_version_from_nvml", lambda: 12040)
    assert environment.cuda_driver_version() == "12.4"


def test_the_doctor_judges_a_race_whose_compile_time_is_unknown():
    summary = {"steady_state_speedup": 1.1, "verdict": "faster", "compile_time_s": None}
    race = Run(7, "race", {}, "doctor", "cuda:0", "done", "done", 1.0, 0.0, 10.0, 40.0, None, None, None, None, 0,
               None, summary, None, None, 0)  # fmt: skip
    outcome = judge(Check("race", "race", {}), race)
    assert outcome.outcome == OK and outcome.figure == "1.10x steady (faster), compile time not measured"
