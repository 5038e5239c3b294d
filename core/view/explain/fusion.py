"""The fusion explainer's presentation: runtime and achieved bandwidth of a chain of k elementwise
ops, eager against fused, with the spread of the repeats and the memory level they measure, and a
verdict that says whether this machine shows fusion's effect, and why not when it does not."""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd

from core.engine import words
from core.view.explain.figures import finish, variant_lines, variants_long

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
