"""The charts of one run: eager against compiled (cumulative time, compiled's lead, the time per
step, per epoch, the loss), the speedup per replicate process; the Runs page's overlays of several
runs; and what every run chart shares (colours and dashes, heights and fonts, downsampling, the
finish). DataFrame in, chart out; pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import altair as alt
import numpy as np
import pandas as pd

from core.engine import words
from core.engine.analysis import default_warmup
from core.engine.events import VARIANTS
from core.engine.intervals import ProcessResult, counted, processes_of
from core.engine.summary import Summary

# ----------------------------------------------------------------------
# What every run chart shares (this module's charts and overlays, and the sweep's and
# explainers' colours): eager's and compiled's colours and dashes, heights and fonts, downsampling,
# the frames' expected columns, and the finish every chart gets.
#
# Pure (no Streamlit, no torch). Pages rebuild these charts every second while a run is live, so
# every builder is a handful of vectorised pandas operations on a trimmed copy of the data, and never
# hands Altair more than ~2,000 points per series (Altair refuses inline data over 5,000 rows anyway).
#
# Every chart carries a top-level `description` (the SVG's aria text) of the exact form
# "{title}: {n_eager} eager steps, {n_compiled} compiled steps" ("... epochs" for the epoch chart);
# the counts are the rows the chart was given (before downsampling), so a browser test can watch
# them grow. Empty input gives a valid, empty chart whose title ends in "(waiting for data)".

VARIANT_COLORS = {"eager": "#4C78A8", "compiled": "#EE4C2C"}
VARIANT_DASHES = {"eager": [1, 0], "compiled": [6, 3]}
NEUTRAL = "#444444"
CHART_HEIGHT = 320
# A step axis in whole steps: with a few steps drawn Vega-Lite would tick 0.0, 0.2, ... 5.0, and its
# labels ran together ("0.00.2 ... 4.85.0") on the live view's first seconds.
STEP_AXIS = alt.Axis(format=",d", tickMinStep=1)
# Streamlit fits a chart's title, legends and axes inside this height: the plot gets what is left.
AXIS_FONT = {"labelFontSize": 14, "titleFontSize": 15}
TEXT_FONT = 14  # the notes written on a chart ("break-even: step 305"), set here so presenter mode can grow them
# Presenter mode (a room reading a 1920x1080 screen, or a 1280x720 projector, from the back): the
# same charts, every piece of text at least 24 px, the axis titles and the notes on the data larger.
PRESENTER_FONTS = {
    "axis": {"labelFontSize": 24, "titleFontSize": 28},
    "legend": 26,
    "title": 30,
    "subtitle": 24,
    "text": 26,
}
# The step-time axis is cut this far above the highest steady step (95th percentile of each variant
# after its warm-up), so the steady steps fill the chart; slower steps sit at the top edge.
CLIP_HEADROOM = 1.35
# Charts are ~500 px wide: more points than that add browser work every second, not detail. On a
# small machine the browser drawing the live charts competes with the training it is watching.
MAX_POINTS_PER_VARIANT = 600
WAITING = " (waiting for data)"
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


def rolling_median(frame: pd.DataFrame, value: str, by: Sequence[str]) -> pd.Series:
    """A centred rolling median of `value` per group (about 1/25 of the series, 5 to 51 steps):
    the trend of a noisy per-step series, untouched by single slow steps."""
    out = pd.Series(np.nan, index=frame.index, dtype="float64")
    for _, group in frame.groupby(list(by), sort=False):
        window = int(min(51, max(5, len(group) // 25)) | 1)
        out.loc[group.index] = group[value].rolling(window, center=True, min_periods=1).median()
    return out


def steady_ceiling_ms(data: pd.DataFrame, by: Sequence[str] = ("variant",)) -> float | None:
    """Where the step-time axis is cut: CLIP_HEADROOM above the highest series' 95th-percentile
    steady step (steps after its warm-up). None when nothing rises above it (no cut needed)."""
    ceilings = []
    for _, group in data.groupby(list(by), sort=False):
        times = group["time_ms"].to_numpy()
        if len(times) < 3:
            continue
        ceilings.append(float(np.quantile(times[default_warmup(len(times)) :], 0.95)))
    if not ceilings:
        return None
    top = max(ceilings) * CLIP_HEADROOM
    return top if top > 0 and float(data["time_ms"].max()) > top else None


def with_columns(frame: pd.DataFrame | None, columns: Sequence[str]) -> pd.DataFrame:
    """The input with every expected column present (missing ones empty), so empty or partial
    frames from a page that has not seen an event yet chart without errors."""
    if frame is None:
        frame = pd.DataFrame()
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        frame = frame.assign(**{c: pd.Series(np.nan, index=frame.index, dtype="float64") for c in missing})
    return frame


def train_steps(steps: pd.DataFrame | None, columns: list[str]) -> pd.DataFrame:
    """Train-phase rows, only the columns a chart needs, in step order per series."""
    frame = with_columns(steps, STEP_COLUMNS)
    if frame["phase"].notna().any():
        frame = frame[frame["phase"] == "train"]
    frame = frame[columns]
    by = [c for c in ("run", "variant") if c in columns]
    data = frame.sort_values([*by, "step"], kind="stable").reset_index(drop=True)
    for column in ("time_s", "cumulative_s", "loss"):
        if column in data.columns:
            data[column] = data[column].astype("float64")
    return data


def variant_counts(data: pd.DataFrame) -> dict[str, int]:
    counts = data["variant"].value_counts()
    return {v: int(counts.get(v, 0)) for v in VARIANTS}


def variant_color(symbol: str = "stroke") -> alt.Color:
    """Colour by variant; the legend shows a line for line charts (a dot reads as a blob), else a square."""
    legend = (
        alt.Legend(symbolType="stroke", symbolStrokeWidth=4, symbolSize=300)
        if symbol == "stroke"
        else alt.Legend(symbolType=symbol, symbolSize=200)
    )
    return alt.Color("variant:N", title=None, scale=variant_color_scale(), sort=list(VARIANTS), legend=legend)


def variant_dash(separate: bool = False) -> alt.StrokeDash:
    """Solid eager, dashed compiled. `separate`: its own legend (below the chart) because colour is
    taken by the run; otherwise it merges with the variant colour legend."""
    legend = alt.Legend(symbolType="stroke", symbolStrokeWidth=3, symbolSize=400)
    if separate:
        legend = alt.Legend(
            orient="bottom",
            direction="horizontal",
            symbolType="stroke",
            symbolStrokeWidth=3,
            symbolSize=400,
            symbolStrokeColor=NEUTRAL,
        )
    return alt.StrokeDash("variant:N", title=None, scale=variant_dash_scale(), sort=list(VARIANTS), legend=legend)


def variant_tooltips() -> list[alt.Tooltip]:
    return [alt.Tooltip("variant:N"), alt.Tooltip("epoch:Q"), alt.Tooltip("step:Q")]


class _Layer(alt.Chart):
    """A finished layer: copying it copies its top level only.

    alt.layer() deep-copies every layer three times (to lift shared data and parameters), walking
    each layer's every schema object and unset field: three fifths of building a live chart, which
    the app does for every new snapshot of a live run. These layers are never changed after they
    are layered (alt.layer only sets or removes top-level fields on its copies: data, name, height),
    so a copy may share what is below the top level. tests/test_charts.py checks that a chart built
    this way gives the same spec as one built with alt.layer."""

    def __deepcopy__(self, memo: Any = None) -> _Layer:
        return self.copy(deep=False)


def layer(*layers: alt.Chart) -> alt.LayerChart:
    """alt.layer(*layers), without the deep copies (see _Layer)."""
    return alt.layer(*(_Layer(**layer._kwds) if type(layer) is alt.Chart else layer for layer in layers))


def finish(
    chart: alt.Chart | alt.LayerChart,
    title: str,
    counts: Mapping[str, int],
    unit: str,
    height: int = CHART_HEIGHT,
    subtitle: str | None = None,
) -> alt.Chart | alt.LayerChart:
    """Title, aria description, height and fonts readable on a phone; width is left to the
    container. `subtitle`: a line under the title, outside the plot (what the axis leaves out),
    so it never covers the data."""
    empty = sum(counts.values()) == 0
    description = f"{title}: {counts['eager']} eager {unit}, {counts['compiled']} compiled {unit}"
    # What .properties() does, without validating each value against the schema on every build (a
    # quarter of a live chart's build; the tests validate every builder's whole spec).
    titled = chart.copy(deep=False)
    heading = title + (WAITING if empty else "")
    titled.title = alt.TitleParams(heading, subtitle=subtitle) if subtitle else heading
    titled.description, titled.height = description, height
    return (
        titled.configure_axis(**AXIS_FONT)
        .configure_legend(labelFontSize=14, orient="top", title=None)
        .configure_title(fontSize=17, subtitleFontSize=13, anchor="start", offset=6)
        .configure_text(fontSize=TEXT_FONT)
    )


def for_projector(chart: alt.Chart | alt.LayerChart, height: int | str) -> alt.Chart | alt.LayerChart:
    """A finished chart (finish) sized for presenter mode: PRESENTER_FONTS everywhere, `height`
    for the chart as a whole (pixels, or "container": the height of the box the page gives it)."""
    sized = chart.copy(deep=False)
    sized.height = height
    fonts = PRESENTER_FONTS
    return (
        sized.configure_axis(**fonts["axis"])
        .configure_legend(labelFontSize=fonts["legend"], labelLimit=0, orient="top", title=None, symbolSize=400)
        .configure_title(fontSize=fonts["title"], subtitleFontSize=fonts["subtitle"], anchor="start", offset=8)
        .configure_text(fontSize=fonts["text"])
    )


# ----------------------------------------------------------------------
# The race's charts, one run's eager against compiled: cumulative time (the race itself), compiled's
# lead, the time per step, per epoch, and the loss. DataFrame in, chart out; what they share (colours,
# downsampling, the finish) is core.view.race_charts's.
#
# What a first-time reader must see decides the layout: the step-time chart's axis is cut just above
# the steady steps (the compile step, 100x taller, would flatten them to a line at 0) with the compile
# step named in words; compiled is always drawn after eager, so it is on top where they overlap; a
# rolling median per variant shows a 15% gap that single noisy steps hide; the race extends both
# cumulative lines as dashed projections to where they would cross, and a small lead chart shows
# that crossing as a line through zero.

PROJECTION_DASH = [5, 4]
LEAD_HEIGHT = 260  # Streamlit's theme takes title and axes out of this: less squashes the plot to a line
# The step-time chart carries two legends (variants, compile marks) and a line under its title
# above the plot: at 360 px the plot keeps about 230 px, room for five ticks of the steady range.
STEP_TIME_HEIGHT = 360
STEP_TIME_TICKS = 5
# The race chart sits under the verdict and the four cards on a finished race's first screen: at
# 300 px it ends above the fold at 1280x720 with room for a card line that wraps.
RACE_HEIGHT = 300
# Dashed projections reach at most this many times the measured steps: a crossing far beyond the
# run is named in words at the chart's edge instead of shrinking what was measured to a sliver.
PROJECTION_REACH = 3.0
STEP_TIME_TITLE = "Step time per step"
CUMULATIVE_TITLE = "The race: cumulative training time"
EPOCH_TITLE = "Training time per epoch"
LOSS_TITLE = "Training loss per step"
LEAD_TITLE = "Compiled's lead over eager"


def step_time_chart(
    steps: pd.DataFrame | None, log_scale: bool = False, marks: pd.DataFrame | None = None
) -> alt.LayerChart:
    """Per-step training time (ms), eager vs compiled, each with its rolling median.

    By default the axis is cut just above the steady steps (the compile step, far taller, would
    flatten them): a triangle marks the compile step at the top edge and the line under the title
    gives its time, outside the plot, where it covers no step; log_scale shows every
    step in full instead. Compiled is drawn after eager, so it stays visible where they overlap.
    Over MAX_POINTS_PER_VARIANT steps a variant is downsampled by bucket maximum, so spikes survive.
    `marks` (core.view.run_screen.why_per_step.compile_marks): a vertical line at every step that
    paid for a compile (dashed) or a recompile (solid), with what happened in its tooltip."""
    data = train_steps(steps, ["variant", "epoch", "step", "time_s"])
    data = data[np.isfinite(data["time_s"]) & ((data["time_s"] > 0) if log_scale else True)]
    counts = variant_counts(data)
    data = data.assign(time_ms=data["time_s"] * 1000.0).drop(columns="time_s").reset_index(drop=True)
    data["median_ms"] = rolling_median(data, "time_ms", ["variant"]) if len(data) else pd.Series(dtype="float64")
    ceiling = None if log_scale else steady_ceiling_ms(data)
    compile_ms = _compile_step_ms(data)
    data = downsample_keep_max(data, "time_ms", ["variant"], MAX_POINTS_PER_VARIANT)
    if log_scale:
        y_scale = alt.Scale(type="log")
    elif ceiling is not None:
        y_scale = alt.Scale(domain=[0, ceiling], clamp=True, nice=False)
    else:
        y_scale = alt.Scale()
    # Short enough to fit beside a phone's 230 px plot; the cut is said in the subtitle.
    y_title = "step time (ms)"
    y_axis = alt.Axis(tickCount=STEP_TIME_TICKS)
    base = alt.Chart(data).encode(
        x=alt.X("step:Q", title="step", axis=STEP_AXIS),
        color=variant_color(),
    )
    tooltip = variant_tooltips() + [
        alt.Tooltip("time_ms:Q", title="time (ms)", format=".2f"),
        alt.Tooltip("median_ms:Q", title="median of nearby steps (ms)", format=".2f"),
    ]
    layers = []
    for variant in VARIANTS:  # compiled last: on top
        mine = base.transform_filter(alt.datum.variant == variant)
        layers.append(
            mine.mark_point(filled=True, size=16, opacity=0.35).encode(
                y=alt.Y("time_ms:Q", title=y_title, scale=y_scale, axis=y_axis), tooltip=tooltip
            )
        )
        layers.append(
            mine.mark_line(strokeWidth=3).encode(
                y=alt.Y("median_ms:Q", title=y_title, scale=y_scale, axis=y_axis), tooltip=tooltip
            )
        )
    subtitle = None
    if ceiling is not None:
        subtitle = f"axis cut at {ceiling:,.0f} ms"
        if compile_ms is not None and compile_ms > ceiling:
            layers.append(_compile_step_marker(compile_ms, ceiling))
            subtitle = f"\u25b2 {compile_step_words(compile_ms)}, above the axis (cut at {ceiling:,.0f} ms)"
    if marks is not None and len(marks):
        layers.append(_compile_marks(marks))
    return finish(layer(*layers), STEP_TIME_TITLE, counts, "steps", height=STEP_TIME_HEIGHT, subtitle=subtitle)


COMPILE_MARK_COLOR = "#5b5b5b"  # neutral: eager's blue and compiled's orange stay the variants'


def _compile_marks(marks: pd.DataFrame) -> alt.Chart:
    """A rule at each step that paid for a compile (dashed) or a recompile (solid, wider); the
    legend names only the kinds drawn, so it fits beside the variants' on a phone."""
    kinds = [k for k in ("compile", "recompile") if (marks["kind"] == k).any()]
    return (
        alt.Chart(marks[["variant", "step", "kind", "note"]])
        .mark_rule(color=COMPILE_MARK_COLOR, opacity=0.8)
        .encode(
            x=alt.X("step:Q", title="step", axis=STEP_AXIS),
            strokeDash=alt.StrokeDash(
                "kind:N",
                scale=alt.Scale(domain=["compile", "recompile"], range=[[5, 3], [1, 0]]),
                legend=alt.Legend(title=None, orient="top", labelExpr="datum.label + ' step'", values=kinds),
            ),
            strokeWidth=alt.StrokeWidth(
                "kind:N", scale=alt.Scale(domain=["compile", "recompile"], range=[1.5, 2.5]), legend=None
            ),
            tooltip=[
                alt.Tooltip("step:Q", title="step"),
                alt.Tooltip("variant:N", title="variant"),
                alt.Tooltip("kind:N", title="what"),
                alt.Tooltip("note:N", title="why"),
            ],
        )
    )


def _compile_step_ms(data: pd.DataFrame) -> float | None:
    first = data[
        (data["variant"] == "compiled") & (data["step"] == data.loc[data["variant"] == "compiled", "step"].min())
    ]
    return float(first["time_ms"].iloc[0]) if len(first) else None


def compile_step_words(compile_ms: float) -> str:
    """'compile step 11.3 s' (or '... 640 ms'): words.seconds."""
    return f"compile step {words.seconds(compile_ms / 1000)}"


def _compile_step_marker(compile_ms: float, ceiling: float) -> alt.Chart:
    """A triangle at the top edge where the compile step leaves the cut axis (its time is in the
    subtitle and the tooltip: words on the plot sat on the steps)."""
    note = pd.DataFrame({"step": [1], "time_ms": [ceiling], "label": [compile_step_words(compile_ms)]})
    return (
        alt.Chart(note)
        .mark_point(shape="triangle-up", size=120, filled=True, color=VARIANT_COLORS["compiled"])
        .encode(
            x=alt.X("step:Q", title="step", axis=STEP_AXIS),
            y=alt.Y("time_ms:Q"),
            tooltip=[alt.Tooltip("label:N", title="off the scale")],
        )
    )


def cumulative_chart(
    steps: pd.DataFrame | None,
    break_even: Mapping[str, Any] | None = None,
    projection: Mapping[str, Any] | None = None,
    compiling_s: float | None = None,
) -> alt.Chart | alt.LayerChart:
    """The race: cumulative training seconds per step for both variants (compiled on top), with
    the break-even step marked when given; otherwise, given a projection (analysis.Projection as a
    dict: position, wall_s, eager_step_s, compiled_step_s), both lines continue dashed at their
    steady rates to the projected crossing. Long runs keep every k-th step + the last.
    `compiling_s`: while compiled's first step is compiling, how long it has so far: a bar in
    compiled's colour grows at step 1, where compiled's line will start (its first step's time is
    the compile, so the line starts at the bar's top)."""
    data = train_steps(steps, ["variant", "epoch", "step", "time_s", "cumulative_s"])
    data = data[np.isfinite(data["cumulative_s"])]
    counts = variant_counts(data)
    ends = _series_ends(data)
    data = downsample_stride(data, ["variant"], MAX_POINTS_PER_VARIANT)
    data = data.assign(time_ms=data["time_s"] * 1000.0).drop(columns="time_s")
    y_title = "cumulative training time (s)"
    base = alt.Chart(data).encode(
        x=alt.X("step:Q", title="step", axis=STEP_AXIS),
        y=alt.Y("cumulative_s:Q", title=y_title),
        color=variant_color(),
        tooltip=variant_tooltips()
        + [
            alt.Tooltip("cumulative_s:Q", title="cumulative (s)", format=".2f"),
            alt.Tooltip("time_ms:Q", title="step time (ms)", format=".2f"),
        ],
    )
    x_end = race_x_end(data, projection if break_even is None else None)
    base = base.encode(x=alt.X("step:Q", title="step", axis=STEP_AXIS, scale=alt.Scale(domain=[0, x_end], nice=False)))
    lines = [base.transform_filter(alt.datum.variant == v).mark_line(strokeWidth=2.5) for v in VARIANTS]
    last_step = int(data["step"].max()) if len(data) else 0
    layers: list[alt.Chart] = []
    if break_even is None and projection is not None and ends:
        layers = _projection_layers(projection, ends, y_title)
    marker = _break_even_layers(break_even, y_title, last_step)
    clock = _compile_clock_layers(compiling_s, y_title) if compiling_s is not None else []
    chart = layer(*lines, *layers, *marker, *clock)
    return finish(chart, CUMULATIVE_TITLE, counts, "steps", height=RACE_HEIGHT)


def compile_clock_label(elapsed_s: float) -> str:
    """The words on the growing compile bar: 'compiling: 7 s so far'."""
    return f"compiling: {words.duration(elapsed_s)} so far"


def _compile_clock_layers(elapsed_s: float, y_title: str) -> list:
    """A bar from 0 to the compile's seconds so far at step 1, with the seconds beside its top."""
    row = pd.DataFrame([{"step": 1, "bottom": 0.0, "top": float(elapsed_s), "label": compile_clock_label(elapsed_s)}])
    bar = (
        alt.Chart(row)
        .mark_rule(strokeWidth=9, opacity=0.45, color=VARIANT_COLORS["compiled"])
        .encode(x=alt.X("step:Q", title="step"), y=alt.Y("bottom:Q", title=y_title), y2="top:Q")
    )
    text = (
        alt.Chart(row)
        .mark_text(align="left", dx=9, color=VARIANT_COLORS["compiled"], fontWeight="bold")
        .encode(x="step:Q", y="top:Q", text="label:N")
    )
    return [bar, text]


def race_x_end(data: pd.DataFrame, projection: Mapping[str, Any] | None) -> float:
    """The step axis's end for the race and lead charts (the same, so the two line up): the last
    measured step, or past the projected crossing (at most PROJECTION_REACH times the last step)."""
    last = float(data["step"].max()) if len(data) else 1.0
    return max(last, projection_reach(last, float(projection["position"]))[0]) if projection else last


def projection_reach(last_step: float, position: float) -> tuple[float, bool]:
    """Where the dashed projections end, and whether the crossing itself is on the chart."""
    end = projection_end(position)
    cap = math.ceil(PROJECTION_REACH * max(last_step, 1.0))
    return (float(end), True) if end <= cap else (float(cap), False)


def projection_end(position: float) -> float:
    """How far the dashed projections run: a little past the crossing, so it is visibly a crossing."""
    return math.ceil(position * 1.08 + 2)


def _series_ends(data: pd.DataFrame) -> dict[str, tuple[int, float]]:
    """Each variant's last measured (step, cumulative seconds)."""
    out = {}
    for variant, group in data.groupby("variant", sort=False):
        if len(group):
            out[str(variant)] = (int(group["step"].iloc[-1]), float(group["cumulative_s"].iloc[-1]))
    return out


def _projection_layers(projection: Mapping[str, Any], ends: Mapping[str, tuple[int, float]], y_title: str) -> list:
    """Dashed lines from each variant's last step at its steady rate, and the projected crossing."""
    position, wall = float(projection["position"]), projection.get("wall_s")
    end, on_chart = projection_reach(max(step for step, _ in ends.values()), position)
    rates = {"eager": projection["eager_step_s"], "compiled": projection["compiled_step_s"]}
    rows = []
    for variant in VARIANTS:
        if variant not in ends or ends[variant][0] >= end:
            continue
        step, total = ends[variant]
        rows += [
            {"variant": variant, "step": step, "cumulative_s": total},
            {"variant": variant, "step": end, "cumulative_s": total + (end - step) * float(rates[variant])},
        ]
    if not rows:
        return []
    dashed = (
        alt.Chart(pd.DataFrame(rows))
        .mark_line(strokeDash=PROJECTION_DASH, strokeWidth=2.5, opacity=0.9)
        .encode(
            x=alt.X("step:Q", title="step", axis=STEP_AXIS),
            y=alt.Y("cumulative_s:Q", title=y_title),
            color=variant_color(),
            detail="variant:N",
            tooltip=[alt.Tooltip("variant:N"), alt.Tooltip("step:Q"), alt.Tooltip("cumulative_s:Q", format=".1f")],
        )
    )
    label = projection.get("label") or words.projection_label(position, None, wall, live=False)
    if not on_chart:  # the crossing lies far beyond: name it where the dashed lines leave the chart
        top = max(r["cumulative_s"] for r in rows if r["step"] == end)
        edge = pd.DataFrame({"step": [end], "cumulative_s": [top], "label": [f"{label} →"]})
        text = (
            alt.Chart(edge)
            .mark_text(align="right", dx=-4, dy=-14, fontWeight="bold", color=NEUTRAL)
            .encode(x=alt.X("step:Q"), y=alt.Y("cumulative_s:Q"), text="label:N")
        )
        return [dashed, text]
    crossing = pd.DataFrame({"step": [position], "cumulative_s": [float(wall or 0.0)], "label": [label]})
    at = alt.Chart(crossing).encode(
        x=alt.X("step:Q", title="step", axis=STEP_AXIS),
        y=alt.Y("cumulative_s:Q", title=y_title),
        tooltip=[alt.Tooltip("label:N", title="projected break-even")],
    )
    ring = at.mark_point(shape="circle", size=140, strokeWidth=2.5, filled=False, color=NEUTRAL)
    text = at.mark_text(align="right", dx=-12, dy=-12, fontWeight="bold", color=NEUTRAL).encode(text="label:N")
    return [dashed, ring, text]


def lead_chart(
    steps: pd.DataFrame | None,
    break_even: Mapping[str, Any] | None = None,
    projection: Mapping[str, Any] | None = None,
) -> alt.LayerChart:
    """Compiled's lead over eager in seconds (eager's cumulative time minus compiled's, at the same
    step): below zero while compile is being paid off, crossing zero at break-even. Two nearly
    parallel cumulative lines cross too shallowly to see; this line crosses zero at a clear angle.
    With a projection (and no break-even yet) it continues dashed to zero."""
    data = train_steps(steps, ["variant", "epoch", "step", "time_s", "cumulative_s"])
    data = data[np.isfinite(data["cumulative_s"])]
    counts = variant_counts(data)
    wide = data.pivot_table(index="step", columns="variant", values="cumulative_s", aggfunc="last")
    if {"eager", "compiled"} <= set(wide.columns):
        wide = wide.dropna(subset=["eager", "compiled"])
        lead = pd.DataFrame({"step": wide.index.astype(int), "lead_s": (wide["eager"] - wide["compiled"]).to_numpy()})
    else:
        lead = pd.DataFrame({"step": pd.Series(dtype="int64"), "lead_s": pd.Series(dtype="float64")})
    x_end = race_x_end(data, projection if not (break_even and break_even.get("step") is not None) else None)
    x = alt.X("step:Q", title="step", axis=STEP_AXIS, scale=alt.Scale(domain=[0, x_end], nice=False))
    lead = downsample_stride(lead.assign(series="measured"), ["series"], MAX_POINTS_PER_VARIANT)
    y = alt.Y("lead_s:Q", title="compiled ahead by (s)")
    measured = (
        alt.Chart(lead)
        .mark_line(strokeWidth=2.5, color=VARIANT_COLORS["compiled"])
        .encode(
            x=x,
            y=y,
            tooltip=[alt.Tooltip("step:Q"), alt.Tooltip("lead_s:Q", title="compiled ahead by (s)", format=".2f")],
        )
    )
    zero = alt.Chart(pd.DataFrame({"lead_s": [0.0]})).mark_rule(color=NEUTRAL, strokeWidth=1).encode(y="lead_s:Q")
    layers: list[alt.Chart] = [zero, measured]
    crossing = None
    if break_even and break_even.get("step") is not None:
        crossing = float(break_even["step"])
    elif projection is not None and len(lead):
        position = float(projection["position"])
        start_step, start_lead = int(lead["step"].iloc[-1]), float(lead["lead_s"].iloc[-1])
        if position > start_step and start_lead < 0:
            end, on_chart = projection_reach(float(data["step"].max()), position)
            slope = -start_lead / (position - start_step)
            dashed = pd.DataFrame(
                {"step": [start_step, end], "lead_s": [start_lead, start_lead + slope * (end - start_step)]}
            )
            layers.append(
                alt.Chart(dashed)
                .mark_line(strokeDash=PROJECTION_DASH, strokeWidth=2.5, color=VARIANT_COLORS["compiled"])
                .encode(x=x, y=y)
            )
            crossing = position if on_chart else None
    if crossing is not None:
        point = pd.DataFrame({"step": [crossing], "lead_s": [0.0]})
        layers.append(
            alt.Chart(point)
            .mark_point(shape="circle", size=110, strokeWidth=2.5, filled=False, color=NEUTRAL)
            .encode(x=x, y=y, tooltip=[alt.Tooltip("step:Q", title="break-even", format=",.0f")])
        )
    return finish(layer(*layers), LEAD_TITLE, counts, "steps", height=LEAD_HEIGHT)


def epoch_chart(epochs: pd.DataFrame | None) -> alt.Chart:
    """Training seconds per epoch, eager and compiled side by side (the original tutorial's view):
    the slow compiled first epoch is the compile cost, the later ones the steady speedup."""
    data = with_columns(epochs, EPOCH_COLUMNS)[["variant", "epoch", "train_time_s", "eval_time_s"]]
    data = data[np.isfinite(data["train_time_s"].astype("float64"))]
    counts = variant_counts(data)
    has_eval = bool(data["eval_time_s"].astype("float64").notna().any())
    if not has_eval:  # a tooltip line "eval (s) null" says nothing a reader can use
        data = data.drop(columns="eval_time_s")
    chart = (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=alt.X("epoch:O", title="epoch", axis=alt.Axis(labelAngle=0)),
            xOffset=alt.XOffset("variant:N", scale=alt.Scale(domain=list(VARIANTS))),
            y=alt.Y("train_time_s:Q", title="training time (s)"),
            color=variant_color("square"),
            tooltip=[
                alt.Tooltip("variant:N"),
                alt.Tooltip("epoch:O"),
                alt.Tooltip("train_time_s:Q", title="train (s)", format=".2f"),
            ]
            + ([alt.Tooltip("eval_time_s:Q", title="eval (s)", format=".2f")] if has_eval else []),
        )
    )
    return finish(chart, EPOCH_TITLE, counts, "epochs")


def loss_chart(steps: pd.DataFrame | None) -> alt.LayerChart:
    """Training loss per step for both variants: the curves coincide because compile does not change
    the numerics, so eager is drawn wide and pale and compiled dashed on top of it (both stay
    visible). Steps without a loss (NaN) are dropped; long runs keep every k-th step + the last."""
    data = train_steps(steps, ["variant", "epoch", "step", "loss"])
    data = data[np.isfinite(data["loss"])]
    counts = variant_counts(data)
    data = downsample_stride(data, ["variant"], MAX_POINTS_PER_VARIANT)
    base = alt.Chart(data).encode(
        x=alt.X("step:Q", title="step", axis=STEP_AXIS),
        y=alt.Y("loss:Q", title="training loss", scale=alt.Scale(zero=False)),
        color=variant_color(),
        strokeDash=variant_dash(),
        tooltip=variant_tooltips() + [alt.Tooltip("loss:Q", format=".4f")],
    )
    eager = base.transform_filter(alt.datum.variant == "eager").mark_line(strokeWidth=5, opacity=0.45)
    compiled = base.transform_filter(alt.datum.variant == "compiled").mark_line(strokeWidth=2)
    return finish(layer(eager, compiled), LOSS_TITLE, counts, "steps")


def _break_even_layers(break_even: Mapping[str, Any] | None, y_title: str, last_step: int = 0) -> list[alt.Chart]:
    """Vertical rule at the break-even step, and a point + label at its wall time. The label sits on
    the side of the rule with more room, so a late break-even is not cut off at the right edge."""
    step = (break_even or {}).get("step")
    if step is None:
        return []
    wall_s = (break_even or {}).get("wall_s")
    has_wall = wall_s is not None and math.isfinite(float(wall_s))
    # Two lines: at a projector's 20 px one line ran past the plot's edge from a mid-run break-even.
    label = f"break-even: step {int(step):,}" + (f"\n({words.seconds(float(wall_s))})" if has_wall else "")
    point = pd.DataFrame({"step": [int(step)], "cumulative_s": [float(wall_s) if has_wall else 0.0], "label": [label]})
    base = alt.Chart(point).encode(x=alt.X("step:Q", title="step", axis=STEP_AXIS))
    late = last_step > 0 and int(step) > last_step / 2
    align, side = ("right", -1) if late else ("left", 1)
    rule = base.mark_rule(color="#555555", strokeDash=[4, 4], strokeWidth=1.5)
    tooltip = [alt.Tooltip("label:N", title="break-even")]
    if not has_wall:
        text = base.mark_text(align=align, dx=6 * side, y=12, fontWeight="bold").encode(text="label:N")
        return [rule.encode(tooltip=tooltip), text]
    at_wall = base.encode(y=alt.Y("cumulative_s:Q", title=y_title), tooltip=tooltip)
    dot = at_wall.mark_point(filled=True, size=90, color="#222222")
    text = at_wall.mark_text(align=align, dx=8 * side, dy=-10, baseline="bottom", lineBreak="\n", fontWeight="bold")
    text = text.encode(text="label:N")
    return [rule.encode(tooltip=tooltip), dot, text]


# ----------------------------------------------------------------------
# The speedup chart of a race that ran replicate processes: one dot per process (its steady speedup,
# with its own interval as a bar), the headline interval as a band across them, and 1x marked. It
# shows at a glance what the interval rests on: how far the processes agree (core.engine.intervals).
# A process that ran while the machine was busy, or failed, is drawn hollow and grey: it does not count;
# nor does a first process whose variants ran apart (turns epoch by epoch), where replicates count.

PROCESS_TITLE = "Speedup by process: one dot each"
PROCESS_HEIGHT = 220  # the plot's own height, in pixels (the title, axes and legend around it)
Y_TICKS = 5
Y_MARGIN = 0.01  # at least 1% of speedup each side of the dots
RAN_APART = "variants ran apart"  # a first process shown, not counted (core.engine.intervals.counted)


def process_rows(summary: Summary | Mapping[str, Any]) -> pd.DataFrame:
    """One row per process: its number, label, speedup, own interval's ends and whether it counts."""
    s = Summary.of(summary)
    first = ProcessResult.from_dict(s.first_process)
    processes = ([first] if first is not None else []) + processes_of(list(s.replicates))
    used = {p.number for p in counted(processes)}
    rows = []
    for p in processes:
        if p.speedup is None:
            continue
        half = p.log_half if p.log_half is not None else 0.0
        rows.append(
            {
                "process": p.number,
                "label": "first" if p.number == 1 else f"replicate {p.number - 1}",
                "speedup": p.speedup,
                "low": p.speedup * math.exp(-half),
                "high": p.speedup * math.exp(half),
                "counts": (
                    "counts"
                    if p.number in used
                    else "busy machine"
                    if p.was_busy
                    else RAN_APART
                    if p.counts
                    else "no interval"
                ),
            }
        )
    return pd.DataFrame(rows, columns=["process", "label", "speedup", "low", "high", "counts"])


def process_chart(summary: Summary | Mapping[str, Any]) -> alt.LayerChart:
    """The processes' speedups side by side, the headline's 95% interval behind them."""
    s = Summary.of(summary)
    data = process_rows(s)
    ci = s.speedup_ci95 or (None, None)
    x = alt.X("process:O", title="process (1: the first, which compiled cold)", axis=alt.Axis(labelAngle=0))
    y_scale = alt.Scale(domain=list(speedup_domain(data, ci)), zero=False, nice=False)
    y_axis = alt.Axis(title="steady speedup (x)", format=".2f", tickCount=Y_TICKS, ticks=True, labels=True, grid=True)
    tooltip = [
        alt.Tooltip("label:N", title="process"),
        alt.Tooltip("speedup:Q", format=".3f"),
        alt.Tooltip("low:Q", title="its own 95% from", format=".3f"),
        alt.Tooltip("high:Q", title="to", format=".3f"),
        alt.Tooltip("counts:N", title="in the headline"),
    ]
    colour = alt.Color(
        "counts:N",
        scale=alt.Scale(
            domain=["counts", "busy machine", RAN_APART, "no interval"],
            range=[VARIANT_COLORS["compiled"], NEUTRAL, NEUTRAL, NEUTRAL],
        ),
        legend=alt.Legend(title=None, orient="bottom"),
    )
    layers = []
    if ci[0] is not None and ci[1] is not None:
        band = pd.DataFrame([{"low": ci[0], "high": ci[1], "point": s.steady_state_speedup}])
        layers.append(alt.Chart(band).mark_rect(opacity=0.15, color=VARIANT_COLORS["compiled"]).encode(
            y=alt.Y("low:Q", scale=y_scale, axis=y_axis), y2="high:Q"
        ))  # fmt: skip
        layers.append(alt.Chart(band).mark_rule(color=VARIANT_COLORS["compiled"]).encode(
            y=alt.Y("point:Q", scale=y_scale, axis=y_axis)
        ))  # fmt: skip
    one = pd.DataFrame([{"one": 1.0}])
    layers.append(alt.Chart(one).mark_rule(strokeDash=[4, 4], color=NEUTRAL).encode(
        y=alt.Y("one:Q", scale=y_scale, axis=y_axis)
    ))  # fmt: skip
    base = alt.Chart(data).encode(x=x, tooltip=tooltip)
    layers.append(
        base.mark_rule(strokeWidth=2).encode(y=alt.Y("low:Q", scale=y_scale, axis=y_axis), y2="high:Q", color=colour)
    )
    layers.append(
        base.mark_point(size=90, filled=True).encode(y=alt.Y("speedup:Q", scale=y_scale, axis=y_axis), color=colour)
    )
    counts = {"eager": 0, "compiled": len(data)}
    subtitle = "band: the race's 95% interval; dashed: 1x, no difference"
    chart = finish(layer(*layers), PROCESS_TITLE, counts, "processes", PROCESS_HEIGHT, subtitle)
    # The height is the plot's own: with the page's full width (fit) the title, the axes and the
    # legend came out of it, and left the dots a strip of a few pixels on the 1x line.
    chart.autosize = alt.AutoSizeParams(type="fit-x", contains="content")
    return chart


def speedup_domain(data: pd.DataFrame, ci: tuple[float | None, float | None]) -> tuple[float, float]:
    """The y axis's span: every dot, its own interval and the headline band, and 1x, with a margin
    of a tenth of the span each side (at least Y_MARGIN), so a dot a few percent off 1x sits clear of it."""
    values = [1.0, *data["low"], *data["high"], *(v for v in ci if v is not None)]
    low, high = min(values), max(values)
    margin = max((high - low) * 0.1, Y_MARGIN)
    return low - margin, high + margin


# ----------------------------------------------------------------------
# The Runs page's overlays: several runs' step times or cumulative times on one chart (colour = run,
# dash = variant), to compare models or settings. DataFrame in, chart out; what they share with a
# race's charts is above.

# Runs in an overlay: neither blue nor orange (those mean eager and compiled everywhere else), and
# far apart in hue and lightness so two runs never look like one.
RUN_COLORS = ["#1B9E77", "#7570B3", "#E7298A", "#66A61E", "#A6761D", "#E6AB02", "#666666", "#17BECF"]
MAX_OVERLAY_POINTS = 4000  # all series of an overlay together, under Altair's 5,000-row limit
MIN_OVERLAY_POINTS_PER_SERIES = 100
OVERLAY_STEP_TITLE = "Step time per step, by run"
OVERLAY_CUMULATIVE_TITLE = "Cumulative training time, by run"


def overlay_step_chart(steps: pd.DataFrame | None, log_scale: bool = False) -> alt.Chart:
    """Step time of several runs on one chart (colour = run, dash = variant) to compare models or
    settings: each series' rolling median (raw steps of several runs are a thicket; the tooltip keeps
    the raw time), the axis cut above the steady steps as in step_time_chart unless log_scale. Each
    series is downsampled by bucket maximum so compile spikes survive in the data."""
    data = train_steps(steps, ["run", "variant", "epoch", "step", "time_s"])
    data = data[np.isfinite(data["time_s"]) & ((data["time_s"] > 0) if log_scale else True)]
    counts = variant_counts(data)
    data = data.assign(time_ms=data["time_s"] * 1000.0).drop(columns="time_s").reset_index(drop=True)
    data["median_ms"] = rolling_median(data, "time_ms", ["run", "variant"]) if len(data) else pd.Series(dtype=float)
    ceiling = None if log_scale else steady_ceiling_ms(data, ["run", "variant"])
    data = downsample_keep_max(data, "time_ms", ["run", "variant"], _overlay_points_per_series(data))
    if ceiling is not None:
        y_scale = alt.Scale(domain=[0, ceiling], clamp=True, nice=False)
    else:
        y_scale = _y_scale(log_scale)
    y_title = "median step time (ms)"  # short enough for a phone; the cut is said under the title
    chart = (
        alt.Chart(data)
        .mark_line(strokeWidth=2.5)
        .encode(
            x=alt.X("step:Q", title="step"),
            y=alt.Y("median_ms:Q", title=y_title, scale=y_scale),
            color=_run_color(data),
            strokeDash=variant_dash(separate=True),
            tooltip=[alt.Tooltip("run:N")]
            + variant_tooltips()
            + [
                alt.Tooltip("time_ms:Q", title="time (ms)", format=".2f"),
                alt.Tooltip("median_ms:Q", title="median of nearby steps (ms)", format=".2f"),
            ],
        )
    )
    subtitle = f"axis cut at {ceiling:,.0f} ms, above the steady steps" if ceiling is not None else None
    return finish(chart, OVERLAY_STEP_TITLE, counts, "steps", height=_overlay_height(data), subtitle=subtitle)


def overlay_cumulative_chart(steps: pd.DataFrame | None) -> alt.Chart:
    """Cumulative training time of several runs on one chart (colour = run, dash = variant): which
    settings pay off their compile soonest. Long series keep every k-th step + the last."""
    data = train_steps(steps, ["run", "variant", "epoch", "step", "cumulative_s"])
    data = data[np.isfinite(data["cumulative_s"])]
    counts = variant_counts(data)
    data = downsample_stride(data, ["run", "variant"], _overlay_points_per_series(data))
    chart = (
        alt.Chart(data)
        .mark_line(strokeWidth=2.5)
        .encode(
            x=alt.X("step:Q", title="step"),
            y=alt.Y("cumulative_s:Q", title="cumulative training time (s)"),
            color=_run_color(data),
            strokeDash=variant_dash(separate=True),
            tooltip=[alt.Tooltip("run:N")]
            + variant_tooltips()
            + [alt.Tooltip("cumulative_s:Q", title="cumulative (s)", format=".2f")],
        )
    )
    return finish(chart, OVERLAY_CUMULATIVE_TITLE, counts, "steps", height=_overlay_height(data))


def _overlay_height(data: pd.DataFrame) -> int:
    """Room for the plot plus one legend line per run and the line-style legend (Streamlit's theme
    takes legends out of the height, so a fixed height squashes the plot as runs are added)."""
    return CHART_HEIGHT + 80 + 22 * len(pd.unique(data["run"]))


def _overlay_points_per_series(data: pd.DataFrame) -> int:
    """Share MAX_OVERLAY_POINTS among the overlay's (run, variant) series."""
    series = max(1, len(data.drop_duplicates(["run", "variant"])))
    return min(MAX_POINTS_PER_VARIANT, max(MIN_OVERLAY_POINTS_PER_SERIES, MAX_OVERLAY_POINTS // series))


def _y_scale(log_scale: bool) -> alt.Scale:
    return alt.Scale(type="log") if log_scale else alt.Scale()


def _run_color(data: pd.DataFrame) -> alt.Color:
    # Runs keep the order they were given in (newest first, say), not alphabetical "#12" < "#9".
    runs = [str(r) for r in pd.unique(data["run"])]
    return alt.Color(
        "run:N",
        title=None,
        sort=runs,
        scale=alt.Scale(domain=runs, range=[RUN_COLORS[i % len(RUN_COLORS)] for i in range(len(runs))]),
        legend=alt.Legend(orient="top", direction="vertical", labelLimit=0, symbolType="stroke", symbolStrokeWidth=4),
    )
