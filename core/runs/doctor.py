"""`python -m core doctor`: the whole GPU story checked in one command on a bare GPU machine,
within a time budget (what is checked, and what it costs, is core.runs.doctor_plan).

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
from core.engine.spec import SpecError
from core.engine.summary import Summary
from core.runs import devices, queue
from core.runs.bundle import export_bundle
from core.runs.doctor_plan import BUNDLE_CHECK, DEFAULT_BUDGET_S, Check, cpu_smoke_plan, fit_budget, gpu_plan, plan_text
from core.runs.limits import HostLimits
from core.runs.store import Run, Store

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
    probe = devices.latest_probe(store)
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
