"""`sweep`, `sweeps`, `cancel-sweep`, `delete-sweep`, `plan`: a sweep queued (one race per point)
and followed, the stored sweeps, and a training run planned from a finished race or sweep."""

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
    positive_int,
    progress_bar,
    queued_or_refused,
    run_id_arg,
    store_parser,
)
from core.cli.races import add_spec_arguments, race_command, spec_from_args
from core.engine.spec import sweep_axes


def sweep_from_args(args: argparse.Namespace):
    """The sweep the flags describe: the race flags are the base, each axis flag one axis."""
    from core.runs.sweeps import SweepSpec, axis_from_text

    given = ((o.name, getattr(args, o.name + "_values")) for o in sweep_axes())
    axes = tuple(axis_from_text(name, text) for name, text in given if text is not None)
    return SweepSpec(spec_from_args(args), axes)


def cmd_sweep(args: argparse.Namespace) -> int:
    from core.runs import queue, sweeps

    store = open_store(args)

    queued: dict = {}

    def enqueue() -> int:
        sweep = sweep_from_args(args)
        caps = queue.ensure_probe(store, owner=args.owner, wait_s=60)
        queued.update(sweep=sweep, caps=caps)
        return sweeps.enqueue_sweep(store, sweep, args.owner, caps=caps)

    sweep_id = queued_or_refused(enqueue)
    if sweep_id is None:
        return EXIT_USAGE
    points = store.sweep_runs(sweep_id)
    print(
        f"sweep {sweep_id}: {len(points)} points queued on {points[0].device_key}",
        file=sys.stderr if args.json else sys.stdout,
    )
    past_limit = sweep_time_limit(queued["sweep"], queued["caps"])
    if past_limit:  # said as it is queued: cancel-sweep stops it
        print(f"warning: {past_limit} (python -m core cancel-sweep {sweep_id} stops it)", file=sys.stderr)
    if args.detach:
        return EXIT_OK
    return follow_sweep(store, sweep_id, args)


def sweep_time_limit(sweep, caps) -> str | None:
    """The sweep's points past the host's job time limit (core.view.sweep.time_limit_points);
    None where none is, or where it cannot be said (an estimate never stops what was queued)."""
    from core.runs.limits import load_host_limits
    from core.view.sweep import time_limit_points

    try:
        return time_limit_points(sweep, caps, load_host_limits())
    except Exception:  # noqa: BLE001
        return None


def follow_sweep(store, sweep_id: int, args: argparse.Namespace) -> int:
    """Follow a sweep to its end: a line per finished point and a progress line on stderr; Ctrl-C
    cancels the whole sweep. Then the report (or JSON) on stdout. A sweep deleted while followed
    (by its owner elsewhere, or the host) ends the follow with one line saying so."""
    from core.runs import queue, sweeps
    from core.view.safe_text import terminal_text
    from core.view.sweep import point_line, sweep_frame, sweep_state

    stream, reported, last = sys.stderr, set(), ""
    cancelled = False
    while True:
        try:
            queue.tick(store)
            found = sweeps.stored_sweep(store, sweep_id)
            if found is None or not found[1]:
                if stream.isatty() and last:
                    stream.write("\n")
                print(f"error: {sweep_gone(store, sweep_id)}", file=sys.stderr)
                return EXIT_FAILED
            sweep, runs = found
            frame = sweep_frame(sweep, runs, store)
            for row in frame.itertuples():
                if row.status in ("done", "failed", "cancelled") and row.run_id not in reported:
                    reported.add(row.run_id)
                    stream.write(("\r\033[K" if stream.isatty() else "") + point_line(row, len(frame)) + "\n")
            state = sweep_state(store, runs)
            line = f"sweep {sweep_id} {progress_bar(sweeps.sweep_progress(runs))} {terminal_text(state)}"
            if stream.isatty() and line != last:
                stream.write("\r\033[K" + line)
                last = line
            stream.flush()
            if sweeps.sweep_finished(runs):
                break
            time.sleep(0.5)
        except KeyboardInterrupt:
            sweeps.cancel_sweep(store, sweep_id, args.owner)
            cancelled = True
    if stream.isatty():
        stream.write("\n")
    if not print_sweep(store, sweep_id, args):
        return EXIT_FAILED
    statuses = {r.status for r in store.sweep_runs(sweep_id)}
    if cancelled or "cancelled" in statuses:
        return EXIT_CANCELLED
    return EXIT_FAILED if "failed" in statuses else EXIT_OK


def sweep_gone(store, sweep_id: int) -> str:
    """Why a sweep cannot be shown: deleted, its points deleted, or its definition damaged."""
    if store.get_sweep(sweep_id) is None:
        return f"sweep {sweep_id} no longer exists (it was deleted)"
    if not store.sweep_runs(sweep_id):
        return f"sweep {sweep_id} has no points left (they were deleted)"
    return f"sweep {sweep_id} cannot be read: its stored definition is damaged"


def print_sweep(store, sweep_id: int, args: argparse.Namespace) -> bool:
    """The sweep's report (or JSON) on stdout; False, with one line on stderr, if it is gone."""
    from core.runs import sweeps
    from core.view.safe_text import terminal_text
    from core.view.sweep import sweep_frame, sweep_json, sweep_report, sweep_state

    found = sweeps.stored_sweep(store, sweep_id)
    if found is None:
        print(f"error: {sweep_gone(store, sweep_id)}", file=sys.stderr)
        return False
    sweep, runs = found
    frame = sweep_frame(sweep, runs, store)
    state = sweep_state(store, runs)
    plan_steps = getattr(args, "plan_steps", None)
    if args.json:
        data = sweep_json(sweep_id, sweep, runs, frame, state)
        if plan_steps:
            from core.view.sweep import plan_rows

            data["plan"] = {"steps": plan_steps, "points": plan_rows(frame, runs, plan_steps)}
        print(json.dumps(data, default=float))  # json escapes every control character
    else:
        print(terminal_text(sweep_report(sweep, frame, state, plan_steps, runs, command=race_command), one_line=False))
    return True


def cmd_sweeps(args: argparse.Namespace) -> int:
    from core.runs import queue, sweeps
    from core.runs.limits import shown_owner
    from core.view.safe_text import terminal_text
    from core.view.sweep import sweep_state

    store = open_store(args)
    queue.tick(store)
    if args.sweep_id is not None:
        if store.get_sweep(args.sweep_id) is None:
            print(f"error: there is no sweep {args.sweep_id}", file=sys.stderr)
            return EXIT_USAGE
        return EXIT_OK if print_sweep(store, args.sweep_id, args) else EXIT_FAILED
    rows = []
    for row in store.list_sweeps(limit=args.limit):
        found = sweeps.stored_sweep(store, row.id)
        if found is None:
            continue
        sweep, runs = found
        rows.append((row, sweep, sweep_state(store, runs)))
    if args.json:
        # An owner's whole token would let anyone with a shell cancel or delete that visitor's sweeps.
        listing = [{"sweep_id": r.id, "owner": shown_owner(r.owner), "state": st, **sw.to_dict()} for r, sw, st in rows]
        print(json.dumps(listing))
        return EXIT_OK
    if not rows:
        print("no sweeps stored")
    for row, sweep, state in rows:
        axes = "; ".join(f"{a.label} {','.join(map(str, a.values))}" for a in sweep.axes)
        print(terminal_text(f"sweep {row.id:>4}  {sweep.base.model:<16} {axes:<44} {state}"))
    return EXIT_OK


def cmd_sweep_action(args: argparse.Namespace) -> int:
    from core.runs import queue, sweeps

    try:
        if args.action == "cancel":
            count = sweeps.cancel_sweep(open_store(args), args.sweep_id, args.owner)
            print(f"sweep {args.sweep_id}: {count} points cancelled")
        else:
            sweeps.delete_sweep(open_store(args), args.sweep_id, args.owner)
            print(f"sweep {args.sweep_id}: deleted")
    except queue.JobError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


def cmd_plan(args: argparse.Namespace) -> int:
    import dataclasses

    from core.engine.words import plan_from_summary
    from core.view.sweep import plan_figures

    steps = args.steps if args.steps is not None else (args.epochs or 0) * (args.steps_per_epoch or 0)
    if steps < 1:
        print("error: give the run's length: --steps N, or --epochs E --steps-per-epoch S", file=sys.stderr)
        return EXIT_USAGE
    store = open_store(args)
    if args.sweep is not None:
        if store.get_sweep(args.sweep) is None:
            print(f"error: there is no sweep {args.sweep}", file=sys.stderr)
            return EXIT_USAGE
        args.plan_steps = steps
        return EXIT_OK if print_sweep(store, args.sweep, args) else EXIT_FAILED
    run = store.get_run(args.run_id) if args.run_id is not None else None
    if run is None or run.kind != "race":
        print(f"error: there is no run {args.run_id} (give a run id, or --sweep SWEEP_ID)", file=sys.stderr)
        return EXIT_USAGE
    plan = plan_from_summary(run.summary or {}, steps) if run.status == "done" else None
    if plan is None:
        print(f"error: run {run.id} has no finished measurement to plan from ({run.status})", file=sys.stderr)
        return EXIT_USAGE
    figures = plan_figures(plan)
    if args.json:
        print(json.dumps({"run_id": run.id, **dataclasses.asdict(plan), "sentence": figures["what compile does"]}))
        return EXIT_OK
    for label in ("eager total", "compiled total, compile included"):
        print(f"{label:<34}{figures[label]}")
    print(figures["what compile does"])
    return EXIT_OK


def add_commands(sub) -> None:
    """`sweep`, `sweeps`, `cancel-sweep`, `delete-sweep`, `plan`."""
    sweep = store_parser(sub, "sweep", "queue a sweep (one race per point) and follow it to the end", owner=True)
    add_spec_arguments(sweep)
    axes = sweep.add_argument_group("axes (one or two)")
    for option in sweep_axes():  # --batch-sizes, --precisions ...: the options table's sweep column
        axes.add_argument(option.axis_flag, dest=option.name + "_values", default=None, help=option.text(option.sweep))
    sweep.add_argument("--json", action="store_true", help="print one JSON object at the end instead of the report")
    sweep.add_argument("--detach", action="store_true", help="queue it and return (follow later: sweeps SWEEP_ID)")
    sweep.add_argument(
        "--plan-steps", type=positive_int, default=None, help="also plan a training run of this many steps"
    )
    sweep.set_defaults(func=cmd_sweep)
    listing = store_parser(sub, "sweeps", "stored sweeps, or one sweep's points and readings")
    listing.add_argument("sweep_id", nargs="?", type=run_id_arg)
    listing.add_argument("--limit", type=int, default=50)
    listing.add_argument("--json", action="store_true")
    listing.add_argument(
        "--plan-steps", type=positive_int, default=None, help="also plan a training run of this many steps"
    )
    listing.set_defaults(func=cmd_sweeps)
    for action, text in (("cancel", "cancel every unfinished point of your sweep"), ("delete", "delete your sweep")):
        p = store_parser(sub, f"{action}-sweep", text, owner=True)
        p.add_argument("sweep_id", type=run_id_arg)
        p.set_defaults(func=cmd_sweep_action, action=action)
    plan = store_parser(sub, "plan", "predict a training run's time eager vs compiled from a finished race or sweep")
    plan.add_argument("run_id", nargs="?", type=run_id_arg)
    plan.add_argument("--sweep", type=run_id_arg, default=None, help="plan from every point of this sweep")
    plan.add_argument("--steps", type=positive_int, default=None, help="the run's length in steps")
    plan.add_argument("--epochs", type=positive_int, default=None)
    plan.add_argument("--steps-per-epoch", type=positive_int, default=None)
    plan.add_argument("--json", action="store_true")
    plan.set_defaults(func=cmd_plan)
