"""The explainers' presentation (the Under the hood page), one section per demo as in
core.engine.explain, which measures them: charts, tables and readings from stored demo results,
pure, no Streamlit. Every figure is shown with what it can stand for: fusion timings with the spread
of their repeats and the memory level they measure, and a one-line reading under each experiment
that follows from the numbers.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

import altair as alt
import pandas as pd

from core.engine import words
from core.engine.explain import PAGE_PARAMS
from core.engine.explain.params import FUSION_MAX_WORKING_SET
from core.runs.limits import HostLimits
from core.view.race_charts import VARIANT_COLORS
from core.view.report import probe_worth_naming
from core.view.run_screen.why_per_step import phase_table

# ----------------------------------------------------------------------
# The explainers' presentation (the Under the hood page), one module per demo as in
# core.engine.explain, which measures them: charts, tables and readings from stored demo results,
# pure, no Streamlit.
#
# Every figure is shown with what it can stand for: fusion timings with the spread of their repeats
# and the memory level they measure, a one-line reading under each experiment that follows from the
# numbers (including "this machine does not show it, because ..."), never a claim the data contradicts.
#
#   fusion     fusion and memory bandwidth: a chain of k elementwise ops, eager against fused
#   overhead   per-op cost against the compiled call's fixed cost, and CUDA graphs
#   graphs     graph capture and graph breaks, before and after the fix
#   codegen    the code Inductor writes
#   caches     where compile time goes, cold against warm cache, and recompiles on new shapes
#   figures    what their charts share: fonts, the finish, the eager-against-compiled lines


# ----------------------------------------------------------------------
# What the explainers' charts share: fonts and the finish (title, height, aria description), and
# the eager-against-compiled lines with each point's spread that fusion and overhead draw.

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


# ----------------------------------------------------------------------
# The compile-time explainer's presentation: cold against warm cache (torch's own phase timers
# beside the wall time), and what recompiles when the input shapes change.

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


# ----------------------------------------------------------------------
# The code-generation explainer's presentation: how many ATen ops became how many kernels, and the
# fused kernel's source with the line numbers it has in its module.


def codegen_sentence(result: dict[str, Any]) -> str:
    g = result.get("generated", {})
    if "unavailable" in g:
        return f"Not available here: {g['unavailable']}"
    eager, decomposed = result.get("eager_ops", {}), result.get("decomposed_ops", {})
    return (
        f"Eager runs **{eager.get('count')}** ATen op(s) ({', '.join(eager.get('ops', []))}), "
        f"**{decomposed.get('count')}** after Inductor's decompositions; Inductor wrote "
        f"**{g.get('kernel_count')}** {g.get('language')} kernel(s): {', '.join(f'`{k}`' for k in g.get('kernel_names', []))}."
    )


def numbered_source(source: str, first_line: int | None) -> str:
    """An excerpt with the line numbers it has in its module (st.code numbers from 1)."""
    lines = source.splitlines()
    if not first_line:
        return source
    width = len(str(first_line + len(lines) - 1))
    return "\n".join(f"{first_line + i:>{width}}  {line}" for i, line in enumerate(lines))


# ----------------------------------------------------------------------
# The fusion explainer's presentation: runtime and achieved bandwidth of a chain of k elementwise
# ops, eager against fused, with the spread of the repeats and the memory level they measure, and a
# verdict that says whether this machine shows fusion's effect, and why not when it does not.

# A fused kernel "stays flat" when its time grows at most this fraction as fast as eager's over the ks.
FLAT_SHARE = 0.5
CLEAR_SPEEDUP = 1.5  # the slowest paired repeat at the longest chain must be at least this much faster


def _marker(k: int) -> alt.Chart:
    return alt.Chart(pd.DataFrame({"k": [k]})).mark_rule(color="#888888", strokeDash=[4, 4]).encode(x="k:Q")


def _with_rates(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows with GB/s spreads derived from the time spreads (the slowest repeat moves the fewest GB/s)."""
    out = []
    for r in result["rows"]:
        row = dict(r)
        for variant in ("eager", "compiled"):
            nbytes, ms = r[f"{variant}_bytes"], r[f"{variant}_ms"]
            row[f"{variant}_gbps_low"] = nbytes / (r.get(f"{variant}_ms_high", ms) / 1e3) / 1e9
            row[f"{variant}_gbps_high"] = nbytes / (r.get(f"{variant}_ms_low", ms) / 1e3) / 1e9
        out.append(row)
    return out


def fusion_time_chart(result: dict[str, Any], k: int) -> alt.LayerChart:
    """Runtime against chain length: eager grows with k, the fused kernel much less (medians, with
    the spread of the repeats as bars)."""
    data = variants_long(result["rows"], "k", {"eager": "eager_ms", "compiled": "compiled_ms"})
    chart = alt.layer(variant_lines(data, "k", "ops in the chain (k)", "time per call (ms)", ",.2f"), _marker(k))
    return finish(
        chart, "Runtime of a chain of k elementwise ops", f"fusion runtime for k in {sorted(data['k'].unique())}"
    )


def memory_level_of(result: dict[str, Any]) -> str:
    """What the copy line measures: "main memory", "cache", "partly cache" or "unknown"."""
    return str((result.get("reference") or {}).get("memory_level") or result.get("memory_level") or "unknown")


def fusion_bandwidth_chart(result: dict[str, Any], k: int) -> alt.LayerChart:
    """Achieved memory bandwidth of each variant against the device's measured copy bandwidth,
    the copy line labelled with the level it measures (main memory or cache)."""
    data = variants_long(_with_rates(result), "k", {"eager": "eager_gbps", "compiled": "compiled_gbps"})
    ref = result.get("reference", {}).get("copy_gbps")
    layers = [variant_lines(data, "k", "ops in the chain (k)", "achieved bandwidth (GB/s)", ",.1f"), _marker(k)]
    if ref:
        level = memory_level_of(result)
        where = "" if level == "unknown" else f" ({level})"
        line = pd.DataFrame({"gbps": [ref], "label": [f"copy{where}: {ref:,.0f} GB/s"]})
        base = alt.Chart(line).encode(y="gbps:Q")
        layers += [
            base.mark_rule(color="#333333", strokeDash=[6, 3]),
            base.mark_text(align="left", x=5, dy=-8, fontSize=13).encode(text="label:N"),
        ]
    return finish(alt.layer(*layers), "Bytes moved per second: how close to the limit", "fusion bandwidth")


def _range(low: float, high: float, fmt: str) -> str:
    return f"{low:{fmt}}–{high:{fmt}}"


def ms_format(ms: float) -> str:
    """Digits that mean something: 14,250 ms, 48.3 ms, 0.442 ms."""
    return ",.0f" if ms >= 100 else ".1f" if ms >= 10 else ".2f" if ms >= 1 else ".3f"


def fusion_sentence(result: dict[str, Any], k: int) -> str:
    row = next(r for r in result["rows"] if r["k"] == k)
    kernels = (
        f" Eager launched {row['eager_kernels']} kernel(s) per call, compiled {row['compiled_kernels']}."
        if row.get("eager_kernels") is not None and row.get("compiled_kernels") is not None
        else ""
    )
    repeats = len(row.get("eager_samples_ms") or []) or (result.get("params") or {}).get("repeats")
    spread = (
        f"; {words.speedup_range(row['speedup_low'], row['speedup_high'])} over {repeats} paired repeats"
        if "speedup_low" in row
        else ""
    )
    e, c = row["eager_ms"], row["compiled_ms"]
    return (
        f"At k = {k}: eager {e:{ms_format(e)}} ms, compiled {c:{ms_format(c)}} ms "
        f"(**{words.speedup(row['speedup'])}**{spread}). "
        f"Eager must move {row['eager_bytes'] / 2**20:,.0f} MiB per call, the fused kernel "
        f"{row['compiled_bytes'] / 2**20:,.0f} MiB.{kernels}"
    )


def fusion_verdict(result: dict[str, Any]) -> tuple[bool, str]:
    """Does this machine show fusion's effect (compiled time growing far more slowly than eager's
    as the chain gets longer, a clear speedup at the longest chain)? And in words, why or why not."""
    rows = sorted(result.get("rows") or [], key=lambda r: r["k"])
    if len(rows) < 2:
        return False, "One chain length only: nothing to compare growth against."
    first, last = rows[0], rows[-1]
    eager_growth = last["eager_ms"] / first["eager_ms"]
    compiled_growth = last["compiled_ms"] / first["compiled_ms"]
    low, high = last.get("speedup_low", last["speedup"]), last.get("speedup_high", last["speedup"])
    span = f"from k = {first['k']} to k = {last['k']}"
    fused = (
        f"the fused kernel's stays flat ({words.ratio(compiled_growth)})"
        if compiled_growth < 1.1
        else f"the fused kernel's {words.ratio(compiled_growth)}"
    )
    growth = f"{span} eager's time grows {words.ratio(eager_growth)} and {fused}"
    at_last = (
        f"at k = {last['k']} compiled is {words.speedup(last['speedup'])} faster "
        f"({words.speedup_range(low, high)} over the repeats)"
    )
    flat = compiled_growth - 1 <= FLAT_SHARE * (eager_growth - 1)
    if flat and low >= CLEAR_SPEEDUP:
        return True, f"**Fusion shows here**: {growth}; {at_last}."
    if low <= 1 <= high:
        why = "the repeats scatter more than the two variants differ, so this machine shows no clear effect"
    elif not flat and (result.get("params") or {}).get("op_set") == "mixed":
        why = (
            "the fused kernel's time grows with k too: sin and sigmoid cost more arithmetic per byte than this "
            "device has to spare, so once fused the chain is compute-bound and saving memory traffic helps "
            "little. The cheap ops show fusion on memory-bound work"
        )
    elif memory_level_of(result) == "cache":
        why = "the tensors fit in the cache, where moving bytes is cheap, so the traffic fusion saves costs little"
    elif not flat:
        why = "the fused kernel's time grows with k almost as fast as eager's, so fusion saves little here"
    else:
        why = "the gain at the longest chain is small next to the spread of the repeats"
    return False, f"**This machine does not show the effect clearly**: {growth}; {at_last}. Why: {why}."


def fusion_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The table: medians with the range of the repeats, so one noisy point is not read as a finding."""

    def with_range(r: dict[str, Any], key: str) -> str:
        fmt = ms_format(r[key])
        if f"{key}_low" not in r:
            return f"{r[key]:{fmt}}"
        return f"{r[key]:{fmt}} ({_range(r[key + '_low'], r[key + '_high'], fmt)})"

    return [
        {
            "k": r["k"],
            "eager (ms)": with_range(r, "eager_ms"),
            "compiled (ms)": with_range(r, "compiled_ms"),
            "speedup": words.speedup_with_range(r["speedup"], r["speedup_low"], r["speedup_high"])
            if "speedup_low" in r
            else words.speedup(r["speedup"]),
            "eager GB/s": round(r["eager_gbps"], 1),
            "compiled GB/s": round(r["compiled_gbps"], 1),
            "kernels eager / compiled": f"{r.get('eager_kernels')} / {r.get('compiled_kernels')}",
        }
        for r in result["rows"]
    ]


def fusion_page_params(op_set: str, limits: HostLimits | None) -> dict[str, Any]:
    """The fusion measurement the page asks for: the page's parameters, the op set, and the host's
    limit on the working set (max_demo_working_set), which makes it another measurement."""
    params = {**PAGE_PARAMS["fusion"], "op_set": op_set}
    if limits is not None and limits.max_demo_working_set is not None:
        params["max_working_set"] = min(limits.max_demo_working_set, FUSION_MAX_WORKING_SET)
    return params


def fusion_measurement_note(result: dict[str, Any]) -> str:
    """What the figures measure: tensor size against the cache, samples and calls."""
    rows, cache = result.get("rows") or [], result.get("cache") or {}
    numel = result.get("numel") or (result.get("params") or {}).get("numel")
    parts = []
    if isinstance(numel, int):
        mib = 2 * numel * 4 / 2**20
        level = memory_level_of(result)
        parts.append(
            f"Each tensor holds {numel / 1e6:,.0f} M floats: input plus output is {mib:,.0f} MiB"
            + (f" against a {cache['bytes'] / 2**20:,.0f} MiB last-level cache" if cache.get("bytes") else "")
            + (f", so the GB/s figures measure {level}." if level != "unknown" else ".")
        )
        if result.get("capped_by_host"):
            parts.append(
                "That is as large as this host lets the demo make them (its max_demo_working_set): "
                "the demo would otherwise size them past the last-level cache."
            )
    faults = rows[-1].get("compiled_page_faults") if rows else None
    copy_gbps = (result.get("reference") or {}).get("copy_gbps")
    slow = bool(rows and copy_gbps and rows[-1]["compiled_gbps"] < 0.5 * copy_gbps)
    if isinstance(numel, int) and faults and faults >= 0.5 * numel * 4 / 4096 and slow:
        parts.append(
            f"Every fresh output tensor page-faults on first touch here ({faults:,.0f} faults per call for the "
            "fused kernel's output, as many again for each eager op's): that costs more than moving the bytes, "
            "so both variants stay well below the copy, which writes into memory it already has."
        )
    if rows and "eager_samples_ms" in rows[0]:
        calls = {r.get("eager_calls_per_sample") for r in rows} | {r.get("compiled_calls_per_sample") for r in rows}
        calls.discard(None)
        per = f"{min(calls):,}" if len(calls) == 1 else f"{min(calls):,} to {max(calls):,}"
        parts.append(
            f"Each point is the median of {len(rows[0]['eager_samples_ms'])} samples, eager and compiled "
            f"alternating, each sample {per} back-to-back call(s); bars show the fastest to slowest sample."
        )
    return " ".join(parts)


# ----------------------------------------------------------------------
# The graph-capture explainer's presentation: graphs and breaks per example, each break with its
# reason and source line, what `fullgraph=True` says, and the fixed version.


def graph_summary(example: dict[str, Any]) -> str:
    ex = example.get("explain", {})
    if "unavailable" in ex:
        return "unavailable"
    return f"{ex.get('graph_count')} graph(s), {ex.get('graph_break_count')} break(s)"


def graph_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per example: graphs and breaks before and after the fix, and what fullgraph said."""
    rows = []
    for e in result.get("examples", []):
        ex, fixed = e.get("explain") or {}, (e.get("fixed") or {}).get("explain") or {}
        rows.append(
            {
                "example": e.get("title", e.get("name")),
                "graphs": ex.get("graph_count"),
                "breaks": ex.get("graph_break_count"),
                "first break": (ex.get("break_reasons") or [{}])[0].get("reason", "-"),
                "fullgraph=True": "ok"
                if e.get("fullgraph", {}).get("ok")
                else e.get("fullgraph", {}).get("error_type", "-"),
                "fixed: graphs / breaks": f"{fixed['graph_count']} / {fixed['graph_break_count']}" if fixed else "-",
            }
        )
    return rows


def break_texts(example: dict[str, Any]) -> list[str]:
    """Each break as one Markdown line: the reason and the source line it points at."""
    ex = example.get("explain", {})
    if "unavailable" in ex:
        return [f"Not available with this torch: {ex['unavailable']}"]
    out = []
    for r in ex.get("break_reasons", []):
        where = f" at line {r['source_line']}: `{r['code']}`" if r.get("source_line") and r.get("code") else ""
        out.append(f"**Break**{where} — {r.get('reason', '?')}")
    return out or ["**No graph breaks**: the whole function is one graph."]


def fullgraph_text(example: dict[str, Any]) -> str:
    fg = example.get("fullgraph", {})
    if fg.get("ok"):
        what = f"one graph of {fg['ops']} ops" if fg.get("ops") is not None else "one graph"
        return f"`fullgraph=True`: compiles as {what}, no error." + (
            f" {example['note']}" if example.get("note") else ""
        )
    return f"`fullgraph=True` refuses it: **{fg.get('error_type', 'error')}**: {fg.get('headline', '')}"


# ----------------------------------------------------------------------
# The overhead explainer's presentation: eager's cost per op against the compiled call's fixed cost
# (tiny tensors), a small MLP's time against batch size, and CUDA graphs, each with its reading.


def overhead_tiny_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Tiny tensors: time per call and per op, eager against compiled, each with its repeats' range."""
    return [
        {
            "ops (k)": r["k"],
            "eager (µs/call)": round(r["eager_us"], 1),
            "eager range (µs)": range_text(r, "eager_us"),
            "compiled (µs/call)": round(r["compiled_us"], 1),
            "compiled range (µs)": range_text(r, "compiled_us"),
            "eager (µs/op)": round(r["eager_us_per_op"], 2),
            "speedup": words.speedup(r["speedup"]),
            "repeats": r.get("samples"),
        }
        for r in result.get("tiny", {}).get("rows", [])
    ]


def range_text(row: dict[str, Any], field: str) -> str:
    """'23-26' from a row's lowest and highest repeat; 'not kept' for a result measured before they were."""
    low, high = row.get(f"{field}_low"), row.get(f"{field}_high")
    if low is None or high is None:
        return "not kept"
    return f"{low:,.0f}-{high:,.0f}" if high >= 100 else f"{low:.1f}-{high:.1f}"


def overhead_batch_chart(result: dict[str, Any]) -> alt.LayerChart:
    """Double the batch, time barely moves: the small MLP's time per call against batch size."""
    rows = result.get("batch_sweep", {}).get("rows", [])
    fields = {"eager": "eager_us"} | ({"compiled": "compiled_us"} if rows and rows[0].get("compiled_us") else {})
    data = variants_long(rows, "batch", fields)
    if "compiled" in fields:  # each point's verdict, as the reading below the chart counts it
        verdicts = {r["batch"]: VERDICT_WORDS[point_verdict(r)] for r in rows}
        data["verdict"] = data["batch"].map(verdicts)
    cut = outlier_cut(data)  # an outlying repeat (a descheduled call) would flatten the medians read here
    chart = variant_lines(data, "batch", "batch size", "time per call (µs)", ".1f", cut=cut)
    repeats = rows[0].get("samples") if rows else None
    title = "Time per call of a small MLP against batch size" + (
        f" (median of {repeats} repeats; bars: lowest to highest)" if repeats else ""
    )
    if cut:  # a second line: the first stays as wide as before
        title = [title, f"Axis cut at {cut:,.0f} µs: the highest repeat reached {float(data['high'].max()):,.0f} µs"]
    return finish(chart, title, "overhead batch sweep")


def first_faster_k(rows: list[dict[str, Any]]) -> int | None:
    """The shortest chain from which compiled stays faster (None if it never is)."""
    ks = sorted(rows, key=lambda r: r["k"])
    for i, r in enumerate(ks):
        if all(later["speedup"] > 1 for later in ks[i:]):
            return r["k"]
    return None


WIDE_SCATTER = 2.0  # a point whose highest repeat is over twice its lowest: its median says little


def _overhead_range(row: dict[str, Any], field: str) -> tuple[float, float]:
    return row.get(f"{field}_low", row[field]), row.get(f"{field}_high", row[field])


def compare_point(row: dict[str, Any]) -> str:
    """'slower', 'faster' or 'unclear': compiled against eager at one point, clear only when the two
    ranges of repeats do not overlap."""
    e_low, e_high = _overhead_range(row, "eager_us")
    c_low, c_high = _overhead_range(row, "compiled_us")
    if c_low > e_high:
        return "slower"
    if c_high < e_low:
        return "faster"
    return "unclear"


SIGN_TEST_LEVEL = 0.025  # each side of a two-sided 5% sign test over a point's pairs of samples


def pairs_needed(n: int) -> int | None:
    """The fewest of `n` pairs in which one variant must be the slower for the point to count as
    clearly slower (a sign test at SIGN_TEST_LEVEL per side); None when even n of n would not be."""
    tail = 0.0
    for k in range(n, -1, -1):
        tail += math.comb(n, k) / 2**n
        if tail > SIGN_TEST_LEVEL:
            return k + 1 if k < n else None
    return None


def point_verdict(row: dict[str, Any]) -> str:
    """'slower', 'faster' or 'unclear': compiled against eager at one batch size, the same for the
    chart and its reading. It starts from the medians the chart draws (compiled's point above eager's
    or below it) and calls the point clear only where the pairs of samples, taken alternately, agree
    with that side often enough for a sign test (compiled_slower_pairs); one descheduled sample moves
    one pair, where it would have stretched a whole range. A result kept before the pairs were
    counted: every pair's ratio on that side (speedup_low / speedup_high), else the ranges apart."""
    above = row["compiled_us"] > row["eager_us"]
    below = row["compiled_us"] < row["eager_us"]
    n, slower_pairs = row.get("samples"), row.get("compiled_slower_pairs")
    if isinstance(n, int) and isinstance(slower_pairs, int) and n > 0:
        needed = pairs_needed(n)
        if needed is None:
            return "unclear"
        if above and slower_pairs >= needed:
            return "slower"
        if below and n - slower_pairs >= needed:
            return "faster"
        return "unclear"
    if row.get("speedup_low") is not None and row.get("speedup_high") is not None:
        if above and row["speedup_high"] < 1:
            return "slower"
        if below and row["speedup_low"] > 1:
            return "faster"
    if "compiled_us_low" not in row or "eager_us_low" not in row:
        return "unclear"  # no spread kept: nothing is clear (the reading says so)
    verdict = compare_point(row)
    return verdict if (verdict == "slower") == above and (verdict == "faster") == below else "unclear"


VERDICT_WORDS = {
    "slower": "compiled clearly slower",
    "faster": "compiled clearly faster",
    "unclear": "too close to call",
}


def fixed_cost(result: dict[str, Any]) -> dict[str, float] | None:
    """The compiled call's fixed cost as the tiny chain measured it: its time at the shortest chain
    (guards, the wrapper, one tiny kernel), median with the repeats' range."""
    rows = (result.get("tiny") or {}).get("rows") or []
    if not rows:
        return None
    shortest = min(rows, key=lambda r: r["k"])
    low, high = _overhead_range(shortest, "compiled_us")
    return {"k": shortest["k"], "median": shortest["compiled_us"], "low": low, "high": high}


def _us_range(low: float, high: float) -> str:
    return f"{low:,.0f}-{high:,.0f} µs"


def overhead_readings(result: dict[str, Any]) -> dict[str, str]:
    """A one-line reading for each overhead experiment, from its numbers: per-op cost against the
    compiled wrapper's fixed cost per call (guards, the wrapper, the call into generated code).
    Medians and the shortest chain, not a fitted line, so one disturbed point does not skew it; a
    cause is named only where the gap is clear of the repeats' spread and fits the measured cost."""
    out: dict[str, str] = {}
    rows = sorted((result.get("tiny") or {}).get("rows") or [], key=lambda r: r["k"])
    fixed = fixed_cost(result)
    if rows and fixed:
        per_op = statistics.median(r["eager_us_per_op"] for r in rows)
        shortest = rows[0]
        from_k = first_faster_k(rows)
        where = (
            f"so compiled wins from k = {from_k} ops on"
            if from_k is not None and from_k > shortest["k"]
            else "so compiled is faster at every length measured"
            if from_k is not None
            else "so compiled does not win at any length measured here"
        )
        spread_words = (
            f" ({_us_range(fixed['low'], fixed['high'])} over {shortest['samples']} repeats)"
            if shortest.get("samples") and "compiled_us_low" in shortest
            else ""
        )
        out["tiny"] = (
            f"Eager pays about {per_op:.1f} µs per op (the median over the chain lengths). A compiled call costs "
            f"{shortest['compiled_us']:.0f} µs{spread_words} even at k = {shortest['k']}: a fixed cost per call "
            f"(checking its guards, calling the generated kernel through its wrapper) that eager's per-op cost must "
            f"add up to, {where}."
        )
    sweep = (result.get("batch_sweep") or {}).get("rows") or []
    if sweep:
        out["batch"] = batch_reading(sweep, fixed)
    return out


def batch_reading(sweep: list[dict[str, Any]], fixed: dict[str, float] | None) -> str:
    """The MLP sweep in words: how eager's time moves with the batch, where compiled is clearly
    slower or faster, and a cause for the gap only where the measured fixed cost covers it."""
    small, large = min(sweep, key=lambda r: r["batch"]), max(sweep, key=lambda r: r["batch"])
    moved, data = large["eager_us"] / small["eager_us"], large["batch"] / small["batch"]
    if moved < 2 or moved < data**0.5:
        bound = "per-op cost, not arithmetic, sets the time"
    elif moved >= data / 2:
        bound = "about in proportion to the data: arithmetic sets the time here"
    else:
        bound = "per-op cost sets the time at the small batches, arithmetic at the large ones"
    text = (
        f"From batch {small['batch']} to {large['batch']} eager's time grows {words.ratio(moved)} for "
        f"{words.ratio(data, digits=0)} the data: {bound}."
    )
    compiled = [r for r in sweep if r.get("compiled_us")]
    if not compiled:
        return text
    kept = all("compiled_us_low" in r and "eager_us_low" in r for r in compiled)
    verdicts = [point_verdict(r) for r in compiled]
    slower = [r for r, v in zip(compiled, verdicts) if v == "slower"]
    faster = [r for r, v in zip(compiled, verdicts) if v == "faster"]
    c_med = statistics.median(r["compiled_us"] for r in compiled)
    e_med = statistics.median(r["eager_us"] for r in compiled)
    n = len(compiled)
    if not kept:
        return text + (
            f" Compiled's median over the batch sizes is {c_med:.0f} µs against eager's {e_med:.0f} µs. This result "
            "kept no spread of its repeats, so no point can be called clearly faster or slower: run the demo again."
        )
    unclear = n - len(slower) - len(faster)
    above = sum(r["compiled_us"] > r["eager_us"] for r in compiled)
    text += (
        f" Compiled's median is above eager's at {_count(above)} of {n} batch sizes (the chart's points; median over "
        f"the batch sizes {c_med:.0f} µs against {e_med:.0f} µs). It is clearly slower at {_count(len(slower))}, "
        f"clearly faster at {_count(len(faster))}, and too close to call at {_count(unclear)} ({_counted_by(compiled)})."
    )
    if slower and fixed:
        gaps = [r["compiled_us"] - r["eager_us"] for r in slower]
        gap = statistics.median(gaps)
        cost = f"the fixed cost a compiled call showed at k = {fixed['k']} above ({_us_range(fixed['low'], fixed['high'])})"
        if fixed["low"] > 0 and fixed["high"] / fixed["low"] > WIDE_SCATTER:
            text += (
                f" Where it is slower, the gap is a median {gap:.0f} µs, but {cost} scattered too widely across "
                "its repeats to say whether it explains that."
            )
        elif gap <= fixed["high"]:
            text += (
                f" Where it is slower, the gap (median {gap:.0f} µs) is within {cost}: the forward is only three "
                "ops, too few to earn that cost back."
            )
        else:
            text += (
                f" Where it is slower, the gap (median {gap:.0f} µs, up to {max(gaps):,.0f} µs) is larger than {cost}, "
                "so that fixed cost does not explain it: the rest is spent inside the compiled call, which this demo "
                "does not break down (a race's per-step profile does)."
            )
    scattered = [r for r in compiled if _scattered(r)]
    if scattered:
        worst = max(
            scattered,
            key=lambda r: _overhead_range(r, "compiled_us")[1] / max(_overhead_range(r, "compiled_us")[0], 1e-9),
        )
        low, high = _overhead_range(worst, "compiled_us")
        text += (
            f" Repeats scatter widely at batch {', '.join(str(r['batch']) for r in scattered)} (compiled "
            f"{_us_range(low, high)} at batch {worst['batch']}): read those points with care."
        )
    return text


def _counted_by(rows: list[dict[str, Any]]) -> str:
    """How a point was counted clear, in words: by its pairs of samples, or, for a result kept
    before they were counted, by every pair's ratio or the ranges of its repeats."""
    n = rows[0].get("samples")
    if all(isinstance(r.get("compiled_slower_pairs"), int) for r in rows) and isinstance(n, int):
        needed = pairs_needed(n)
        if needed is None:
            return f"{n} pairs of samples are too few for any point to be clear"
        return f"a point counts where compiled was on its side in at least {needed} of its {n} pairs of samples"
    return "this result kept no count of its pairs: a point counts only where all its repeats are on its side"


def _count(n: int) -> str:
    return "none" if n == 0 else str(n)


def _scattered(row: dict[str, Any]) -> bool:
    for field in ("eager_us", "compiled_us"):
        low, high = _overhead_range(row, field)
        if low > 0 and high / low > WIDE_SCATTER:
            return True
    return False


def overhead_cuda_graphs_text(result: dict[str, Any]) -> str:
    cg = result.get("cuda_graphs", {})
    if "unavailable" in cg:
        return cg["unavailable"]
    rows = cg.get("rows", [])
    if not rows:
        return ""
    parts = [
        f"k={r['k']}: default {r['default_us']:.1f} µs, reduce-overhead {r['reduce_overhead_us']:.1f} µs" for r in rows
    ]
    return "`mode='reduce-overhead'` against `default`: " + "; ".join(parts) + "."
