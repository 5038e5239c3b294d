"""`record`: make a shipped recording again (assets/recordings), on a quiet machine only.

Each recording is one row of core/view/replay.py; the race runs through the queue of a store of
its own, like any race, and its bundle is written where the app lists it. A busy machine (other
work sharing the cores) would record slow compiles as if they were this device's, so `record` waits
up to --wait-quiet seconds for the load to drop and refuses otherwise, and a recording during which
the machine got busy is not written (--anyway records regardless; the replay then says how busy
the machine was)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

from core.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, queued_or_refused

# How quiet `record` waits for before each recording: well under the busy line the recording is
# judged by afterwards (BUSY_LOAD_PER_CORE), so that the last recording's threads fading from the
# 1-minute load and the new worker's start-up do not push a quiet start over it.
QUIET_LOAD_PER_CORE = 0.3


def wait_for_quiet(wait_s: float, sleep=time.sleep, now=time.monotonic) -> str | None:
    """None once the machine is quiet (within wait_s), else how busy it still is."""
    from core.engine.environment import machine_load
    from core.view.replay import machine_busy

    deadline = now() + wait_s
    while (busy := machine_busy(machine_load(), QUIET_LOAD_PER_CORE)) is not None and now() < deadline:
        sleep(5)
    return busy


def cmd_record(args: argparse.Namespace) -> int:
    from core.cli.jobs import follow
    from core.runs import queue
    from core.runs.bundle import export_bundle
    from core.runs.store import Store
    from core.view.replay import BY_NAME, RECORDINGS_DIR, SHIPPED, load_reading, recorded_load

    names = args.names or [r.name for r in SHIPPED]
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        print(f"error: no shipped recording named {unknown[0]!r} (known: {', '.join(BY_NAME)})", file=sys.stderr)
        return EXIT_USAGE
    out_dir = args.out_dir or RECORDINGS_DIR
    store = None
    for name in names:
        busy = wait_for_quiet(args.wait_quiet)
        if busy and not args.anyway:
            print(
                f"error: the machine is busy ({busy}): a recording made now would show slow times as this "
                f"device's. Run it on a quiet machine, or pass --anyway (the replay then says so)",
                file=sys.stderr,
            )
            return EXIT_FAILED
        if store is None:  # a store of its own: the recording's race is alone in a clean queue
            store = Store(os.path.join(tempfile.mkdtemp(prefix="compile-lab-record-"), "store.sqlite3"))
        caps = queue.ensure_probe(store, owner="recording", wait_s=120)
        run_id = queued_or_refused(
            lambda n=name, c=caps, s=store: queue.enqueue(s, BY_NAME[n].params, "recording", caps=c)
        )
        if run_id is None:
            return EXIT_USAGE
        print(f"{name}: recording as run {run_id}", file=sys.stderr)
        code = follow(store, run_id, argparse.Namespace(json=False))
        if code != EXIT_OK:
            return code
        env = store.get_run(run_id).environment or {}
        if load_reading(env)[1] and not args.anyway:
            print(
                f"error: {name}: the machine got busy while it was recorded ({load_reading(env)[0]}): "
                f"not written; record it again on a quiet machine (or pass --anyway)",
                file=sys.stderr,
            )
            return EXIT_FAILED
        path = os.path.join(out_dir, f"{name}.json")
        with open(path, "w") as fh:
            json.dump(export_bundle(store, run_id), fh)
        print(f"{name}: written to {path}, recorded {recorded_load(env)}")
    return EXIT_OK


def add_commands(sub) -> None:
    """`record`."""
    record = sub.add_parser("record", help="make a shipped recording again (assets/recordings), on a quiet machine")
    record.add_argument("names", nargs="*", help="which recordings (default: all of them)")
    record.add_argument("--out-dir", default=None, help="where to write them (default: assets/recordings)")
    record.add_argument(
        "--wait-quiet", type=float, default=180.0, help="seconds to wait for a quiet machine before refusing (180)"
    )
    record.add_argument("--anyway", action="store_true", help="record even on a busy machine")
    record.set_defaults(func=cmd_record)
