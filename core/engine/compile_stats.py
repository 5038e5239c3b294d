"""What torch says about its own compilation: graphs, graph breaks, recompiles, skipped frames,
skipped CUDA graphs, phase times.

These come from private torch APIs (`torch._dynamo.utils`), so they are read in this one module,
defensively: a figure this torch version does not provide is None ("not available"), never 0 and
never a crash. The module imports no torch at import time: `compile_skipped_reason` is pure, and
the view uses it on stored runs.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from core.engine.spec import CUDA_GRAPH_MODES


@dataclass
class CompileStats:
    """Counters and times for everything compiled since `reset_compile_state()`."""

    graphs: int | None = None
    graph_breaks: int | None = None
    break_reasons: list[str] = field(default_factory=list)
    recompiles: int | None = None
    recompile_reasons: list[str] = field(default_factory=list)
    frames_compiled: int | None = None
    frame_skips: list[str] = field(default_factory=list)  # frames Dynamo or a backend decided to skip
    cudagraph_skips: int | None = None
    cudagraph_skip_reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # what torch warned while compiling
    # Where compile time went, forward and backward apart, in phases that add up to each total
    # (compile_breakdown); {} when this torch does not report it.
    phases: dict[str, Any] = field(default_factory=dict)
    cache_hits: int | None = None
    cache_misses: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# How many compile records torch keeps for a race's totals (its default, 64, drops the oldest: a
# model with many graph breaks, or recompiles, fills it before the race ends).
COMPILATION_RECORDS_KEPT = 4096


def reset_compile_state() -> None:
    """Forget earlier compilations so counters describe only what comes next."""
    try:
        import torch._dynamo
        import torch._dynamo.utils as du

        torch._dynamo.reset()
        du.counters.clear()
        if hasattr(du, "_compilation_metrics"):
            du._compilation_metrics.clear()
        if hasattr(du, "set_compilation_metrics_limit"):  # 64 by default: a race's totals need them all
            du.set_compilation_metrics_limit(COMPILATION_RECORDS_KEPT)
    except Exception:  # noqa: BLE001 - a missing private API only costs us the counters
        pass
    try:  # start recording why frames are skipped (torch keeps no list until asked to)
        from torch._dynamo import eval_frame

        eval_frame.reset_skip_reasons()
    except Exception:  # noqa: BLE001
        pass


DYNAMO, AOT, LOWERING, CODEGEN, KERNELS = (
    "Dynamo tracing",
    "AOT autograd",
    "Inductor lowering",
    "Inductor code generation",
    "kernel compilation",
)
PHASE_ORDER = (DYNAMO, AOT, LOWERING, CODEGEN, KERNELS)
PHASE_MEANING = {
    DYNAMO: "Dynamo reads the Python bytecode and records the tensor operations into a graph",
    AOT: "AOT autograd traces the joint forward and backward graph and splits it in two",
    LOWERING: "Inductor lowers the graph to loops and decides what to fuse",
    CODEGEN: "Inductor writes the kernels' source code (C++ on a CPU, Triton on a GPU)",
    KERNELS: "the C++ compiler or Triton compiles those kernels (and autotuning benchmarks variants)",
}
# Skip reasons that mean "this frame was not compiled although it held tensor work"; torch also
# lists the frames it never meant to compile (its own library code), which say nothing.
_MEANINGFUL_SKIPS = ("decided to skip the frame", "error was suppressed", "compilation failed")


def read_compile_stats() -> CompileStats:
    """Collect torch's own counters for what has compiled since the last reset."""
    stats = CompileStats()
    try:
        import torch._dynamo.utils as du
    except Exception:  # noqa: BLE001
        return stats
    counters = du.counters
    breaks = counters.get("graph_break", {})
    stats.graph_breaks = int(sum(breaks.values()))
    stats.break_reasons = [_first_line(reason) for reason in breaks]
    # Dynamo counts a graph only once the backend compiled it: a frame the backend skipped
    # (Inductor's bf16 check on a pre-Ampere GPU) leaves this at 0 although a frame was traced.
    stats.graphs = int(counters.get("stats", {}).get("unique_graphs", 0))
    stats.frames_compiled = int(counters.get("frames", {}).get("ok", 0))
    stats.frame_skips = _frame_skip_reasons()
    inductor = counters.get("inductor", {})
    stats.cudagraph_skips = int(inductor.get("cudagraph_skips", 0))
    metrics, present = _compilation_metrics(du)
    if metrics is not None:
        if "recompile_reason" in present:
            reasons = [m.get("recompile_reason") for m in metrics if m.get("recompile_reason")]
            stats.recompiles = len(reasons)
            stats.recompile_reasons = [_first_line(r) for r in reasons]
        elif "compile_id" in present:  # older torch: recompiles counted from their ids, reasons unknown
            stats.recompiles = sum(is_recompile(m) for m in metrics)
        stats.phases = compile_breakdown(metrics)
        if "inductor_fx_local_cache_hit_count" in present:
            stats.cache_hits = int(sum(m.get("inductor_fx_local_cache_hit_count") or 0 for m in metrics))
            stats.cache_misses = int(sum(m.get("inductor_fx_local_cache_miss_count") or 0 for m in metrics))
        if "cudagraph_skip_reason" in present:
            stats.cudagraph_skip_reasons = list(
                dict.fromkeys(
                    _first_line(m["cudagraph_skip_reason"]) for m in metrics if m.get("cudagraph_skip_reason")
                )
            )
        fails = [
            f"{m.get('fail_type')}: {_first_line(m.get('fail_reason') or '')}" for m in metrics if m.get("fail_type")
        ]
        stats.frame_skips += [f for f in fails if f not in stats.frame_skips]
    return stats


def compile_breakdown(metrics: list[dict[str, Any]]) -> dict[str, Any]:
    """Compile time by phase, forward and backward apart, with totals that the phases add up to.

    Torch's per-compile records nest their times: a frame's Dynamo total contains AOT autograd,
    which contains Inductor, which contains code generation, which contains kernel compilation.
    The backward graph compiles later, at the first backward, in a record of its own whose total
    lies outside the frame's. So each phase here is its own time minus the next one nested in it
    (the differences add up to the outer total exactly), and the honest total is the forward
    totals plus the backward totals. {} when this torch reports none of it.
    """
    chains = {
        "forward": (
            (DYNAMO, "dynamo_cumulative_compile_time_us"),
            (AOT, "aot_autograd_cumulative_compile_time_us"),
            (LOWERING, "inductor_cumulative_compile_time_us"),
            (CODEGEN, "inductor_code_gen_cumulative_compile_time_us"),
            (KERNELS, "triton_compile_time_us"),
        ),
        "backward": (
            (AOT, "backward_cumulative_compile_time_us"),
            (LOWERING, "inductor_cumulative_compile_time_us"),
            (CODEGEN, "inductor_code_gen_cumulative_compile_time_us"),
            (KERNELS, "triton_compile_time_us"),
        ),
    }
    out: dict[str, Any] = {}
    for direction, chain in chains.items():
        phases = dict.fromkeys(PHASE_ORDER, 0.0)
        total = 0.0
        for m in metrics:
            is_forward = m.get("is_forward")
            if (direction == "forward") != (is_forward is None or bool(is_forward)):
                continue
            present = [(name, float(m[key])) for name, key in chain if m.get(key)]
            if not present or present[0][0] != chain[0][0]:
                continue  # no outer total: nothing honest to split
            outer = cap = present[0][1]
            for (name, value), (_, following) in zip(present, [*present[1:], (None, 0.0)]):
                value = min(value, cap)  # torch's timers can overlap a little: never count a second twice
                cap = min(following, value)
                phases[name] += (value - cap) / 1e6
            total += outer / 1e6
        if total:
            out[direction] = {"phases": {k: v for k, v in phases.items() if v > 0}, "total_s": total}
    if out:
        out["total_s"] = sum(part["total_s"] for part in out.values())
    return out


class CompileWatch:
    """Which compiles happened since it last looked, cheaply enough to ask after every step.

    Torch keeps its records in a deque of 64 (`DEFAULT_COMPILATION_METRICS_LIMIT`): once full, its
    length stops growing while records keep coming, so new records are told by identity, not by
    count. The watch holds the records it has seen, so their ids cannot be reused. Records torch
    marks `is_runtime` (CUDA-graph recording, Triton's runtime autotuning) are not compiles."""

    def __init__(self) -> None:
        self._held = self._records()
        self._seen = {id(r) for r in self._held}

    @staticmethod
    def _records() -> list[Any]:
        try:
            import torch._dynamo.utils as du

            return list(du.get_compilation_metrics())
        except Exception:  # noqa: BLE001 - this torch keeps no records: no compile events
            return []

    def new_compiles(self) -> list[str]:
        """One note per compile since the last call ('recompile: <the guard that failed>', ...)."""
        records = self._records()
        if len(records) == len(self._held) and (not records or records[-1] is self._held[-1]):
            return []  # the usual step: nothing new
        fresh = [r for r in records if id(r) not in self._seen]
        self._held, self._seen = records, {id(r) for r in records}
        dicts = (dataclasses.asdict(r) if dataclasses.is_dataclass(r) else dict(vars(r)) for r in fresh)
        return [compile_note(d) for d in dicts if not is_runtime_record(d)]


def is_runtime_record(record: dict[str, Any]) -> bool:
    """A record torch files beside compiles for work done at run time, not a compile."""
    return record.get("is_runtime") is True


_GENERIC_FRAMES = ("inner", "forward", "_fn", "_wrapped_call_impl", "_call_impl")


def is_recompile(record: dict[str, Any]) -> bool:
    """A frame's second or later compile: torch's compile id "frame/attempt" with attempt > 0
    (what older torch versions, which record no recompile reason, still tell)."""
    if record.get("recompile_reason"):
        return True
    match = re.match(r"^\[?(\d+)/(\d+)", str(record.get("compile_id") or ""))
    return bool(match) and int(match.group(2)) > 0 and record.get("is_forward") is not False


def compile_note(record: dict[str, Any]) -> str:
    """What one compile record says happened, in a line."""
    if record.get("recompile_reason"):
        reason = re.sub(r"^\d+/\d+: ", "", _first_line(record["recompile_reason"]))  # drop torch's "0/0: " frame id
        return f"recompile: {reason}"
    if is_recompile(record):
        return "recompile (this torch version does not record which guard failed)"
    if record.get("is_forward") is False:
        return "backward graph compiled (at the first backward)"
    name = record.get("co_name") or ""
    if "resume_in" in name:
        return f"forward graph compiled for the code after a graph break ({name})"
    return "forward graph compiled" + (f" ({name})" if name and name not in _GENERIC_FRAMES else "")


def _frame_skip_reasons() -> list[str]:
    try:
        from torch._dynamo import eval_frame

        reasons = eval_frame.get_skip_reasons()
    except Exception:  # noqa: BLE001 - older torch: no list of skips
        return []
    out = []
    for reason in reasons:
        if any(marker in reason for marker in _MEANINGFUL_SKIPS):
            text = reason.split("): ", 1)[-1]  # drop "name (file:line)"
            out.append(_first_line(text.replace("Dynamo decided to skip the frame while tracing: ", "")))
    return list(dict.fromkeys(out))


def _compilation_metrics(du) -> tuple[list[dict[str, Any]] | None, set[str]]:
    """Torch's per-compile records as dicts, and the field names this torch version has."""
    getter = getattr(du, "get_compilation_metrics", None)
    if getter is None:
        return None, set()
    present: set[str] = set()
    cls = getattr(du, "CompilationMetrics", None)
    if cls is not None and dataclasses.is_dataclass(cls):
        present = {f.name for f in dataclasses.fields(cls)}
    try:
        records = [dataclasses.asdict(m) if dataclasses.is_dataclass(m) else dict(vars(m)) for m in getter()]
    except Exception:  # noqa: BLE001
        return None, present
    records = [r for r in records if not is_runtime_record(r)]
    for record in records:
        present |= set(record)
    return records, present


def _first_line(text: str) -> str:
    """Torch's reasons run to many lines of hints; the first line says what happened."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[0] if lines else ""


def compile_skipped_reason(
    compile_info: dict[str, Any] | None, backend: str, mode: str, cache: str = "cold"
) -> str | None:
    """Why the compiled variant did not actually run compiled code, or None if it did (or if the
    record cannot tell). Pure: works on a CompileStats dict, stored or imported.

    - no graph compiled although frames were traced: Dynamo or the backend skipped them (Inductor
      skips a bf16 graph on a GPU without native bf16), so the "compiled" run ran eagerly;
    - a CUDA-graph mode whose CUDA graphs were skipped: the mode's point did not happen.
    """
    info = compile_info or {}
    if backend == "eager":  # Dynamo capture only, by request: nothing is meant to compile
        return None
    if cache == "precompiled":  # compiled ahead of time by another process: this one loads, it compiles no graph
        return None
    skips = [s for s in info.get("frame_skips") or [] if s]
    warned = [w for w in info.get("warnings") or [] if "skip" in w.lower()]
    if info.get("graphs") == 0:
        why = (skips or warned or ["Dynamo captured no graph, so the compiled variant ran eagerly"])[0]
        return f"no graph was compiled ({why})"
    if mode in CUDA_GRAPH_MODES and (info.get("cudagraph_skips") or 0) > 0:
        why = (info.get("cudagraph_skip_reasons") or ["torch did not say why"])[0]
        return f"CUDA graphs were skipped ({why}), so mode {mode!r} ran without them"
    return None
