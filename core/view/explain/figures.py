"""What the explainers' charts share: fonts and the finish (title, height, aria description), and
the eager-against-compiled lines with each point's spread that fusion and overhead draw."""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd

from core.view.chart_style import VARIANT_COLORS

FONT = {"labelFontSize": 14, "titleFontSize": 15}


def finish(chart: alt.Chart, title: str | list[str], description: str) -> alt.Chart:
    """Title, height, aria description and projector-sized fonts, the same on every explainer chart."""
    return (
        chart.properties(title=title, height=300, description=description)
        .configure_axis(**FONT)
        .configure_legend(labelFontSize=13, titleFontSize=14, orient="top")
        .configure_title(fontSize=17, anchor="start")
    )


def variants_long(rows: list[dict[str, Any]], x: str, fields: dict[str, str]) -> pd.DataFrame:
    """Wide rows (eager_ms, compiled_ms) to long form with a `variant` column for Altair; where the
    rows carry a spread (eager_ms_low / eager_ms_high) it comes along as low / high."""
    long = [
        {
            x: r[x],
            "variant": variant,
            "value": r[field],
            "low": r.get(f"{field}_low", r[field]),
            "high": r.get(f"{field}_high", r[field]),
        }
        for r in rows
        for variant, field in fields.items()
    ]
    return pd.DataFrame(long, columns=[x, "variant", "value", "low", "high"])


# A repeat this many times the largest median would flatten the medians a chart is read for: the
# y axis stops here and a bar that goes past it is cut (the title says where, and how far it went).
OUTLIER_CUT = 3.0


def outlier_cut(data: pd.DataFrame) -> float | None:
    """Where the y axis stops so that outlying repeats do not flatten the medians; None when none go past."""
    if data.empty:
        return None
    top = float(data["value"].max()) * OUTLIER_CUT
    return top if float(data["high"].max()) > top else None


def variant_lines(
    data: pd.DataFrame, x: str, x_title: str, y_title: str, fmt: str, cut: float | None = None
) -> alt.LayerChart:
    """Median per variant as a line (compiled drawn last, on top), each point's spread as a bar
    (a `verdict` column, where the data has one, in the tooltips); with `cut`, the y axis ends there and longer bars are cut at it (their tooltip keeps the value)."""
    scale = alt.Scale(domain=list(VARIANT_COLORS), range=list(VARIANT_COLORS.values()))
    y_scale = alt.Scale(domain=[0, cut], clamp=True) if cut else alt.Undefined
    base = alt.Chart(data).encode(
        x=alt.X(f"{x}:Q", title=x_title, scale=alt.Scale(type="log", base=2)),
        color=alt.Color(
            "variant:N",
            scale=scale,
            title=None,
            sort=list(VARIANT_COLORS),
            legend=alt.Legend(symbolType="stroke", symbolStrokeWidth=4),
        ),
        tooltip=[
            alt.Tooltip(f"{x}:Q"),
            alt.Tooltip("variant:N"),
            alt.Tooltip("value:Q", format=fmt, title=f"{y_title}, median"),
            alt.Tooltip("low:Q", format=fmt, title="lowest repeat"),
            alt.Tooltip("high:Q", format=fmt, title="highest repeat"),
            *([alt.Tooltip("verdict:N", title="this point")] if "verdict" in data.columns else []),
        ],
    )
    layers = []  # every layer keeps base's colour encoding: one with legend=None would hide the shared legend
    for variant in VARIANT_COLORS:
        mine = base.transform_filter(alt.datum.variant == variant)
        layers.append(
            mine.mark_rule(strokeWidth=6, opacity=0.35).encode(
                y=alt.Y("low:Q", title=y_title, scale=y_scale), y2="high:Q"
            )
        )
        layers.append(
            mine.mark_line(point=True, strokeWidth=2.5).encode(y=alt.Y("value:Q", title=y_title, scale=y_scale))
        )
    return alt.layer(*layers)
