"""The devices of this box, as the queue sees them: its lanes, each job's device key, and what
the device probe found. No torch: the probe job asks torch, this module reads its answer.

One lane per device (the CPU, each GPU by index), each running one job at a time, so two
measurements never share a device. The probe and model lookups have lanes of their own beside
them: the probe only asks what the device is, a lookup builds a model on the meta device.
"""

from __future__ import annotations

import dataclasses
import os
import socket
from typing import Any

from core.engine.spec import DeviceCaps, resolve_device
from core.runs.store import Run, Store

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
