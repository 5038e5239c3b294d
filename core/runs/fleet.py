"""The devices a race can run on: this box's lanes (the CPU, each GPU) and each job's device key,
the device type a finished race records (with its torch: what shared results and estimates match on),
and the fleet of boxes whose agents run jobs from one shared store. No torch.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import time
from dataclasses import dataclass, replace
from typing import Any

from core.engine.spec import DeviceCaps, RunSpec, resolve_device
from core.runs.store import Run, Store

# ----------------------------------------------------------------------
# The fleet: the boxes (hosts) whose agents run jobs from one shared store, and their lanes. No torch.
#
# An agent (core.runs.agent) registers its host and lanes here and heartbeats; everyone else reads
# them: the queue leaves dispatch to live agents and fails the runs of an agent that stopped, the
# CLI's status and the pages list them. A host's name is its agent's name (a job's `host`).
# A heartbeat's age counts from the moment the store is back (Store.up_since: the server's restart,
# or when this process reached it again) where that is after the agent joined: nobody could
# heartbeat meanwhile, and no agent is taken for stopped until its timeout has passed since then.

AGENT_TIMEOUT_S = 30.0  # an agent silent this long has stopped: its runs fail, its name is free again


def agent_timeout_s() -> float:
    """AGENT_TIMEOUT_S, or COMPILE_LAB_AGENT_TIMEOUT_S (the tests shorten it)."""
    try:
        return float(os.environ.get("COMPILE_LAB_AGENT_TIMEOUT_S") or AGENT_TIMEOUT_S)
    except ValueError:
        return AGENT_TIMEOUT_S


class AgentRefused(Exception):
    """An agent cannot join: another live agent has its name. A message for a person."""


@dataclass(frozen=True)
class Lane:
    host: str
    lane: str
    device_name: str
    memory_bytes: int | None
    caps: dict[str, Any]


@dataclass(frozen=True)
class Host:
    name: str
    state: str  # live | stopped (as recorded; `live` also needs a fresh heartbeat)
    pid: int | None
    machine: str | None
    torch: str | None
    started_at: float
    heartbeat_at: float
    lanes: tuple[Lane, ...] = ()
    store_since: float = 0.0  # when the store (re)started: no heartbeat could be written before

    def live(self, now: float | None = None) -> bool:
        now = time.time() if now is None else now
        since = self.store_since if self.store_since > self.started_at else 0.0  # restarted since it joined
        return self.state == "live" and now - max(self.heartbeat_at, since) <= agent_timeout_s()


def register(store: Store, name: str, pid: int, machine: str, torch: str, lanes: list[dict[str, Any]]) -> None:
    """Join the fleet as `name` with these lanes; AgentRefused while another live agent has the name."""
    now = time.time()
    with store.transaction(immediate=True) as c:
        row = store.host_row(c, name)
        if row is not None and row["state"] == "live" and now - row["heartbeat_at"] <= agent_timeout_s():
            raise AgentRefused(
                f"an agent named {name!r} is already running (pid {row['pid']} on {row['machine']}, "
                f"heartbeat {now - row['heartbeat_at']:.0f} s ago): give this one another --name"
            )
        store.replace_host(c, name, pid, machine, torch, now, lanes)


def heartbeat(store: Store, name: str, pid: int) -> bool:
    """Say this agent is alive; False when its row is gone or taken by another agent of the name."""
    return store.host_heartbeat(name, pid, time.time())


def leave(store: Store, name: str, pid: int) -> None:
    """This agent stops: its name is free at once."""
    store.host_stopped(name, pid)


def hosts(store: Store) -> list[Host]:
    """Every registered host with its lanes, by name."""
    host_rows, lane_rows = store.hosts_and_lanes()
    since = store.up_since() if host_rows else 0.0
    lanes: dict[str, list[Lane]] = {}
    for r in lane_rows:
        try:
            caps = json.loads(r["caps"] or "{}")
        except ValueError:
            caps = {}
        lanes.setdefault(r["host"], []).append(Lane(r["host"], r["lane"], r["device_name"], r["memory_bytes"], caps))
    return [
        Host(
            r["name"],
            r["state"],
            r["pid"],
            r["machine"],
            r["torch"],
            r["started_at"],
            r["heartbeat_at"],
            tuple(lanes.get(r["name"], ())),
            since,
        )  # fmt: skip
        for r in host_rows
    ]


def live_hosts(store: Store) -> list[Host]:
    now = time.time()
    return [h for h in hosts(store) if h.live(now)]


def stopped_agents(store: Store) -> dict[str, Host]:
    """Hosts whose agent stopped or went silent: their unfinished runs will never end by themselves."""
    now = time.time()
    return {h.name: h for h in hosts(store) if not h.live(now)}


def fleet_caps(store: Store) -> DeviceCaps | None:
    """What the fleet can run, for a box that has no probe of its own (the app's server with no GPU):
    a live GPU lane's device facts if any, else a CPU lane's; None with no live agent."""
    found = [lane for host in live_hosts(store) for lane in host.lanes if lane.caps]
    gpu = [lane for lane in found if lane.lane.startswith("cuda")]
    for lane in gpu or found:
        try:
            caps = DeviceCaps.from_dict(lane.caps)
        except (TypeError, ValueError, KeyError):
            continue
        # A race for any GPU may land on the largest: only what fits none is refused here (a pinned
        # race that does not fit its lane's GPU is refused by its worker, which knows that GPU).
        memories = [m for other in gpu if isinstance(m := other.caps.get("cuda_memory_bytes"), int)]
        return replace(caps, cuda_memory_bytes=max(memories)) if memories else caps
    return None


# ----------------------------------------------------------------------
# The devices of this box, as the queue sees them: its lanes, each job's device key, and what
# the device probe found. No torch: the probe job asks torch, this module reads its answer.
#
# One lane per device (the CPU, each GPU by index), each running one job at a time, so two
# measurements never share a device. The probe and model lookups have lanes of their own beside
# them: the probe only asks what the device is, a lookup builds a model on the meta device.

# Lanes are per box: a job's host says whose lane (and pid) it is. A worker an agent started is on
# the agent's host (its name: core.runs.agent), which need not be the machine's name.
HOST = os.environ.get("COMPILE_LAB_AGENT") or socket.gethostname()
PROBE_DEVICE_KEY = "probe"  # the probe only asks what the device is; it times nothing
LOOKUP_DEVICE_KEY = "lookup"  # model lookups: a lane of their own, beside measurements
ANY_GPU = "cuda"  # a queued CUDA job's key until dispatch picks an idle GPU lane: cuda:0 .. cuda:N-1


def race_device_key(params: dict[str, Any], caps: DeviceCaps | None) -> str:
    """The lane a race asks for: its device, 'auto' resolved by what the probe found."""
    return resolve_device(params.get("device", "auto"), caps or DeviceCaps())


def demo_device_key(params: dict[str, Any], caps: DeviceCaps | None) -> str:
    """Demos time things too: they take the device's turn like a race."""
    return race_device_key({"device": "auto"}, caps)


def same_device(run_key: str, key: str) -> bool:
    """Is a run on `run_key` ('cuda:3') on the device `key` names ('cuda' = any GPU lane)?"""
    return run_key == key or (key == ANY_GPU and run_key.startswith("cuda:"))


def device_lanes(caps: DeviceCaps | None) -> list[str]:
    """The queue's lanes on this machine: the CPU, and one per GPU (each runs one job at a time)."""
    gpus = caps.cuda_lanes if caps is not None and caps.cuda else 0
    return ["cpu"] + [f"cuda:{i}" for i in range(gpus)] + (["mps"] if caps is not None and caps.mps else [])


def latest_probe(store: Store) -> Run | None:
    """This host's most recent finished device probe."""
    for run in store.list_runs(kind="probe", status=["done"], limit=20):
        if run.host == HOST and run.summary and "caps" in run.summary:
            return run
    return None


def known_caps(store: Store) -> DeviceCaps | None:
    """What jobs queued here can run on: in a fleet (live agents: core.runs.fleet.fleet_caps), what
    its lanes offer, so the app's server needs no GPU; else what this box's latest device probe
    recorded (None before any probe has finished)."""
    from core.runs.fleet import fleet_caps  # (fleet reads the store, as this module does)

    caps = fleet_caps(store)
    if caps is not None:
        return caps
    probe = latest_probe(store)
    return probe_caps(probe.summary) if probe else None


def probe_caps(summary: dict[str, Any]) -> DeviceCaps:
    """The device facts a probe recorded; a probe from before DeviceCaps kept memory has it in its
    environment (the host's RAM, where it probed a CPU) and its list of GPUs (the largest)."""
    caps = DeviceCaps.from_dict(summary["caps"])
    env = summary.get("environment") or {}
    gpus = [g.get("memory_bytes") for g in summary.get("gpus") or [] if isinstance(g, dict)]
    gpus = [m for m in gpus if isinstance(m, int) and m > 0]
    if caps.cuda_memory_bytes is None and gpus:
        caps = dataclasses.replace(caps, cuda_memory_bytes=max(gpus))
    ram = env.get("device_memory_bytes")
    if caps.memory_bytes is None and env.get("device_type") == "cpu" and isinstance(ram, int) and ram > 0:
        caps = dataclasses.replace(caps, memory_bytes=ram)
    return caps


# ----------------------------------------------------------------------
# Which device type a race will run on, named as its finished run records it, with its torch: what
# shared results (core.runs.device_history) and estimates (core.runs.device_history) match on. A number
# measured on another GPU or with another torch is not this race's number. No torch.
#
# A GPU is a device type: the same model of GPU on two boxes of a fleet, with the same torch, measures
# a race alike, so their races count for each other. A CPU (or a Mac's GPU) is its box: two boxes'
# CPUs of one name can have other cores to themselves and another load.

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


def from_lane(host: Host, lane: Lane) -> DeviceType:
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
    live = live_hosts(store)
    if host is not None:
        wanted = lane or device
        found = [from_lane(h, each) for h in live if h.name == host for each in h.lanes if each.lane == wanted]
        return found[0] if found else None
    if live:
        types = {from_lane(h, each) for h in live for each in h.lanes if lane_kind(each.lane) == device}
        return types.pop() if len(types) == 1 else None
    probe = latest_probe(store)
    return from_probe(probe, device) if probe is not None else None
