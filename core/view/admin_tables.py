"""The admin page's tables: every run and every lane as rows of plain values (no owner tokens)."""

from __future__ import annotations

import time
from typing import Any

from core.runs.admin import Lane
from core.runs.identity import shown_owner
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
