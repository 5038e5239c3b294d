"""The speedup chart of a race that ran replicate processes: one dot per process (its steady speedup,
with its own interval as a bar), the headline interval as a band across them, and 1x marked. It
shows at a glance what the interval rests on: how far the processes agree (core.engine.replicates).
A process that ran while the machine was busy, or failed, is drawn hollow and grey: it does not count;
nor does a first process whose variants ran apart (turns epoch by epoch), where replicates count.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import altair as alt
import pandas as pd

from core.engine.replicates import ProcessResult, counted, processes_of
from core.engine.summary import Summary
from core.view.chart_style import NEUTRAL, VARIANT_COLORS, finish, layer

PROCESS_TITLE = "Speedup by process: one dot each"
PROCESS_HEIGHT = 220  # the plot's own height, in pixels (the title, axes and legend around it)
Y_TICKS = 5
Y_MARGIN = 0.01  # at least 1% of speedup each side of the dots
RAN_APART = "variants ran apart"  # a first process shown, not counted (core.engine.replicates.counted)


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
