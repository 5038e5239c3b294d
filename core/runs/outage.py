"""A store's server lost mid-run (PostgreSQL down, restarting, out of reach): how long a worker
measures on without it, the sign of life it leaves on its box meanwhile, and what it kept, written
to the box's data folder when it gives up and delivered later. No torch.

Why this design: nothing measured is lost, whatever the outage, and each step can be tested alone.
- A worker that cannot reach its store keeps its events in memory and goes on measuring; the
  moment the server answers again it writes them (core.runs.worker.EventSink), through a fresh
  connection pool (psycopg's own retries back off to a minute and more), and the run ends as if
  nothing had happened.
- Past the limit (`store_lost_limit_s`, 300 s, COMPILE_LAB_STORE_LOST_LIMIT_S) it stops measuring:
  a race nobody can see grows in memory, holds its lane, and the fleet cannot tell it from a hung
  one. The run ends failed with what it kept: "lost the database for N s (limit L s): kept M steps".
- At the end of a run it waits for the server a while more (`end_wait_s`); still away, it writes
  what it kept (the events, the run's last fields, how it ends) to a file of its own in the box's
  data folder (`kept_dir`, 0600) and exits, since a worker cannot hold its lane forever. Whoever
  next reconciles the queue from this box with the store reachable (its agent at every step, the
  app's or a CLI's tick) delivers the file in one transaction (`deliver_kept`) and removes it.
- While the store is away the worker touches a file of its own (`alive_path`), so its agent, which
  sees both, does not take a worker whose heartbeats cannot reach the store for a hung one; and
  heartbeats count from the moment the store is back (Store.up_since: the server's restart, or when
  this process reached it again), so an outage does not turn every box's silence into "agent
  stopped" (core.runs.fleet, core.runs.queue.reconcile).
A box cut off alone (its network, not the server) is "agent <name> stopped" to the rest of the
fleet after the agent timeout; its worker still delivers every event it kept when it is back.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from core.runs.disk_space import DISK_FULL_WAIT_S
from core.runs.store import Store, store_files_dir
from core.runs.store.records import shown_location
from core.runs.warm_start import pid_running

STORE_LOST_LIMIT_S = 300.0  # how long a worker measures without its store before it stops
LIMIT_VARIABLE = "COMPILE_LAB_STORE_LOST_LIMIT_S"
KEPT_SUFFIX = ".json"
DELIVERING = ".delivering-"  # a file being delivered, by the process whose pid follows


def store_lost_limit_s() -> float:
    """STORE_LOST_LIMIT_S, or COMPILE_LAB_STORE_LOST_LIMIT_S where it is a positive number."""
    try:
        value = float(os.environ.get(LIMIT_VARIABLE) or STORE_LOST_LIMIT_S)
    except ValueError:
        return STORE_LOST_LIMIT_S
    return value if value > 0 else STORE_LOST_LIMIT_S


def end_wait_s() -> float:
    """How long a worker whose run has ended waits for a lost store before it leaves what it kept
    in a file: DISK_FULL_WAIT_S, or the limit where that is shorter."""
    return min(DISK_FULL_WAIT_S, store_lost_limit_s())


def lost_reason(lost_s: float, steps: int) -> str:
    """What a run that stopped at the limit failed with."""
    return f"lost the database for {lost_s:.0f} s (limit {store_lost_limit_s():.0f} s): kept {steps} steps"


# -- the worker's sign of life on its own box ---------------------------------------------------


def alive_path(store_path: str, run_id: int) -> str:
    return os.path.join(store_files_dir(store_path), "logs", f"run-{run_id}.alive")


def touch_alive(store_path: str, run_id: int) -> None:
    """The worker is alive and trying: its heartbeats cannot reach the store."""
    path = alive_path(store_path, run_id)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "a"):
            os.utime(path)
    except OSError:
        pass  # (a full disk too: the store's heartbeat is what counts then)


def alive_at(store_path: str, run_id: int) -> float:
    """When the worker of a run on this box last said it is alive without its store (0: never)."""
    try:
        return os.stat(alive_path(store_path, run_id)).st_mtime
    except OSError:
        return 0.0


def clear_alive(store_path: str, run_id: int) -> None:
    try:
        os.remove(alive_path(store_path, run_id))
    except OSError:
        pass


# -- what a worker kept, left on its box --------------------------------------------------------


def kept_dir(store_path: str) -> str:
    return os.path.join(store_files_dir(store_path), "kept-events")


def write_kept(
    store_path: str,
    run_id: int,
    rows: list[dict[str, Any]],
    fields: dict[str, Any],
    finish: tuple[str, dict[str, Any]],
) -> str:
    """Leave a run's kept events, its last fields and its end in a file (written whole, then renamed,
    readable by this user only); returns its path."""
    folder = kept_dir(store_path)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"run-{run_id}-{os.getpid()}{KEPT_SUFFIX}")
    kept = {
        "store": shown_location(store_path),
        "run_id": run_id,
        "written_at": time.time(),
        "events": rows,
        "fields": fields,
        "finish": {"status": finish[0], "fields": finish[1]},
    }
    partial = path + ".partial"
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as fh:
        json.dump(kept, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(partial, path)
    return path


def deliver_kept(store: Store) -> list[int]:
    """Deliver the files of kept events this box holds for `store`: each in one transaction (its
    events, its fields, its end unless the run has ended meanwhile), then removed. Returns the runs
    delivered. A file is claimed by renaming it first, so two processes never deliver one twice;
    a claim whose process died is taken back. A lost store raises (the file stays for next time)."""
    folder = kept_dir(store.path)
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    here = shown_location(store.path)
    delivered = []
    for name in names:
        path = os.path.join(folder, name)
        if DELIVERING in name:  # a claim: taken back if its process is gone
            base, _, pid = name.rpartition(DELIVERING)
            if pid.isdigit() and not pid_running(int(pid)):
                _rename(path, os.path.join(folder, base))
            continue
        if not name.endswith(KEPT_SUFFIX):
            continue
        claimed = f"{path}{DELIVERING}{os.getpid()}"
        if not _rename(path, claimed):
            continue  # another process claimed it first
        try:
            with open(claimed) as fh:
                kept = json.load(fh)
            if kept.get("store") != here:
                _rename(claimed, path)  # another store's (this box serves several)
                continue
            run_id = int(kept["run_id"])
            finish = kept["finish"]
            fields = {k: v for k, v in (kept.get("fields") or {}).items() if k != "heartbeat_at"}
            if store.get_run(run_id) is not None:
                store.append_events(run_id, kept["events"], fields, (finish["status"], finish["fields"]))
        except (ValueError, KeyError, TypeError):
            _rename(claimed, path + ".unreadable")  # kept for a person to look at, never retried
            continue
        except BaseException:
            _rename(claimed, path)
            raise
        os.remove(claimed)
        delivered.append(run_id)
    return delivered


def _rename(source: str, target: str) -> bool:
    try:
        os.rename(source, target)
        return True
    except OSError:
        return False
