"""`python -m core agent`: this box joins the fleet of a shared store (core.runs.agent). The
fleet's hosts and lanes are listed by `python -m core status` (core.view.host_tables)."""

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
    p.add_argument(
        "--stop-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="once stopped (Ctrl-C, SIGTERM), how long its running jobs may finish before they are cancelled "
        "(default 600; a second stop cancels them at once)",
    )
    p.set_defaults(func=cmd_agent)


def say(text: str) -> None:
    """What the agent is doing, a line at a time, as it happens (a run id, a lane, a reason)."""
    print(terminal_text(text), flush=True)


def cmd_agent(args) -> int:
    from core.runs import agent, fleet
    from core.runs.store import Store

    store = Store(args.store)
    name = args.name or socket.gethostname()
    if not name.strip() or len(name) > 100 or any(not (c.isalnum() or c in "-_.") for c in name):
        print(f"error: --name {terminal_text(name)!r}: letters, digits, '-', '_' and '.' only", file=sys.stderr)
        return EXIT_USAGE
    timeout = agent.STOP_TIMEOUT_S if args.stop_timeout is None else args.stop_timeout
    if not 0 <= timeout < 10**7:
        print(f"error: --stop-timeout {args.stop_timeout}: a number of seconds, 0 or more", file=sys.stderr)
        return EXIT_USAGE
    try:
        found = agent.find_lanes()
    except (RuntimeError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:  # stopped while it was finding its devices: it had not joined yet
        print(f"agent {terminal_text(name)}: stopped before it joined the fleet", flush=True)
        return 0
    try:
        return agent.Agent(store, name, found, say=say, stop_timeout_s=timeout).run()
    except fleet.AgentRefused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
