"""The host's machinery for people: the queue (one line per lane, one job's state in words), the
fleet's hosts and lanes, and the Admin page's tables of runs, lanes and the data folder. Every name
from the store is made inert with safe_text.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from core.engine import words
from core.engine.spec import DeviceCaps
from core.runs.admin import Lane, Purged
from core.runs.disk_budget import DiskUse, freed_words
from core.runs.fleet import ANY_GPU, Host, device_lanes, same_device
from core.runs.limits import shown_owner
from core.runs.queue import queue_position
from core.runs.run_files import Freed
from core.runs.store import ACTIVE_STATES, Run, Store
from core.view.safe_text import terminal_text

# ----------------------------------------------------------------------
# The admin page's tables: every run and every lane as rows of plain values (no owner tokens), and
# the data folder's use and what was freed from it, in words.


def _when(t: float | None) -> str:
    return "" if t is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(t))


def run_rows(runs: list[Run]) -> list[dict[str, Any]]:
    """One row per run of any kind; owners cut so a screenshot gives nobody a token."""
    return [
        {
            "id": run.id,
            "kind": run.kind,
            "status": run.status,
            "owner": shown_owner(run.owner),
            "lane": run.device_key,
            "what": str((run.params or {}).get("model") or (run.params or {}).get("demo") or ""),
            "created": _when(run.created_at),
            "finished": _when(run.finished_at),
            "state": str(run.error or run.phase or ""),
        }
        for run in runs
    ]


def lane_rows(lanes: list[Lane]) -> list[dict[str, Any]]:
    """One row per device lane: its running job, its worker, how many wait."""
    rows = []
    for lane in lanes:
        run = lane.running
        worker = (
            "-"
            if run is None
            else ("on another host" if lane.worker_alive is None else ("alive" if lane.worker_alive else "gone"))
        )
        rows.append(
            {
                "lane": lane.device_key,
                "running": "" if run is None else f"#{run.id} {run.kind} {(run.params or {}).get('model', '')}".strip(),
                "phase": "" if run is None else str(run.phase),
                "worker pid": None if run is None else run.pid,
                "host": "" if run is None else str(run.host or ""),
                "worker": worker,
                "heartbeat (s ago)": None if lane.heartbeat_age_s is None else round(lane.heartbeat_age_s, 1),
                "waiting": lane.waiting,
            }
        )
    return rows


def disk_line(use: DiskUse) -> str:
    """'The data folder holds 1.2 GiB of a 2.0 GiB budget: the store 40 MiB, runs' files 900 MiB, ...'."""
    budget = "(no disk budget)" if use.budget is None else f"of a {words.bytes_(use.budget)} budget"
    over = " (over: the next job's end frees files)" if use.over else ""
    return (
        f"The data folder holds {words.bytes_(use.total)} {budget}{over}: the store {words.bytes_(use.store)}, "
        f"runs' traces and logs {words.bytes_(use.run_files)}, the warm Inductor cache {words.bytes_(use.warm_cache)}."
    )


def last_freed_line(last: tuple[float, str, Freed] | None) -> str | None:
    """When files were last freed, why and what; None when never."""
    if last is None:
        return None
    at, why, freed = last
    return f"Last {_when(at)}, for {why}: {freed_words(freed)}."


def freed_line(freed: Freed) -> str:
    """What freeing to the budget did, as the page says it."""
    if not freed.files:
        return "Nothing to free: the data folder is within its budget."
    said = freed_words(freed)
    return f"{said[:1].upper()}{said[1:]}."


def purge_line(purged: Purged) -> str:
    freed = f"; {freed_words(purged.freed)}" if purged.freed.files else "; no files of theirs were left"
    return f"Deleted {words.count(purged.runs, 'run')} and their events{freed}."


# ----------------------------------------------------------------------
# The fleet for people: its hosts and lanes (device, memory, live or stopped, last heartbeat, the
# run on each), as lines for the terminal and the sidebar and as rows for the Admin page's table.
# Every name comes from the store (an agent's name, a device's): made inert with safe_text.


def _doing(host: Host, lane: str, on_lane: dict[tuple[str | None, str], Run], live: bool) -> str:
    run = on_lane.get((host.name, lane))
    if run is not None:
        return f"run {run.id} ({terminal_text(run.phase)})"
    return "idle" if live else "-"


def fleet_lines(hosts: list[Host], runs: list[Run], now: float) -> list[str]:
    """One line per host, then one per lane."""
    if not hosts:
        return ["no agents: this store's jobs run on the box that queued them (python -m core agent joins one)"]
    on_lane = {(r.host, r.device_key): r for r in runs}
    lines = []
    for host in hosts:
        live = host.live(now)
        lines.append(
            f"{terminal_text(host.name)}  {'live' if live else 'stopped'}  heartbeat {now - host.heartbeat_at:.0f} s ago  "
            f"torch {terminal_text(host.torch or '?')}  on {terminal_text(host.machine or '?')}"
        )
        for lane in host.lanes:
            memory = f", {lane.memory_bytes / 2**30:.0f} GiB" if lane.memory_bytes else ""
            lines.append(
                f"  {lane.lane:<8} {terminal_text(lane.device_name)}{memory}: {_doing(host, lane.lane, on_lane, live)}"
            )
    return lines


def fleet_rows(hosts: list[Host], runs: list[Run], now: float) -> list[dict[str, Any]]:
    """One row per lane of every host, for a table."""
    on_lane = {(r.host, r.device_key): r for r in runs}
    return [
        {
            "host": terminal_text(host.name),
            "lane": lane.lane,
            "device": terminal_text(lane.device_name),
            "memory (GiB)": None if not lane.memory_bytes else round(lane.memory_bytes / 2**30, 1),
            "state": "live" if host.live(now) else "stopped",
            "heartbeat (s ago)": round(now - host.heartbeat_at, 1),
            "torch": terminal_text(host.torch or ""),
            "running": _doing(host, lane.lane, on_lane, host.live(now)),
        }
        for host in hosts
        for lane in host.lanes
    ]


def fleet_summary(hosts: list[Host], runs: list[Run], now: float) -> str | None:
    """The sidebar's one line: 'Fleet: 2 hosts live, 3 lanes (1 busy)'; None without agents."""
    live = [h for h in hosts if h.live(now)]
    if not hosts:
        return None
    lanes = [(h.name, lane.lane) for h in live for lane in h.lanes]
    busy = sum(1 for r in runs if (r.host, r.device_key) in set(lanes))
    return f"Fleet: {len(live)} of {len(hosts)} hosts live, {len(lanes)} lanes ({busy} busy)"


def device_type_counts(
    hosts: list[Host], runs: list[Run], now: float, gpus_only: bool = False
) -> dict[str, tuple[int, int]]:
    """The fleet's live lanes by device type (device name as registered): {name: (free, busy)}, GPUs
    first, then by name. `runs`: those starting or running (a busy lane)."""
    busy_lanes = {(r.host, r.device_key) for r in runs}
    counts: dict[str, list[int]] = {}
    for host in hosts:
        if host.live(now):
            for lane in host.lanes:
                if gpus_only and not lane.lane.startswith("cuda:"):
                    continue
                free_busy = counts.setdefault(lane.device_name, [0, 0])
                free_busy[(host.name, lane.lane) in busy_lanes] += 1
    order = sorted(counts, key=lambda name: (name.startswith("CPU"), name))
    return {name: (counts[name][0], counts[name][1]) for name in order}


def device_type_label(name: str, free: int, busy: int) -> str:
    """'NVIDIA H100 80GB HBM3: 2 free, 1 busy' (the name made inert)."""
    return f"{terminal_text(name)}: {free} free, {busy} busy"


def labelled_type(label: object, names: Iterable[str]) -> str | None:
    """The device type (of `names`) whose device_type_label `label` is, whatever its counts were."""
    text = label if isinstance(label, str) else ""
    return next((name for name in names if text.startswith(f"{terminal_text(name)}: ")), None)


def device_type_lines(hosts: list[Host], runs: list[Run], now: float) -> list[str]:
    """The fleet's live lanes by device type: 'NVIDIA H100 80GB HBM3: 2 free, 1 busy', GPUs first."""
    return [device_type_label(name, *counts) for name, counts in device_type_counts(hosts, runs, now).items()]


# ----------------------------------------------------------------------
# The queue as people read it: one line per lane (the CPU, each GPU), what runs there and how
# many wait, as the sidebar shows it (pure: runs and device facts in, text out); and one job's state
# in words ('queued (position 2)', 'compiled epoch 2/3', 'failed: ...'), wherever a job is shown.


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
