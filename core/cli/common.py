"""What every command shares: exit statuses, the one-line usage error, argument types, printing
stored text safely, the store and the owner, and a refused enqueue said in one line per reason."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TextIO

from core.engine.spec import SpecError
from core.runs.store import MAX_ID, id_from_text

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_CANCELLED = 0, 1, 2, 130
EXIT_BROKEN_PIPE = 141  # what a shell reports for a program stopped by SIGPIPE (`... | head -1`)


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage error as a single line (no usage dump), exit status 2."""

    def error(self, message: str):  # noqa: D102
        self.exit(EXIT_USAGE, f"error: {message} (see: python -m core {self.prog.split()[-1]} --help)\n")


def run_id_arg(value: str) -> int:
    """A run id as the store can hold it (SQLite integers are 64-bit), in ASCII digits as links and
    routes read it (store.id_from_text: int() alone takes ' 7', '+7', '1_0' and other scripts' digits)."""
    number = id_from_text(value)
    if number is None:
        shown = value if len(value) <= 40 else value[:40] + "..."
        raise argparse.ArgumentTypeError(f"{shown!r} is not a run id (a whole number from 1 to {MAX_ID}, digits 0-9)")
    return number


def row_limit(value: str) -> int:
    """How many rows to list: a whole number SQLite can hold."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of rows") from None
    if not 1 <= number < 2**63:
        raise argparse.ArgumentTypeError(f"{value} rows: give a whole number from 1 to {2**63 - 1}")
    return number


def say(text: str, file: TextIO | None = None) -> None:
    """Print text that holds stored data (a bundle's device name, a run's error) with its control
    characters removed, so a terminal shows it and obeys none of it."""
    from core.view.safe_text import terminal_text

    print(terminal_text(text, one_line=False), file=file or sys.stdout)


def positive_int(value: str) -> int:
    """A count of steps or epochs: a whole number from 1."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value} must be 1 or more")
    return number


def default_owner() -> str:
    import getpass

    try:
        return f"cli:{getpass.getuser()}"
    except Exception:  # noqa: BLE001 - no user database (some containers)
        return "cli"


def owner_arg(text: str) -> str:
    """--owner: who you are to the queue, any name but a web visitor's. A visitor's owner is the hash
    of their browser's token (core.runs.limits), which the store holds and a shell user could read:
    taking it here would let them cancel or delete that visitor's runs."""
    from core.runs.limits import VISITOR_PREFIX

    name = text.strip()
    if not name or name.startswith(VISITOR_PREFIX):
        raise argparse.ArgumentTypeError(
            f"--owner: a name of your own, not a web visitor's ({VISITOR_PREFIX}...): only their browser acts for them"
        )
    return name


def open_store(args: argparse.Namespace):
    from core.runs.store import Store

    store = Store(args.store)
    if store.damage:  # a file cut short: read as it is, one line says so
        print(f"warning: {store.damage}", file=sys.stderr)
    return store


def stored_result(run) -> dict:
    """A stored run in the shape summary_table reads (the same as race --json): its settings and the
    environment it ran in too, which its answers (why, what to try next on its device) read."""
    details = run.details or {}
    return {
        "spec": run.params or {},
        "environment": run.environment or {},
        "summary": run.summary or {},
        "variants": details.get("variants", {"eager": {"final_loss": None}, "compiled": {"final_loss": None}}),
        "compile": details.get("compile", {}),
    }


def progress_bar(fraction: float, width: int = 30) -> str:
    filled = int(round(max(0.0, min(fraction, 1.0)) * width))
    return "[" + "#" * filled + "." * (width - filled) + f"] {fraction * 100:3.0f}%"


def queued_or_refused(enqueue: Callable[[], int]) -> int | None:
    """What `enqueue` queued (a run or sweep id), or None once it was refused, with one line per
    reason on stderr: bad input, a full queue, an unreadable host configuration."""
    from core.runs import queue
    from core.runs.disk_space import is_disk_full

    try:
        return enqueue()
    except SpecError as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
    except queue.JobError as exc:
        print(f"error: {exc}", file=sys.stderr)
    except (ValueError, OSError) as exc:  # the host's limits configuration is unreadable
        if is_disk_full(exc):
            raise  # said by main in one line
        print(f"error: configuration: {exc}", file=sys.stderr)
    return None


def store_parser(sub, name: str, help_text: str, owner: bool = False) -> argparse.ArgumentParser:
    """A subcommand that opens the store (--store), and with `owner` acts as someone (--owner)."""
    p = sub.add_parser(name, help=help_text)
    p.add_argument(
        "--store",
        default=None,
        help="store: a file, or a postgresql:// URL for a fleet (default: $COMPILE_LAB_STORE or data/compile_lab.sqlite3)",
    )
    if owner:
        p.add_argument(
            "--owner", type=owner_arg, default=default_owner(), help="who you are to the queue (default: cli:<user>)"
        )
    return p
