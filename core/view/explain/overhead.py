"""The overhead explainer's presentation: eager's cost per op against the compiled call's fixed cost
(tiny tensors), a small MLP's time against batch size, and CUDA graphs, each with its reading."""

from __future__ import annotations

import statistics
from typing import Any

import altair as alt

from core.view.explain.figures import finish, variant_lines, variants_long


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
    data = variants_long(rows, "batch", fields)
    chart = variant_lines(data, "batch", "batch size", "time per call (µs)", ".1f")
    return finish(chart, "Time per call of a small MLP against batch size", "overhead batch sweep")


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
