"""The compile-time explainer's presentation: cold against warm cache (torch's own phase timers
beside the wall time), and what recompiles when the input shapes change."""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd

from core.engine import words
from core.view.explain.figures import finish
from core.view.report import probe_worth_naming
from core.view.run_screen.why_per_step import phase_table

CACHE_COLORS = {"cold": "#5F6B73", "warm": "#A9B4BB", "fresh machine": "#87939B"}  # neutral: orange is "compiled"
# The three compiles, as the chart and the table name them: the result's key, the name shown.
COMPILES = (("cold", "cold"), ("warm", "warm"), ("portable", "fresh machine"))


def portable_total_s(run: dict[str, Any]) -> float | None:
    """What a fresh machine pays with shipped artifacts: loading them, then its compile."""
    if not isinstance(run.get("compile_s"), int | float):
        return None
    return float(run["compile_s"]) + float(run.get("load_s") or 0.0)


def caches_chart(result: dict[str, Any]) -> alt.Chart:
    """Cold, warm and fresh-machine compile time of the same model, each measured in a fresh process
    (the fresh machine's bar includes loading the artifacts)."""
    rows = []
    for key, name in COMPILES:
        run = result.get(key)
        if isinstance(run, dict) and "compile_s" in run:
            rows.append({"cache": name, "compile_s": portable_total_s(run) if key == "portable" else run["compile_s"]})
    order = [row["cache"] for row in rows]  # COMPILES' order, the ones measured
    data = pd.DataFrame(rows, columns=["cache", "compile_s"])
    chart = (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=alt.X("compile_s:Q", title="compile time (s)"),
            y=alt.Y("cache:N", title=None, sort=order),
            color=alt.Color(
                "cache:N",
                scale=alt.Scale(domain=order, range=[CACHE_COLORS[name] for name in order]),
                legend=None,
            ),
            tooltip=[alt.Tooltip("cache:N"), alt.Tooltip("compile_s:Q", format=".2f", title="seconds")],
        )
    )
    return finish(
        chart,
        f"Compile time of {result.get('model', '?')}: cold, warm, and a fresh machine with the cache shipped",
        "cold, warm and fresh-machine compile time",
    )


def cache_phase_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Torch's own phase breakdown for the cold and warm compile, side by side (seconds): forward
    and backward graphs apart, each phase without the phases nested in it, so each part's rows add
    up to its total and the two totals to the whole."""
    runs = [(name, result.get(key) or {}) for key, name in COMPILES if isinstance(result.get(key), dict)]
    runs = [(name, run) for name, run in runs if "error" not in run or name == "cold"]
    rows = []
    for graph, phase, *seconds in phase_table(*(run.get("phases") or {} for _, run in runs)):
        row = {"graph": graph, "phase": phase}
        for (name, run), s in zip(runs, seconds):
            row[f"{name} (s)"] = seconds_cell(s, run)
        rows.append(row)
    return rows


NOT_RUN = "not run: read from the cache"
NOT_TIMED = "not timed"


def seconds_cell(seconds: float | None, compile_run: dict[str, Any]) -> str:
    """A phase's seconds as the table shows them; where a phase has none, why: a compile that hit
    the cache never ran it (its timer never started), else torch's timers did not record it."""
    if seconds is not None:
        return f"{seconds:.3f}"
    hits = compile_run.get("cache_hits")
    return NOT_RUN if isinstance(hits, int) and hits > 0 else NOT_TIMED


def portable_words(result: dict[str, Any]) -> str | None:
    """What shipping the cache saves a fresh machine, with the numbers: the artifacts' size, loading
    them, the compile after, against cold and warm; or why it was not measured."""
    portable, cold, warm = (result.get(k) or {} for k in ("portable", "cold", "warm"))
    if portable.get("error"):
        return f"A fresh machine with the cache shipped was not measured: {portable['error']}."
    total = portable_total_s(portable)
    if total is None or not isinstance(cold.get("compile_s"), int | float):
        return None
    warm_s = warm.get("compile_s")
    beside = f", against {words.seconds(cold['compile_s'])} cold" + (
        f" and {words.seconds(warm_s)} warm" if isinstance(warm_s, int | float) else ""
    )
    return (
        f"A fresh machine (a new process, an empty cache) that loads the {words.bytes_(cold.get('artifact_bytes') or 0)} "
        f"of artifacts the cold compile saved (torch.compiler.save_cache_artifacts, then load_cache_artifacts) pays "
        f"{words.seconds(total)}: {words.seconds(float(portable.get('load_s') or 0.0))} to load them and "
        f"{words.seconds(portable['compile_s'])} to compile{beside}. Dynamo still traces the model (its row in the "
        "table); the stages the artifacts hold are read, not run."
    )


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
            "cache": CACHE_WORDS.get(r.get("cache"), CACHE_WORDS[None]),
        }
        for r in rows
    ]


CACHE_WORDS = {
    "own": "its own, empty",
    "shared": "shared with the rows above",
    None: "shared with the rows above (measured before each row had its own)",
}


def recompile_note(result: dict[str, Any]) -> str | None:
    """Which cache each row compiled with, so a fast row is read as a compile or as a cache read."""
    rows = result.get("recompiles")
    if not isinstance(rows, list) or not rows:
        return None
    if all(r.get("cache") == "own" for r in rows):
        return (
            "Each row compiled with its own empty Inductor cache, after an untimed warm-up compile had paid the "
            "process's one-time costs: no row read code another row wrote, so the times compare the settings."
        )
    return (
        "These rows shared one Inductor cache, filled in order from the top: a later row may have read a graph a "
        "row above wrote (dynamic=True the dynamic graph the automatic row compiled), so its time can be a cache "
        "read, not a compile. Measure again for rows with their own caches."
    )
