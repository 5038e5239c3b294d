"""What the Sweep page and `python -m core sweep` show: one row per point, the regime reading, the
backend ladder's reading, whole against regional compile side by side, and the training plan. Pure: stored runs in, frames
and text out (no Streamlit, no torch).

Only a point that finished (`done`) with compiled code counts as a finding; a failed, cancelled
or still running point shows its state and error, never its partial numbers.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import pandas as pd

from core.engine import words
from core.engine.ladder import Rung, ladder_reading
from core.engine.race_estimates import estimate_race, estimate_seconds
from core.engine.spec import DeviceCaps, Option, RunSpec, SpecError, on_form
from core.engine.summary import PROJECTED, REACHED, Summary
from core.runs.limits import HostLimits
from core.runs.store import ACTIVE_STATES, Run, Store
from core.runs.sweeps import AXES, MAX_POINTS, Axis, SweepSpec, axis_from_text, point_label, whole_numbers
from core.view import compare
from core.view.answers import sweep_next
from core.view.host_tables import compile_skipped, describe
from core.view.race_form import CHOICES, field_values, unavailable_options, within_limits
from core.view.safe_text import terminal_text

FRAME_COLUMNS = [
    "point",
    "run_id",
    "label",
    "status",
    "state",
    "x",
    "series",
    "measured",
    "speedup",
    "ci_low",
    "ci_high",
    "verdict",
    "compile_time_s",
    "compile_cost",
    "break_even_step",
    "break_even_at",
    "break_even_kind",
    "break_even",
    "break_even_short",
    "eager_step_s",
    "compiled_step_s",
    "eager_samples_per_s",
    "compiled_samples_per_s",
    "compile_skipped",
    "error",
    "device_type",
]
OBSERVED, EXTRAPOLATED = "within the run", "at the steady rates"


def chart_axes(sweep: SweepSpec) -> tuple[str, str | None]:
    """(x axis, series axis): batch size goes along x whenever it is swept (on a log-2 scale)."""
    names = [a.name for a in sweep.axes]
    x = "batch_size" if "batch_size" in names else names[0]
    others = [n for n in names if n != x]
    return x, (others[0] if others else None)


def sweep_frame(sweep: SweepSpec, runs: list[Run], store: Store | None = None) -> pd.DataFrame:
    """One row per point, in queue order. `measured` marks the rows whose figures are findings:
    done, with a speedup, and compiled code actually ran. `state` needs the store (queue position)."""
    x_axis, series_axis = chart_axes(sweep)
    rows = []
    for i, run in enumerate(runs, start=1):
        params = run.params or {}
        # the verdict and break-even as the point's headline interval gives them (Summary.headline)
        s = Summary.of(run.summary if run.status == "done" else None)
        skipped = s.compile_skipped or compile_skipped(run)
        measured = run.status == "done" and s.steady_state_speedup is not None and s.compiled and not skipped
        ci = s.speedup_ci95 or (math.nan, math.nan)
        observed, extrapolated = s.break_even_step, s.projected_position  # the one projection rule
        kind = {REACHED: OBSERVED, PROJECTED: EXTRAPOLATED}.get(s.break_even)
        rows.append(
            {
                "point": i,
                "run_id": run.id,
                "label": _label(params, sweep),
                "status": run.status,
                "state": describe(store, run) if store is not None else run.status,
                "x": params.get(x_axis),
                "series": str(params.get(series_axis, "")) if series_axis else "",
                "measured": measured,
                "speedup": s.steady_state_speedup if measured else math.nan,
                "ci_low": ci[0] if measured else math.nan,
                "ci_high": ci[1] if measured else math.nan,
                "verdict": compare.verdict(s) if measured else None,
                "compile_time_s": _num(s.compile_time_s) if measured else math.nan,
                "compile_cost": words.compile_cost(s) if measured else None,  # or too small to measure
                "break_even_step": _num(observed) if measured else math.nan,
                "break_even_at": _num(observed if observed is not None else extrapolated) if measured else math.nan,
                "break_even_kind": kind if measured else None,
                # The words every surface says (the table's cell: short).
                "break_even": words.break_even(s) if measured else None,
                "break_even_short": words.break_even(s, short=True) if measured else None,
                "eager_step_s": _num(s.eager_median_step_s) if measured else math.nan,
                "compiled_step_s": _num(s.headline.compiled_step_s()) if measured else math.nan,
                "eager_samples_per_s": _num(s.eager_samples_per_s) if measured else math.nan,
                "compiled_samples_per_s": _num(s.headline.compiled_samples_per_s) if measured else math.nan,
                "compile_skipped": skipped,
                "error": run.error,
                "device_type": (run.environment or {}).get("device_type"),
            }
        )
    return pd.DataFrame(rows, columns=FRAME_COLUMNS)


def _label(params: dict[str, Any], sweep: SweepSpec) -> str:
    return ", ".join(f"{a.label} {params.get(a.name)}" for a in sweep.axes)


def _num(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


SAMPLES_COLUMN = "samples/s, eager / compiled"
# The points table's columns a page must not cut: the verdict whole ("no verdict (busy)"), whatever
# width the rest of the table leaves it (Streamlit's "medium" holds about 25 characters).
POINT_COLUMN_WIDTHS = {"verdict": "medium"}


def points_table(frame: pd.DataFrame) -> list[dict[str, str]]:
    """The points as a person reads them (all text): what each measured, or why it did not."""
    out = []
    for row in frame.itertuples():
        if row.measured:
            figures = {
                "steady speedup (95%)": words.speedup_with_range(row.speedup, row.ci_low, row.ci_high),
                "verdict": words.verdict(row.verdict, short=True),
                "compile time": row.compile_cost,
                "break-even": row.break_even_short,
                # One column for both (a page's width holds the table): "10,813 / 28,511".
                SAMPLES_COLUMN: f"{words.number(row.eager_samples_per_s)} / {words.number(row.compiled_samples_per_s)}",
            }
        else:
            why = f"compile did not happen: {row.compile_skipped}" if row.compile_skipped else ""
            figures = dict.fromkeys(
                (
                    "steady speedup (95%)",
                    "verdict",
                    "compile time",
                    "break-even",
                    SAMPLES_COLUMN,
                ),
                "",
            )
            figures["verdict"] = why
        # The run id early: on a narrow page the last columns are the ones scrolled out of view.
        out.append({"#": str(row.point), "point": row.label, "run": str(row.run_id), "state": row.state, **figures})
    return out


def measured_points(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The measured points as dicts (label, verdict, speedup, interval, run), for what to try next."""
    columns = ["label", "verdict", "speedup", "ci_low", "ci_high", "run_id"]
    return [dict(zip(columns, row, strict=True)) for row in frame[frame["measured"]][columns].itertuples(index=False)]


def break_even_note(frame: pd.DataFrame) -> str | None:
    """The measured points the break-even chart cannot draw (no step reached or projected), each
    with its break-even in the words every surface uses."""
    off_chart = frame[frame["measured"] & frame["break_even_kind"].isna()]
    if off_chart.empty:
        return None
    return "No break-even to chart: " + "; ".join(f"{r.label} ({r.break_even})" for r in off_chart.itertuples()) + "."


def regime_readings(sweep: SweepSpec, frame: pd.DataFrame) -> list[str]:
    """The regime reading per series, from the eager step time at each finished batch size
    (empty when batch size is not swept)."""
    x_axis, series_axis = chart_axes(sweep)
    if x_axis != "batch_size":
        return []
    done = frame[frame["measured"]]
    out = []
    series_values = list(dict.fromkeys(frame["series"])) or [""]
    for series in series_values:
        part = done[done["series"] == series]
        prefix = f"{series}: " if series_axis else ""
        reading = words.regime(
            part["x"].astype(int).tolist(),
            part["eager_step_s"].tolist(),
            part["verdict"].tolist(),
            cuda=bool((part["device_type"] == "cuda").any()),  # no CUDA-graph advice for a CPU's points
        )
        if reading is not None:
            out.append(prefix + reading.text)
        elif part["x"].nunique() < words.MIN_BATCH_SIZES:
            out.append(
                f"{prefix}The regime reading needs eager step times at {words.MIN_BATCH_SIZES} or more batch "
                f"sizes ({part['x'].nunique()} measured)."
            )
        else:
            out.append(
                f"{prefix}No clear regime: the eager step times do not follow fixed overhead plus a per-sample "
                "cost (noise, or a machine busy with other work while it measured)."
            )
    return out


def ladder_readings(sweep: SweepSpec, runs: list[Run]) -> list[str]:
    """The backend ladder's reading (core.engine.ladder) per value of the other axis: at which rung
    the compile's cost, the step's change or an error comes in; empty unless backend is swept."""
    if sweep.axis("backend") is None:
        return []
    other = next((a for a in sweep.axes if a.name != "backend"), None)
    groups: dict[Any, list[Rung]] = {}
    for run in runs:
        params = run.params or {}
        summary = Summary.of(run.summary) if run.status == "done" else None
        rung = Rung(str(params.get("backend")), summary, run.status, run.error)
        groups.setdefault(params.get(other.name) if other else None, []).append(rung)
    out = []
    for value, rungs in groups.items():
        reading = ladder_reading(rungs)
        if reading is not None:
            out.append((f"{other.label} {value}: " if other else "") + reading.text)
    return out


def scope_comparison(sweep: SweepSpec, frame: pd.DataFrame) -> list[dict[str, str]]:
    """Whole against regional compile side by side (compile time and steady speedup), one row per
    value of the other axis; empty unless compile scope is swept."""
    scope = sweep.axis("compile_scope")
    if scope is None:
        return []
    other = next((a for a in sweep.axes if a.name != "compile_scope"), None)
    x_axis, _ = chart_axes(sweep)
    scope_col, other_col = ("x", "series") if x_axis == "compile_scope" else ("series", "x")
    rows = []
    for value in dict.fromkeys(frame[other_col]):
        part = frame[(frame[other_col] == value) & frame["measured"]]
        row = {"": f"{other.label} {value}" if other else sweep.base.model}
        for scope_value in scope.values:
            hit = part[part[scope_col].astype(str) == str(scope_value)]
            if hit.empty:
                row[f"{scope_value}: compile time"] = row[f"{scope_value}: steady speedup"] = "-"
                continue
            r = hit.iloc[0]
            row[f"{scope_value}: compile time"] = r["compile_cost"]
            row[f"{scope_value}: steady speedup"] = words.speedup_with_range(r["speedup"], r["ci_low"], r["ci_high"])
        rows.append(row)
    return rows


def plan_rows(frame: pd.DataFrame, runs: list[Run], steps: int) -> list[dict[str, str]]:
    """The training plan for each measured point over a run of `steps` steps (all text)."""
    by_id = {r.id: r for r in runs}
    out = []
    for row in frame[frame["measured"]].itertuples():
        plan = words.plan_from_summary(by_id[row.run_id].summary or {}, steps)
        if plan is None:
            continue
        out.append({"point": row.label, **plan_figures(plan)})
    return out


def plan_figures(plan: words.TrainingPlan) -> dict[str, str]:
    """Eager and compiled totals (compile included) with their intervals, and the sentence."""

    def span(total: float, ci: tuple[float, float]) -> str:
        return f"{words.duration(total)} ({words.duration_range(ci[0], ci[1], total)})"

    return {
        "eager total": span(plan.eager_total_s, plan.eager_ci),
        "compiled total, compile included": span(plan.compiled_total_s, plan.compiled_ci),
        "what compile does": words.plan_sentence(plan),
    }


def point_line(frame_row: Any, total: int) -> str:
    """'point 2/4 batch size 256: done, 1.12x (1.05-1.20x) faster, compile 9.80 s, break-even step 1,037 (4.10 s in)'."""
    r = frame_row
    head = f"point {r.point}/{total} {r.label}: "
    if not r.measured:
        if r.compile_skipped:
            return head + terminal_text(f"{r.status}, compile did not happen: {r.compile_skipped}")
        return head + terminal_text(r.state if r.state != r.status else r.status + (f": {r.error}" if r.error else ""))
    return (
        f"{head}done, {words.speedup_with_range(r.speedup, r.ci_low, r.ci_high)} {words.verdict(r.verdict)}, "
        f"compile {r.compile_cost}, break-even {r.break_even}"
    )


def sweep_report(
    sweep: SweepSpec,
    frame: pd.DataFrame,
    state: str,
    plan_steps: int | None = None,
    runs=(),
    command: Callable[[RunSpec], str] | None = None,
) -> str:
    """The end-of-sweep text for a terminal: one line per point, the regime, whole vs regional,
    and the training plan when asked. `command`: what runs the race it suggests there (the CLI's
    core.cli.races.race_command), on its own line, in place of the page's link."""
    lines = [f"{sweep.base.model}, {' x '.join(a.label for a in sweep.axes)}: {state}", ""]
    lines += [point_line(r, len(frame)) for r in frame.itertuples()]
    readings = regime_readings(sweep, frame)
    if readings:
        lines += ["", "regime (eager step time against batch size):"] + [f"  {t}" for t in readings]
    if runs and not frame.empty and frame["measured"].any():
        nxt = sweep_next(measured_points(frame), list(runs))
        if nxt is not None:
            lines += [""] + ([f"why ({nxt.point}): {nxt.why}"] if nxt.why else [])
            if nxt.race is not None and nxt.race.spec is not None and command is not None:
                lines += [f"next: {nxt.text} {nxt.race.label}:", f"  {command(nxt.race.spec)}"]
            else:
                lines.append(f"next: {nxt.text}" + (f" {nxt.race.label}: {nxt.race.link}" if nxt.race else ""))
    ladders = ladder_readings(sweep, list(runs))
    if ladders:
        lines += ["", "backend ladder (where the compile's cost, the step's change or an error comes in):"]
        lines += [f"  {t}" for t in ladders]
    scopes = scope_comparison(sweep, frame)
    if scopes:
        lines += ["", "whole vs regional compile:"]
        lines += ["  " + "; ".join(f"{k}: {v}" if k else v for k, v in row.items()) for row in scopes]
    if plan_steps:
        plans = plan_rows(frame, list(runs), plan_steps)
        lines += ["", f"plan for a run of {plan_steps:,} steps (compile included):"]
        lines += [f"  {p['point']}: {p['what compile does']}" for p in plans] or ["  no measured point to plan from"]
    return "\n".join(lines)


_JSON_KEYS = (
    "steady_state_speedup",
    "speedup_ci95",
    "verdict",
    "compile_time_s",
    "compile_time_under_s",
    "break_even_step",
    "break_even_extrapolated_step",
    "break_even_reason",
    "eager_median_step_s",
    "compiled_median_step_s",
    "eager_samples_per_s",
    "compiled_samples_per_s",
    "whole_run_speedup",
    "compile_skipped",
)


def sweep_json(sweep_id: int, sweep: SweepSpec, runs: list[Run], frame: pd.DataFrame, state: str) -> dict[str, Any]:
    """The sweep as one JSON object: its definition, each point's headline figures, the readings."""
    points = []
    for run, row in zip(runs, frame.itertuples()):
        s = {**(run.summary or {}), **Summary.of(run.summary).headline.kept_figures()}  # derived, not stored ones
        points.append(
            {
                "run_id": run.id,
                "label": row.label,
                **{a.name: (run.params or {}).get(a.name) for a in sweep.axes},
                "status": run.status,
                "error": run.error,
                "measured": bool(row.measured),
                **{k: s.get(k) if run.status == "done" else None for k in _JSON_KEYS},
            }
        )
    return {
        "sweep_id": sweep_id,
        "state": state,
        **sweep.to_dict(),
        "points": points,
        "regime": regime_readings(sweep, frame),
        "ladder": ladder_readings(sweep, runs),
        "scope_comparison": scope_comparison(sweep, frame),
    }


def sweep_title(sweep_id: int, params: dict[str, Any]) -> str:
    """'#3 pointwise_mlp: batch size 64-4096': a stored sweep in a list (text, from its definition)."""
    try:
        sweep = SweepSpec.from_dict(params)
    except Exception:  # noqa: BLE001 - a damaged definition is still listed, and says so
        return f"#{sweep_id} (unreadable)"
    axes = "; ".join(
        f"{a.label} {a.values[0]}-{a.values[-1]}" if a.name == "batch_size" and a.values else
        f"{a.label} {', '.join(map(str, a.values))}"
        for a in sweep.axes
    )  # fmt: skip
    return f"#{sweep_id} {sweep.base.model}: {axes}"


def sweep_state(store: Store, runs: list[Run], shown: Callable[[str], str] = str) -> str:
    """'point 2 of 4 running: batch size 256, compiled epoch 1/2', 'finished: 3 done, 1 failed'.
    A point's own state (its phase, from the worker) passes through `shown` on its way in: a page
    passes markdown_text, so only that part, not the sentence around it, is made inert."""
    if not runs:
        return "no points"
    counts: dict[str, int] = {}
    for run in runs:
        counts[run.status] = counts.get(run.status, 0) + 1
    finished = sum(counts.get(s, 0) for s in ("done", "failed", "cancelled"))
    active = [r for r in runs if r.status in ACTIVE_STATES]
    if active:
        run = active[0]
        return f"point {runs.index(run) + 1} of {len(runs)} running: {shown(describe(store, run))}"
    if finished < len(runs):
        first = next(r for r in runs if r.status == "queued")
        return (
            f"{finished} of {len(runs)} points finished; point {runs.index(first) + 1} is "
            f"{shown(describe(store, first))}"
        )
    parts = [f"{counts[s]} {s}" for s in ("done", "failed", "cancelled") if counts.get(s)]
    return "finished: " + ", ".join(parts)


# ----------------------------------------------------------------------
# What the Sweep page's form needs, as pure functions: defaults sized for the device, the values
# an axis may take here, the sweep the form describes, and a rough duration.
#
# The CPU default is a 4-point batch-size sweep of pointwise_mlp sized to finish in a few minutes
# on a small CPU (each point is a race: a worker start, a cold compile, both variants' steps); a host's
# limits narrow it (fewer and smaller batch sizes, an allowed model) so that it can be launched there.

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
    values = field_values(state, "sweep_")
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
