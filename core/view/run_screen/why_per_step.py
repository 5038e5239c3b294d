"""Why, per step, on the run itself: what each variant launches per step, where compiles and
recompiles happened and why, and what the compile spent its time on.

Rows and marks for the run view (pages) and the tables the CLI prints, from what the worker
recorded: the summary's `profile` (core.engine.profiling), its `compile_phases`
(compile_stats.compile_breakdown) and the compile events (one per compile, at the step that paid
for it). Torch-free: the app's process shows these.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from core.engine.cause import race_cause
from core.engine.compile_stats import recompile_words
from core.engine.profile_reading import profile_reading
from core.engine.summary import Summary

MAX_MARKS = 60  # compile marks drawn on the step chart; a run recompiling every step names the rest in words


def is_recompile(note: Any) -> bool:
    return isinstance(note, str) and note.startswith("recompile")


def recompile_count(summary: Summary | dict[str, Any]) -> int | None:
    """Recompiles of the compiled variant: counted from its compile events where the run has them
    (a live run, a new run), else torch's own counter from a finished run (older bundles)."""
    s = Summary.of(summary)
    if s.compile_events:
        return sum(1 for e in s.compile_events if e.get("variant") == "compiled" and is_recompile(e.get("note")))
    return s.recompiles


def compile_marks(compiles: pd.DataFrame | None) -> pd.DataFrame:
    """One mark per (variant, training step) that paid for a compile: `kind` is "recompile" when any
    of its compiles was one, and `note` joins what happened ("forward graph compiled; backward graph
    compiled ..."). At most MAX_MARKS, recompiles kept first."""
    columns = ["variant", "step", "kind", "note"]
    if compiles is None or compiles.empty:
        return pd.DataFrame(columns=columns)
    train = compiles[compiles["phase"] == "train"]
    rows = []
    for (variant, step), group in train.groupby(["variant", "step"], sort=True):
        notes = [str(n) for n in group["note"] if isinstance(n, str) and n]
        kind = "recompile" if any(is_recompile(n) for n in notes) else "compile"
        rows.append({"variant": variant, "step": int(step), "kind": kind, "note": "; ".join(dict.fromkeys(notes))})
    marks = pd.DataFrame(rows, columns=columns)
    if len(marks) > MAX_MARKS:
        marks = marks.sort_values(["kind", "step"], ascending=[False, True]).head(MAX_MARKS).sort_values("step")
    return marks.reset_index(drop=True)


def compile_event_rows(summary: Summary, compiles: pd.DataFrame | None = None) -> list[dict[str, Any]]:
    """Every compile and recompile: variant, phase, epoch, step and what happened (from the live
    frame when given, else the summary's events)."""
    if compiles is not None and not compiles.empty:
        records = compiles.to_dict("records")
    else:
        records = list(Summary.of(summary).compile_events)
    return [
        {
            "variant": r.get("variant"),
            "phase": r.get("phase"),
            "epoch": r.get("epoch"),
            "step": r.get("step"),
            "what happened": r.get("note"),
        }
        for r in records
    ]


def anatomy_rows(profile: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Eager and compiled side by side, per profiled step: operators, kernels, host and kernel time."""
    profile = profile or {}
    eager, compiled = profile.get("eager") or {}, profile.get("compiled") or {}
    if not eager and not compiled:
        return []

    def per_step(part: dict[str, Any], key: str, scale: float = 1.0, digits: int = 0) -> float | None:
        value = part.get(key)
        return None if value is None else round(float(value) * scale, digits)

    rows = [
        ("operators per step (ATen calls from Python)", "operators_per_step", 1.0, 0),
        ("kernels per step", "kernels_per_step", 1.0, 0),
        ("host time per step (ms)", "host_s_per_step", 1000.0, 2),
        ("kernel time per step (ms)", "device_s_per_step", 1000.0, 2),
    ]
    out = [
        {"per step": label, "eager": per_step(eager, key, scale, d), "compiled": per_step(compiled, key, scale, d)}
        for label, key, scale, d in rows
    ]
    out.append(
        {
            "per step": "profiled steps",
            "eager": per_step(eager, "steps"),
            "compiled": per_step(compiled, "steps"),
        }
    )
    return out


def profile_words(profile: dict[str, Any] | None) -> str | None:
    """The anatomy's reading, worded again from the stored numbers (a profile recorded with the CPU
    figure that missed convolutions is not read for a bound), else the reading stored with it."""
    profile = profile or {}
    return profile_reading(profile.get("eager"), profile.get("compiled")) or profile.get("reading")


def cause_words(
    summary: dict[str, Any], params: dict[str, Any] | None, environment: dict[str, Any] | None
) -> str | None:
    """Why compiled is faster, slower or the same, from this anatomy and the verdict (core.engine.cause)."""
    cause = race_cause(summary, params, environment)
    return cause.sentence if cause else None


def recompile_story(summary: dict[str, Any], params: dict[str, Any] | None) -> str | None:
    """The recompiles with each failed guard in full, what they cost and what avoids them."""
    return recompile_words(summary, params)


def kernels_counted(profile: dict[str, Any] | None) -> str | None:
    """What counts as a kernel on this device (CUDA kernels; on a CPU, leaf ATen ops and Inductor's C++ kernels)."""
    for variant in ("compiled", "eager"):
        part = (profile or {}).get(variant) or {}
        if part.get("kernel_counting"):
            return str(part["kernel_counting"])
    return None


def top_kernel_rows(profile: dict[str, Any] | None, variant: str) -> list[dict[str, Any]]:
    """A variant's kernels that took the most time per step."""
    part = (profile or {}).get(variant) or {}
    return [
        {
            "kernel": k.get("name"),
            "calls per step": round(float(k.get("calls_per_step") or 0), 1),
            "ms per step": round(float(k.get("s_per_step") or 0) * 1000, 3),
        }
        for k in part.get("top_kernels") or []
    ]


def top_kernel_lines(profile: dict[str, Any] | None, variant: str) -> list[str]:
    """The same kernels as lines that wrap whole: '17.133 ms per step, 1 call: graph_0_cpp_fused_...',
    the name breakable after each underscore (a zero-width space), so no part of it or its time is cut."""
    return [
        f"{row['ms per step']:.3f} ms per step, {row['calls per step']:g} call{'s' if row['calls per step'] != 1 else ''}"
        f": {wrappable(str(row['kernel']))}"
        for row in top_kernel_rows(profile, variant)
    ]


def wrappable(name: str) -> str:
    """A long identifier that a page may wrap after each underscore or dot (zero-width spaces)."""
    return name.replace("_", "_\u200b").replace(".", ".\u200b").replace("::", "::\u200b")


def phase_rows(summary: Summary) -> list[dict[str, Any]]:
    """The compile's phases, forward and backward apart, each part adding up to its total and the
    two totals to the whole (torch's own timers, compile_stats.compile_breakdown)."""
    breakdown = Summary.of(summary).compile_phases
    if not isinstance(breakdown, dict):
        return []
    return [{"graph": graph, "phase": phase, "seconds": s} for graph, phase, s in phase_table(breakdown)]


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
