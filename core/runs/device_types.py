"""Which device type a race will run on, named as its finished run records it, with its torch: what
shared results (core.runs.shared_results) and estimates (core.runs.estimates) match on. A number
measured on another GPU or with another torch is not this race's number. No torch.

A GPU is a device type: the same model of GPU on two boxes of a fleet, with the same torch, measures
a race alike, so their races count for each other. A CPU (or a Mac's GPU) is its box: two boxes'
CPUs of one name can have other cores to themselves and another load.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.engine.spec import DeviceCaps, RunSpec, resolve_device
from core.runs import devices, fleet
from core.runs.store import Run, Store

# What must match besides the device: a result measured with other software is not this device's.
# A fleet's lane says its box's torch only (its version names its CUDA build: 2.4.1+cu121).
VERSION_KEYS = ("torch", "cuda", "triton")


def lane_kind(lane: str) -> str:
    """'cuda:1' -> 'cuda': the kind of device a lane (or a run's device key) is."""
    return lane.split(":", 1)[0]


@dataclass(frozen=True)
class DeviceType:
    """A device as its runs record it (environment device_type and device_name) and the software
    they ran with; `host` for a device that is its box (a CPU), None for a GPU type."""

    kind: str  # cpu | cuda | mps
    name: str | None  # None: whatever this box's CPU is called (a fleet lane's label is not the run's word)
    versions: tuple[tuple[str, Any], ...]
    host: str | None = None

    def measured(self, run: Run) -> bool:
        """Whether `run` ran on this device type with this software."""
        env = run.environment or {}
        if env.get("device_type") != self.kind or lane_kind(run.device_key) != self.kind:
            return False
        if self.name is not None and env.get("device_name") != self.name:
            return False
        if self.host is not None and run.host != self.host:
            return False
        return all(env.get(key) == value for key, value in self.versions)


def device_name(probe_summary: dict[str, Any], device: str) -> str | None:
    """The one name a run on `device` records on this machine, from what the probe recorded; None
    when a new run's device cannot be told in advance (GPUs of different models: the queue gives a
    CUDA race whichever GPU is free)."""
    environment = probe_summary.get("environment") or {}
    if device == "cuda":
        names = {gpu.get("name") for gpu in probe_summary.get("gpus") or []} or {environment.get("device_name")}
        return names.pop() if len(names) == 1 else None
    if environment.get("device_type") == device:
        return environment.get("device_name")
    return environment.get("cpu_name") if device == "cpu" else None


def from_probe(probe: Run, device: str) -> DeviceType | None:
    """A single box's device, as its device probe recorded it."""
    summary = probe.summary or {}
    name = device_name(summary, device)
    if name is None:
        return None
    env = summary.get("environment") or {}
    return DeviceType(
        device, name, tuple((k, env.get(k)) for k in VERSION_KEYS), None if device == "cuda" else probe.host
    )


def from_lane(host: fleet.Host, lane: fleet.Lane) -> DeviceType:
    """A fleet's lane, as its agent registered it."""
    kind = lane_kind(lane.lane)
    gpu = kind == "cuda"
    return DeviceType(kind, lane.device_name if gpu else None, (("torch", host.torch),), None if gpu else host.name)


def race_device_type(
    store: Store, spec: RunSpec, caps: DeviceCaps | None, host: str | None = None, lane: str | None = None
) -> DeviceType | None:
    """The device type `spec` runs on: the fleet's lane where it is pinned to one (`host`, and `lane`
    for a GPU); in a fleet of live agents, the one type its device has there (None when several could
    take it: whichever agent claims it decides); on a single box, what its device probe found."""
    device = resolve_device(spec.device, caps or DeviceCaps())
    live = fleet.live_hosts(store)
    if host is not None:
        wanted = lane or device
        found = [from_lane(h, each) for h in live if h.name == host for each in h.lanes if each.lane == wanted]
        return found[0] if found else None
    if live:
        types = {from_lane(h, each) for h in live for each in h.lanes if lane_kind(each.lane) == device}
        return types.pop() if len(types) == 1 else None
    probe = devices.latest_probe(store)
    return from_probe(probe, device) if probe is not None else None
