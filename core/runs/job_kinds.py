"""Every kind of job, one row each: how the queue checks it, which lane it takes, whether it
counts toward a visitor's limits, and the function its worker runs (named by module path, so
reading the table imports no torch). Adding a kind is one row here plus its runner.

The queue (core.runs.queue) and the worker (core.runs.worker) both read this table: what a kind
does is said here only. Other modules name a kind where they ask the store for runs of it
(`list_runs(kind="race")`: the Runs page, shared results, the doctor, the device probe's answer).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.engine.explain import demo_device_problem, demo_problems
from core.engine.spec import DeviceCaps, Problem, RunSpec, SpecError, validate
from core.runs.devices import LOOKUP_DEVICE_KEY, PROBE_DEVICE_KEY, demo_device_key, race_device_key
from core.runs.limits import HostLimits
from core.runs.lookups import lookup_problems

Check = Callable[[dict[str, Any], DeviceCaps | None, HostLimits], list[Problem]]
DeviceKey = Callable[[dict[str, Any], DeviceCaps | None], str]
# A visitor typing names could queue lookups without end (each builds a model): at most this many
# of one asker's lookups wait at once, whatever the host's limits say.
MAX_QUEUED_LOOKUPS = 4


@dataclass(frozen=True)
class JobKind:
    """How the queue handles one kind of job, and what its worker runs."""

    name: str
    check: Check  # the job's problems before it is queued (none: it may be queued)
    device_key: DeviceKey  # the lane it waits for
    runner: str  # "package.module.function": (params, sink) -> (status, run fields); imported by the worker
    counted: bool = True  # toward the queue length and a visitor's share (the app's own questions are not)
    max_waiting_per_asker: int | None = None  # an uncounted kind's own cap on one asker's waiting jobs
    plural: str = ""  # what a person calls several of them, for a refusal
    pinned_to_host: bool = False  # its answer is about the box that ran it (so it is queued on this host)


def race_problems(params: dict[str, Any], caps: DeviceCaps | None, limits: HostLimits) -> list[Problem]:
    """A race's spec problems on this device, then the host limits it passes."""
    try:
        spec = RunSpec.from_dict(params)
    except SpecError as exc:
        return exc.problems
    except TypeError as exc:
        return [Problem("spec", str(exc))]
    problems = validate(spec, caps)
    return problems + [p for p in limits.problems(spec) if p.field not in {q.field for q in problems}]


def demo_job_problems(params: dict[str, Any], caps: DeviceCaps | None, limits: HostLimits) -> list[Problem]:
    """An explainer demo this build knows, with valid parameters, that this device can run."""
    problems = [Problem("demo", message) for message in demo_problems(params)]
    device = demo_device_problem(params.get("demo", ""), caps) if not problems else None
    return problems + ([Problem("device", device)] if device else [])


# A lookup (a model's parameters and input, timm's list of names) builds a model on the meta
# device in a worker that sees no GPU: it never waits behind a race, and takes no GPU. It runs
# niced on one thread, on the core a CPU race leaves to the app (COMPILE_LAB_WORKER_THREADS).
JOB_KINDS: dict[str, JobKind] = {
    kind.name: kind
    for kind in [
        JobKind("race", race_problems, race_device_key, "core.runs.runners.run_race_job", plural="races"),
        JobKind("demo", demo_job_problems, demo_device_key, "core.runs.runners.run_demo_job", plural="demos"),
        JobKind(
            "probe",
            lambda params, caps, limits: [],
            lambda params, caps: PROBE_DEVICE_KEY,
            "core.runs.runners.run_probe_job",
            counted=False,
            plural="device probes",
            pinned_to_host=True,
        ),
        JobKind(
            "lookup",
            lambda params, caps, limits: lookup_problems(params, limits),
            lambda params, caps: LOOKUP_DEVICE_KEY,
            "core.runs.runners.run_lookup_job",
            counted=False,
            max_waiting_per_asker=MAX_QUEUED_LOOKUPS,
            plural="model lookups",
        ),
    ]
}
UNCOUNTED_KINDS = tuple(name for name, kind in JOB_KINDS.items() if not kind.counted)


def runner_of(kind: str) -> Callable[..., tuple[str, dict[str, Any]]]:
    """The function a worker runs for a job of `kind` (importing its module, which may import torch)."""
    module, _, function = JOB_KINDS[kind].runner.rpartition(".")
    return getattr(importlib.import_module(module), function)
