"""Every kind of job, one row each, and what it does inside its worker: how the queue checks it,
which lane it takes, whether it counts toward a visitor's limits, and its runner (run a race, probe
the device, measure an explainer demo, answer a lookup about models). The table names each runner by
module path, so reading the table imports no torch.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.engine.events import StartEvent
from core.engine.explain import demo_device_problem, demo_problems
from core.engine.models.sources import library_version, model_name_problem, source_of
from core.engine.spec import DeviceCaps, Problem, RunSpec, SpecError, validate
from core.runs import device_history, race_conditions, warm_start
from core.runs.fleet import LOOKUP_DEVICE_KEY, PROBE_DEVICE_KEY, demo_device_key, race_device_key
from core.runs.limits import HostLimits, model_allowed
from core.runs.processes import run_replicate
from core.runs.run_files import run_files_dir
from core.runs.store import Store

# ----------------------------------------------------------------------
# What each kind of job does inside its worker (core.runs.job_kinds names these by path): run a
# race, probe the device, measure an explainer demo, answer a lookup about models. Each takes the
# job's parameters and the worker's event sink and returns (status, run fields to store).
#
# Kept apart from the worker process itself (core.runs.worker: claiming, recording, ending a job),
# so a new kind adds its function here and its row to the table. torch is imported inside each.


def run_race_job(params: dict[str, Any], sink: Any) -> tuple[str, dict[str, Any]]:
    """Run a race; returns (status, run fields to store)."""
    import torch

    from core.engine.spec import detect_device_caps, resolve_device
    from core.engine.trainer import run_race

    spec = RunSpec.from_dict(params)
    too_large = _model_size_problem(sink, spec)
    if too_large:
        return "failed", {"error": too_large}
    caps = detect_device_caps()
    device = resolve_device(spec.device, caps)
    try:  # the same process conditions as every door's race (core.runs.race_conditions)
        conditions = race_conditions.apply(device)
    except race_conditions.CoreSettingError as exc:
        return "failed", {"error": f"this host's configuration: {exc}"}
    from core.engine.environment import environment_record, machine_load

    here = environment_record(torch.device(device))
    spread = _spread(sink, params, here)
    trace_dir = run_files_dir(sink.store_path, sink.run_id)

    def on_event(event: Any) -> None:
        if isinstance(event, StartEvent):  # said from the start (a cancelled race keeps it too)
            event.environment["process_start"] = warm_start.how_started()  # forked from a warm server, or not
        sink(event)

    result = run_race(
        spec,
        on_event=on_event,
        caps=caps,
        trace_dir=trace_dir,
        spread=spread,
        replicate=functools.partial(replicate_in_time, deadline=getattr(sink, "deadline", None), conditions=conditions),
        conditions=conditions.to_dict(),
        run_id=sink.run_id,
    )
    result.environment["load_at_end"] = machine_load()  # the race's own threads included
    data = result.to_dict()
    race_conditions.keep_in_environment(result.environment, conditions)
    details = {
        "compile": data["compile"],
        "variants": {name: {k: v for k, v in d.items() if k != "steps"} for name, d in data["variants"].items()},
        "replicates": data["replicates"],  # every replicate's steps, as measured
    }
    fields = {
        "summary": result.summary.to_dict(),
        "details": details,
        "environment": result.environment,
        "error": result.error,
    }
    status = "done" if not result.error else ("cancelled" if result.error == "cancelled" else "failed")
    return status, fields


def _model_size_problem(sink: Any, spec: RunSpec) -> str | None:
    """Where the host limits a model's size (max_model_parameters, kept in the details the race was
    queued with), why this one is over it: counted on the meta device before any memory is taken."""
    from core.engine.models.workload import model_size_problem

    with contextlib.closing(Store(sink.store_path)) as store:
        run = store.get_run(sink.run_id)
    limit = (run.details or {}).get("max_model_parameters") if run is not None else None
    if not isinstance(limit, int) or isinstance(limit, bool):
        return None
    return model_size_problem(spec, limit)


REPLICATE_MARGIN_S = 30.0  # a replicate is not started with less than this left before the job's time limit


def replicate_in_time(
    spec: Any, number: int, steps: int, cache_dir: str, limit_s: float, deadline: float | None, conditions: Any
) -> dict[str, Any]:
    """run_replicate, unless the job's time limit (a host's) is too near for another one: then a
    process that says so, and the race ends with what it measured instead of being cut off."""
    import time

    from core.engine.intervals import ProcessResult

    if deadline is not None and deadline - time.time() < REPLICATE_MARGIN_S:
        error = "no replicate started this close to the job's time limit"
        return {"process": ProcessResult(number, None, None, 0, error=error).to_dict()}
    if deadline is not None:
        limit_s = min(limit_s, deadline - time.time() - 5.0)
    return run_replicate(spec, number, steps, cache_dir, limit_s, conditions=conditions)


def _spread(sink: Any, params: dict[str, Any], here: dict[str, Any]) -> Any:
    """The run-to-run spread races of this device have shown so far (core.runs.device_history); the
    assumed one when the store cannot say: a spread never stops a race."""
    from core.engine.intervals import ASSUMED

    try:
        with contextlib.closing(Store(sink.store_path)) as store:
            return device_history.spread_here(store, params, here.get("device_name"), here.get("torch"), sink.run_id)
    except Exception:  # noqa: BLE001
        return ASSUMED


def run_probe_job(params: dict[str, Any], sink: Any) -> tuple[str, dict[str, Any]]:
    """Record what this machine's device is, so the UI never has to touch CUDA to know."""
    import torch

    from core.engine.environment import cuda_driver_version, environment_record, gpu_inventory
    from core.engine.spec import detect_device_caps

    caps = detect_device_caps()
    env = environment_record(torch.device(caps.default_device))
    summary = {
        "caps": caps.to_dict(),
        "environment": env,
        "gpus": gpu_inventory(),
        "cuda_driver": cuda_driver_version(),
    }
    return "done", {"summary": summary, "environment": env}


def run_demo_job(params: dict[str, Any], sink: Any) -> tuple[str, dict[str, Any]]:
    """Run an explainer demo on this machine's device; the result is stored as the run's summary."""
    import inspect

    import torch

    from core.engine.environment import environment_record
    from core.engine.explain import demo_device_problem, demo_module, with_defaults
    from core.engine.spec import detect_device_caps

    caps = detect_device_caps()
    device = caps.default_device
    cannot = demo_device_problem(params["demo"], caps)
    if cannot:  # refused before measuring, not half way through
        return "failed", {"error": cannot}
    env = environment_record(torch.device(device))
    sink.update(environment=env, phase=f"measuring {params['demo']} on {device}")
    module = demo_module(params["demo"])
    full = with_defaults(params["demo"], params.get("params"))
    accepts = inspect.signature(module.run).parameters
    kwargs: dict[str, Any] = {"device": device} if "device" in accepts else {}
    if "fresh_process" in accepts:  # its fresh processes start warm too (core.runs.warm_start)
        kwargs["fresh_process"] = warm_start.run_fresh
    result = module.run(full, **kwargs)
    return "done", {"summary": {"result": result, "params": full}, "environment": env}


def run_lookup_job(params: dict[str, Any], sink: Any) -> tuple[str, dict[str, Any]]:
    """Answer a question about models for the app (core.runs.model_catalog): a model's facts, built
    on the meta device (a model file: on the CPU, with one checked step), or timm's list of names.
    Niced and on one thread: it may run beside a race, on the core the race leaves free."""
    import torch

    from core.engine.models.workload import ModelError, describe_model, is_out_of_memory

    with contextlib.suppress(OSError):
        os.nice(10)
    torch.set_num_threads(1)
    if "list" in params:
        from core.engine.models.library_models import timm_model_names

        sink.update(phase="reading timm's model list")
        return "done", {"summary": {"names": timm_model_names(), "library": params.get("library")}}
    spec = RunSpec(model=params["model"], model_file=params.get("model_file"), device="cpu")
    sink.update(phase=f"looking up {spec.model}")
    try:
        facts = describe_model(spec)
    except ModelError as exc:  # about the model, so worth keeping: the same question gets the same answer
        return "failed", {"error": str(exc), "summary": {"model_error": True}}
    except Exception as exc:  # noqa: BLE001 - out of memory building it, or a library's own failure
        # Still an answer about the model (the same library builds it the same way next time): kept,
        # so a page showing it does not queue the same failing lookup again every minute.
        if is_out_of_memory(exc):
            error = f"{spec.model} does not fit in this machine's memory"
        else:
            error = f"{spec.model} could not be built: {type(exc).__name__}: {exc}"
        return "failed", {"error": error, "summary": {"model_error": True}}
    return "done", {"summary": {"facts": facts}}


# ----------------------------------------------------------------------
# What a lookup job asks, and which questions the queue accepts: the job's parameters for one
# model or for a library's list of names, and its check. No torch.
#
# Apart from core.runs.model_catalog (which asks and reads the answers through the queue) because the
# job-kinds table needs the check, and the queue needs the table: the catalog sits above both.

LISTS = ("timm",)


def model_params(model: str, model_file: str | None = None) -> dict[str, Any]:
    """A lookup job's parameters for one model: the question and the library version answering it."""
    return {"model": model, "model_file": model_file, "library": library_version(source_of(model))}


def list_params(source: str = "timm") -> dict[str, Any]:
    return {"list": source, "library": library_version(source)}


def lookup_problems(params: dict[str, Any], limits: HostLimits) -> list[Problem]:
    """A lookup asks about a model this host allows, or for a list it knows; nothing else."""
    if "list" in params:
        if params["list"] not in LISTS:
            return [Problem("list", f"{params['list']!r} is not a list of models; known: {', '.join(LISTS)}")]
        return []
    model = params.get("model")
    problem = model_name_problem(model)
    if problem:
        return [Problem("model", problem)]
    if source_of(model) == "zoo":
        return [Problem("model", "zoo models need no lookup (core.engine.models.sources describes them)")]
    if source_of(model) == "file":
        if limits.model_files_problem():
            return [Problem("model", limits.model_files_problem() or "")]
        path = params.get("model_file")
        if not isinstance(path, str) or not os.path.isfile(path):
            return [Problem("model_file", f"no such file: {path}")]
    elif not model_allowed(limits.allowed_models, model):
        return [Problem("model", f"this host allows only: {', '.join(limits.allowed_models or ())}")]
    return []


# ----------------------------------------------------------------------
# Every kind of job, one row each: how the queue checks it, which lane it takes, whether it
# counts toward a visitor's limits, and the function its worker runs (named by module path, so
# reading the table imports no torch). Adding a kind is one row here plus its runner.
#
# The queue (core.runs.queue) and the worker (core.runs.worker) both read this table: what a kind
# does is said here only. Other modules name a kind where they ask the store for runs of it
# (`list_runs(kind="race")`: the Runs page, shared results, the doctor, the device probe's answer).

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
        JobKind("race", race_problems, race_device_key, "core.runs.job_kinds.run_race_job", plural="races"),
        JobKind("demo", demo_job_problems, demo_device_key, "core.runs.job_kinds.run_demo_job", plural="demos"),
        JobKind(
            "probe",
            lambda params, caps, limits: [],
            lambda params, caps: PROBE_DEVICE_KEY,
            "core.runs.job_kinds.run_probe_job",
            counted=False,
            plural="device probes",
            pinned_to_host=True,
        ),
        JobKind(
            "lookup",
            lambda params, caps, limits: lookup_problems(params, limits),
            lambda params, caps: LOOKUP_DEVICE_KEY,
            "core.runs.job_kinds.run_lookup_job",
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
