"""Command line: `python -m core models | race | sweep | sweeps | plan | submit | status | cancel | delete | runs
| export | import | doctor` (with `cancel-sweep` and `delete-sweep`), one module per group of
subcommands; the race flags come from the options table (core.cli.race_flags).

Errors a user can cause end with one line on stderr and exit status 2; a run that fails part
way prints what it measured, then the reason, and exits 1.

The CLI sits above the three layers: it may import the engine, the runs and the view, and nothing
in them ever imports it. It never imports streamlit or altair, and loads only what a command needs
when it runs, so `race` and `doctor` work on a GPU box that has only torch and pandas.
"""

from __future__ import annotations

import argparse
import os
import sys

from core.cli import doctor, models, queue, races, stored, sweeps
from core.cli.common import EXIT_BROKEN_PIPE, EXIT_USAGE, OneLineParser


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m core", description="Compile Lab: eager vs torch.compile, measured.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    for group in (models, races, queue, stored, doctor, sweeps):  # the order `--help` lists them in
        group.add_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from core.runs.store import StoreError

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
    return code
