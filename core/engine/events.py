"""The race's records: the events a race emits as it runs and the results they add up to.

These cross processes (the worker stores them, the CLI prints them, bundles carry their fields),
so they are plain dataclasses in a module that imports no torch: a reader of events never pays
for, or needs, the trainer that makes them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from core.engine.compile_stats import CompileStats
from core.engine.reading import reading
from core.engine.spec import RunSpec
from core.engine.summary import Summary

VARIANTS = ("eager", "compiled")


@dataclass
class StepEvent:
    """One timed step of one variant. `step` counts from 1 within the variant and phase."""

    variant: str
    phase: str  # "train" | "eval"
    epoch: int
    step: int
    time_s: float
    loss: float
    samples: int


@dataclass
class EpochEvent:
    """An epoch boundary: wall times measured between device synchronizations."""

    variant: str
    epoch: int
    train_time_s: float
    eval_time_s: float | None


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
class CompileEvent:
    """A compile or recompile that happened during a step (its time is in that step's time)."""

    variant: str
    phase: str
    epoch: int
    step: int
    note: str  # "compiled forward", "recompile: <the guard that failed>", ...


@dataclass
class BusyEvent:
    """A stretch of one variant's timed train steps (first_step..last_step) during which the race's
    threads waited for a core `wait_share` of the time: the machine was busy (core.engine.noise)."""

    variant: str
    epoch: int
    first_step: int
    last_step: int
    wait_share: float


@dataclass
class ReplicateEvent:
    """A replicate process of the race landed: its result as the headline uses it
    (core.engine.replicates.ProcessResult.to_dict)."""

    process: dict[str, Any]


Event = StepEvent | EpochEvent | StatusEvent | StartEvent | CompileEvent | BusyEvent | ReplicateEvent
EventCallback = Callable[[Event], None]


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
    load: list[dict[str, Any]] = field(default_factory=list)  # per epoch: the machine's load (core.engine.noise)
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
