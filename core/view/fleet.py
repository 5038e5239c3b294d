"""The fleet for people: its hosts and lanes (device, memory, live or stopped, last heartbeat, the
run on each), as lines for the terminal and the sidebar and as rows for the Admin page's table.
Every name comes from the store (an agent's name, a device's): made inert with safe_text."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from core.runs.fleet import Host
from core.runs.store import Run
from core.view.safe_text import terminal_text


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
