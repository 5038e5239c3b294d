"""Shared results: a race this very device finished recently, offered instead of measuring it again.

On a shared box many visitors ask for the same few configurations (the preset, the defaults, a
talk's example). A race that this host's device finished within the host's reuse window, with the
same spec, the same device and the same torch, measured what a new run would measure: the Race
page offers it at once, and where the host says so (auto_reuse_queue_length) shows it without
asking while the queue is long. A race that failed is never one, nor an older release's race that
took a full disk during its compile for a finding about the model (core.engine.machine_faults). Never across device types or software versions (core.runs.device_types:
a number from another GPU or another torch is not this device's number); in a fleet, a race on one
GPU type counts for every box with that GPU and that torch, a CPU's only for its own box.
"""

from __future__ import annotations

import time
from typing import Any

from core.engine.machine_faults import is_machine_fault_text
from core.engine.options import COMPILE, LENGTH, RECORDED, STEP_TIME
from core.engine.replicates import replicates_asked
from core.engine.spec import DeviceCaps, RunSpec
from core.runs import devices
from core.runs.device_types import race_device_type
from core.runs.limits import HostLimits
from core.runs.store import Run, Store

SCAN_LIMIT = 500  # newest finished races looked at: plenty for one reuse window on one box


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
    for run in store.list_runs(kind="race", status=["done"], limit=SCAN_LIMIT):
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
    lane = (
        devices.ANY_GPU if run.device_key.startswith("cuda:") else run.device_key
    )  # queued CUDA jobs wait for any GPU
    waiting = sum(1 for r in store.list_runs(status=("queued",)) if devices.same_device(r.device_key, lane))
    return waiting >= limits.auto_reuse_queue_length


def stored_demo(store: Store, demo: str, params: dict[str, Any]) -> Run | None:
    """The newest finished (or still running) measurement of this demo with exactly these
    parameters, on this machine's device and torch version: what the page shows without re-measuring."""
    probe = devices.latest_probe(store)
    torch_version = (probe.summary or {}).get("environment", {}).get("torch") if probe else None
    caps = DeviceCaps.from_dict(probe.summary["caps"]) if probe else None
    key = devices.demo_device_key({}, caps)
    for run in store.list_runs(kind="demo", limit=200):
        if (
            run.params != {"demo": demo, "params": params}
            or not devices.same_device(run.device_key, key)
            or run.status == "cancelled"
        ):
            continue
        if run.finished and run.environment and torch_version and run.environment.get("torch") != torch_version:
            continue
        return run
    return None
