"""The admin page's tables: every run and every lane as rows of plain values (no owner tokens), and
the data folder's use and what was freed from it, in words."""

from __future__ import annotations

import time
from typing import Any

from core.engine import words
from core.runs.admin import Lane, Purged
from core.runs.disk_budget import DiskUse, freed_words
from core.runs.identity import shown_owner
from core.runs.run_files import Freed
from core.runs.store import Run


def _when(t: float | None) -> str:
    return "" if t is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(t))


def run_rows(runs: list[Run]) -> list[dict[str, Any]]:
    """One row per run of any kind; owners cut so a screenshot gives nobody a token."""
    return [
        {
            "id": run.id,
            "kind": run.kind,
            "status": run.status,
            "owner": shown_owner(run.owner),
            "lane": run.device_key,
            "what": str((run.params or {}).get("model") or (run.params or {}).get("demo") or ""),
            "created": _when(run.created_at),
            "finished": _when(run.finished_at),
            "state": str(run.error or run.phase or ""),
        }
        for run in runs
    ]


def lane_rows(lanes: list[Lane]) -> list[dict[str, Any]]:
    """One row per device lane: its running job, its worker, how many wait."""
    rows = []
    for lane in lanes:
        run = lane.running
        worker = (
            "-"
            if run is None
            else ("on another host" if lane.worker_alive is None else ("alive" if lane.worker_alive else "gone"))
        )
        rows.append(
            {
                "lane": lane.device_key,
                "running": "" if run is None else f"#{run.id} {run.kind} {(run.params or {}).get('model', '')}".strip(),
                "phase": "" if run is None else str(run.phase),
                "worker pid": None if run is None else run.pid,
                "host": "" if run is None else str(run.host or ""),
                "worker": worker,
                "heartbeat (s ago)": None if lane.heartbeat_age_s is None else round(lane.heartbeat_age_s, 1),
                "waiting": lane.waiting,
            }
        )
    return rows


def disk_line(use: DiskUse) -> str:
    """'The data folder holds 1.2 GiB of a 2.0 GiB budget: the store 40 MiB, runs' files 900 MiB, ...'."""
    budget = "(no disk budget)" if use.budget is None else f"of a {words.bytes_(use.budget)} budget"
    over = " (over: the next job's end frees files)" if use.over else ""
    return (
        f"The data folder holds {words.bytes_(use.total)} {budget}{over}: the store {words.bytes_(use.store)}, "
        f"runs' traces and logs {words.bytes_(use.run_files)}, the warm Inductor cache {words.bytes_(use.warm_cache)}."
    )


def last_freed_line(last: tuple[float, str, Freed] | None) -> str | None:
    """When files were last freed, why and what; None when never."""
    if last is None:
        return None
    at, why, freed = last
    return f"Last {_when(at)}, for {why}: {freed_words(freed)}."


def freed_line(freed: Freed) -> str:
    """What freeing to the budget did, as the page says it."""
    if not freed.files:
        return "Nothing to free: the data folder is within its budget."
    said = freed_words(freed)
    return f"{said[:1].upper()}{said[1:]}."


def purge_line(purged: Purged) -> str:
    freed = f"; {freed_words(purged.freed)}" if purged.freed.files else "; no files of theirs were left"
    return f"Deleted {words.count(purged.runs, 'run')} and their events{freed}."
