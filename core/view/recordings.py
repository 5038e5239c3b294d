"""The recordings shipped with the app (assets/recordings): one row each, what it shows and the race
it records, so `python -m core record NAME` makes it again, the same race every time.

A recording carries the load its machine was under (core.engine.environment.machine_load): a
recording made while other work shared a small CPU shows a compile many times slower than a quiet
machine does, so `record` waits for a quiet machine and refuses a busy one (BUSY_LOAD_PER_CORE)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.view.race_form import CPU_BREAK_EVEN_PRESET
from core.view.replay import BUSY_LOAD_PER_CORE


@dataclass(frozen=True)
class ShippedRecording:
    name: str  # the file's stem: its name in links (?replay=file:NAME)
    shows: str  # what a speaker plays it for
    params: dict[str, Any]  # the race, over RunSpec's defaults


SHIPPED = (
    ShippedRecording(  # recorded before races ran on one core, at the demo's size then (its date is in its file)
        "cpu-break-even-demo",
        "the CPU break-even demo as recorded on two cores (3 x 200 steps): compile pays for itself inside the run",
        {**CPU_BREAK_EVEN_PRESET, "steps_per_epoch": 200, "device": "cpu"},
    ),
    ShippedRecording(
        "cpu-compile-never-pays-off",
        "mlp, batch 64: compiled steps not clearly faster (the interval spans 1x), so nothing earns the compile back",
        {"model": "mlp", "batch_size": 64, "epochs": 2, "steps_per_epoch": 60, "device": "cpu"},
    ),
    ShippedRecording(
        "cpu-recompiles-varying-shapes",
        "small_cnn, a smaller last batch with dynamic=false: a recompile, marked with the guard that failed",
        {
            "model": "small_cnn",
            "batch_size": 48,
            "epochs": 3,
            "steps_per_epoch": 15,
            "dynamic": False,
            "shapes": "varying",
            "device": "cpu",
        },
    ),
)
BY_NAME = {r.name: r for r in SHIPPED}


def machine_busy(load: dict[str, Any] | None, share: float = BUSY_LOAD_PER_CORE) -> str | None:
    """Why a recording made now would mislead ('load 3.1 on 2 cores'), or None on a quiet machine:
    a 1-minute load above `share` of the cores."""
    if not load:
        return None
    one, cores = float(load["load_average"][0]), int(load.get("cpu_count") or 1)
    if one > share * cores:
        return f"load {one:.1f} on {cores} core{'s' if cores != 1 else ''}"
    return None
