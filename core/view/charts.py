"""Altair chart builders for the live race and the runs overlay: DataFrame in, chart out.

Pure (no Streamlit, no torch). Pages rebuild these every second while a run is live, so every
builder is a handful of vectorised pandas operations on a trimmed copy of the data, and never hands
Altair more than ~2,000 points per series (Altair refuses inline data over 5,000 rows anyway).

Every chart carries a top-level `description` (the SVG's aria text) of the exact form
"{title}: {n_eager} eager steps, {n_compiled} compiled steps" ("... epochs" for the epoch chart);
the counts are the rows the chart was given (before downsampling), so a browser test can watch
them grow. Empty input gives a valid, empty chart whose title ends in "(waiting for data)".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import altair as alt
import numpy as np
import pandas as pd

VARIANTS = ("eager", "compiled")
VARIANT_COLORS = {"eager": "#4C78A8", "compiled": "#EE4C2C"}
VARIANT_DASHES = {"eager": [1, 0], "compiled": [6, 3]}
CHART_HEIGHT = 320
# Charts are ~500 px wide: more points than that add browser work every second, not detail. On a
# small machine the browser drawing the live charts competes with the training it is watching.
MAX_POINTS_PER_VARIANT = 600
MAX_OVERLAY_POINTS = 4000  # all series of an overlay together, under Altair's 5,000-row limit
MIN_OVERLAY_POINTS_PER_SERIES = 100
WAITING = " (waiting for data)"

STEP_TIME_TITLE = "Step time per step"
CUMULATIVE_TITLE = "The race: cumulative training time"
EPOCH_TITLE = "Training time per epoch"
LOSS_TITLE = "Training loss per step"
OVERLAY_STEP_TITLE = "Step time per step, by run"
OVERLAY_CUMULATIVE_TITLE = "Cumulative training time, by run"

STEP_COLUMNS = ("run", "variant", "phase", "epoch", "step", "time_s", "loss", "cumulative_s")
EPOCH_COLUMNS = ("run", "variant", "epoch", "train_time_s", "eval_time_s")


def variant_color_scale() -> alt.Scale:
    """The one colour scale for eager vs compiled, so the two read the same in every chart."""
    return alt.Scale(domain=list(VARIANTS), range=[VARIANT_COLORS[v] for v in VARIANTS])


def variant_dash_scale() -> alt.Scale:
    """Solid eager, dashed compiled: the variant cue when colour is taken by the run."""
    return alt.Scale(domain=list(VARIANTS), range=[VARIANT_DASHES[v] for v in VARIANTS])


def downsample_keep_max(frame: pd.DataFrame, value: str, by: Sequence[str], max_points: int) -> pd.DataFrame:
    """At most max_points rows per group: consecutive buckets, each represented by its row with the
    largest `value`, so a spike (the compile step) is never dropped. Rows must be in step order."""
    by = list(by)
    if frame.empty or max_points < 1:
        return frame
    frame = frame.reset_index(drop=True)
    groups = frame.groupby(by, sort=False)[value]
    sizes = groups.transform("size")
    if sizes.max() <= max_points:
        return frame
    bucket = (groups.cumcount() * max_points) // sizes
    keep = frame.assign(_bucket=bucket).groupby([*by, "_bucket"], sort=False)[value].idxmax()
    return frame.loc[np.sort(keep.to_numpy())].reset_index(drop=True)


def downsample_stride(frame: pd.DataFrame, by: Sequence[str], max_points: int) -> pd.DataFrame:
    """At most max_points rows per group: every k-th row plus the group's last (where a curve ends
    matters). Rows must be in step order."""
    by = list(by)
    if frame.empty or max_points < 2:
        return frame
    frame = frame.reset_index(drop=True)
    groups = frame.groupby(by, sort=False)[by[0]]
    sizes = groups.transform("size").to_numpy()
    if sizes.max() <= max_points:
        return frame
    pos = groups.cumcount().to_numpy()
    stride = np.where(sizes <= max_points, 1, np.ceil(sizes / (max_points - 1))).astype(np.int64)
    keep = (pos % stride == 0) | (pos == sizes - 1)
    return frame.loc[keep].reset_index(drop=True)


def step_time_chart(steps: pd.DataFrame | None, log_scale: bool = False) -> alt.Chart:
    """Per-step training time (ms), eager vs compiled: shows the compile spike on compiled step 1
    (log_scale keeps it and the steady steps readable together). Over MAX_POINTS_PER_VARIANT steps
    a variant is downsampled by bucket maximum, so the spike always survives."""
    data = _train_steps(steps, ["variant", "epoch", "step", "time_s"])
    data = data[np.isfinite(data["time_s"]) & ((data["time_s"] > 0) if log_scale else True)]
    counts = _variant_counts(data)
    data = downsample_keep_max(data, "time_s", ["variant"], MAX_POINTS_PER_VARIANT)
    data = data.assign(time_ms=data["time_s"] * 1000.0).drop(columns="time_s")
    chart = (
        alt.Chart(data)
        .mark_line(point=alt.OverlayMarkDef(size=18), strokeWidth=1.5)
        .encode(
            x=alt.X("step:Q", title="step"),
            y=alt.Y("time_ms:Q", title="step time (ms)", scale=_y_scale(log_scale)),
            color=_variant_color(),
            tooltip=_variant_tooltips() + [alt.Tooltip("time_ms:Q", title="time (ms)", format=".2f")],
        )
    )
    return _finish(chart, STEP_TIME_TITLE, counts, "steps")


def cumulative_chart(
    steps: pd.DataFrame | None, break_even: Mapping[str, Any] | None = None
) -> alt.Chart | alt.LayerChart:
    """The race: cumulative training seconds per step for both variants, with the break-even step
    (where compiled pulls ahead for good) marked when given. Long runs keep every k-th step + the last."""
    data = _train_steps(steps, ["variant", "epoch", "step", "time_s", "cumulative_s"])
    data = data[np.isfinite(data["cumulative_s"])]
    counts = _variant_counts(data)
    data = downsample_stride(data, ["variant"], MAX_POINTS_PER_VARIANT)
    data = data.assign(time_ms=data["time_s"] * 1000.0).drop(columns="time_s")
    y_title = "cumulative training time (s)"
    lines = (
        alt.Chart(data)
        .mark_line(point=alt.OverlayMarkDef(size=14), strokeWidth=2)
        .encode(
            x=alt.X("step:Q", title="step"),
            y=alt.Y("cumulative_s:Q", title=y_title),
            color=_variant_color(),
            tooltip=_variant_tooltips()
            + [
                alt.Tooltip("cumulative_s:Q", title="cumulative (s)", format=".2f"),
                alt.Tooltip("time_ms:Q", title="step time (ms)", format=".2f"),
            ],
        )
    )
    last_step = int(data["step"].max()) if len(data) else 0
    marker = _break_even_layers(break_even, y_title, last_step)
    chart = alt.layer(lines, *marker) if marker else lines
    return _finish(chart, CUMULATIVE_TITLE, counts, "steps")


def epoch_chart(epochs: pd.DataFrame | None) -> alt.Chart:
    """Training seconds per epoch, eager and compiled side by side (the original tutorial's view):
    the slow compiled first epoch is the compile cost, the later ones the steady speedup."""
    data = _frame(epochs, EPOCH_COLUMNS)[["variant", "epoch", "train_time_s", "eval_time_s"]]
    data = data[np.isfinite(data["train_time_s"].astype("float64"))]
    counts = _variant_counts(data)
    chart = (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=alt.X("epoch:O", title="epoch", axis=alt.Axis(labelAngle=0)),
            xOffset=alt.XOffset("variant:N", scale=alt.Scale(domain=list(VARIANTS))),
            y=alt.Y("train_time_s:Q", title="training time (s)"),
            color=_variant_color(),
            tooltip=[
                alt.Tooltip("variant:N"),
                alt.Tooltip("epoch:O"),
                alt.Tooltip("train_time_s:Q", title="train (s)", format=".2f"),
                alt.Tooltip("eval_time_s:Q", title="eval (s)", format=".2f"),
            ],
        )
    )
    return _finish(chart, EPOCH_TITLE, counts, "epochs")


def loss_chart(steps: pd.DataFrame | None) -> alt.Chart:
    """Training loss per step for both variants: the curves overlap because compile does not change
    the numerics. Steps without a loss (NaN) are dropped; long runs keep every k-th step + the last."""
    data = _train_steps(steps, ["variant", "epoch", "step", "loss"])
    data = data[np.isfinite(data["loss"])]
    counts = _variant_counts(data)
    data = downsample_stride(data, ["variant"], MAX_POINTS_PER_VARIANT)
    chart = (
        alt.Chart(data)
        .mark_line(point=alt.OverlayMarkDef(size=14), strokeWidth=1.5)
        .encode(
            x=alt.X("step:Q", title="step"),
            y=alt.Y("loss:Q", title="training loss", scale=alt.Scale(zero=False)),
            color=_variant_color(),
            strokeDash=_variant_dash(),  # compiled dashed: identical losses stay visible on top of eager
            tooltip=_variant_tooltips() + [alt.Tooltip("loss:Q", format=".4f")],
        )
    )
    return _finish(chart, LOSS_TITLE, counts, "steps")


def overlay_step_chart(steps: pd.DataFrame | None, log_scale: bool = False) -> alt.Chart:
    """Step time of several runs on one chart (colour = run, dash = variant) to compare models or
    settings. Each series is downsampled by bucket maximum so compile spikes survive."""
    data = _train_steps(steps, ["run", "variant", "epoch", "step", "time_s"])
    data = data[np.isfinite(data["time_s"]) & ((data["time_s"] > 0) if log_scale else True)]
    counts = _variant_counts(data)
    data = downsample_keep_max(data, "time_s", ["run", "variant"], _overlay_points_per_series(data))
    data = data.assign(time_ms=data["time_s"] * 1000.0).drop(columns="time_s")
    chart = (
        alt.Chart(data)
        .mark_line(point=alt.OverlayMarkDef(size=14), strokeWidth=1.5)
        .encode(
            x=alt.X("step:Q", title="step"),
            y=alt.Y("time_ms:Q", title="step time (ms)", scale=_y_scale(log_scale)),
            color=_run_color(data),
            strokeDash=_variant_dash(),
            tooltip=[alt.Tooltip("run:N")]
            + _variant_tooltips()
            + [alt.Tooltip("time_ms:Q", title="time (ms)", format=".2f")],
        )
    )
    return _finish(chart, OVERLAY_STEP_TITLE, counts, "steps")


def overlay_cumulative_chart(steps: pd.DataFrame | None) -> alt.Chart:
    """Cumulative training time of several runs on one chart (colour = run, dash = variant): which
    settings pay off their compile soonest. Long series keep every k-th step + the last."""
    data = _train_steps(steps, ["run", "variant", "epoch", "step", "cumulative_s"])
    data = data[np.isfinite(data["cumulative_s"])]
    counts = _variant_counts(data)
    data = downsample_stride(data, ["run", "variant"], _overlay_points_per_series(data))
    chart = (
        alt.Chart(data)
        .mark_line(point=alt.OverlayMarkDef(size=12), strokeWidth=2)
        .encode(
            x=alt.X("step:Q", title="step"),
            y=alt.Y("cumulative_s:Q", title="cumulative training time (s)"),
            color=_run_color(data),
            strokeDash=_variant_dash(),
            tooltip=[alt.Tooltip("run:N")]
            + _variant_tooltips()
            + [alt.Tooltip("cumulative_s:Q", title="cumulative (s)", format=".2f")],
        )
    )
    return _finish(chart, OVERLAY_CUMULATIVE_TITLE, counts, "steps")


def _frame(frame: pd.DataFrame | None, columns: Sequence[str]) -> pd.DataFrame:
    """The input with every expected column present (missing ones empty), so empty or partial
    frames from a page that has not seen an event yet chart without errors."""
    if frame is None:
        frame = pd.DataFrame()
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        frame = frame.assign(**{c: pd.Series(np.nan, index=frame.index, dtype="float64") for c in missing})
    return frame


def _train_steps(steps: pd.DataFrame | None, columns: list[str]) -> pd.DataFrame:
    """Train-phase rows, only the columns a chart needs, in step order per series."""
    frame = _frame(steps, STEP_COLUMNS)
    if frame["phase"].notna().any():
        frame = frame[frame["phase"] == "train"]
    frame = frame[columns]
    by = [c for c in ("run", "variant") if c in columns]
    data = frame.sort_values([*by, "step"], kind="stable").reset_index(drop=True)
    for column in ("time_s", "cumulative_s", "loss"):
        if column in data.columns:
            data[column] = data[column].astype("float64")
    return data


def _variant_counts(data: pd.DataFrame) -> dict[str, int]:
    counts = data["variant"].value_counts()
    return {v: int(counts.get(v, 0)) for v in VARIANTS}


def _overlay_points_per_series(data: pd.DataFrame) -> int:
    """Share MAX_OVERLAY_POINTS among the overlay's (run, variant) series."""
    series = max(1, len(data.drop_duplicates(["run", "variant"])))
    return min(MAX_POINTS_PER_VARIANT, max(MIN_OVERLAY_POINTS_PER_SERIES, MAX_OVERLAY_POINTS // series))


def _y_scale(log_scale: bool) -> alt.Scale:
    return alt.Scale(type="log") if log_scale else alt.Scale()


def _variant_color() -> alt.Color:
    return alt.Color("variant:N", title="variant", scale=variant_color_scale(), sort=list(VARIANTS))


def _variant_dash() -> alt.StrokeDash:
    return alt.StrokeDash("variant:N", title="variant", scale=variant_dash_scale(), sort=list(VARIANTS))


def _run_color(data: pd.DataFrame) -> alt.Color:
    # Runs keep the order they were given in (newest first, say), not alphabetical "#12" < "#9".
    return alt.Color("run:N", title="run", sort=[str(r) for r in pd.unique(data["run"])])


def _variant_tooltips() -> list[alt.Tooltip]:
    return [alt.Tooltip("variant:N"), alt.Tooltip("epoch:Q"), alt.Tooltip("step:Q")]


def _break_even_layers(break_even: Mapping[str, Any] | None, y_title: str, last_step: int = 0) -> list[alt.Chart]:
    """Vertical rule at the break-even step, and a point + label at its wall time. The label sits on
    the side of the rule with more room, so a late break-even is not cut off at the right edge."""
    step = (break_even or {}).get("step")
    if step is None:
        return []
    wall_s = (break_even or {}).get("wall_s")
    has_wall = wall_s is not None and math.isfinite(float(wall_s))
    label = f"break-even: step {int(step)}" + (f" ({float(wall_s):.1f} s)" if has_wall else "")
    point = pd.DataFrame({"step": [int(step)], "cumulative_s": [float(wall_s) if has_wall else 0.0], "label": [label]})
    base = alt.Chart(point).encode(x=alt.X("step:Q", title="step"))
    late = last_step > 0 and int(step) > last_step / 2
    align, side = ("right", -1) if late else ("left", 1)
    rule = base.mark_rule(color="#555555", strokeDash=[4, 4], strokeWidth=1.5)
    tooltip = [alt.Tooltip("label:N", title="break-even")]
    if not has_wall:
        text = base.mark_text(align=align, dx=6 * side, y=12, fontSize=14, fontWeight="bold").encode(text="label:N")
        return [rule.encode(tooltip=tooltip), text]
    at_wall = base.encode(y=alt.Y("cumulative_s:Q", title=y_title), tooltip=tooltip)
    dot = at_wall.mark_point(filled=True, size=90, color="#222222")
    text = at_wall.mark_text(align=align, dx=8 * side, dy=-10, fontSize=14, fontWeight="bold").encode(text="label:N")
    return [rule.encode(tooltip=tooltip), dot, text]


def _finish(
    chart: alt.Chart | alt.LayerChart, title: str, counts: Mapping[str, int], unit: str
) -> alt.Chart | alt.LayerChart:
    """Title, aria description, height and projector-sized fonts; width is left to the container."""
    empty = sum(counts.values()) == 0
    description = f"{title}: {counts['eager']} eager {unit}, {counts['compiled']} compiled {unit}"
    return (
        chart.properties(title=title + (WAITING if empty else ""), description=description, height=CHART_HEIGHT)
        .configure_axis(labelFontSize=13, titleFontSize=15)
        .configure_legend(labelFontSize=13, titleFontSize=14, orient="top", title=None)
        .configure_title(fontSize=17, anchor="start")
    )
