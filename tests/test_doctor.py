"""`python -m core doctor`: the GPU check in one command. Its plan and its judging are checked here
on a CPU; the machinery runs end to end at toy size; the real thing is a `gpu` test."""

import os
import subprocess
import sys

import pytest
import torch
from support import ROOT

from core.engine.spec import DeviceCaps, RunSpec, validate
from core.runs.doctor import BUNDLE_CHECK, FAILED, NEEDS_CUDA, OK, Check, Outcome, gpu_plan, judge, table
from core.runs.store import Run

H200 = DeviceCaps(
    cuda=True, cuda_name="NVIDIA H200", compute_capability=(9, 0), cuda_bf16=True, triton=True, gpu_count=1
)


def run(status="done", summary=None, error=None, kind="race"):
    return Run(7, kind, {}, "doctor", "cuda:0", status, status, 1.0, 0.0, 10.0, 40.0, None, None, None, None, 0,
               None, summary, None, error, 0)  # fmt: skip


def test_the_full_gpu_plan_covers_what_the_issue_lists_and_every_race_is_valid_on_a_modern_gpu():
    plan = gpu_plan(full=True)
    races = [RunSpec.from_dict(c.params) for c in plan if c.kind == "race"]
    assert {r.precision for r in races} == {"fp32", "tf32", "amp-fp16", "amp-bf16"}
    assert any(r.model == "resnet50" and r.precision == "amp-bf16" and r.batch_size == 128 for r in races)
    assert {"reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune"} <= {r.mode for r in races}
    assert any(r.compile_scope == "regional" for r in races)
    oom = [i for i, c in enumerate(plan) if c.expect_error]
    assert len(oom) == 1 and plan[oom[0] + 1].kind == "race"  # a job after the failure must still run
    assert [c.params["demo"] for c in plan if c.kind == "demo"] == ["fusion", "overhead", "graphs", "codegen", "caches"]
    for spec in races:
        assert validate(spec, H200) == [], spec
    assert any(c.name == BUNDLE_CHECK for c in plan)


def test_judging_a_race():
    check = Check("race", "race", {})
    good = {
        "steady_state_speedup": 1.42,
        "verdict": "faster",
        "compile_time_s": 21.3,
        "compiled_peak_reserved_bytes": 5 * 2**30,  # eager's leftover cache included
        "compiled_reserved_growth_bytes": 3 * 2**30,
    }
    assert judge(check, run(summary=good)) == Outcome(
        "race",
        OK,
        "1.42x steady (faster), compile 21.3 s, compiled added 3.0 GiB to the CUDA cache (CUDA-graph pool included)",
        7,
    )
    skipped = judge(check, run(summary={**good, "compile_skipped": "no graph was compiled (BF16 is not supported)"}))
    assert skipped.outcome == FAILED and "compile did not happen" in skipped.figure
    assert judge(check, run("failed", error="Boom")).figure == "failed: Boom"
    assert judge(check, None).outcome == FAILED


def test_judging_the_out_of_memory_on_purpose():
    check = Check("oom", "race", {}, expect_error="out of memory at batch size")
    reason = "out of memory at batch size 65536 on cuda: try a smaller batch size or amp-bf16"
    assert judge(check, run("failed", error=reason)).outcome == OK
    assert judge(check, run("failed", error="RuntimeError: CUDA error: illegal memory access")).outcome == FAILED
    assert judge(check, run("done", summary={"steady_state_speedup": 1.0})).outcome == FAILED


def test_judging_a_demo_counts_a_missing_torch_api_but_not_a_cuda_only_part_on_a_cpu():
    check = Check("demo caches", "demo", {})
    missing = {"result": {"recompiles": {"unavailable": "AttributeError: no get_compilation_metrics"}}}
    assert judge(check, run(summary=missing, kind="demo")).outcome == FAILED
    cpu_only = {"result": {"cuda_graphs": {"unavailable": "CUDA graphs need a CUDA device; this run is on cpu."}}}
    assert judge(check, run(summary=cpu_only, kind="demo")).outcome == OK


def test_the_table_counts_failures():
    text = table([Outcome("a", OK, "fine"), Outcome("b", FAILED, "broken")])
    assert text.splitlines()[0].split() == ["check", "outcome", "figure"]
    assert text.endswith("1 of 2 checks passed; 1 FAILED")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: the doctor would run for real")
def test_on_a_cpu_machine_the_doctor_says_in_one_line_that_it_needs_cuda():
    done = subprocess.run([sys.executable, "-m", "core", "doctor"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2 and done.stdout.strip() == NEEDS_CUDA


def test_the_doctor_machinery_runs_without_streamlit_altair_or_pandas(tmp_path):
    """Through the real queue and worker processes, with the UI libraries made unimportable (a GPU
    box with only torch installed)."""
    blocked = tmp_path / "blocked"
    for name in ("streamlit", "altair", "pandas"):
        (blocked / name).mkdir(parents=True)
        (blocked / name / "__init__.py").write_text(f"raise ImportError('{name} is not installed on this box')\n")
    env = {**os.environ, "PYTHONPATH": f"{blocked}{os.pathsep}{ROOT}", "COMPILE_LAB_DATA": str(tmp_path / "data")}
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "core", "doctor", "--cpu-smoke", "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 of 3 checks passed" in done.stdout
    assert (out / "doctor.txt").read_text().startswith("check")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_the_doctor_passes_on_this_gpu(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "core", "doctor", "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-4000:]
    assert (tmp_path / "resnet50-amp-bf16-b128.json").exists()
