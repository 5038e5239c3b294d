"""Sweeps: one model, one or two axes (the options table's sweep axes: batch size, precision,
compile mode, compile scope), a few values each; every point an ordinary race job grouped under a
sweep id.

Because the points are races, everything the queue does for a race holds for them unchanged: one
job per lane, host limits (each point is checked against them, and their number against the
queue's), faults (a failed point fails alone and the queue moves on), bundles (each point exports
as a run). A sweep is queued whole or not at all, and cancelled whole.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from typing import Any

from core.engine.spec import DeviceCaps, Problem, RunSpec, SpecError, sweep_axes
from core.runs import fleet, job_kinds, queue
from core.runs.limits import HostLimits, load_host_limits
from core.runs.run_files import remove_run_files
from core.runs.store import ACTIVE_STATES, Run, Store

# axis -> (what a person calls it, the values it may take; None: whole numbers, checked per point),
# from the options table's sweep column.
AXES: dict[str, tuple[str, tuple | None]] = {o.name: (o.label.lower(), o.choices) for o in sweep_axes()}
MAX_AXES = 2
MAX_VALUES = 8  # per axis
MAX_POINTS = 24  # 8 batch sizes x 3 modes, say: what fits a chart and an afternoon


@dataclass(frozen=True)
class Axis:
    name: str
    values: tuple

    @property
    def label(self) -> str:
        return AXES[self.name][0] if self.name in AXES else self.name


@dataclass(frozen=True)
class SweepSpec:
    """The race every point shares (`base`) and what varies: points are the product of the axes'
    values, the first axis outermost."""

    base: RunSpec
    axes: tuple[Axis, ...]

    def points(self) -> list[RunSpec]:
        names = [a.name for a in self.axes]
        return [
            dataclasses.replace(self.base, **dict(zip(names, combo)))
            for combo in itertools.product(*(a.values for a in self.axes))
        ]

    def axis(self, name: str) -> Axis | None:
        return next((a for a in self.axes if a.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {"base": self.base.to_dict(), "axes": [{"name": a.name, "values": list(a.values)} for a in self.axes]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SweepSpec:
        """From stored or given JSON; a shape that is not a sweep is a SpecError."""
        if not isinstance(data, dict) or not isinstance(data.get("axes"), list):
            raise SpecError([Problem("sweep", "must be an object with base and axes")])
        base = RunSpec.from_dict(data.get("base") or {})
        axes = []
        for axis in data["axes"]:
            if not isinstance(axis, dict) or not isinstance(axis.get("values"), list):
                raise SpecError([Problem("axes", "each axis needs a name and a list of values")])
            axes.append(Axis(str(axis.get("name")), tuple(axis["values"])))
        return cls(base, tuple(axes))


def point_label(spec: RunSpec, axes: tuple[Axis, ...]) -> str:
    """'batch size 256, precision amp-bf16': where a point sits in its sweep."""
    return ", ".join(f"{a.label} {getattr(spec, a.name)}" for a in axes)


def sweep_problems(sweep: SweepSpec, caps: DeviceCaps | None, limits: HostLimits) -> list[Problem]:
    """Every problem with the sweep's shape and with each of its points (as the queue would check
    each race), each naming the field; a problem shared by all points is said once."""
    p: list[Problem] = []
    if not 1 <= len(sweep.axes) <= MAX_AXES:
        p.append(Problem("axes", f"choose 1 or {MAX_AXES} axes to sweep (got {len(sweep.axes)})"))
    names = [a.name for a in sweep.axes]
    for name in sorted({n for n in names if names.count(n) > 1}):
        p.append(Problem("axes", f"{name} is chosen twice; choose each axis once"))
    for axis in sweep.axes:
        if axis.name not in AXES:
            p.append(Problem("axes", f"{axis.name!r} cannot be swept; allowed: {', '.join(AXES)}"))
            continue
        if len(axis.values) < 2:
            p.append(Problem(axis.name, f"give at least 2 {axis.label} values to sweep (one value is a race)"))
        if len(axis.values) > MAX_VALUES:
            p.append(Problem(axis.name, f"at most {MAX_VALUES} {axis.label} values (got {len(axis.values)})"))
        repeated = [v for i, v in enumerate(axis.values) if v in axis.values[:i]]
        if repeated:
            p.append(Problem(axis.name, f"{axis.label} {repeated[0]} is given twice"))
    cap = min(MAX_POINTS, limits.max_sweep_points) if limits.max_sweep_points is not None else MAX_POINTS
    if p:
        return p
    points = sweep.points()
    if len(points) > cap:
        who = "this host allows" if cap != MAX_POINTS else "a sweep has"
        return [Problem("points", f"{who} at most {cap} points (got {len(points)}: fewer values, or one axis)")]
    seen: dict[tuple[str, str], list[str]] = {}
    for point in points:
        for problem in job_kinds.JOB_KINDS["race"].check(point.to_dict(), caps, limits):
            seen.setdefault((problem.field, problem.message), []).append(point_label(point, sweep.axes))
    for (field, message), where in seen.items():
        if len(where) < len(points) and field not in names:  # the message alone would not say which point
            message += f" (at {'; '.join(where)})"
        p.append(Problem(field, message))
    return p


def enqueue_sweep(
    store: Store,
    sweep: SweepSpec,
    owner: str,
    limits: HostLimits | None = None,
    caps: DeviceCaps | None = None,
    address: str | None = None,
) -> int:
    """Validate and queue every point in one transaction; returns the sweep id. Raises SpecError
    (a bad point, over a host limit) or JobError (no room in the queue) and then queues nothing.
    `address`: as for queue.enqueue, where the host limits visitors by client address."""
    limits = limits or load_host_limits()
    caps = caps if caps is not None else fleet.known_caps(store)
    problems = sweep_problems(sweep, caps, limits)
    if problems:
        raise SpecError(problems)
    if caps is None and sweep.base.device == "auto":
        raise queue.JobError("still finding out which device this machine has: try again in a few seconds")
    points = sweep.points()
    with store.transaction(immediate=True) as c:
        queue.check_room(
            c, owner, limits, adding=len(points), what=f"this sweep's {len(points)} points", address=address
        )
        sweep_id = store.insert_sweep(c, owner, sweep.to_dict())
        for point in points:
            row = queue.job_row("race", point.to_dict(), owner, caps, limits, sweep_id=sweep_id, client=address)
            store._insert_run(c, row)
    queue.tick(store, prewarm=True)
    return sweep_id


def _owned_sweep(store: Store, sweep_id: int, owner: str, action: str):
    sweep = store.get_sweep(sweep_id)
    if sweep is None:
        raise queue.JobError(f"there is no sweep {sweep_id}")
    if sweep.owner != owner:
        raise queue.JobError(f"sweep {sweep_id} belongs to someone else: you can {action} only your own sweeps")
    return sweep


def cancel_sweep(store: Store, sweep_id: int, owner: str) -> int:
    """Cancel every point of `owner`'s sweep that has not finished; returns how many. The waiting
    points go first, so stopping the running one cannot start the next."""
    _owned_sweep(store, sweep_id, owner, "cancel")
    cancelled = 0
    with store.transaction(immediate=True) as c:
        for run in store.sweep_runs(sweep_id):
            if run.status == "queued" and store.finish_run(run.id, "cancelled", conn=c, phase="cancelled"):
                cancelled += 1
    for run in store.sweep_runs(sweep_id):
        if run.status in (*ACTIVE_STATES, "queued"):
            cancelled += queue.cancel(store, run.id, run.owner) == "cancelled"
    return cancelled


def delete_sweep(store: Store, sweep_id: int, owner: str) -> None:
    """Delete `owner`'s sweep with its points and their events (cancelling what still runs)."""
    _owned_sweep(store, sweep_id, owner, "delete")
    cancel_sweep(store, sweep_id, owner)
    points = [run.id for run in store.sweep_runs(sweep_id)]
    store.delete_sweep(sweep_id)
    remove_run_files(store.path, points)  # their traces and their workers' logs


def stored_sweep(store: Store, sweep_id: int) -> tuple[SweepSpec, list[Run]] | None:
    """A stored sweep's definition and its points (None if there is no such sweep, or its
    definition is unreadable)."""
    row = store.get_sweep(sweep_id)
    if row is None:
        return None
    try:
        spec = SweepSpec.from_dict(row.params)
    except (SpecError, TypeError):
        return None
    return spec, store.sweep_runs(sweep_id)


def sweep_finished(runs: list[Run]) -> bool:
    return bool(runs) and all(r.finished for r in runs)


def sweep_running(runs: list[Run]) -> bool:
    """Whether a view of the sweep should keep polling: some point is not final yet (a sweep
    whose points were all deleted has nothing left to wait for)."""
    return any(not r.finished for r in runs)


def sweep_progress(runs: list[Run]) -> float:
    """0..1 over all points (a running point counts by its own progress)."""
    if not runs:
        return 0.0
    return sum(1.0 if r.finished else (r.progress if r.status in ACTIVE_STATES else 0.0) for r in runs) / len(runs)


def whole_numbers(name: str) -> bool:
    """Whether the axis takes whole numbers (typed, checked per point) rather than choices."""
    return name in AXES and AXES[name][1] is None


def axis_from_text(name: str, text: str) -> Axis:
    """An axis from comma-separated values ('64, 256, 1024'), as the CLI and the form take them;
    a value of a whole-number axis (batch sizes) that is not a whole number is a SpecError naming it."""
    raw = [v.strip() for v in str(text).split(",") if v.strip()]
    if not whole_numbers(name):
        return Axis(name, tuple(raw))
    values = []
    for value in raw:
        try:
            values.append(int(value))
        except ValueError:
            raise SpecError(
                [Problem(name, f"{value!r} is not a whole number ({AXES[name][0]}s: e.g. 64,256,1024)")]
            ) from None
    return Axis(name, tuple(values))
