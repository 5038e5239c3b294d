"""Races pinned to a device type of the fleet: the Race form's chosen GPU type ("H100 80GB: 2 free,
1 busy"), and Race on every GPU type, the same race once per distinct device type of the fleet's
live lanes (an A100, an H100 and a 4090 each run it). Either way a job is pinned to one live lane of
its type (its host and lane: only that box's agent claims it), an idle one first. No torch."""

from __future__ import annotations

import dataclasses

from core.engine.spec import DeviceCaps, RunSpec
from core.runs import fleet, queue
from core.runs.limits import HostLimits
from core.runs.store import Store


def gpu_types(store: Store) -> dict[str, fleet.Lane]:
    """One live GPU lane per device type (by device name), idle ones first, names in order."""
    busy = {(r.host, r.device_key) for r in store.list_runs(status=("starting", "running"))}
    lanes = [lane for host in fleet.live_hosts(store) for lane in host.lanes if lane.lane.startswith("cuda:")]
    lanes.sort(key=lambda lane: (lane.device_name, (lane.host, lane.lane) in busy, lane.host, lane.lane))
    chosen: dict[str, fleet.Lane] = {}
    for lane in lanes:
        chosen.setdefault(lane.device_name, lane)
    return chosen


def pin_to_type(store: Store, device_name: str) -> dict[str, str]:
    """Where a race for `device_name` is queued: {"host", "lane"} of a live GPU lane of that type
    (an idle one first), for queue.enqueue; JobError when the fleet has none of it now."""
    lane = gpu_types(store).get(device_name)
    if lane is None:
        raise queue.JobError(f"no live GPU of type {device_name} in the fleet now: choose another device type")
    return {"host": lane.host, "lane": lane.lane}


def enqueue_on_every_gpu_type(
    store: Store, spec: RunSpec, owner: str, limits: HostLimits | None = None, address: str | None = None
) -> dict[str, int]:
    """Queue `spec` on the CUDA device of each GPU type: {device name: run id}. JobError without GPUs."""
    types = gpu_types(store)
    if not types:
        raise queue.JobError("no live GPU lane in this fleet: start an agent on a GPU box (python -m core agent)")
    spec = dataclasses.replace(spec, device="cuda")
    runs = {}
    for name, lane in types.items():
        caps = DeviceCaps.from_dict(lane.caps) if lane.caps else None
        runs[name] = queue.enqueue(
            store, spec, owner, limits=limits, caps=caps, address=address, lane=lane.lane, host=lane.host
        )
    return runs
