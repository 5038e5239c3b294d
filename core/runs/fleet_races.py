"""Race on every GPU type: the same race once per distinct device type of a fleet's live lanes
(an A100, an H100 and a 4090 each run it), each pinned to one lane of that type. No torch."""

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
