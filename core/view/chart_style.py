"""What every run chart shares (core.view.race_charts, core.view.overlay_charts, and the sweep's and
explainers' colours): eager's and compiled's colours and dashes, heights and fonts, downsampling,
the frames' expected columns, and the finish every chart gets.

Pure (no Streamlit, no torch). Pages rebuild these charts every second while a run is live, so
every builder is a handful of vectorised pandas operations on a trimmed copy of the data, and never
hands Altair more than ~2,000 points per series (Altair refuses inline data over 5,000 rows anyway).

Every chart carries a top-level `description` (the SVG's aria text) of the exact form
"{title}: {n_eager} eager steps, {n_compiled} compiled steps" ("... epochs" for the epoch chart);
the counts are the rows the chart was given (before downsampling), so a browser test can watch
them grow. Empty input gives a valid, empty chart whose title ends in "(waiting for data)".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import altair as alt
import numpy as np
import pandas as pd

from core.engine.analysis import default_warmup
from core.engine.events import VARIANTS

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
