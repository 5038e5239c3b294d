"""What each kind of job does inside its worker (core.runs.job_kinds names these by path): run a
race, probe the device, measure an explainer demo, answer a lookup about models. Each takes the
job's parameters and the worker's event sink and returns (status, run fields to store).

Kept apart from the worker process itself (core.runs.worker: claiming, recording, ending a job),
so a new kind adds its function here and its row to the table. torch is imported inside each.
"""

from __future__ import annotations

import contextlib
import functools
import os
from typing import Any

from core.engine.events import StartEvent
from core.engine.spec import RunSpec
from core.runs import race_conditions, run_to_run, warm_start, worker_cores
from core.runs.replicate_process import run_replicate
from core.runs.run_files import run_files_dir
from core.runs.store import Store


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
    except worker_cores.CoreSettingError as exc:
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
    from core.engine.models.resolve import model_size_problem

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

    from core.engine.replicates import ProcessResult

    if deadline is not None and deadline - time.time() < REPLICATE_MARGIN_S:
        error = "no replicate started this close to the job's time limit"
        return {"process": ProcessResult(number, None, None, 0, error=error).to_dict()}
    if deadline is not None:
        limit_s = min(limit_s, deadline - time.time() - 5.0)
    return run_replicate(spec, number, steps, cache_dir, limit_s, conditions=conditions)


def _spread(sink: Any, params: dict[str, Any], here: dict[str, Any]) -> Any:
    """The run-to-run spread races of this device have shown so far (core.runs.run_to_run); the
    assumed one when the store cannot say: a spread never stops a race."""
    from core.engine.intervals import ASSUMED

    try:
        with contextlib.closing(Store(sink.store_path)) as store:
            return run_to_run.spread_here(store, params, here.get("device_name"), here.get("torch"), sink.run_id)
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

    from core.engine.models.resolve import describe_model
    from core.engine.models.workload import ModelError, is_out_of_memory

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
