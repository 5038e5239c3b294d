"""This device's measured races, for the estimate of the next one (core.engine.race_estimates), and
the estimate a race is launched with, kept in its details so later races can say how good past
estimates were.

Only races measured on this race's device type with its torch count (core.runs.device_types: in a
fleet, a GPU type's races from every box that has it, a CPU's from its own box): done, not imported
(a bundle from another machine says nothing about this one, whatever device name it claims).
"""

from __future__ import annotations

from typing import Any

from core.engine.race_estimates import MeasuredRace, RaceEstimate, estimate_race
from core.engine.spec import DeviceCaps, RunSpec
from core.runs.device_types import race_device_type
from core.runs.store import Run, Store

SCAN_LIMIT = 200  # newest finished races looked at


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
        for r in store.list_runs(kind="race", status=["done"], limit=SCAN_LIMIT)
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
