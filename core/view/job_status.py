"""The queue as people read it: one line per lane (the CPU, each GPU), what runs there and how
many wait, as the sidebar shows it (pure: runs and device facts in, text out); and one job's state
in words ('queued (position 2)', 'compiled epoch 2/3', 'failed: ...'), wherever a job is shown."""

from __future__ import annotations

from typing import Any

from core.engine import words
from core.engine.spec import DeviceCaps
from core.runs.devices import ANY_GPU, device_lanes, same_device
from core.runs.queue import queue_position
from core.runs.store import ACTIVE_STATES, Run, Store


def gpu_lines(probe_summary: dict[str, Any]) -> list[str]:
    """The device card on a GPU box: each GPU (name, memory, SMs, compute capability), then the
    versions, from what the probe job recorded."""
    env = probe_summary.get("environment") or {}
    gpus = probe_summary.get("gpus") or [
        {"index": 0, "name": env.get("device_name"), "memory_bytes": env.get("device_memory_bytes"),
         "compute_capability": env.get("compute_capability")}
    ]  # fmt: skip
    lines = []
    for gpu in gpus:
        sms = f", {gpu['sm_count']} SMs" if gpu.get("sm_count") else ""
        lines.append(
            f"cuda:{gpu.get('index', 0)} {gpu.get('name') or '?'}: {words.bytes_(gpu.get('memory_bytes'))}{sms}, "
            f"compute capability {gpu.get('compute_capability') or '?'}"
        )
    driver = f", driver CUDA {probe_summary['cuda_driver']}" if probe_summary.get("cuda_driver") else ""
    lines.append(f"torch {env.get('torch', '?')}, CUDA {env.get('cuda') or '?'}{driver}")
    return lines


def lane_lines(caps: DeviceCaps | None, active: list[Run], queued: list[Run], paused: bool = False) -> list[str]:
    """'cuda:1: run 12 resnet50, compiled epoch 2/3', 'cuda:2: idle', then what waits for a GPU.
    A lane with nothing running but a job waiting is never 'idle': the job is starting there (the
    next dispatch takes it: a worker still exiting, or the device probe, holds it for a moment),
    unless the host paused the queue."""
    lines = []
    for lane in device_lanes(caps):
        here = [r for r in active if r.device_key == lane]
        mine = sorted((r for r in queued if r.device_key == lane), key=lambda r: r.id)
        if not here and not mine and lane != "cpu" and not lane.startswith("cuda:"):
            continue
        what = "; ".join(f"{_name(r)}, {r.phase}" for r in here)
        waiting = len(mine)
        if not what and mine:
            what = f"{_name(mine[0])}, {'waiting (queue paused)' if paused else 'starting'}"
            waiting -= 1
        lines.append(f"{lane}: {what or 'idle'}" + (f" ({waiting} waiting)" if waiting else ""))
    any_gpu = sum(1 for r in queued if r.device_key == ANY_GPU)
    if any_gpu:
        lines.append(f"{any_gpu} waiting for the next free GPU")
    probing = [r for r in active if not any(same_device(r.device_key, lane) for lane in device_lanes(caps))]
    lines += [f"{r.device_key}: run {r.id} {r.kind}, {r.phase}" for r in probing]
    return lines


def _name(run: Run) -> str:
    if run.kind == "demo":
        return f"the {run.params.get('demo', '?')} demo"
    return f"run {run.id} {run.params.get('model', run.kind)}"


def compile_failed(run: Run) -> str | None:
    """Why torch.compile could not handle this race's model (a finding: eager ran), else None."""
    reason = (run.summary or {}).get("compile_failed") if isinstance(run.summary, dict) else None
    return reason if isinstance(reason, str) else None


def compile_skipped(run: Run) -> str | None:
    """Why this race's compiled variant ran no compiled code, once the worker knows (else None)."""
    for record in (run.summary, run.details):
        if isinstance(record, dict) and isinstance(record.get("compile_skipped"), str):
            return record["compile_skipped"]
    return None


def describe(store: Store, run: Run) -> str:
    """The run's state as a person reads it: 'queued (position 2)', 'compiled epoch 2/3', ..."""
    if run.status == "queued":
        paused = "; the host has paused the queue" if store.queue_paused() else ""
        return f"queued (position {queue_position(store, run.id)}{paused})"
    skipped, failed = compile_skipped(run), compile_failed(run)
    suffix = f" (compile did not happen: {skipped})" if skipped else ""
    suffix = f" (compile failed on this model: {failed}; eager ran)" if failed else suffix
    if run.status in ACTIVE_STATES:
        return (run.phase or run.status) + suffix
    if run.status == "failed":
        return f"failed: {run.error}{suffix}"
    if run.status == "cancelled" and run.error and run.error != "cancelled":  # "agent NAME stopped": who did
        return f"cancelled: {run.error}{suffix}"
    return run.status + suffix
