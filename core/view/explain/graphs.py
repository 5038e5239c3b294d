"""The graph-capture explainer's presentation: graphs and breaks per example, each break with its
reason and source line, what `fullgraph=True` says, and the fixed version."""

from __future__ import annotations

from typing import Any


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
