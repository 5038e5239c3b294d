"""The doctor fits a short GPU window: a plan readable on any machine, one cold headline race and
tiny warm path checks within the budget, each check its own deadline, "not run: budget" for what
does not fit, and the checks that prove more than "it ran" (TF32, CUDA graphs, losses)."""

import subprocess
import sys

import pytest
from support import ROOT

from core.engine.profiling import summarize_profile
from core.engine.spec import DeviceCaps, RunSpec, validate
from core.runs import doctor, queue
from core.runs.doctor import (
    BUNDLE_CHECK,
    DEFAULT_BUDGET_S,
    FAILED,
    NOT_RUN,
    OK,
    OOM_CHECK,
    Check,
    Outcome,
    fit_budget,
    gpu_plan,
    judge,
    plan_text,
    run_checks,
    table,
)
from core.runs.store import Run, Store

H200 = DeviceCaps(
    cuda=True, cuda_name="NVIDIA H200", compute_capability=(9, 0), cuda_bf16=True, triton=True, gpu_count=2
)


def run(summary=None, environment=None):
    return Run(7, "race", {}, "doctor", "cuda:0", "done", "done", 1.0, 0.0, 10.0, 40.0, None, None, None, None, 0,
               environment, summary, None, None, 0)  # fmt: skip


def test_the_default_plan_fits_the_budget_with_one_cold_resnet50_headline():
    checks = gpu_plan()
    plan = fit_budget(checks, DEFAULT_BUDGET_S)
    assert plan.over_budget == [] and plan.expected_s <= DEFAULT_BUDGET_S
    races = {c.name: RunSpec.from_dict(c.params) for c in checks if c.kind == "race"}
    compiling = {c.name for c in checks if c.compiles}  # the out-of-memory fails before any compile
    cold = [name for name, spec in races.items() if spec.cache == "cold" and name in compiling]
    assert cold == [BUNDLE_CHECK] and races[BUNDLE_CHECK].model == "resnet50"
    assert races[BUNDLE_CHECK].precision == "amp-bf16" and races[BUNDLE_CHECK].batch_size == 128
    assert all(spec.model in ("mlp", "gpt", "resnet50") for spec in races.values())
    for spec in races.values():
        assert validate(spec, H200) == [], spec
    assert [c.kind for c in checks].count("demo") == 0  # demos are --full's
    names = [c.name for c in checks]
    for wanted in ("TF32 in force", "CUDA graphs replayed", "losses agree", "warm-cache race", "alternating schedule"):
        assert any(wanted in name for name in names), wanted
    oom = names.index(OOM_CHECK)
    assert checks[oom].lane is not None and checks[oom + 1].lane == checks[oom].lane  # recovery on the same GPU
    assert any(c.tf32 for c in checks) and any(c.cudagraphs for c in checks) and any(c.loss_tolerance for c in checks)


def test_the_full_plan_adds_max_autotune_with_cuda_graphs_and_runs_all_cold():
    full = gpu_plan(full=True)
    autotune = [c for c in full if c.params.get("mode") == "max-autotune"]
    assert len(autotune) == 1 and autotune[0].cudagraphs
    assert all(c.params.get("cache", "cold") == "cold" for c in full if c.kind == "race")
    assert fit_budget(full, None).over_budget == []


def test_the_plan_prints_on_a_cpu_machine_with_compiles_expected_times_and_a_total():
    done = subprocess.run([sys.executable, "-m", "core", "doctor", "--plan"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0].split()[:4] == ["check", "compiles", "expected", "deadline"]
    assert any(line.startswith(BUNDLE_CHECK) for line in lines)
    assert "of a 240 s budget" in lines[-1] and "Inductor graph compiles" in lines[-1]
    total = float(lines[-1].split("about ")[1].split(" s")[0])
    assert total <= 240


def test_a_check_that_does_not_fit_the_budget_says_not_run_never_passes():
    plan = fit_budget(gpu_plan(), 90.0)
    assert [c.name for c in plan.checks] == [BUNDLE_CHECK]
    assert plan.over_budget and "not run: budget" in plan_text(plan)
    text = table([Outcome("a", OK, "fine"), Outcome("b", NOT_RUN, "not run: budget")])
    assert text.endswith("1 of 2 checks passed; 1 not run: budget")


def test_each_check_is_queued_with_its_own_deadline_and_the_recovery_on_the_oom_gpu(tmp_path, monkeypatch):
    queued = []

    def enqueue(store, params, owner, kind="race", limits=None, caps=None, lane=None):
        queued.append((params.get("model"), limits.job_time_limit_s, lane))
        raise queue.JobError("not in this test")

    monkeypatch.setattr(queue, "ensure_probe", lambda store, owner, wait_s: H200)
    monkeypatch.setattr(queue, "enqueue", enqueue)
    monkeypatch.setattr(doctor, "_probe_figure", lambda store: "H200")
    checks = gpu_plan()
    outcomes = run_checks(Store(str(tmp_path / "s.sqlite3")), checks, budget_s=DEFAULT_BUDGET_S)
    assert [limit for _, limit, _ in queued] == [c.deadline_s for c in checks]
    assert len(set(limit for _, limit, _ in queued)) > 1  # not one deadline for all
    lanes = [lane for _, _, lane in queued]
    oom = [c.name for c in checks].index(OOM_CHECK)
    assert lanes[oom] == lanes[oom + 1] == "cuda:0" and lanes.count("cuda:0") == 2
    assert [o.outcome for o in outcomes[1:]] == [FAILED] * len(checks)  # refused here: said, never passed


def test_judging_tf32_in_force_from_the_recorded_flags():
    check = Check("tf32", "race", {}, tf32=True)
    summary = {"steady_state_speedup": 1.1, "verdict": "faster", "compile_time_s": 3.0}
    on = {"precision_flags": {"cuda_matmul_fp32_precision": "tf32", "cudnn_fp32_precision": "tf32"}}
    off = {"precision_flags": {"cuda_matmul_fp32_precision": "tf32", "cudnn_fp32_precision": "none"}}
    assert judge(check, run(summary, on)).outcome == OK and "TF32 in force" in judge(check, run(summary, on)).figure
    assert judge(check, run(summary, off)).outcome == FAILED


def test_judging_cuda_graphs_replayed_and_losses_agreeing():
    base = {"steady_state_speedup": 0.9, "verdict": "slower", "compile_time_s": 3.0}
    graphs = Check("ro", "race", {}, cudagraphs=True)
    replayed = {**base, "profile": {"compiled": {"graph_launches_per_step": 2.0}}}
    assert judge(graphs, run(replayed)).outcome == OK  # slower is a finding, not a failure
    assert judge(graphs, run({**base, "profile": {"compiled": {"graph_launches_per_step": 0.0}}})).outcome == FAILED
    losses = Check("fp32", "race", {}, loss_tolerance=1e-3)
    assert judge(losses, run({**base, "eager_final_loss": 2.0, "compiled_final_loss": 2.0005})).outcome == OK
    assert judge(losses, run({**base, "eager_final_loss": 2.0, "compiled_final_loss": 2.1})).outcome == FAILED


class Event:
    def __init__(self, name, device_type="DeviceType.CPU"):
        self.name, self.device_type = name, device_type
        self.cpu_children, self.cpu_parent, self.time_range = [], None, None
        self.cpu_time_total = 1.0


def test_the_profile_counts_cuda_graph_replays():
    events = [Event("cudaGraphLaunch"), Event("cudaGraphLaunch_v10000"), Event("cudaLaunchKernel")]
    assert summarize_profile(events, "cuda", 2)["graph_launches_per_step"] == 1.0


@pytest.mark.parametrize("argv", [["--plan", "--full"], ["--plan", "--budget", "60"]])
def test_the_plan_follows_full_and_budget(argv):
    done = subprocess.run([sys.executable, "-m", "core", "doctor", *argv], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    if "--full" in argv:
        assert "no budget: --full" in done.stdout and "demo caches" in done.stdout
    else:
        assert "not run: budget" in done.stdout and "of a 60 s budget" in done.stdout
