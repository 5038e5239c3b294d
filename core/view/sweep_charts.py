"""Altair charts of a sweep: steady speedup with its 95% interval, compile time, break-even step
and throughput, each against the swept axis. Pure: a sweep frame (core.view.sweep) in, chart out.

Only measured points are drawn (done, with compiled code). Batch size goes on a log-2 axis; a
categorical axis keeps the order its values were given in; a second axis is the colour (for
throughput, where colour means eager and compiled, it is the dash). Every chart's `description`
reads "{title}: {n} points" (the points drawn), so tests and a browser can watch it grow; no
point yet gives a valid empty chart titled "... (waiting for data)".
"""

from __future__ import annotations

import copy
import json
from collections import OrderedDict
from typing import Any

import altair as alt
import numpy as np
import pandas as pd

from core.runs.sweeps import AXES, SweepSpec
from core.view.race_charts import CHART_HEIGHT, VARIANT_COLORS, WAITING, variant_color_scale
from core.view.sweep import EXTRAPOLATED, OBSERVED, chart_axes

SPEEDUP_TITLE = "Steady-state speedup"
COMPILE_TITLE = "Compile time"
BREAK_EVEN_TITLE = "Break-even step"
THROUGHPUT_TITLE = "Throughput, eager vs compiled"
SINGLE_COLOR = VARIANT_COLORS["compiled"]
NEVER = " (no point breaks even)"


def _measured(frame: pd.DataFrame, *columns: str) -> pd.DataFrame:
    """The measured points with a finite first column, and only the columns a chart needs: Altair
    sanitizes every column it is given, on every refresh."""
    data = frame[frame["measured"].astype(bool)] if len(frame) else frame
    data = data[np.isfinite(data[columns[0]].astype("float64"))] if len(data) else data
    data = data[["label", "x", "series", *columns]].copy()
    data["x_label"] = data["x"].astype(str)
    for column in columns:
        if column not in ("verdict", "break_even_kind"):
            data[column] = data[column].astype("float64")
    return data


def _x(sweep: SweepSpec) -> alt.X:
    x_axis, _ = chart_axes(sweep)
    title = AXES[x_axis][0] if x_axis in AXES else x_axis
    if x_axis == "batch_size":
        return alt.X("x:Q", title=f"{title} (log 2)", scale=alt.Scale(type="log", base=2), axis=alt.Axis(format="d"))
    order = [str(v) for v in sweep.axis(x_axis).values]
    return alt.X("x_label:N", title=title, sort=order, axis=alt.Axis(labelAngle=0))


def _color(sweep: SweepSpec) -> alt.Color | alt.value:
    _, series_axis = chart_axes(sweep)
    if series_axis is None:
        return alt.value(SINGLE_COLOR)
    order = [str(v) for v in sweep.axis(series_axis).values]
    return alt.Color("series:N", title=AXES[series_axis][0], sort=order)


def _fill(sweep: SweepSpec) -> alt.Fill | alt.value:
    _, series_axis = chart_axes(sweep)
    if series_axis is None:
        return alt.value(SINGLE_COLOR)
    return alt.Fill("series:N", legend=None, sort=[str(v) for v in sweep.axis(series_axis).values])


def _quantitative(sweep: SweepSpec) -> bool:
    return chart_axes(sweep)[0] == "batch_size"


def _tooltip(*extra: alt.Tooltip) -> list[alt.Tooltip]:
    return [alt.Tooltip("label:N", title="point"), *extra]


def speedup_chart(sweep: SweepSpec, frame: pd.DataFrame) -> alt.LayerChart:
    """Median eager / median compiled step per point, with its bootstrap 95% interval as an error
    bar; the dashed line at 1 is "no faster"."""
    data = _measured(frame, "speedup", "ci_low", "ci_high", "verdict")
    tip = _tooltip(
        alt.Tooltip("speedup:Q", format=".2f", title="speedup"),
        alt.Tooltip("ci_low:Q", format=".2f", title="95% low"),
        alt.Tooltip("ci_high:Q", format=".2f", title="95% high"),
        alt.Tooltip("verdict:N"),
    )
    # One dataset for all layers, each layer encoded once: Altair copies and sanitizes per call.
    x, color = _x(sweep), _color(sweep)
    layers = [
        alt.Chart().mark_rule(color="#555555", strokeDash=[4, 4]).encode(y=alt.datum(1.0)),
        alt.Chart()
        .mark_rule(strokeWidth=2)
        .encode(x=x, color=color, y=alt.Y("ci_low:Q", title="steady speedup (x)"), y2=alt.Y2("ci_high:Q")),
        alt.Chart().mark_point(filled=True, size=90).encode(x=x, color=color, y=alt.Y("speedup:Q"), tooltip=tip),
    ]
    if _quantitative(sweep):
        layers.insert(
            1, alt.Chart().mark_line(strokeWidth=1.5, opacity=0.6).encode(x=x, color=color, y=alt.Y("speedup:Q"))
        )
    return _finish(alt.layer(*layers, data=data), SPEEDUP_TITLE, len(data))


def compile_time_chart(sweep: SweepSpec, frame: pd.DataFrame) -> alt.Chart:
    """What compile cost at each point: the first compiled steps minus the same eager steps."""
    data = _measured(frame, "compile_time_s")
    tip = _tooltip(alt.Tooltip("compile_time_s:Q", format=".1f", title="compile (s)"))
    y = alt.Y("compile_time_s:Q", title="compile time (s)")
    return _finish(_marks(sweep, data, y, tip), COMPILE_TITLE, len(data))


def break_even_chart(sweep: SweepSpec, frame: pd.DataFrame) -> alt.Chart:
    """The step at which compile has paid for itself: filled where it happened within the run,
    hollow where it is extrapolated from the steady rates (log scale). Points that never break
    even are not drawn; the page lists them."""
    data = _measured(frame, "break_even_at", "break_even_kind")
    data = data[data["break_even_at"] > 0] if len(data) else data
    tip = _tooltip(
        alt.Tooltip("break_even_at:Q", format=",.0f", title="break-even step"),
        alt.Tooltip("break_even_kind:N", title="found"),
    )
    chart = (
        alt.Chart(data)
        .mark_point(size=110, strokeWidth=2)
        .encode(
            x=_x(sweep),
            y=alt.Y("break_even_at:Q", title="break-even step (log)", scale=alt.Scale(type="log")),
            color=_color(sweep),
            shape=alt.Shape("break_even_kind:N", title="break-even", sort=[OBSERVED, EXTRAPOLATED]),
            fill=_fill(sweep),
            fillOpacity=alt.FillOpacity(
                "break_even_kind:N", scale=alt.Scale(domain=[OBSERVED, EXTRAPOLATED], range=[1.0, 0.0]), legend=None
            ),
            tooltip=tip,
        )
    )
    measured = int(frame["measured"].astype(bool).sum()) if len(frame) else 0
    return _finish(chart, BREAK_EVEN_TITLE, len(data), NEVER if measured and data.empty else WAITING)


def throughput_chart(sweep: SweepSpec, frame: pd.DataFrame) -> alt.Chart:
    """Samples per second at the steady median step, eager (blue) and compiled (orange)."""
    data = _measured(frame, "compiled_samples_per_s", "eager_samples_per_s")
    long = (
        data.melt(
            id_vars=["label", "x", "x_label", "series"],
            value_vars=["eager_samples_per_s", "compiled_samples_per_s"],
            var_name="variant",
            value_name="samples_per_s",
        ).assign(variant=lambda d: d["variant"].str.replace("_samples_per_s", "", regex=False))
        if len(data)
        else pd.DataFrame(columns=["label", "x", "x_label", "series", "variant", "samples_per_s"])
    )
    _, series_axis = chart_axes(sweep)
    encoding = dict(
        x=_x(sweep),
        y=alt.Y("samples_per_s:Q", title="samples per second"),
        color=alt.Color("variant:N", title="variant", scale=variant_color_scale(), sort=["eager", "compiled"]),
        tooltip=_tooltip(alt.Tooltip("variant:N"), alt.Tooltip("samples_per_s:Q", format=",.0f", title="samples/s")),
    )
    if _quantitative(sweep):
        detail = {"strokeDash": alt.StrokeDash("series:N", title=AXES[series_axis][0])} if series_axis else {}
        chart = alt.Chart(long).mark_line(point=alt.OverlayMarkDef(size=60)).encode(**encoding, **detail)
    else:
        if series_axis:  # both axes categorical: one group of bars per (x, series)
            encoding["x"] = alt.X("group:N", title=f"{AXES[chart_axes(sweep)[0]][0]} / {AXES[series_axis][0]}")
            long = long.assign(group=long["x_label"].astype(str) + " / " + long["series"].astype(str))
        offset = alt.XOffset("variant:N", sort=["eager", "compiled"])
        chart = alt.Chart(long).mark_bar().encode(**encoding, xOffset=offset)
    return _finish(chart, THROUGHPUT_TITLE, len(data))


def _marks(sweep: SweepSpec, data: pd.DataFrame, y: alt.Y, tip: list) -> alt.Chart | alt.LayerChart:
    """Line and points along a batch-size axis; bars (side by side per series) along a categorical one."""
    encoding = dict(x=_x(sweep), y=y, color=_color(sweep), tooltip=tip)
    if _quantitative(sweep):
        return (
            alt.Chart(data)
            .mark_line(point=alt.OverlayMarkDef(size=70, filled=True), strokeWidth=1.5)
            .encode(**encoding)
        )
    _, series_axis = chart_axes(sweep)
    if series_axis:
        encoding["xOffset"] = alt.XOffset("series:N", sort=[str(v) for v in sweep.axis(series_axis).values])
    return alt.Chart(data).mark_bar().encode(**encoding)


_SHOWN_COLUMNS = ["label", "x", "series", "measured", "speedup", "ci_low", "ci_high", "verdict", "compile_time_s",
                  "break_even_at", "break_even_kind", "eager_samples_per_s", "compiled_samples_per_s"]  # fmt: skip
_SPEC_CACHE: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
_SPEC_CACHE_SIZE = 32


def nothing_to_chart(frame: pd.DataFrame) -> bool:
    """Points were measured, and none of them has a break-even to draw (none reached, none
    projected: they are slower, in doubt, or measured on a busy machine). The break-even chart is
    then not drawn empty; its place says why (core.view.sweep.break_even_note)."""
    if not len(frame):
        return False
    measured = frame[frame["measured"].astype(bool)]
    return bool(len(measured)) and bool(measured["break_even_kind"].isna().all())


def chart_specs(sweep: SweepSpec, frame: pd.DataFrame) -> list[dict[str, Any] | None]:
    """The four charts as Vega-Lite specs (speedup, compile time, break-even, throughput), cached
    on what they draw; None in the break-even's place where there is nothing to chart
    (nothing_to_chart). While a point runs nothing they draw changes, so the page's refresh every
    second reuses them (building and serializing an Altair chart costs tens of ms)."""
    key = json.dumps(sweep.to_dict(), sort_keys=True) + frame[_SHOWN_COLUMNS].to_json()
    specs = _SPEC_CACHE.get(key)
    if specs is None:
        empty = nothing_to_chart(frame)
        builders = (speedup_chart, compile_time_chart, None if empty else break_even_chart, throughput_chart)
        # Not validated again here: tests validate every kind of chart these builders make.
        specs = [build(sweep, frame).to_dict(validate=False) if build else None for build in builders]
        _SPEC_CACHE[key] = specs
        while len(_SPEC_CACHE) > _SPEC_CACHE_SIZE:
            _SPEC_CACHE.popitem(last=False)
    else:
        _SPEC_CACHE.move_to_end(key)
    return copy.deepcopy(specs)  # Streamlit moves datasets out of the spec it is given


# Projector-sized fonts, legend on top: one Config object, assigned (configure_* would copy the chart).
CONFIG = alt.Config(
    axis=alt.AxisConfig(labelFontSize=13, titleFontSize=15),
    legend=alt.LegendConfig(labelFontSize=13, titleFontSize=14, orient="top"),
    title=alt.TitleConfig(fontSize=17, anchor="start"),
)


def _finish(chart, title: str, points: int, empty_note: str = WAITING):
    """Title, aria description, height and fonts, set in place on the chart just built."""
    chart.title = title + (empty_note if points == 0 else "")
    chart.description = f"{title}: {points} points"
    chart.height = CHART_HEIGHT
    chart.config = CONFIG
    return chart
