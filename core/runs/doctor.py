"""`python -m core doctor`: the whole GPU story checked in one command on a bare GPU machine,
within a time budget (what is checked, and what it costs, is core.runs.doctor).

Every check is an ordinary job through the real queue and worker (so lanes, the probe, failure
handling and the store are exercised exactly as the app uses them), each with its own deadline:
the probe; the tutorial's ResNet-50 with amp-bf16 at batch 128, cold; a race per precision (TF32
in force, losses agreeing); the CUDA-graph (replayed) and autotune modes; regional compile; the
alternating schedule; a warm-cache race; an out-of-memory on purpose and a race after it on the
same GPU; with --full, every explainer demo. Then one table: check, outcome, figure.

Needs only torch and torchvision: nothing here (or in what it imports) needs Streamlit, Altair or
pandas. Judging a finished job is a pure function, so it is tested on a CPU machine.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from core.engine import words
from core.engine.explain import DEMOS, PAGE_PARAMS
from core.engine.spec import RunSpec, SpecError
from core.engine.summary import Summary
from core.runs import fleet, queue
from core.runs.bundle import export_bundle
from core.runs.limits import HostLimits
from core.runs.store import Run, Store

# ----------------------------------------------------------------------
# What the doctor checks, as one table: each check's job, how many Inductor graph compiles it
# makes, how long it is expected to take on one modern GPU (an H200-class card), and what its
# outcome must show beyond "it ran". Fitting the checks into a time budget is here too, and the
# `--plan` text, so the plan can be read on any machine (a CPU box included) before anyone pays for
# a GPU. Torch-free.
#
# The default plan fits a short GPU window: one cold ResNet-50 amp-bf16 race (the headline, cold as a
# user sees it); every other check proves a path, not a speed, so it uses a tiny model and the
# box's one warm Inductor/Triton cache. `full` runs everything at full size, cold, with every
# demo and max-autotune with CUDA graphs.

DEFAULT_BUDGET_S = 240.0
BUNDLE_CHECK = "resnet50 amp-bf16, batch 128"  # exported as a recording the app can replay
OOM_CHECK = "out of memory on purpose"
RECOVERY_LANE = "cuda:0"  # the out-of-memory and the race after it share one GPU: that is the proof
PROBE_EXPECTED_S = 8.0  # a worker's start (torch, a CUDA context) and the device's facts
DEADLINE_FACTOR, MIN_DEADLINE_S = 3.0, 45.0  # a check's own deadline: this times its expected time


@dataclass(frozen=True)
class Check:
    """One line of the doctor's table: a job to run, what it costs, and what its outcome must show."""

    name: str
    kind: str  # "race" | "demo"
    params: dict[str, Any]
    expect_error: str | None = None  # a race that must fail, with this text in its reason
    compiles: int = 0  # Inductor graph compiles it makes (forward and backward count one each)
    expected_s: float = 30.0  # on one H200-class GPU, the worker's start included
    tf32: bool = False  # TF32 must be in force (what Inductor reads)
    cudagraphs: bool = False  # CUDA graphs must be replayed in the profiled steps
    loss_tolerance: float | None = None  # eager's and compiled's final losses agree within this (relative)
    lane: str | None = None  # one GPU lane, not the next idle one
    proves: str = ""  # what passing it shows, for the plan

    @property
    def deadline_s(self) -> float:
        """This check's own time limit (each check its own: a slow one fails alone)."""
        return max(MIN_DEADLINE_S, DEADLINE_FACTOR * self.expected_s)


@dataclass
class Plan:
    """The checks that fit the budget, in order, and those that do not."""

    checks: list[Check]
    over_budget: list[Check] = field(default_factory=list)
    budget_s: float | None = DEFAULT_BUDGET_S

    @property
    def expected_s(self) -> float:
        return PROBE_EXPECTED_S + sum(c.expected_s for c in self.checks)


def _race(
    name: str, compiles: int, expected_s: float, proves: str, check: dict[str, Any] | None = None, **spec: Any
) -> Check:
    base = {"model": "mlp", "batch_size": 64, "epochs": 2, "steps_per_epoch": 6, "device": "cuda"}
    base.update({"profile_steps": 0, "cache": "warm"})
    params = RunSpec(**{**base, **spec}).to_dict()
    return Check(name, "race", params, compiles=compiles, expected_s=expected_s, proves=proves, **(check or {}))


def _full(check: Check, expected_s: float) -> Check:
    """The same check at the old full size: cold cache, batch 256, 2 epochs of 10 steps, profiled."""
    params = {**check.params, "cache": "cold", "profile_steps": 3}
    if params["model"] == "mlp":
        params.update(batch_size=256, steps_per_epoch=max(params["steps_per_epoch"], 10))
    return Check(**{**check.__dict__, "params": params, "expected_s": expected_s})


def gpu_plan(full: bool = False) -> list[Check]:
    """What a GPU box must get right: the short plan by default, everything at full size with `full`."""
    headline = _race(
        BUNDLE_CHECK, 2, 75.0, "the tutorial's model, cold as a new user pays it; its bundle is exported",
        model="resnet50", batch_size=128, precision="amp-bf16", steps_per_epoch=15, cache="cold",
    )  # fmt: skip
    checks = [
        headline,
        _race("race mlp fp32, losses agree", 2, 10.0, "eager and compiled train alike (final losses within 1e-3)",
              {"loss_tolerance": 1e-3}, precision="fp32"),
        _race("race mlp tf32, TF32 in force", 2, 10.0, "TF32 set where Inductor reads it (matmul and cuDNN conv)",
              {"tf32": True}, precision="tf32"),
        _race("race mlp amp-fp16", 2, 10.0, "autocast fp16 with the grad scaler", precision="amp-fp16"),
        _race("race mlp amp-bf16, losses agree", 2, 10.0, "autocast bf16 (final losses within 5%)",
              {"loss_tolerance": 5e-2}, precision="amp-bf16"),
        _race("mode reduce-overhead, CUDA graphs replayed", 2, 12.0, "CUDA graphs recorded and replayed",
              {"cudagraphs": True}, mode="reduce-overhead", precision="amp-bf16", profile_steps=3),
        _race("mode max-autotune-no-cudagraphs", 2, 20.0, "Inductor's autotuned Triton templates",
              mode="max-autotune-no-cudagraphs", steps_per_epoch=4),
        _race("regional compile (gpt blocks)", 2, 15.0, "a repeated block compiled once, in place",
              model="gpt", batch_size=8, compile_scope="regional"),
        _race("alternating schedule", 2, 10.0, "eager and compiled taking turns on one GPU", schedule="alternating"),
        _race("warm-cache race", 2, 10.0, "a compile served from the warm cache the checks above filled",
              precision="fp32"),
    ]  # fmt: skip
    # 65,536 sequences of 4,096 tokens: the embedding alone wants 128 GiB, its sum with the positions as
    # much again, more than any GPU has; the batch itself is only 2 GiB, made in a second or two.
    oom = RunSpec(model="gpt", batch_size=65536, image_size=4096, epochs=1, steps_per_epoch=1, device="cuda")
    checks.append(
        Check(OOM_CHECK, "race", oom.to_dict(), expect_error="out of memory at batch size", expected_s=10.0,
              lane=RECOVERY_LANE, proves="an out-of-memory ends the run with the clear reason")
    )  # fmt: skip
    checks.append(
        _race("a race after the out-of-memory, same GPU", 2, 10.0, "the GPU that ran out of memory recovers",
              {"lane": RECOVERY_LANE}, precision="amp-bf16", epochs=1, steps_per_epoch=5)
    )  # fmt: skip
    if not full:
        return checks
    checks = [c if c.name == BUNDLE_CHECK or c.expect_error else _full(c, 3 * c.expected_s) for c in checks]
    checks.insert(
        7,
        _full(_race("mode max-autotune (with CUDA graphs)", 2, 30.0, "autotuned templates under CUDA graphs",
                    {"cudagraphs": True}, mode="max-autotune", steps_per_epoch=4), 90.0),
    )  # fmt: skip
    checks += [
        Check(f"demo {name}", "demo", {"demo": name, "params": dict(PAGE_PARAMS[name])}, compiles=DEMO_COMPILES.get(name, 2),
              expected_s=DEMO_EXPECTED_S.get(name, 30.0), proves="the Under the hood demo, as the page asks for it")
        for name in DEMOS
    ]  # fmt: skip
    return checks


# The demos at the page's parameters (estimates; caches compiles cold and warm in fresh processes).
DEMO_COMPILES = {"fusion": 2, "overhead": 2, "graphs": 4, "codegen": 1, "caches": 8}
DEMO_EXPECTED_S = {"fusion": 25.0, "overhead": 30.0, "graphs": 20.0, "codegen": 15.0, "caches": 60.0}


def cpu_smoke_plan() -> list[Check]:
    """The same machinery on a CPU at toy sizes: what CI can check of the doctor itself."""
    race = RunSpec(model="mlp", batch_size=8, epochs=1, steps_per_epoch=3, backend="aot_eager", device="cpu")
    return [
        Check("race mlp fp32 (aot_eager)", "race", race.to_dict(), expected_s=20.0, loss_tolerance=1e-3),
        Check("demo graphs", "demo", {"demo": "graphs", "params": {"examples": ["clean", "prints"]}}, expected_s=20.0),
    ]


def fit_budget(checks: list[Check], budget_s: float | None) -> Plan:
    """The longest first part of the checks whose expected times (after the probe's) fit the
    budget (in order: the race after the out-of-memory needs the out-of-memory); the rest will say
    "not run: budget". No budget: all of them."""
    if budget_s is None:
        return Plan(list(checks), [], None)
    plan = Plan([], [], budget_s)
    used = PROBE_EXPECTED_S
    for check in checks:
        if not plan.over_budget and used + check.expected_s <= budget_s:
            plan.checks.append(check)
            used += check.expected_s
        else:
            plan.over_budget.append(check)
    return plan


def plan_text(plan: Plan) -> str:
    """`doctor --plan`: every check, its compiles, expected time and own deadline, and the total."""
    width = max([len(c.name) for c in plan.checks + plan.over_budget] + [12]) + 2
    lines = [f"{'check':<{width}}{'compiles':>9}{'expected':>10}{'deadline':>10}  proves"]
    lines.append(f"{'device probe':<{width}}{0:>9}{PROBE_EXPECTED_S:>9.0f}s{'':>10}  the GPU, its versions and driver")
    for c in plan.checks:
        lines.append(f"{c.name:<{width}}{c.compiles:>9}{c.expected_s:>9.0f}s{c.deadline_s:>9.0f}s  {c.proves}")
    for c in plan.over_budget:
        lines.append(f"{c.name:<{width}}{c.compiles:>9}{c.expected_s:>9.0f}s{'':>10}  not run: budget")
    compiles = sum(c.compiles for c in plan.checks)
    budget = f" of a {plan.budget_s:.0f} s budget" if plan.budget_s is not None else " (no budget: --full)"
    lines.append(
        f"\n{len(plan.checks) + 1} checks, {compiles} Inductor graph compiles, about {plan.expected_s:.0f} s{budget} "
        "on one H200-class GPU (expected times are estimates; each check stops at its own deadline)"
    )
    return "\n".join(lines)


OWNER = "doctor"
OK, FAILED, SKIPPED, NOT_RUN = "ok", "FAILED", "skipped", "not run"
NEEDS_CUDA = "doctor needs a CUDA GPU: torch finds none on this machine (torch.cuda.is_available() is False)"
BUDGET = "not run: budget"


@dataclass
class Outcome:
    name: str
    outcome: str  # OK | FAILED | SKIPPED
    figure: str
    run_id: int | None = None
    details: dict[str, Any] = field(default_factory=dict)


def judge(check: Check, run: Run | None) -> Outcome:
    """The table line for a finished job. Pure: the run as stored decides."""
    if run is None:
        return Outcome(check.name, FAILED, "never ran")
    if check.expect_error is not None:
        if run.status == "failed" and check.expect_error in (run.error or ""):
            return Outcome(check.name, OK, f"failed as it should: {run.error}", run.id)
        return Outcome(check.name, FAILED, f"expected a failure with '{check.expect_error}', got {run.status}", run.id)
    if run.status != "done":
        return Outcome(check.name, FAILED, f"{run.status}: {run.error or 'no reason recorded'}", run.id)
    if check.kind == "demo":
        result = (run.summary or {}).get("result") or {}  # a demo's result, not a race's summary
        unavailable = _unavailable(result)
        if unavailable:
            return Outcome(check.name, FAILED, f"part of the demo was unavailable: {unavailable}", run.id)
        took = (run.finished_at or 0) - (run.started_at or 0)
        return Outcome(check.name, OK, f"measured in {took:.0f} s", run.id)
    summary = Summary.of(run.summary)
    if summary.compile_failed:
        return Outcome(check.name, FAILED, f"compile failed: {summary.compile_failed}", run.id)
    if summary.compile_skipped:
        return Outcome(check.name, FAILED, f"compile did not happen: {summary.compile_skipped}", run.id)
    speedup, compile_s = summary.steady_state_speedup, summary.compile_time_s
    if speedup is None:
        return Outcome(check.name, FAILED, "too few steps finished to compare the variants", run.id)
    compiled = f"compile {words.seconds(compile_s)}" if compile_s is not None else "compile time not measured"
    figure = f"{words.speedup(speedup)} steady ({summary.verdict}), {compiled}"
    added = summary.compiled_reserved_growth_bytes
    if added:
        figure += f", compiled added {words.bytes_(added)} to the CUDA cache (CUDA-graph pool included)"
    for problem, note in (_tf32(check, run), _graphs_replayed(check, summary), _losses_agree(check, summary)):
        if problem:
            return Outcome(check.name, FAILED, f"{note}; {figure}", run.id)
        if note:
            figure += f", {note}"
    return Outcome(check.name, OK, figure, run.id)


def _tf32(check: Check, run: Run) -> tuple[bool, str]:
    """(failed, note): TF32 in force where Inductor reads it, from the flags the race recorded."""
    if not check.tf32:
        return False, ""
    flags = (run.environment or {}).get("precision_flags") or {}
    if "cuda_matmul_fp32_precision" in flags or "cudnn_fp32_precision" in flags:
        on = flags.get("cuda_matmul_fp32_precision") == "tf32" and flags.get("cudnn_fp32_precision") == "tf32"
        seen = f"matmul {flags.get('cuda_matmul_fp32_precision')}, cudnn {flags.get('cudnn_fp32_precision')}"
    else:  # a torch before the per-backend API
        on = flags.get("float32_matmul_precision") == "high" and bool(flags.get("cudnn_allow_tf32"))
        seen = f"matmul {flags.get('float32_matmul_precision')}, cudnn tf32 {flags.get('cudnn_allow_tf32')}"
    return (False, f"TF32 in force ({seen})") if on else (True, f"TF32 not in force ({seen})")


def _graphs_replayed(check: Check, summary: Summary) -> tuple[bool, str]:
    """(failed, note): CUDA graphs replayed in compiled's profiled steps (cudaGraphLaunch calls)."""
    if not check.cudagraphs:
        return False, ""
    profile = (summary.profile or {}).get("compiled") or {}
    launches = profile.get("graph_launches_per_step")
    if not launches:
        return True, "no CUDA graph replayed in the profiled steps"
    return False, f"CUDA graphs replayed ({launches:.0f} launches per step)"


def _losses_agree(check: Check, summary: Summary) -> tuple[bool, str]:
    """(failed, note): eager's and compiled's final losses within the check's relative tolerance."""
    if check.loss_tolerance is None:
        return False, ""
    eager, compiled = summary.eager_final_loss, summary.compiled_final_loss
    if eager is None or compiled is None:
        return True, "final losses not recorded"
    gap = abs(eager - compiled) / max(abs(eager), 1e-12)
    said = f"final losses {eager:.4g} vs {compiled:.4g} (gap {gap:.1e}, tolerance {check.loss_tolerance:.0e})"
    return gap > check.loss_tolerance, ("losses agree: " if gap <= check.loss_tolerance else "losses differ: ") + said


def _unavailable(result: Any, depth: int = 0) -> str | None:
    """The first 'unavailable' note anywhere in a demo's result (a private torch API missing).
    A CUDA-only part on a CPU machine is expected there and does not count."""
    if depth > 6:
        return None
    if isinstance(result, dict):
        note = result.get("unavailable")
        if isinstance(note, str) and "need a CUDA device" not in note and "needs a CUDA" not in note:
            return note
        values = result.values()
    elif isinstance(result, list):
        values = result
    else:
        return None
    for value in values:
        found = _unavailable(value, depth + 1)
        if found:
            return found
    return None


def run_checks(
    store: Store,
    checks: list[Check],
    budget_s: float | None = DEFAULT_BUDGET_S,
    on_progress: Callable[[str], None] | None = None,
) -> list[Outcome]:
    """Queue every check that fits the budget at once (FIFO per lane, so a failure must not stop
    the next), each with its own deadline, wait for them, and judge each. What does not fit the
    budget, beforehand or when it runs out, is "not run: budget", never a pass."""
    say = on_progress or (lambda text: None)
    started = time.monotonic()
    caps = queue.ensure_probe(store, owner=OWNER, wait_s=120)
    if caps is None:
        probe = store.list_runs(kind="probe", limit=1)
        reason = probe[0].error if probe and probe[0].error else "no answer within 120 s"
        return [Outcome("device probe", FAILED, reason)]
    outcomes = [Outcome("device probe", OK, _probe_figure(store))]
    plan = fit_budget(checks, budget_s)
    queued: list[tuple[Check, int | None, str | None]] = []
    for check in plan.checks:
        limits = HostLimits(job_time_limit_s=check.deadline_s)
        try:
            run_id = queue.enqueue(
                store, check.params, OWNER, kind=check.kind, limits=limits, caps=caps, lane=check.lane
            )
            queued.append((check, run_id, None))
        except (SpecError, queue.JobError) as exc:
            queued.append((check, None, str(exc)))
    # Past the budget, what has not started is not run; what runs stops at its own deadline.
    deadline = None if budget_s is None else started + budget_s
    pending = {run_id for _, run_id, _ in queued if run_id is not None}
    while pending:
        queue.tick(store)
        for run_id in list(pending):
            run = store.get_run(run_id)
            if run is not None and run.finished:
                pending.discard(run_id)
                ended = f"failed: {run.error}" if run.status == "failed" else run.status  # the table says more
                say(f"{len(queued) - len(pending)}/{len(queued)} {run.kind} #{run_id}: {ended}")
            elif run is not None and run.status == "queued" and deadline is not None and time.monotonic() > deadline:
                if store.finish_run(run_id, "cancelled", error=BUDGET, phase=BUDGET):
                    pending.discard(run_id)
        time.sleep(0.5)
    for check, run_id, refused in queued:
        if refused is not None:
            outcomes.append(Outcome(check.name, FAILED, f"refused: {refused}"))
            continue
        run = store.get_run(run_id)
        if run is not None and run.error == BUDGET:
            outcomes.append(Outcome(check.name, NOT_RUN, BUDGET, run_id))
        else:
            outcomes.append(judge(check, run))
    outcomes += [Outcome(check.name, NOT_RUN, BUDGET) for check in plan.over_budget]
    return outcomes


def _probe_figure(store: Store) -> str:
    probe = fleet.latest_probe(store)
    summary = probe.summary if probe else {}
    env = summary.get("environment") or {}
    gpus = summary.get("gpus") or []
    names = ", ".join(f"{g.get('name')} ({g.get('compute_capability')})" for g in gpus) or env.get("device_name", "?")
    caps = summary.get("caps") or {}
    if not caps.get("cuda"):
        return f"CPU only: {env.get('cpu_name', '?')}, {env.get('cpu_count', '?')} cores; torch {env.get('torch')}"
    return (
        f"{len(gpus) or 1} x {names}; torch {env.get('torch')}, CUDA {env.get('cuda')}, driver "
        f"{summary.get('cuda_driver') or '?'}, Triton {env.get('triton') or 'none'}; "
        f"native bf16 {'yes' if caps.get('cuda_bf16') else 'no'}"
    )


def table(outcomes: list[Outcome]) -> str:
    """The doctor's one table, plain text."""
    width = max([len(o.name) for o in outcomes] + [5]) + 2
    lines = [f"{'check':<{width}}{'outcome':<9}figure"]
    lines += [f"{o.name:<{width}}{o.outcome:<9}{o.figure}" for o in outcomes]
    failed = sum(o.outcome == FAILED for o in outcomes)
    not_run = sum(o.outcome == NOT_RUN for o in outcomes)
    passed = sum(o.outcome == OK for o in outcomes)
    lines.append(
        f"\n{passed} of {len(outcomes)} checks passed"
        + (f"; {failed} FAILED" if failed else "")
        + (f"; {not_run} {BUDGET}" if not_run else "")
    )
    return "\n".join(lines)


def write_results(store: Store, outcomes: list[Outcome], out_dir: str) -> list[str]:
    """The table (text and JSON) and the ResNet-50 race as a bundle, into out_dir."""
    os.makedirs(out_dir, exist_ok=True)
    written = []
    path = os.path.join(out_dir, "doctor.txt")
    with open(path, "w") as fh:
        fh.write(table(outcomes) + "\n")
    written.append(path)
    path = os.path.join(out_dir, "doctor.json")
    with open(path, "w") as fh:
        json.dump([o.__dict__ for o in outcomes], fh, indent=1)
    written.append(path)
    for o in outcomes:
        if o.name == BUNDLE_CHECK and o.outcome == OK and o.run_id is not None:
            path = os.path.join(out_dir, "resnet50-amp-bf16-b128.json")
            with open(path, "w") as fh:
                json.dump(export_bundle(store, o.run_id), fh, indent=1)
            written.append(path)
    return written


def doctor(
    store_path: str | None,
    out_dir: str | None,
    cpu_smoke: bool = False,
    say=print,
    budget_s: float | None = None,
    full: bool = False,
    plan_only: bool = False,
) -> int:
    """Run the doctor; returns the exit status (0: every check passed, 1: something failed or did
    not fit the budget, 2: no CUDA GPU here). `plan_only`: print the plan, on any machine, and run
    nothing. The budget is `budget_s`, else DEFAULT_BUDGET_S, or none with `full`."""
    budget = budget_s if budget_s is not None else (None if full else DEFAULT_BUDGET_S)
    checks = cpu_smoke_plan() if cpu_smoke else gpu_plan(full=full)
    if plan_only:
        say(plan_text(fit_budget(checks, budget)))
        return 0
    import torch

    if not cpu_smoke and not torch.cuda.is_available():
        say(NEEDS_CUDA)
        return 2
    workdir = tempfile.mkdtemp(prefix="compile-lab-doctor-")
    store = Store(store_path or os.path.join(workdir, "doctor.sqlite3"))
    started = time.monotonic()
    outcomes = run_checks(store, checks, budget_s=budget, on_progress=lambda text: say(text))
    say(table(outcomes) + f"\n(took {time.monotonic() - started:.0f} s; store: {store.path})")
    if out_dir:
        for path in write_results(store, outcomes, out_dir):
            say(f"wrote {path}")
    return 1 if any(o.outcome in (FAILED, NOT_RUN) for o in outcomes) else 0
