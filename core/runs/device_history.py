"""What this device has measured before, put to use for the next race: the estimate a race is
launched with, the run-to-run spread its processes are pooled with, and a recent race of the same
configuration offered instead of measuring it again. Only races measured on the same device type
with the same torch count. No torch.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from typing import Any

from core.engine.intervals import (
    ASSUMED,
    PRIOR_RACES,
    ProcessResult,
    RunToRun,
    counted,
    processes_of,
    replicates_asked,
    run_to_run,
)
from core.engine.machine_faults import is_machine_fault_text
from core.engine.race_estimates import MeasuredRace, RaceEstimate, estimate_race
from core.engine.spec import COMPILE, LENGTH, RECORDED, STEP_TIME, DeviceCaps, RunSpec
from core.engine.summary import Summary
from core.runs import fleet
from core.runs.fleet import race_device_type
from core.runs.limits import HostLimits
from core.runs.store import Run, Store

# ----------------------------------------------------------------------
# This device's measured races, for the estimate of the next one (core.engine.race_estimates), and
# the estimate a race is launched with, kept in its details so later races can say how good past
# estimates were.
#
# Only races measured on this race's device type with its torch count (core.runs.fleet: in a
# fleet, a GPU type's races from every box that has it, a CPU's from its own box): done, not imported
# (a bundle from another machine says nothing about this one, whatever device name it claims).

ESTIMATE_SCAN_LIMIT = 200  # newest finished races looked at


def measured_race(run: Run) -> MeasuredRace | None:
    """A finished race as a measurement to estimate from; None without a wall time."""
    if run.started_at is None or run.finished_at is None or run.finished_at <= run.started_at:
        return None
    compile_s = (run.summary or {}).get("compile_time_s")
    estimate = (run.details or {}).get("estimate")
    return MeasuredRace(
        run.id,
        dict(run.params or {}),
        run.finished_at - run.started_at,
        float(compile_s) if isinstance(compile_s, (int, float)) else None,
        estimate if isinstance(estimate, dict) else None,
    )


def measured_here(
    store: Store, spec: RunSpec, caps: DeviceCaps | None, host: str | None = None, lane: str | None = None
) -> list[MeasuredRace]:
    """The races measured on the device type `spec` runs on, with its torch, newest first (none while
    that type is not known: before the probe, or a fleet with several types for it and no pin)."""
    if caps is None:
        return []
    target = race_device_type(store, spec, caps, host, lane)
    if target is None:
        return []
    runs = [
        r
        for r in store.list_runs(kind="race", status=["done"], limit=ESTIMATE_SCAN_LIMIT)
        if not r.imported and target.measured(r)
    ]
    return [m for r in runs if (m := measured_race(r)) is not None]


def race_estimate(
    store: Store, spec: RunSpec, caps: DeviceCaps | None, host: str | None = None, lane: str | None = None
) -> RaceEstimate | None:
    """About how long `spec` takes on its device type (None: nothing to estimate from); `host` and
    `lane`: the fleet's lane it is pinned to, if any."""
    return estimate_race(spec, caps, measured_here(store, spec, caps, host, lane))


def estimate_details(
    store: Store, params: dict[str, Any], caps: DeviceCaps | None, host: str | None = None, lane: str | None = None
) -> dict[str, Any] | None:
    """The details a race is queued with: the estimate it was launched with (None: none to give)."""
    try:
        spec = RunSpec.from_dict(params)
        estimate = race_estimate(store, spec, caps, host, lane)
    except Exception:  # noqa: BLE001 - an estimate never stops a race from being queued
        return None
    return {"estimate": estimate.record()} if estimate is not None else None


def keep_estimate(queued: dict[str, Any] | None, details: dict[str, Any] | None) -> dict[str, Any] | None:
    """A worker's details with the estimate the race was queued with kept in them."""
    estimate = (queued or {}).get("estimate")
    if estimate is None:
        return details
    return {**(details or {}), "estimate": estimate}


# ----------------------------------------------------------------------
# How far processes of one configuration land from each other on this device: the run-to-run
# spread, the prior a new race's processes are pooled with (core.engine.intervals.combine).
#
# Learnt from the store: the done races measured on the same device (its name, as the race's
# environment records it) with the same torch. A race with replicate processes says it directly: how
# far its own processes (the first and its replicates, each a fresh process) landed from each other.
# Races of one process each (stored before replicates, or run with `replicates` 0) say it as before,
# grouped by configuration: each configuration raced twice or more says how far a second race lands
# from the first. Spreads differ by configuration (a small MLP race's can be several times narrower
# than a small CNN's: docs/benchmarks.md#steady_mallocpy), so it is learnt in two tiers: the
# device's, pooled over every configuration and shrunk towards the assumed one, is where a
# configuration starts; that configuration's own races then take over. Imported races never count
# (another machine's bundle says nothing of this one), nor races whose compile did not happen, nor
# processes the machine was busy during. Which host of a fleet ran them does not matter: a second
# race of the configuration may land on any box of this device type.

SPREAD_SCAN_LIMIT = 500  # newest done races looked at


def configuration(params: dict[str, Any]) -> tuple | None:
    """A race's configuration as far as its steady speedup goes (None: params that are no race)."""
    spec = RunSpec.stored(params)
    return None if spec is None else spec.same_race(STEP_TIME)  # the device name the race recorded decides the rest


def log_speedup(run: Run) -> float | None:
    """The log steady speedup a done race measured; None when it is no compile speedup."""
    summary = Summary.of(run.summary)
    speedup = summary.steady_state_speedup
    if not summary.compiled or speedup is None or not speedup > 0 or not math.isfinite(speedup):
        return None
    return math.log(speedup)


def spread_here(
    store: Store,
    params: dict[str, Any],
    device_name: str | None,
    torch_version: str | None,
    exclude: int | None = None,
) -> RunToRun:
    """The run-to-run spread for a race of `params` on this device and torch: this configuration's
    own earlier races, shrunk towards the device's spread (the assumed one while no configuration
    has been raced twice here). `exclude`: the race about to start."""
    if not device_name:
        return ASSUMED
    groups: dict[tuple, list[float]] = defaultdict(list)  # races of one process each, by configuration
    replicated: dict[tuple, list[list[float]]] = defaultdict(list)  # a race with replicates: its processes
    for run in store.list_runs(kind="race", status=["done"], limit=SPREAD_SCAN_LIMIT):
        env = run.environment or {}
        if run.id == exclude or run.imported or env.get("device_name") != device_name:
            continue
        if env.get("torch") != torch_version:
            continue
        key, value = configuration(run.params or {}), log_speedup(run)
        if key is None or value is None:
            continue
        processes = process_log_speedups(run)
        if len(processes) >= 2:
            replicated[key].append(processes)
        else:
            groups[key].append(value)
    everything = list(groups.values()) + [p for races in replicated.values() for p in races]
    device = run_to_run(everything)
    start = RunToRun(device.log_sd, min(device.df, PRIOR_RACES), device.races)
    key = configuration(params)
    return run_to_run([groups.get(key, []), *replicated.get(key, [])], prior=start)


def process_log_speedups(run: Run) -> list[float]:
    """The log speedups of a done race's processes that counted (its first and its replicates: the
    spread between them is the run-to-run spread, measured inside the race)."""
    summary = Summary.of(run.summary)
    first = ProcessResult.from_dict(summary.first_process)
    return [math.log(p.speedup) for p in counted(([first] if first else []) + processes_of(list(summary.replicates)))]


# ----------------------------------------------------------------------
# Shared results: a race this very device finished recently, offered instead of measuring it again.
#
# On a shared box many visitors ask for the same few configurations (the preset, the defaults, a
# talk's example). A race that this host's device finished within the host's reuse window, with the
# same spec, the same device and the same torch, measured what a new run would measure: the Race
# page offers it at once, and where the host says so (auto_reuse_queue_length) shows it without
# asking while the queue is long. A race that failed is never one, nor an older release's race that
# took a full disk during its compile for a finding about the model (core.engine.machine_faults). Never across device types or software versions (core.runs.fleet:
# a number from another GPU or another torch is not this device's number); in a fleet, a race on one
# GPU type counts for every box with that GPU and that torch, a CPU's only for its own box.

SHARED_SCAN_LIMIT = 500  # newest finished races looked at: plenty for one reuse window on one box


# A shared result is the same race in everything it measures and records (a dataset folder and the
# download flag change none of it; the device type is matched apart: race_device_type).
SHARED = (STEP_TIME, COMPILE, LENGTH, RECORDED)


def same_result(spec: RunSpec) -> tuple[tuple[str, Any], ...]:
    """What two races must share to be one shared result: spec.same_race over SHARED, with the
    replicate processes made explicit (auto: the count the race runs)."""
    asked = replicates_asked(spec.replicates, spec.target_interval)
    return tuple((name, asked if name == "replicates" else value) for name, value in spec.same_race(*SHARED))


def recent_result(
    store: Store,
    spec: RunSpec,
    caps: DeviceCaps,
    within_s: float | None,
    now: float | None = None,
    host: str | None = None,
    lane: str | None = None,
) -> Run | None:
    """The newest finished race with this spec on the device type it runs on (this box's device, or
    in a fleet its lane's: `host` and `lane` where it is pinned to one) and that type's torch,
    finished within `within_s` seconds (None: any age; 0: never); None when there is none."""
    if within_s == 0:
        return None
    target = race_device_type(store, spec, caps, host, lane)
    if target is None:
        return None
    wanted = same_result(spec)
    now = time.time() if now is None else now
    for run in store.list_runs(kind="race", status=["done"], limit=SHARED_SCAN_LIMIT):
        if run.imported or not run.summary or not target.measured(run):
            continue
        if is_machine_fault_text(run.summary.get("compile_failed")):  # an older release's "finding"
            continue
        if within_s is not None and (run.finished_at is None or now - run.finished_at > within_s):
            continue
        theirs = RunSpec.stored(run.params)
        if theirs is not None and same_result(theirs) == wanted:
            return run
    return None


def reuse_automatically(store: Store, run: Run, limits: HostLimits) -> bool:
    """Whether the host wants `run` shown without asking: its lane's queue is at least as long as
    auto_reuse_queue_length."""
    if limits.auto_reuse_queue_length is None:
        return False
    lane = fleet.ANY_GPU if run.device_key.startswith("cuda:") else run.device_key  # queued CUDA jobs wait for any GPU
    waiting = sum(1 for r in store.list_runs(status=("queued",)) if fleet.same_device(r.device_key, lane))
    return waiting >= limits.auto_reuse_queue_length


def stored_demo(store: Store, demo: str, params: dict[str, Any]) -> Run | None:
    """The newest finished (or still running) measurement of this demo with exactly these
    parameters, on this machine's device and torch version: what the page shows without re-measuring."""
    probe = fleet.latest_probe(store)
    torch_version = (probe.summary or {}).get("environment", {}).get("torch") if probe else None
    caps = DeviceCaps.from_dict(probe.summary["caps"]) if probe else None
    key = fleet.demo_device_key({}, caps)
    for run in store.list_runs(kind="demo", limit=200):
        if (
            run.params != {"demo": demo, "params": params}
            or not fleet.same_device(run.device_key, key)
            or run.status == "cancelled"
        ):
            continue
        if run.finished and run.environment and torch_version and run.environment.get("torch") != torch_version:
            continue
        return run
    return None
