"""The fleet: the boxes (hosts) whose agents run jobs from one shared store, and their lanes. No torch.

An agent (core.runs.agent) registers its host and lanes here and heartbeats; everyone else reads
them: the queue leaves dispatch to live agents and fails the runs of an agent that stopped, the
CLI's status and the pages list them. A host's name is its agent's name (a job's `host`).
A heartbeat's age counts from the moment the store is back (Store.up_since: the server's restart,
or when this process reached it again) where that is after the agent joined: nobody could
heartbeat meanwhile, and no agent is taken for stopped until its timeout has passed since then.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, replace
from typing import Any

from core.engine.spec import DeviceCaps
from core.runs.store import Store

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
