"""The Runs page's overlays: several runs' step times or cumulative times on one chart (colour = run,
dash = variant), to compare models or settings. DataFrame in, chart out; what they share with the
race's charts is core.view.chart_style's.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from core.view.chart_style import (
    CHART_HEIGHT,
    MAX_POINTS_PER_VARIANT,
    downsample_keep_max,
    downsample_stride,
    finish,
    rolling_median,
    steady_ceiling_ms,
    train_steps,
    variant_counts,
    variant_dash,
    variant_tooltips,
)

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
