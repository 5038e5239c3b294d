"""`doctor`: on a GPU box, every CUDA path checked (precisions, modes, out of memory, demos) and
printed as one table (core.runs.doctor does the checking)."""

from __future__ import annotations

import argparse


def cmd_doctor(args: argparse.Namespace) -> int:
    from core.runs.doctor import doctor

    return doctor(
        args.store, args.out, cpu_smoke=args.cpu_smoke, budget_s=args.budget, full=args.full, plan_only=args.plan
    )


def add_commands(sub) -> None:
    """`doctor`."""
    doc = sub.add_parser(
        "doctor",
        help="on a GPU box: check every CUDA path (precisions, modes, out of memory, demos) and print one table",
    )
    doc.add_argument("--store", default=None, help="store to run the checks in (default: a fresh temporary one)")
    doc.add_argument(
        "--out", default=None, help="folder for the table (doctor.txt, doctor.json) and the ResNet-50 bundle"
    )
    doc.add_argument(
        "--budget",
        type=float,
        default=None,
        metavar="SECONDS",
        help="finish within this many seconds (default 240; none with --full): a check that does not fit "
        "says 'not run: budget'",
    )
    doc.add_argument("--full", action="store_true", help="every check at full size, cold, with every demo")
    doc.add_argument(
        "--plan",
        action="store_true",
        help="print the checks, their compiles and expected times, and run nothing (any machine)",
    )
    doc.add_argument("--cpu-smoke", action="store_true", help=argparse.SUPPRESS)  # the machinery at toy size, for tests
    doc.set_defaults(func=cmd_doctor)
