"""What torch says about its own compilation: graphs, graph breaks, recompiles, phase times.

These come from private torch APIs (`torch._dynamo.utils`), so they are read in this one
module, defensively: a torch version that lacks one gives None for that figure, never a crash.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


@dataclass
class CompileStats:
    """Counters and times for everything compiled since `reset_compile_state()`."""

    graphs: int | None = None
    graph_breaks: int | None = None
    break_reasons: list[str] = field(default_factory=list)
    recompiles: int | None = None
    recompile_reasons: list[str] = field(default_factory=list)
    frames_compiled: int | None = None
    phase_times_s: dict[str, float] = field(default_factory=dict)  # dynamo / aot / inductor / ...
    cache_hits: int | None = None
    cache_misses: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def reset_compile_state() -> None:
    """Forget earlier compilations so counters describe only what comes next."""
    try:
        import torch._dynamo
        import torch._dynamo.utils as du

        torch._dynamo.reset()
        du.counters.clear()
        if hasattr(du, "_compilation_metrics"):
            du._compilation_metrics.clear()
    except Exception:  # noqa: BLE001 - a missing private API only costs us the counters
        pass


# (label shown to users, CompilationMetrics field in microseconds). The phases nest: the
# dynamo total contains AOT autograd, which contains Inductor, so they do not add up.
_PHASES = (
    ("total: dynamo tracing, includes the phases below", "dynamo_cumulative_compile_time_us"),
    ("aot autograd: forward + backward graphs", "aot_autograd_cumulative_compile_time_us"),
    ("inductor: lowering and kernel generation", "inductor_cumulative_compile_time_us"),
    ("inductor code generation", "inductor_code_gen_cumulative_compile_time_us"),
    ("kernel compile: C++ on CPU, Triton on GPU", "triton_compile_time_us"),
    ("backward graph, compiled at first backward", "backward_cumulative_compile_time_us"),
)


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
    stats.graphs = int(counters.get("stats", {}).get("unique_graphs", 0))
    stats.frames_compiled = int(counters.get("frames", {}).get("ok", 0))
    metrics = _compilation_metrics(du)
    if metrics is not None:
        reasons = [m.get("recompile_reason") for m in metrics if m.get("recompile_reason")]
        stats.recompiles = len(reasons)
        stats.recompile_reasons = [_first_line(r) for r in reasons]
        for label, key in _PHASES:
            total = sum(m.get(key) or 0 for m in metrics)
            if total:
                stats.phase_times_s[label] = total / 1e6
        hits = sum(m.get("inductor_fx_local_cache_hit_count") or 0 for m in metrics)
        misses = sum(m.get("inductor_fx_local_cache_miss_count") or 0 for m in metrics)
        stats.cache_hits, stats.cache_misses = int(hits), int(misses)
    return stats


def _compilation_metrics(du) -> list[dict[str, Any]] | None:
    getter = getattr(du, "get_compilation_metrics", None)
    if getter is None:
        return None
    try:
        return [dataclasses.asdict(m) if dataclasses.is_dataclass(m) else dict(vars(m)) for m in getter()]
    except Exception:  # noqa: BLE001
        return None


def _first_line(text: str) -> str:
    """Torch's reasons run to many lines of hints; the first line says what happened."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[0] if lines else ""
