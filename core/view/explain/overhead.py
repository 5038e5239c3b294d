"""The overhead explainer's presentation: eager's cost per op against the compiled call's fixed cost
(tiny tensors), a small MLP's time against batch size, and CUDA graphs, each with its reading."""

from __future__ import annotations

import math
import statistics
from typing import Any

import altair as alt

from core.engine import words
from core.view.explain.figures import finish, outlier_cut, variant_lines, variants_long


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


def _range(row: dict[str, Any], field: str) -> tuple[float, float]:
    return row.get(f"{field}_low", row[field]), row.get(f"{field}_high", row[field])


def compare_point(row: dict[str, Any]) -> str:
    """'slower', 'faster' or 'unclear': compiled against eager at one point, clear only when the two
    ranges of repeats do not overlap."""
    e_low, e_high = _range(row, "eager_us")
    c_low, c_high = _range(row, "compiled_us")
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
    low, high = _range(shortest, "compiled_us")
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
        worst = max(scattered, key=lambda r: _range(r, "compiled_us")[1] / max(_range(r, "compiled_us")[0], 1e-9))
        low, high = _range(worst, "compiled_us")
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
        low, high = _range(row, field)
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
