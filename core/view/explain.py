"""Charts and tables for the explainer page, from stored demo results: pure, no Streamlit."""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd

from core.view.charts import VARIANT_COLORS

FONT = {"labelFontSize": 13, "titleFontSize": 15}


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
                scale=alt.Scale(domain=["cold", "warm"], range=[VARIANT_COLORS["compiled"], "#59A14F"]),
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


def phase_table(*breakdowns: dict[str, Any]) -> list[tuple]:
    """Rows (graph, phase, seconds per breakdown...) from compile_stats.compile_breakdown dicts:
    the forward phases, its total, the backward phases, its total, then the total of both."""
    rows = []
    for graph in ("forward", "backward"):
        parts = [b.get(graph) or {} for b in breakdowns]
        names = list(dict.fromkeys(name for part in parts for name in part.get("phases", {})))
        rows += [(graph, name, *(_s(part.get("phases", {}).get(name)) for part in parts)) for name in names]
        if any(part.get("total_s") for part in parts):
            rows.append((graph, f"{graph} total", *(_s(part.get("total_s")) for part in parts)))
    if any(b.get("total_s") for b in breakdowns):
        rows.append(("both", "compile total (forward + backward)", *(_s(b.get("total_s")) for b in breakdowns)))
    return rows


def _s(value: float | None) -> float | None:
    return None if value is None else round(float(value), 3)


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
    """Wide rows (eager_ms, compiled_ms) to long form with a `variant` column for Altair."""
    long = [{x: r[x], "variant": variant, "value": r[field]} for r in rows for variant, field in fields.items()]
    return pd.DataFrame(long, columns=[x, "variant", "value"])


def _variant_lines(data: pd.DataFrame, x: str, x_title: str, y_title: str, fmt: str) -> alt.Chart:
    scale = alt.Scale(domain=list(VARIANT_COLORS), range=list(VARIANT_COLORS.values()))
    return (
        alt.Chart(data)
        .mark_line(point=True, strokeWidth=2.5)
        .encode(
            x=alt.X(f"{x}:Q", title=x_title, scale=alt.Scale(type="log", base=2)),
            y=alt.Y("value:Q", title=y_title),
            color=alt.Color("variant:N", scale=scale, title=None),
            tooltip=[
                alt.Tooltip(f"{x}:Q"),
                alt.Tooltip("variant:N"),
                alt.Tooltip("value:Q", format=fmt, title=y_title),
            ],
        )
    )


def _marker(k: int) -> alt.Chart:
    return alt.Chart(pd.DataFrame({"k": [k]})).mark_rule(color="#888888", strokeDash=[4, 4]).encode(x="k:Q")


def fusion_time_chart(result: dict[str, Any], k: int) -> alt.LayerChart:
    """Runtime against chain length: eager grows with k, the fused kernel much less."""
    data = _variants_long(result["rows"], "k", {"eager": "eager_ms", "compiled": "compiled_ms"})
    chart = alt.layer(_variant_lines(data, "k", "ops in the chain (k)", "time per call (ms)", ".3f"), _marker(k))
    return _finish(
        chart, "Runtime of a chain of k elementwise ops", f"fusion runtime for k in {sorted(data['k'].unique())}"
    )


def fusion_bandwidth_chart(result: dict[str, Any], k: int) -> alt.LayerChart:
    """Achieved memory bandwidth of each variant against the device's measured copy bandwidth."""
    data = _variants_long(result["rows"], "k", {"eager": "eager_gbps", "compiled": "compiled_gbps"})
    ref = result.get("reference", {}).get("copy_gbps")
    layers = [_variant_lines(data, "k", "ops in the chain (k)", "achieved bandwidth (GB/s)", ".1f"), _marker(k)]
    if ref:
        line = pd.DataFrame({"gbps": [ref], "label": [f"measured copy: {ref:.0f} GB/s"]})
        base = alt.Chart(line).encode(y="gbps:Q")
        layers += [
            base.mark_rule(color="#333333", strokeDash=[6, 3]),
            base.mark_text(align="left", x=5, dy=-8, fontSize=13).encode(text="label:N"),
        ]
    return _finish(alt.layer(*layers), "Bytes moved per second: how close to the limit", "fusion bandwidth")


def fusion_sentence(result: dict[str, Any], k: int) -> str:
    row = next(r for r in result["rows"] if r["k"] == k)
    kernels = (
        f" Eager launched {row['eager_kernels']} kernel(s) per call, compiled {row['compiled_kernels']}."
        if row.get("eager_kernels") is not None and row.get("compiled_kernels") is not None
        else ""
    )
    return (
        f"At k = {k}: eager {row['eager_ms']:.2f} ms, compiled {row['compiled_ms']:.2f} ms (**{row['speedup']:.2f}x**). "
        f"Eager must move {row['eager_bytes'] / 2**20:.0f} MiB per call, the fused kernel "
        f"{row['compiled_bytes'] / 2**20:.0f} MiB.{kernels}"
    )


def fusion_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "k": r["k"],
            "eager (ms)": round(r["eager_ms"], 3),
            "compiled (ms)": round(r["compiled_ms"], 3),
            "speedup": f"{r['speedup']:.2f}x",
            "eager GB/s": round(r["eager_gbps"], 1),
            "compiled GB/s": round(r["compiled_gbps"], 1),
            "kernels eager / compiled": f"{r.get('eager_kernels')} / {r.get('compiled_kernels')}",
        }
        for r in result["rows"]
    ]


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


def overhead_batch_chart(result: dict[str, Any]) -> alt.Chart:
    """Double the batch, time barely moves: the small MLP's time per call against batch size."""
    rows = result.get("batch_sweep", {}).get("rows", [])
    fields = {"eager": "eager_us"} | ({"compiled": "compiled_us"} if rows and rows[0].get("compiled_us") else {})
    data = _variants_long(rows, "batch", fields)
    chart = _variant_lines(data, "batch", "batch size", "time per call (µs)", ".1f")
    return _finish(chart, "Time per call of a small MLP against batch size", "overhead batch sweep")


def overhead_cuda_graphs_text(result: dict[str, Any]) -> str:
    cg = result.get("cuda_graphs", {})
    if "unavailable" in cg:
        return f"**CUDA graphs** — {cg['unavailable']}"
    rows = cg.get("rows", [])
    if not rows:
        return ""
    parts = [
        f"k={r['k']}: default {r['default_us']:.1f} µs, reduce-overhead {r['reduce_overhead_us']:.1f} µs" for r in rows
    ]
    return "**CUDA graphs** (`mode='reduce-overhead'` against `default`): " + "; ".join(parts) + "."
