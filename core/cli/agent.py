"""`python -m core agent`: this box joins the fleet of a shared store (core.runs.agent); and the
fleet's hosts and lanes as `python -m core status` lists them."""

from __future__ import annotations

import socket
import sys

from core.cli.common import EXIT_FAILED, EXIT_USAGE, store_parser
from core.view.safe_text import terminal_text


def add_commands(sub) -> None:
    p = store_parser(
        sub, "agent", "run this box's jobs from a shared store (a fleet: COMPILE_LAB_STORE=postgresql://...)"
    )
    p.add_argument(
        "--name", default=None, help="this box's name in the fleet (default: its hostname); unique among live agents"
    )
    p.set_defaults(func=cmd_agent)


def cmd_agent(args) -> int:
    from core.runs import agent, fleet
    from core.runs.store import Store

    store = Store(args.store)
    name = args.name or socket.gethostname()
    if not name.strip() or len(name) > 100 or any(not (c.isalnum() or c in "-_.") for c in name):
        print(f"error: --name {terminal_text(name)!r}: letters, digits, '-', '_' and '.' only", file=sys.stderr)
        return EXIT_USAGE
    try:
        found = agent.find_lanes()
    except (RuntimeError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    try:
        return agent.Agent(store, name, found, say=lambda text: print(text, flush=True)).run()
    except fleet.AgentRefused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE


def fleet_lines(hosts, runs, now: float) -> list[str]:
    """One line per host, then one per lane: its device, state, heartbeat, and the run on it."""
    if not hosts:
        return ["no agents: this store's jobs run on the box that queued them (python -m core agent joins one)"]
    on_lane = {(r.host, r.device_key): r for r in runs}
    lines = []
    for host in hosts:
        state = "live" if host.live(now) else "stopped"
        lines.append(
            f"{terminal_text(host.name)}  {state}  heartbeat {now - host.heartbeat_at:.0f} s ago  "
            f"torch {terminal_text(host.torch or '?')}  on {terminal_text(host.machine or '?')}"
        )
        for lane in host.lanes:
            memory = f", {lane.memory_bytes / 2**30:.0f} GiB" if lane.memory_bytes else ""
            run = on_lane.get((host.name, lane.lane))
            doing = f"run {run.id} ({terminal_text(run.phase)})" if run else ("idle" if state == "live" else "-")
            lines.append(f"  {lane.lane:<8} {terminal_text(lane.device_name)}{memory}: {doing}")
    return lines
