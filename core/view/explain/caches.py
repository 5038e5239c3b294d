"""The compile-time explainer's presentation: cold against warm cache (torch's own phase timers
beside the wall time), and what recompiles when the input shapes change."""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd

from core.view.explain.figures import finish
from core.view.report import probe_worth_naming
from core.view.run_screen.why_per_step import phase_table

CACHE_COLORS = {"cold": "#5F6B73", "warm": "#A9B4BB"}  # neutral: orange means "compiled" everywhere else


def caches_chart(result: dict[str, Any]) -> alt.Chart:
    """Cold against warm compile time of the same model, each measured in a fresh process."""
    rows = [
        {"cache": name, "compile_s": result[name]["compile_s"]}
        for name in ("cold", "warm")
        if isinstance(result.get(name), dict) and "compile_s" in result[name]
    ]
    data = pd.DataFrame(rows, columns=["cache", "compile_s"])
    chart = (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=alt.X("compile_s:Q", title="compile time (s)"),
            y=alt.Y("cache:N", title=None, sort=["cold", "warm"]),
            color=alt.Color(
                "cache:N",
                scale=alt.Scale(domain=["cold", "warm"], range=[CACHE_COLORS["cold"], CACHE_COLORS["warm"]]),
                legend=None,
            ),
            tooltip=[alt.Tooltip("cache:N"), alt.Tooltip("compile_s:Q", format=".2f", title="seconds")],
        )
    )
    return finish(chart, f"Compile time of {result.get('model', '?')}: cold vs warm cache", "cold vs warm compile time")


def cache_phase_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Torch's own phase breakdown for the cold and warm compile, side by side (seconds): forward
    and backward graphs apart, each phase without the phases nested in it, so each part's rows add
    up to its total and the two totals to the whole."""
    cold = (result.get("cold") or {}).get("phases") or {}
    warm = (result.get("warm") or {}).get("phases") or {}
    return [
        {"graph": graph, "phase": phase, "cold (s)": cold_s, "warm (s)": warm_s}
        for graph, phase, cold_s, warm_s in phase_table(cold, warm)
    ]


def phase_total_s(breakdown: dict[str, Any]) -> float | None:
    """Torch's own compile time from a compile_stats.compile_breakdown: forward plus backward."""
    total = (breakdown or {}).get("total_s")
    return float(total) if isinstance(total, int | float) else None


def caches_wall_vs_phases(result: dict[str, Any]) -> str | None:
    """Why the bar (wall time of the first step) is longer than torch's compile total, with the numbers."""
    cold = result.get("cold") or {}
    wall, total = cold.get("compile_s"), phase_total_s(cold.get("phases") or {})
    if wall is None or total is None:
        return None
    gap = wall - total
    if gap > 0.05:
        rest = (
            f"the other {gap:.1f} s of the bar is work outside those timers: loading the compiled kernels and "
            "running the new code for the first time"
        )
    elif gap < -0.05:
        rest = f"they come to {-gap:.1f} s more than the bar, which subtracts a steady step that varies too"
    else:
        rest = "they account for all of the bar"
    probe = probe_worth_naming(cold.get("cpu_isa_probe_s"))
    if probe is not None:
        rest += (
            f". Neither counts Inductor's one-time CPU feature probe ({probe:.1f} s in the cold process): a "
            "machine pays it once, not once per model"
        )
    return (
        f"The bar is wall time: the first training step minus a steady one ({wall:.1f} s cold). The table is "
        f"torch's own timers for the compile, forward and backward graphs apart; they add up to {total:.1f} s, "
        f"and {rest}."
    )


def recompile_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per `dynamic` setting: graphs, recompiles, total time over the input lengths."""
    rows = result.get("recompiles")
    if not isinstance(rows, list):
        return []
    return [
        {
            "dynamic=": r["dynamic"],
            "input lengths": ", ".join(str(c["length"]) for c in r["calls"]),
            "graphs": r["graphs"],
            "recompiles": r["recompiles"],
            "total time (s)": round(r["total_s"], 3),
            "first reason": (r.get("recompile_reasons") or ["-"])[0],
        }
        for r in rows
    ]
