"""`submit`, `status`, `cancel`, `delete`: races queued for a background worker, followed, and
stopped or removed by their owner."""

from __future__ import annotations

import argparse
import json
import sys
import time

from core.cli.common import (
    EXIT_CANCELLED,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    open_store,
    progress_bar,
    queued_or_refused,
    run_id_arg,
    say,
    store_parser,
    stored_result,
)
from core.cli.races import add_spec_arguments, race_command, spec_from_args


def cmd_submit(args: argparse.Namespace) -> int:
    from core.runs import device_history, queue
    from core.runs.limits import load_host_limits
    from core.view.host_tables import describe
    from core.view.race_form import time_limit_note

    store = open_store(args)
    if args.every_gpu_type:
        return submit_on_every_gpu_type(store, args)

    queued: dict = {}

    def enqueue() -> int:
        limits = load_host_limits()  # before anything runs: a broken configuration is said at once
        spec = spec_from_args(args)
        caps = queue.ensure_probe(store, owner=args.owner, wait_s=60)
        queued.update(spec=spec, caps=caps, limits=limits)
        return queue.enqueue(store, spec, args.owner, limits=limits, caps=caps)

    run_id = queued_or_refused(enqueue)
    if run_id is None:
        return EXIT_USAGE
    run = store.get_run(run_id)
    print(f"run {run_id}: {describe(store, run)} on {run.device_key}")
    try:  # an estimate never stops what was queued
        note = time_limit_note(device_history.race_estimate(store, queued["spec"], queued["caps"]), queued["limits"])
    except Exception:  # noqa: BLE001
        note = None
    if note:  # said as it is queued: cancel it (python -m core cancel N), or let it run to the limit
        print(f"warning: {note} (python -m core cancel {run_id} stops it)", file=sys.stderr)
    if not args.wait:
        return EXIT_OK
    return follow(store, run_id, args)


def submit_on_every_gpu_type(store, args: argparse.Namespace) -> int:
    """`submit --every-gpu-type`: the race once per GPU type of the fleet, one line per run."""
    from core.runs.fleet_races import enqueue_on_every_gpu_type
    from core.runs.limits import load_host_limits
    from core.view.safe_text import terminal_text

    runs = queued_or_refused(
        lambda: enqueue_on_every_gpu_type(store, spec_from_args(args), args.owner, load_host_limits())
    )
    if runs is None:
        return EXIT_USAGE
    for name, run_id in runs.items():
        run = store.get_run(run_id)
        print(f"run {run_id}: {terminal_text(name)} ({terminal_text(run.host)} {run.device_key})")
    ids = " ".join(str(i) for i in runs.values())
    print(f"side by side: python -m core status {ids} (the Race page: ?compare={ids.replace(' ', ',')})")
    if not args.wait:
        return EXIT_OK
    return follow_group(store, list(runs.values()))


def follow_group(store, ids: list[int]) -> int:
    """Follow a group of races to their end (one line on stderr whenever one changes), then print
    them side by side."""
    from core.runs import queue
    from core.view.host_tables import describe
    from core.view.safe_text import terminal_text

    last: dict[int, str] = {}
    while True:
        queue.tick(store)
        runs = [store.get_run(i) for i in ids]
        for run_id, run in zip(ids, runs):
            line = "deleted" if run is None else f"{progress_bar(run.progress)} {terminal_text(describe(store, run))}"
            if last.get(run_id) != line:
                print(f"run {run_id} {line}", file=sys.stderr, flush=True)
                last[run_id] = line
        if all(run is None or run.finished for run in runs):
            break
        time.sleep(0.5)
    print_comparison(store, ids)
    return EXIT_OK if all(run is not None and run.status == "done" for run in runs) else EXIT_FAILED


def print_comparison(store, ids: list[int]) -> None:
    """Races of one spec on several devices, side by side (core.view.device_comparison)."""
    from core.view.device_comparison import comparison, comparison_lines

    print("\n".join(comparison_lines(comparison(store, ids))))


def follow(store, run_id: int, args: argparse.Namespace) -> int:
    """Follow a run to its end with a progress bar on stderr, ticking the queue meanwhile."""
    from core.runs import queue
    from core.view.host_tables import describe
    from core.view.report import summary_table
    from core.view.safe_text import terminal_text

    stream = sys.stderr
    last = ""
    while True:
        queue.tick(store)
        run = store.get_run(run_id)
        line = f"run {run_id} {progress_bar(run.progress)} {terminal_text(describe(store, run))}"
        if line != last:
            stream.write(("\r\033[K" + line) if stream.isatty() else line + "\n")
            stream.flush()
            last = line
        if run.finished:
            break
        time.sleep(0.5)
    if stream.isatty():
        stream.write("\n")
    if run.summary and args.json:
        print(json.dumps(stored_result(run), default=float))
    elif run.summary:
        say(summary_table(stored_result(run), command=race_command))
    if run.status == "failed":
        say(f"error: run {run_id} failed: {run.error}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_CANCELLED if run.status == "cancelled" else EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    from core.runs import queue
    from core.runs.limits import shown_owner
    from core.view.host_tables import describe

    store = open_store(args)
    queue.tick(store)
    if len(args.run_id) > 1:  # several races (Race on every GPU type's): side by side
        print_comparison(store, args.run_id)
        return EXIT_OK
    if args.run_id:
        run = store.get_run(args.run_id[0])
        if run is None:
            print(f"error: there is no run {args.run_id[0]}", file=sys.stderr)
            return EXIT_USAGE
        # An owner's whole token would let anyone with a shell cancel or delete that visitor's runs.
        say(f"run {run.id} ({run.kind}, owner {shown_owner(run.owner)}, {run.device_key}): {describe(store, run)}")
        if run.kind == "race" and run.summary:
            from core.engine.reading import reading

            say(reading(run.summary))
        return EXIT_OK
    active = store.list_runs(status=("queued", "starting", "running"))
    if not active:
        print("nothing queued or running")
    if store.queue_paused():
        print("the queue is paused by the host: queued jobs wait")
    for run in reversed(active):
        say(f"run {run.id:>5}  {run.device_key:<8} {shown_owner(run.owner):<16} {describe(store, run)}")
    from core.runs import fleet
    from core.view.host_tables import fleet_lines

    hosts = fleet.hosts(store)
    if hosts:  # a fleet: its hosts and lanes (python -m core agent)
        print("\nfleet:")
        print("\n".join(fleet_lines(hosts, active, time.time())))
    return EXIT_OK


def cmd_cancel(args: argparse.Namespace) -> int:
    from core.runs import queue

    try:
        status = queue.cancel(open_store(args), args.run_id, args.owner)
    except queue.JobError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"run {args.run_id}: {status}")
    return EXIT_OK


def cmd_delete(args: argparse.Namespace) -> int:
    from core.runs import queue

    try:
        queue.delete(open_store(args), args.run_id, args.owner)
    except queue.JobError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"run {args.run_id}: deleted")
    return EXIT_OK


def add_commands(sub) -> None:
    """`submit`, `status`, `cancel`, `delete`."""
    submit = store_parser(sub, "submit", "queue a race for a background worker", owner=True)
    add_spec_arguments(submit)
    submit.add_argument(
        "--wait",
        action="store_true",
        help="follow the run with a progress bar until it ends (--every-gpu-type: the runs, then side by side)",
    )
    submit.add_argument("--json", action="store_true", help="with --wait: print the result as JSON")
    submit.add_argument(
        "--every-gpu-type", action="store_true", help="in a fleet: the race once on each GPU type its boxes have"
    )
    submit.set_defaults(func=cmd_submit)
    status = store_parser(sub, "status", "the state of one run, of several side by side, or of the queue")
    status.add_argument("run_id", nargs="*", type=run_id_arg)
    status.set_defaults(func=cmd_status)
    for name, func, text in (
        ("cancel", cmd_cancel, "cancel your queued or running run"),
        ("delete", cmd_delete, "delete your run, its events and its files (traces, log)"),
    ):
        p = store_parser(sub, name, text, owner=True)
        p.add_argument("run_id", type=run_id_arg)
        p.set_defaults(func=func)
