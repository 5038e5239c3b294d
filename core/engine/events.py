"""A race's events: what a race emits as it runs, the rows the store keeps of them, and the
results they add up to.

Each stored event kind declares its row and reads it back in one place, its class's `to_row` and
`from_row` (the codec): the worker writes rows through `to_row`, and every reader (the analysis,
the live view's store reader, a bundle's importer and its checks) reads them back through
`from_row`, or by ROW_KINDS where it only needs to know a row's kind. A row's fields are the
store's columns (core.runs.store.records): where an event's field has no column of its own it is
packed, and only its kind's codec knows how (a busy stretch's wait share in `time_s` and its last
step in `note`, a replicate's result as JSON in `note`). A replicate process belongs to the whole
race, not to an epoch, so its rows carry epoch 0 (`in_epoch`).

These cross processes (the worker stores them, the CLI prints them, bundles carry their rows), so
they are plain dataclasses in a module that imports no torch: a reader of events never pays for,
or needs, the trainer that makes them.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from core.engine.compile_stats import CompileStats
from core.engine.intervals import ProcessResult
from core.engine.reading import reading
from core.engine.spec import RunSpec
from core.engine.summary import Summary

VARIANTS = ("eager", "compiled")


class Stored:
    """What a stored event kind declares beside its fields: its row's `kind`, whether its rows belong
    to an epoch of the race (epoch 1..epochs) or to the race as a whole (epoch 0), what one row is (for
    a message), and its row both ways. `from_row` raises KeyError, TypeError or ValueError on a row
    this app did not write; the module's from_row turns that into None."""

    kind: ClassVar[str]
    in_epoch: ClassVar[bool] = True
    what: ClassVar[str]
    note_is: ClassVar[str] = ""  # what its note must hold, where it packs a field there

    @classmethod
    def epochs(cls, race_epochs: int) -> tuple[int, int]:
        """The epochs a row of this kind may carry in a race of `race_epochs` epochs."""
        return (1, race_epochs) if cls.in_epoch else (0, 0)

    def to_row(self, now: float) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Stored:
        raise NotImplementedError


@dataclass
class StepEvent(Stored):
    """One timed step of one variant. `step` counts from 1 within the variant and phase. Its row is
    its fields as they are (the live view reads many of them: core.view.run_screen.shared_board)."""

    kind: ClassVar[str] = "step"
    what: ClassVar[str] = "a timed step"

    variant: str
    phase: str  # "train" | "eval"
    epoch: int
    step: int
    time_s: float
    loss: float
    samples: int

    def to_row(self, now: float) -> dict[str, Any]:
        return {"kind": "step", **dataclasses.asdict(self), "recorded_at": now}

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> StepEvent:
        return cls(
            row["variant"], row["phase"], int(row["epoch"]), int(row["step"]), float(row["time_s"]),
            row.get("loss"), row.get("samples"),
        )  # fmt: skip


@dataclass
class EpochEvent(Stored):
    """An epoch boundary: wall times measured between device synchronizations. Its row: the train
    time as `time_s`, at step 0."""

    kind: ClassVar[str] = "epoch"
    what: ClassVar[str] = "an epoch's wall time"

    variant: str
    epoch: int
    train_time_s: float
    eval_time_s: float | None

    def to_row(self, now: float) -> dict[str, Any]:
        return {
            "kind": "epoch", "variant": self.variant, "phase": "train", "epoch": self.epoch, "step": 0,
            "time_s": self.train_time_s, "eval_time_s": self.eval_time_s, "recorded_at": now,
        }  # fmt: skip

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> EpochEvent:
        return cls(row["variant"], int(row["epoch"]), float(row["time_s"]), row.get("eval_time_s"))


@dataclass
class StatusEvent:
    """Where the race is: starting, compiling, epoch k/n, done, failed."""

    variant: str
    # "starting" | "compiling" | "compile_phase" | "training" | "evaluating" | "compile_skipped"
    # | "compile_failed" | "done" | "failed"
    state: str
    epoch: int
    epochs: int
    message: str = ""


@dataclass
class StartEvent:
    """The race begins: what it runs on, with the precision flags actually in force."""

    environment: dict[str, Any]


@dataclass
class CompileEvent(Stored):
    """A compile or recompile that happened during a step (its time is in that step's time, so its
    row's `time_s` is 0)."""

    kind: ClassVar[str] = "compile"
    what: ClassVar[str] = "a compile or recompile"

    variant: str
    phase: str
    epoch: int
    step: int
    note: str  # "compiled forward", "recompile: <the guard that failed>", ...

    def to_row(self, now: float) -> dict[str, Any]:
        return {
            "kind": "compile", "variant": self.variant, "phase": self.phase, "epoch": self.epoch,
            "step": self.step, "time_s": 0.0, "note": self.note, "recorded_at": now,
        }  # fmt: skip

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> CompileEvent:
        return cls(row["variant"], row["phase"], int(row["epoch"]), int(row["step"]), row.get("note"))


@dataclass
class BusyEvent(Stored):
    """A stretch of one variant's timed train steps (first_step..last_step) during which the race's
    threads waited for a core `wait_share` of the time: the machine was busy (core.engine.intervals).
    Its row: the first step as `step`, the wait share as `time_s`, the last step (digits) as `note`."""

    kind: ClassVar[str] = "busy"
    what: ClassVar[str] = "a stretch of steps a busy machine touched"
    note_is: ClassVar[str] = "of a busy stretch must be its last step"

    variant: str
    epoch: int
    first_step: int
    last_step: int
    wait_share: float

    def to_row(self, now: float) -> dict[str, Any]:
        return {
            "kind": "busy", "variant": self.variant, "phase": "train", "epoch": self.epoch,
            "step": self.first_step, "time_s": self.wait_share, "note": str(self.last_step), "recorded_at": now,
        }  # fmt: skip

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> BusyEvent:
        note = row.get("note")
        if not (isinstance(note, str) and note.isascii() and note.isdecimal()):
            raise ValueError("a busy stretch's note is its last step")
        return cls(row["variant"], int(row["epoch"]), int(row["step"]), int(note), float(row.get("time_s") or 0.0))


@dataclass
class ReplicateEvent(Stored):
    """A replicate process of the race landed: its result as the headline uses it
    (core.engine.intervals.ProcessResult.to_dict). Its row belongs to the race (epoch 0): its
    number as `step`, its wall time as `time_s`, its result as JSON in `note`; read back, the
    result is what ProcessResult keeps of it, and a row that holds no replicate's result (a
    process numbered 2 or more: the first is the race's own) is none."""

    kind: ClassVar[str] = "replicate"
    in_epoch: ClassVar[bool] = False
    what: ClassVar[str] = "a replicate process's result"
    note_is: ClassVar[str] = "of a replicate must be its result"

    process: dict[str, Any]

    def to_row(self, now: float) -> dict[str, Any]:
        return {
            "kind": "replicate", "variant": "compiled", "phase": "train", "epoch": 0,
            "step": int(self.process["number"]), "time_s": float(self.process.get("wall_s") or 0.0),
            "note": json.dumps(self.process, default=float), "recorded_at": now,
        }  # fmt: skip

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> ReplicateEvent:
        note = row.get("note")
        process = ProcessResult.from_dict(json.loads(note)) if isinstance(note, str) else None
        if process is None or process.number < 2:
            raise ValueError("a replicate's note is its result")
        return cls(process.to_dict())


Event = StepEvent | EpochEvent | StatusEvent | StartEvent | CompileEvent | BusyEvent | ReplicateEvent
EventCallback = Callable[[Event], None]

# kind -> the event class whose rows the store keeps (status and start events update the run itself).
ROW_KINDS: dict[str, type[Stored]] = {
    c.kind: c for c in (StepEvent, EpochEvent, CompileEvent, BusyEvent, ReplicateEvent)
}
KINDS = tuple(ROW_KINDS)


def to_row(event: Any, now: float) -> dict[str, Any] | None:
    """The stored row of a trainer event recorded at `now`, or None for an event that is not stored
    as a row (status and start events update the run itself)."""
    return event.to_row(now) if isinstance(event, Stored) else None


def from_row(row: dict[str, Any]) -> Stored | None:
    """The event a stored row records (to_row's inverse), or None where the row is not one this
    app wrote (an unknown kind, a missing field, a note that does not parse): readers skip it."""
    kind = ROW_KINDS.get(row.get("kind"))
    try:
        return kind.from_row(row) if kind is not None else None
    except (KeyError, TypeError, ValueError):
        return None


@dataclass
class VariantResult:
    """What one variant measured: its steps, epochs and compiles, memory peaks, profile and error."""

    name: str
    steps: list[StepEvent] = field(default_factory=list)
    epochs: list[EpochEvent] = field(default_factory=list)
    peak_memory_bytes: int | None = None
    peak_reserved_bytes: int | None = None  # CUDA: the caching allocator's peak, eager's leftover cache included
    reserved_at_start_bytes: int | None = None  # CUDA: reserved when the variant's memory count started
    reserved_growth_bytes: int | None = None  # CUDA: what the variant added to the cache (CUDA-graph pools live here)
    memory_kind: str = ""
    error: str | None = None
    compiles: list[CompileEvent] = field(default_factory=list)
    profile: dict[str, Any] | None = None  # per-step anatomy, profiled after the timed epochs
    load: list[dict[str, Any]] = field(default_factory=list)  # per epoch: the machine's load (core.engine.intervals)
    busy_steps: list[int] = field(default_factory=list)  # train steps timed while the machine was busy

    def times(self, phase: str = "train") -> list[float]:
        return [s.time_s for s in self.steps if s.phase == phase]

    @property
    def final_loss(self) -> float | None:
        train = [s.loss for s in self.steps if s.phase == "train"]
        return train[-1] if train else None


@dataclass
class RaceResult:
    """Everything measured, including a partial run that stopped on an error."""

    spec: RunSpec
    environment: dict[str, Any]
    eager: VariantResult
    compiled: VariantResult
    compile_stats: CompileStats
    summary: Summary
    error: str | None = None
    replicates: list[dict[str, Any]] = field(default_factory=list)  # each replicate's steps, as measured

    @property
    def status(self) -> str:
        return "failed" if self.error else "done"

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "error": self.error,
            "spec": self.spec.to_dict(),
            "environment": self.environment,
            "summary": self.summary.to_dict(),
            "reading": reading(self.summary),  # derived, for a reader of the JSON: never stored
            "compile": self.compile_stats.to_dict(),
            "variants": {v.name: _variant_dict(v) for v in (self.eager, self.compiled)},
            "replicates": self.replicates,
        }


def _variant_dict(v: VariantResult) -> dict[str, Any]:
    return {
        "peak_memory_bytes": v.peak_memory_bytes,
        "peak_reserved_bytes": v.peak_reserved_bytes,
        "reserved_growth_bytes": v.reserved_growth_bytes,
        "memory_kind": v.memory_kind,
        "final_loss": v.final_loss,
        "error": v.error,
        "profile": v.profile,
        "compiles": [dataclasses.asdict(c) for c in v.compiles],
        "epochs": [dataclasses.asdict(e) for e in v.epochs],
        "steps": [dataclasses.asdict(s) for s in v.steps],
    }
