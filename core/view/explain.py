"""Charts, tables and readings for the explainer page, from stored demo results: pure, no Streamlit.

Every figure is shown with what it can stand for: fusion timings with the spread of their repeats
and the memory level they measure, a one-line reading under each experiment that follows from the
numbers (including "this machine does not show it, because ..."), never a claim the data contradicts.
"""

from __future__ import annotations

import statistics
from typing import Any

import altair as alt
import pandas as pd

from core.view.chart_style import VARIANT_COLORS
from core.view.report import probe_worth_naming
from core.view.run_screen.why_per_step import phase_table

FONT = {"labelFontSize": 14, "titleFontSize": 15}
CACHE_COLORS = {"cold": "#5F6B73", "warm": "#A9B4BB"}  # neutral: orange means "compiled" everywhere else
# A fused kernel "stays flat" when its time grows at most this fraction as fast as eager's over the ks.
FLAT_SHARE = 0.5
CLEAR_SPEEDUP = 1.5  # the slowest paired repeat at the longest chain must be at least this much faster


def _finish(chart: alt.Chart, title: str, description: str) -> alt.Chart:
    return (
        chart.properties(title=title, height=300, description=description)
        .configure_axis(**FONT)
        .configure_legend(labelFontSize=13, titleFontSize=14, orient="top")
        .configure_title(fontSize=17, anchor="start")
    )


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
    return _finish(
        chart, f"Compile time of {result.get('model', '?')}: cold vs warm cache", "cold vs warm compile time"
    )


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
        return "`fullgraph=True`: compiles without complaint." + (f" {example['note']}" if example.get("note") else "")
    return f"`fullgraph=True` refuses it: **{fg.get('error_type', 'error')}**: {fg.get('headline', '')}"


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


def _variants_long(rows: list[dict[str, Any]], x: str, fields: dict[str, str]) -> pd.DataFrame:
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


def _variant_lines(data: pd.DataFrame, x: str, x_title: str, y_title: str, fmt: str) -> alt.LayerChart:
    """Median per variant as a line (compiled drawn last, on top), each point's spread as a bar."""
    scale = alt.Scale(domain=list(VARIANT_COLORS), range=list(VARIANT_COLORS.values()))
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
        ],
    )
    layers = []  # every layer keeps base's colour encoding: one with legend=None would hide the shared legend
    for variant in VARIANT_COLORS:
        mine = base.transform_filter(alt.datum.variant == variant)
        layers.append(mine.mark_rule(strokeWidth=6, opacity=0.35).encode(y=alt.Y("low:Q", title=y_title), y2="high:Q"))
        layers.append(mine.mark_line(point=True, strokeWidth=2.5).encode(y=alt.Y("value:Q", title=y_title)))
    return alt.layer(*layers)


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
    data = _variants_long(result["rows"], "k", {"eager": "eager_ms", "compiled": "compiled_ms"})
    chart = alt.layer(_variant_lines(data, "k", "ops in the chain (k)", "time per call (ms)", ",.2f"), _marker(k))
    return _finish(
        chart, "Runtime of a chain of k elementwise ops", f"fusion runtime for k in {sorted(data['k'].unique())}"
    )


def memory_level_of(result: dict[str, Any]) -> str:
    """What the copy line measures: "main memory", "cache", "partly cache" or "unknown"."""
    return str((result.get("reference") or {}).get("memory_level") or result.get("memory_level") or "unknown")


def fusion_bandwidth_chart(result: dict[str, Any], k: int) -> alt.LayerChart:
    """Achieved memory bandwidth of each variant against the device's measured copy bandwidth,
    the copy line labelled with the level it measures (main memory or cache)."""
    data = _variants_long(_with_rates(result), "k", {"eager": "eager_gbps", "compiled": "compiled_gbps"})
    ref = result.get("reference", {}).get("copy_gbps")
    layers = [_variant_lines(data, "k", "ops in the chain (k)", "achieved bandwidth (GB/s)", ",.1f"), _marker(k)]
    if ref:
        level = memory_level_of(result)
        where = "" if level == "unknown" else f" ({level})"
        line = pd.DataFrame({"gbps": [ref], "label": [f"copy{where}: {ref:,.0f} GB/s"]})
        base = alt.Chart(line).encode(y="gbps:Q")
        layers += [
            base.mark_rule(color="#333333", strokeDash=[6, 3]),
            base.mark_text(align="left", x=5, dy=-8, fontSize=13).encode(text="label:N"),
        ]
    return _finish(alt.layer(*layers), "Bytes moved per second: how close to the limit", "fusion bandwidth")


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
        f"; {_range(row['speedup_low'], row['speedup_high'], '.2f')}x over {repeats} paired repeats"
        if "speedup_low" in row
        else ""
    )
    e, c = row["eager_ms"], row["compiled_ms"]
    return (
        f"At k = {k}: eager {e:{ms_format(e)}} ms, compiled {c:{ms_format(c)}} ms "
        f"(**{row['speedup']:.2f}x**{spread}). "
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
        f"the fused kernel's stays flat ({compiled_growth:.1f}x)"
        if compiled_growth < 1.1
        else f"the fused kernel's {compiled_growth:.1f}x"
    )
    growth = f"{span} eager's time grows {eager_growth:.1f}x and {fused}"
    at_last = (
        f"at k = {last['k']} compiled is {last['speedup']:.2f}x faster ({_range(low, high, '.2f')}x over the repeats)"
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
            "speedup": f"{r['speedup']:.2f}x"
            + (f" ({_range(r['speedup_low'], r['speedup_high'], '.2f')}x)" if "speedup_low" in r else ""),
            "eager GB/s": round(r["eager_gbps"], 1),
            "compiled GB/s": round(r["compiled_gbps"], 1),
            "kernels eager / compiled": f"{r.get('eager_kernels')} / {r.get('compiled_kernels')}",
        }
        for r in result["rows"]
    ]


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


def overhead_tiny_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Tiny tensors: time per call and per op, eager against compiled."""
    return [
        {
            "ops (k)": r["k"],
            "eager (µs/call)": round(r["eager_us"], 1),
            "compiled (µs/call)": round(r["compiled_us"], 1),
            "eager (µs/op)": round(r["eager_us_per_op"], 2),
            "speedup": f"{r['speedup']:.2f}x",
        }
        for r in result.get("tiny", {}).get("rows", [])
    ]


def overhead_batch_chart(result: dict[str, Any]) -> alt.LayerChart:
    """Double the batch, time barely moves: the small MLP's time per call against batch size."""
    rows = result.get("batch_sweep", {}).get("rows", [])
    fields = {"eager": "eager_us"} | ({"compiled": "compiled_us"} if rows and rows[0].get("compiled_us") else {})
    data = _variants_long(rows, "batch", fields)
    chart = _variant_lines(data, "batch", "batch size", "time per call (µs)", ".1f")
    return _finish(chart, "Time per call of a small MLP against batch size", "overhead batch sweep")


def first_faster_k(rows: list[dict[str, Any]]) -> int | None:
    """The shortest chain from which compiled stays faster (None if it never is)."""
    ks = sorted(rows, key=lambda r: r["k"])
    for i, r in enumerate(ks):
        if all(later["speedup"] > 1 for later in ks[i:]):
            return r["k"]
    return None


def overhead_readings(result: dict[str, Any]) -> dict[str, str]:
    """A one-line reading for each overhead experiment, from its numbers: per-op cost against the
    compiled wrapper's fixed cost per call (guards, the wrapper, the call into generated code).
    Medians and the shortest chain, not a fitted line, so one disturbed point does not skew it."""
    out: dict[str, str] = {}
    rows = sorted((result.get("tiny") or {}).get("rows") or [], key=lambda r: r["k"])
    if rows:
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
        out["tiny"] = (
            f"Eager pays about {per_op:.1f} µs per op (the median over the chain lengths). A compiled call costs "
            f"{shortest['compiled_us']:.0f} µs even at k = {shortest['k']}: a fixed cost per call (checking its "
            f"guards, calling the generated kernel through its wrapper) that eager's per-op cost must add up to, "
            f"{where}."
        )
    sweep = (result.get("batch_sweep") or {}).get("rows") or []
    if sweep:
        small, large = min(sweep, key=lambda r: r["batch"]), max(sweep, key=lambda r: r["batch"])
        moved = large["eager_us"] / small["eager_us"]
        text = (
            f"From batch {small['batch']} to {large['batch']} eager's time grows {moved:.1f}x for "
            f"{large['batch'] / small['batch']:.0f}x the data: per-op cost, not arithmetic, sets the time."
        )
        compiled = [r for r in sweep if r.get("compiled_us")]
        if compiled:
            slower = [r for r in compiled if r["compiled_us"] > r["eager_us"]]
            c_med = statistics.median(r["compiled_us"] for r in compiled)
            e_med = statistics.median(r["eager_us"] for r in compiled)
            which = (
                "at every batch size"
                if len(slower) == len(compiled)
                else f"at {len(slower)} of {len(compiled)} batch sizes"
            )
            if len(slower) * 2 > len(compiled):
                text += (
                    f" Compiled is slower {which} (median {c_med:.0f} µs against {e_med:.0f} µs): the forward is "
                    "only three ops, too few to earn back the compiled wrapper's fixed cost per call (the chain "
                    "above needs several ops to)."
                )
            else:
                text += (
                    f" Compiled is faster at {len(compiled) - len(slower)} of {len(compiled)} batch sizes "
                    f"(median {c_med:.0f} µs against {e_med:.0f} µs)."
                )
        out["batch"] = text
    return out


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


def numbered_source(source: str, first_line: int | None) -> str:
    """An excerpt with the line numbers it has in its module (st.code numbers from 1)."""
    lines = source.splitlines()
    if not first_line:
        return source
    width = len(str(first_line + len(lines) - 1))
    return "\n".join(f"{first_line + i:>{width}}  {line}" for i, line in enumerate(lines))
