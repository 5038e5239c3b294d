"""`python -m core agent`: this box joins the fleet of a shared store (core.runs.agent). The
fleet's hosts and lanes are listed by `python -m core status` (core.view.fleet)."""

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
