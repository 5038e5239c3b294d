"""`python -m core doctor`: the whole GPU story checked in one command on a bare GPU machine.

Every check is an ordinary job through the real queue and worker (so lanes, the probe, failure
handling and the store are exercised exactly as the app uses them): the probe; a short race per
precision; the tutorial's ResNet-50 with amp-bf16 at batch 128; the CUDA-graph and autotune
modes; an out-of-memory on purpose (it must fail with the clear reason, and the job after it must
still run); every explainer demo as the page asks for it. Then one table: check, outcome, figure.

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

from core.engine.explain import DEMOS, PAGE_PARAMS
from core.engine.spec import RunSpec, SpecError
from core.runs import devices, processes, queue
from core.runs.bundle import export_bundle
from core.runs.limits import HostLimits
from core.runs.store import Run, Store

OWNER = "doctor"
OK, FAILED, SKIPPED = "ok", "FAILED", "skipped"
NEEDS_CUDA = "doctor needs a CUDA GPU: torch finds none on this machine (torch.cuda.is_available() is False)"
BUNDLE_CHECK = "resnet50 amp-bf16, batch 128"  # exported as a recording the app can replay


@dataclass(frozen=True)
class Check:
    """One line of the doctor's table: a job to run and what its outcome must be."""

    name: str
    kind: str  # "race" | "demo"
    params: dict[str, Any]
    expect_error: str | None = None  # a race that must fail, with this text in its reason


@dataclass
class Outcome:
    name: str
    outcome: str  # OK | FAILED | SKIPPED
    figure: str
    run_id: int | None = None
    details: dict[str, Any] = field(default_factory=dict)


def _race(name: str, **spec: Any) -> Check:
    base = {"model": "mlp", "batch_size": 256, "epochs": 2, "steps_per_epoch": 10, "device": "cuda"}
    return Check(name, "race", RunSpec(**{**base, **spec}).to_dict())


def gpu_plan() -> list[Check]:
    """What a GPU box must get right, small enough to finish in minutes on one GPU."""
    checks = [_race(f"race mlp {precision}", precision=precision) for precision in ("fp32", "tf32", "amp-fp16")]
    checks.append(_race("race mlp amp-bf16", precision="amp-bf16"))
    checks.append(
        _race(BUNDLE_CHECK, model="resnet50", batch_size=128, precision="amp-bf16", epochs=2, steps_per_epoch=15)
    )
    checks.append(_race("mode reduce-overhead (CUDA graphs)", mode="reduce-overhead", precision="amp-bf16"))
    checks.append(_race("mode max-autotune-no-cudagraphs", mode="max-autotune-no-cudagraphs", steps_per_epoch=5))
    checks.append(_race("regional compile (gpt blocks)", model="gpt", batch_size=32, compile_scope="regional"))
    # 65,536 sequences of 4,096 tokens: the embedding alone wants 128 GiB, its sum with the positions as
    # much again, more than any GPU has; the batch itself is only 2 GiB, made in a second or two.
    oom = RunSpec(model="gpt", batch_size=65536, image_size=4096, epochs=1, steps_per_epoch=1, device="cuda")
    checks.append(Check("out of memory on purpose", "race", oom.to_dict(), expect_error="out of memory at batch size"))
    checks.append(_race("a race after the out-of-memory", precision="amp-bf16", epochs=1, steps_per_epoch=5))
    checks += [Check(f"demo {name}", "demo", {"demo": name, "params": dict(PAGE_PARAMS[name])}) for name in DEMOS]
    return checks


def cpu_smoke_plan() -> list[Check]:
    """The same machinery on a CPU at toy sizes: what CI can check of the doctor itself."""
    race = RunSpec(model="mlp", batch_size=8, epochs=1, steps_per_epoch=3, backend="aot_eager", device="cpu")
    return [
        Check("race mlp fp32 (aot_eager)", "race", race.to_dict()),
        Check("demo graphs", "demo", {"demo": "graphs", "params": {"examples": ["clean", "prints"]}}),
    ]


def judge(check: Check, run: Run | None) -> Outcome:
    """The table line for a finished job. Pure: the run as stored decides."""
    if run is None:
        return Outcome(check.name, FAILED, "never ran")
    summary = run.summary or {}
    if check.expect_error is not None:
        if run.status == "failed" and check.expect_error in (run.error or ""):
            return Outcome(check.name, OK, f"failed as it should: {run.error}", run.id)
        return Outcome(check.name, FAILED, f"expected a failure with '{check.expect_error}', got {run.status}", run.id)
    if run.status != "done":
        return Outcome(check.name, FAILED, f"{run.status}: {run.error or 'no reason recorded'}", run.id)
    if check.kind == "demo":
        result = summary.get("result") or {}
        unavailable = _unavailable(result)
        if unavailable:
            return Outcome(check.name, FAILED, f"part of the demo was unavailable: {unavailable}", run.id)
        took = (run.finished_at or 0) - (run.started_at or 0)
        return Outcome(check.name, OK, f"measured in {took:.0f} s", run.id)
    if summary.get("compile_failed"):
        return Outcome(check.name, FAILED, f"compile failed: {summary['compile_failed']}", run.id)
    if summary.get("compile_skipped"):
        return Outcome(check.name, FAILED, f"compile did not happen: {summary['compile_skipped']}", run.id)
    speedup, compile_s = summary.get("steady_state_speedup"), summary.get("compile_time_s")
    if speedup is None:
        return Outcome(check.name, FAILED, "too few steps finished to compare the variants", run.id)
    compiled = f"compile {compile_s:.1f} s" if compile_s is not None else "compile time not measured"
    figure = f"{speedup:.2f}x steady ({summary.get('verdict')}), {compiled}"
    added = summary.get("compiled_reserved_growth_bytes")
    if added:
        figure += f", compiled added {added / 2**30:.1f} GiB to the CUDA cache (CUDA-graph pool included)"
    return Outcome(check.name, OK, figure, run.id)


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
    store: Store, checks: list[Check], timeout_s: float = 900.0, on_progress: Callable[[str], None] | None = None
) -> list[Outcome]:
    """Queue every check at once (FIFO per lane, so a failure must not stop the next), wait for all
    of them, and judge each."""
    say = on_progress or (lambda text: None)
    limits = HostLimits(job_time_limit_s=timeout_s)
    caps = queue.ensure_probe(store, owner=OWNER, wait_s=120)
    if caps is None:
        probe = store.list_runs(kind="probe", limit=1)
        reason = probe[0].error if probe and probe[0].error else "no answer within 120 s"
        return [Outcome("device probe", FAILED, reason)]
    outcomes = [Outcome("device probe", OK, _probe_figure(store))]
    queued: list[tuple[Check, int | None, str | None]] = []
    for check in checks:
        try:
            queued.append(
                (check, queue.enqueue(store, check.params, OWNER, kind=check.kind, limits=limits, caps=caps), None)
            )
        except (SpecError, queue.JobError) as exc:
            queued.append((check, None, str(exc)))
    deadline = time.monotonic() + timeout_s
    pending = {run_id for _, run_id, _ in queued if run_id is not None}
    while pending and time.monotonic() < deadline:
        queue.tick(store)
        for run_id in list(pending):
            run = store.get_run(run_id)
            if run is not None and run.finished:
                pending.discard(run_id)
                ended = f"failed: {run.error}" if run.status == "failed" else run.status  # the table says more
                say(f"{len(queued) - len(pending)}/{len(queued)} {run.kind} #{run_id}: {ended}")
        time.sleep(0.5)
    for run_id in pending:  # past the doctor's own time limit: stop it, and say so
        queue.reconcile(store)
        run = store.get_run(run_id)
        if run is not None and not run.finished and run.pid:
            processes.terminate_group(run.pid)
        store.finish_run(run_id, "failed", error=f"the doctor gave up after {timeout_s:.0f} s")
    for check, run_id, refused in queued:
        if refused is not None:
            outcomes.append(Outcome(check.name, FAILED, f"refused: {refused}"))
        else:
            outcomes.append(judge(check, store.get_run(run_id)))
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
    lines.append(
        f"\n{len(outcomes) - failed} of {len(outcomes)} checks passed" + (f"; {failed} FAILED" if failed else "")
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


def doctor(store_path: str | None, out_dir: str | None, cpu_smoke: bool = False, say=print) -> int:
    """Run the doctor; returns the exit status (0: every check passed, 1: something failed, 2:
    no CUDA GPU here)."""
    import torch

    if not cpu_smoke and not torch.cuda.is_available():
        say(NEEDS_CUDA)
        return 2
    workdir = tempfile.mkdtemp(prefix="compile-lab-doctor-")
    store = Store(store_path or os.path.join(workdir, "doctor.sqlite3"))
    checks = cpu_smoke_plan() if cpu_smoke else gpu_plan()
    started = time.monotonic()
    outcomes = run_checks(store, checks, on_progress=lambda text: say(text))
    say(table(outcomes) + f"\n(took {time.monotonic() - started:.0f} s; store: {store.path})")
    if out_dir:
        for path in write_results(store, outcomes, out_dir):
            say(f"wrote {path}")
    return 1 if any(o.outcome == FAILED for o in outcomes) else 0
