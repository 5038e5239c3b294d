"""The parser of `python -m core`, gathered from the subcommand modules in the order `--help`
lists them, and `main`, which runs one command and turns a store error, a full disk or a closed pipe
into its exit status."""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys

from core.cli import agent, doctor, jobs, models, races, record, stored, sweeps
from core.cli.common import EXIT_BROKEN_PIPE, EXIT_FAILED, EXIT_USAGE, OneLineParser


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m core", description="Compile Lab: eager vs torch.compile, measured.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    for group in (models, races, jobs, stored, record, doctor, sweeps, agent):  # the order `--help` lists them in
        group.add_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from core.runs.disk_space import disk_full_message, is_disk_full
    from core.runs.store import StoreError, default_store_path

    args = build_parser().parse_args(argv)
    try:
        code = args.func(args)
        sys.stdout.flush()  # inside the try: a reader that went away is noticed here, not at exit
    except StoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # `python -m core status | head -1`: the reader has what it wanted. Point stdout at
        # /dev/null so the interpreter's own flush at exit does not complain, and stop quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except (sqlite3.OperationalError, OSError) as exc:  # a write to a full disk: one line, no traceback
        if not is_disk_full(exc):
            raise
        print(f"error: {disk_full_message(getattr(args, 'store', None) or default_store_path())}", file=sys.stderr)
        return EXIT_FAILED
    return code
