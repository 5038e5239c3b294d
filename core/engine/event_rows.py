"""A race's events as the store keeps them: one row shape per event kind, declared once.

The worker writes rows through `to_row`, the readers (analysis.summarize_events, a bundle's
importer) read the rows whose fields are packed (a busy stretch's last step in its note, a
replicate's result as JSON) back through `from_row`, and a bundle's importer checks each row against
the same declaration (`ROW_KINDS`): what epochs a kind's rows may carry, and so which events a race can
record. A replicate process belongs to the whole race, not to an epoch, so its rows carry epoch 0;
when the importer knew only per-epoch kinds, every race with replicates failed to replay or import.
No torch: readers of events never pay for the trainer.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from core.engine.events import BusyEvent, CompileEvent, EpochEvent, ReplicateEvent, StepEvent


@dataclass(frozen=True)
class RowKind:
    """One stored event kind: the trainer's event it records, and whether its rows belong to an
    epoch of the race (epoch 1..epochs) or to the race as a whole (epoch 0)."""

    name: str
    event: type
    in_epoch: bool
    what: str  # for a message: what one row of this kind is

    def epochs(self, race_epochs: int) -> tuple[int, int]:
        """The epochs a row of this kind may carry in a race of `race_epochs` epochs."""
        return (1, race_epochs) if self.in_epoch else (0, 0)


ROW_KINDS: dict[str, RowKind] = {
    k.name: k
    for k in (
        RowKind("step", StepEvent, True, "a timed step"),
        RowKind("epoch", EpochEvent, True, "an epoch's wall time"),
        RowKind("compile", CompileEvent, True, "a compile or recompile"),
        RowKind("busy", BusyEvent, True, "a stretch of steps a busy machine touched"),
        RowKind("replicate", ReplicateEvent, False, "a replicate process's result"),
    )
}
KINDS = tuple(ROW_KINDS)


def to_row(event: Any, now: float) -> dict[str, Any] | None:
    """The stored row of a trainer event, or None for an event that is not stored as a row
    (status and start events update the run itself)."""
    if isinstance(event, StepEvent):
        return {"kind": "step", **dataclasses.asdict(event), "recorded_at": now}
    if isinstance(event, EpochEvent):
        return {
            "kind": "epoch",
            "variant": event.variant,
            "phase": "train",
            "epoch": event.epoch,
            "step": 0,
            "time_s": event.train_time_s,
            "eval_time_s": event.eval_time_s,
            "recorded_at": now,
        }
    if isinstance(event, CompileEvent):
        return {
            "kind": "compile",
            "variant": event.variant,
            "phase": event.phase,
            "epoch": event.epoch,
            "step": event.step,
            "time_s": 0.0,
            "note": event.note,
            "recorded_at": now,
        }
    if isinstance(event, BusyEvent):  # its first step, its wait share as time_s, its last step as note
        return {
            "kind": "busy",
            "variant": event.variant,
            "phase": "train",
            "epoch": event.epoch,
            "step": event.first_step,
            "time_s": event.wait_share,
            "note": str(event.last_step),
            "recorded_at": now,
        }
    if isinstance(event, ReplicateEvent):  # its number as step, its wall time, its result as note
        process = event.process
        return {
            "kind": "replicate",
            "variant": "compiled",
            "phase": "train",
            "epoch": 0,
            "step": int(process["number"]),
            "time_s": float(process.get("wall_s") or 0.0),
            "note": json.dumps(process, default=float),
            "recorded_at": now,
        }
    return None


def from_row(row: dict[str, Any]) -> Any:
    """The trainer event a stored row records (to_row's inverse), or None where the row is not
    one this app wrote (an unknown kind, a note that does not parse): readers skip such a row."""
    kind = row.get("kind")
    try:
        if kind == "step":
            return StepEvent(
                row["variant"], row["phase"], int(row["epoch"]), int(row["step"]), float(row["time_s"]),
                row.get("loss"), row.get("samples"),
            )  # fmt: skip
        if kind == "epoch":
            return EpochEvent(row["variant"], int(row["epoch"]), float(row["time_s"]), row.get("eval_time_s"))
        if kind == "compile":
            return CompileEvent(row["variant"], row["phase"], int(row["epoch"]), int(row["step"]), row.get("note"))
        if kind == "busy":
            first = int(row["step"])
            last = int(_json(row.get("note")) or first)
            return BusyEvent(row["variant"], int(row["epoch"]), first, last, float(row.get("time_s") or 0.0))
        if kind == "replicate":
            process = _json(row.get("note"))
            return ReplicateEvent(process) if isinstance(process, dict) else None
    except (KeyError, TypeError, ValueError):
        return None
    return None


def _json(text: Any) -> Any:
    """A row's note as the JSON it holds (a replicate's result, a busy stretch's last step)."""
    if not isinstance(text, str):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None
