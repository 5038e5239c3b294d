"""What the Sweep page's form needs, as pure functions: defaults sized for the device, the values
an axis may take here, the sweep the form describes, and a rough duration.

The CPU default is a 4-point batch-size sweep of pointwise_mlp sized to finish in a few minutes
on a small CPU (each point is a race: a worker start, a cold compile, both variants' steps); a host's
limits narrow it (fewer and smaller batch sizes, an allowed model) so that it can be launched there.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from core.engine import words
from core.engine.options import Option
from core.engine.race_estimates import estimate_race, estimate_seconds
from core.engine.spec import OPTIONS, DeviceCaps, RunSpec, SpecError, on_form
from core.runs.limits import HostLimits
from core.runs.sweeps import AXES, MAX_POINTS, Axis, SweepSpec, axis_from_text, point_label, whole_numbers
from core.view.race_form import CHOICES, unavailable_options, within_limits

NO_AXIS = "none"
CPU_BATCH_SIZES = (64, 256, 1024, 4096)
GPU_BATCH_SIZES = (32, 64, 128, 256)
MIN_VALUES = 2  # an axis needs two values (core.runs.sweeps.sweep_problems)


def default_sweep(caps: DeviceCaps | None, limits: HostLimits | None = None) -> SweepSpec:
    """A first sweep: batch size on a log-2 axis, small on a CPU, the tutorial's model on a GPU;
    moved within the host's limits (its models, sizes and steps: race_form.within_limits; its batch
    sizes and how many points a visitor may queue: `batch_sizes`), so a first visit is not refused."""
    if caps is not None and caps.cuda:
        modern = caps.compute_capability is not None and caps.compute_capability >= (8, 0) and caps.cuda_bf16
        base = RunSpec(
            model="resnet50",
            batch_size=GPU_BATCH_SIZES[0],
            precision="amp-bf16" if modern else "amp-fp16",
            epochs=2,
            steps_per_epoch=50,
            device="cuda",
        )
    else:
        base = RunSpec(
            model="pointwise_mlp", batch_size=CPU_BATCH_SIZES[0], epochs=2, steps_per_epoch=100, device="cpu"
        )
    base = within_limits(base, limits)
    values = batch_sizes(caps, limits)
    return SweepSpec(dataclasses.replace(base, batch_size=values[0]), (Axis("batch_size", values),))


def point_room(limits: HostLimits | None) -> int:
    """How many points a sweep may have here: the sweep's own cap, the host's, and how many jobs one
    visitor may have queued (a sweep queues every point at once: core.runs.queue.check_room)."""
    if limits is None:
        return MAX_POINTS
    counts = (limits.max_sweep_points, limits.max_queued_per_owner, limits.max_queue_length)
    return max(MIN_VALUES, min([MAX_POINTS, *(n for n in counts if n is not None)]))


def batch_sizes(caps: DeviceCaps | None, limits: HostLimits | None = None) -> tuple[int, ...]:
    """The default batch sizes of a batch-size axis: the device's, those within the host's largest
    batch (that largest itself and its halves where fewer than two are), at most as many as a visitor
    may queue (the smallest and the largest kept, the rest spread between)."""
    values = GPU_BATCH_SIZES if caps is not None and caps.cuda else CPU_BATCH_SIZES
    top = limits.max_batch_size if limits is not None else None
    if top is not None:
        values = tuple(v for v in values if v <= top)
        if len(values) < MIN_VALUES:
            values = tuple(sorted({max(1, top >> k) for k in range(len(CPU_BATCH_SIZES))}))
    room = point_room(limits)
    if len(values) > room:
        step = (len(values) - 1) / (room - 1)
        values = tuple(values[round(i * step)] for i in range(room))
    return values


def base_options() -> list[Option]:
    """The base race's options the form shows, in the Race form's order (the options table's
    sweep_form column)."""
    return [o for o in on_form() if o.sweep_form]


def default_values(axis: str, caps: DeviceCaps | None, base: RunSpec, limits: HostLimits | None = None) -> tuple:
    """What a newly chosen axis starts with: every value this device can run (batch sizes: the defaults)."""
    if axis == "batch_size":
        return batch_sizes(caps, limits)
    if whole_numbers(axis):
        return ()  # typed by the visitor
    return axis_options(axis, caps, base, limits)


def axis_options(axis: str, caps: DeviceCaps | None, base: RunSpec, limits: HostLimits | None = None) -> tuple:
    """The values of a categorical axis this device (and host) can run with the rest of `base`."""
    blocked = unavailable_options(base, axis, caps, limits)
    return tuple(v for v in CHOICES[axis] if v not in blocked)


def axis_choices(other: str | None = None) -> list[str]:
    """Axes the form offers (the second axis cannot repeat the first)."""
    return [name for name in AXES if name != other]


def form_sweep(state: Any) -> SweepSpec:
    """The sweep the form describes: `sweep_<field>` entries of a mapping (the page's session
    state) over the RunSpec defaults, and `sweep_axis1/2` with `sweep_values1/2`."""
    values = {}
    for f in dataclasses.fields(RunSpec):
        key = f"sweep_{f.name}"
        if key in state:
            values[f.name] = state[key]
    for name in (o.name for o in OPTIONS.values() if o.type is int):
        if isinstance(values.get(name), float) and values[name].is_integer():
            values[name] = int(values[name])
    axes = []
    for i in (1, 2):
        name = state.get(f"sweep_axis{i}", NO_AXIS)
        if name and name != NO_AXIS:
            axes.append(Axis(name, tuple(state.get(f"sweep_values{i}") or ())))
    return SweepSpec(RunSpec(**values), tuple(axes))


def sweep_to_state(sweep: SweepSpec) -> dict[str, Any]:
    """The form's session-state entries for `sweep` (the inverse of form_sweep)."""
    out = {f"sweep_{k}": v for k, v in sweep.base.to_dict().items()}
    for i in (1, 2):
        axis = sweep.axes[i - 1] if len(sweep.axes) >= i else None
        out[f"sweep_axis{i}"] = axis.name if axis else NO_AXIS
        out[f"sweep_values{i}"] = list(axis.values) if axis else []
        out[f"sweep_text{i}"] = ", ".join(map(str, axis.values)) if axis else ""  # batch sizes, as typed
    return out


def estimate_sweep_seconds(sweep: SweepSpec, caps: DeviceCaps | None) -> tuple[float, float]:
    """A rough (low, high) for the whole sweep: its points one after another."""
    low = high = 0.0
    for point in sweep.points():
        lo, hi = estimate_seconds(point, caps)
        low, high = low + lo, high + hi
    return low, high


def time_limit_points(sweep: SweepSpec, caps: DeviceCaps | None, limits: HostLimits | None) -> str | None:
    """The sweep's points whose rough estimate (the zoo's figures, as the sweep's duration) is past
    the host's job time limit even at its low end, said once beside the duration (the Sweep page,
    `sweep`); None where none is, or there is no limit. Each point is a job of its own."""
    limit = limits.job_time_limit_s if limits is not None else None
    if limit is None:
        return None
    points = sweep.points()
    past = [(point, e) for point in points if (e := estimate_race(point, caps)) is not None and e.low_s > limit]
    if not past:
        return None
    shown = "; ".join(f"{point_label(p, sweep.axes)}: at least {words.duration(e.low_s)}" for p, e in past[:3])
    return (
        f"Past this host's time limit: {len(past)} of {len(points)} points would take longer than "
        f"{words.duration(limit)} ({shown}{'; ...' if len(past) > 3 else ''}); each is stopped there, ending "
        "failed with what it measured by then."
    )


def tidy_axes(state: Any, caps: DeviceCaps | None, limits: HostLimits | None = None) -> dict[int, str]:
    """Make the form's axes consistent before its widgets draw (state: the page's session state):
    the second axis never repeats the first, batch sizes are read from their text, categorical
    values keep only what this device can run. Returns {axis number: why its text does not parse}."""
    if state.get("sweep_axis2") == state.get("sweep_axis1"):
        state.update(sweep_axis2=NO_AXIS, sweep_values2=[], sweep_text2="")
    errors = {}
    for i in (1, 2):
        name = state.get(f"sweep_axis{i}", NO_AXIS)
        if whole_numbers(name):
            try:
                state[f"sweep_values{i}"] = list(axis_from_text(name, state.get(f"sweep_text{i}", "")).values)
            except SpecError as exc:
                state[f"sweep_values{i}"] = []
                errors[i] = str(exc.problems[0])
        elif name != NO_AXIS:
            allowed = axis_options(name, caps, form_sweep(state).base, limits)
            state[f"sweep_values{i}"] = [v for v in state.get(f"sweep_values{i}", []) if v in allowed]
    return errors


def reset_axis_values(state: Any, i: int, caps: DeviceCaps | None, limits: HostLimits | None = None) -> None:
    """A newly chosen axis starts with its default values (every value this device can run)."""
    name = state[f"sweep_axis{i}"]
    values = [] if name == NO_AXIS else list(default_values(name, caps, form_sweep(state).base, limits))
    state[f"sweep_values{i}"] = values
    state[f"sweep_text{i}"] = ", ".join(map(str, values))
