"""A race's summary from what its variants recorded: analysis.summarize over their steps and epochs
(with the race's replicate processes and the steps a busy machine touched), plus memory, losses,
compile counters, the profile's reading and why the race stopped: a Summary (its reading is derived,
never stored: core.engine.reading)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from core.engine import analysis, noise
from core.engine.compile_stats import CompileStats, compile_skipped_reason
from core.engine.events import VariantResult
from core.engine.intervals import ASSUMED, BLOCK_STEPS, RunToRun
from core.engine.profile_reading import profile_reading
from core.engine.replicates import APART_SCHEDULES, ProcessResult, replicates_asked
from core.engine.spec import RunSpec
from core.engine.stopping import race_alpha, stop_reading
from core.engine.summary import Summary


def summarize_variants(
    spec: RunSpec,
    eager: VariantResult,
    compiled: VariantResult,
    stats: CompileStats,
    compile_failed: str | None = None,
    spread: RunToRun | None = ASSUMED,
    replicated: Sequence[ProcessResult] = (),
    conditions: dict[str, Any] | None = None,
) -> Summary:
    """analysis.summarize over the recorded events, plus memory, losses and compile counters;
    `compile_failed` is why torch.compile could not handle the model, when it could not;
    `replicated`: the race's replicate processes (core.engine.replicates); `conditions`: what its
    process ran under, which the reading names."""
    measured = analysis.summarize(
        eager.times("train"),
        compiled.times("train"),
        [e.train_time_s for e in eager.epochs],
        [e.train_time_s for e in compiled.epochs],
        spec.batch_size,
        [e.eval_time_s for e in eager.epochs if e.eval_time_s is not None],
        [e.eval_time_s for e in compiled.epochs if e.eval_time_s is not None],
        min_warmup=analysis.warmup_floor(spec.mode, spec.backend),
        compile_events=[dataclasses.asdict(c) for c in compiled.compiles],
        paired=spec.schedule != "sequential",
        alpha=race_alpha(spec),
        spread=spread,
        replicated=replicated,
        busy={"eager": eager.busy_steps, "compiled": compiled.busy_steps},
        apart=_apart(spec, len(eager.times("train"))),
    )
    load = eager.load + compiled.load
    summary = Summary.from_dict(measured)
    summary = summary.replace(
        replicates_asked=replicates_asked(spec.replicates, spec.target_interval),
        conditions=conditions,  # what the race's process ran under (core.runs.race_conditions)
        noise_warnings=summary.noise_warnings + tuple(noise.load_warnings(load)),
        machine_load=tuple(load),
        eager_eval_step_times_s=tuple(eager.times("eval")),
        compiled_eval_step_times_s=tuple(compiled.times("eval")),
        eager_peak_memory_bytes=eager.peak_memory_bytes,
        compiled_peak_memory_bytes=compiled.peak_memory_bytes,
        eager_peak_reserved_bytes=eager.peak_reserved_bytes,
        compiled_peak_reserved_bytes=compiled.peak_reserved_bytes,
        eager_reserved_growth_bytes=eager.reserved_growth_bytes,
        compiled_reserved_growth_bytes=compiled.reserved_growth_bytes,
        memory_kind=compiled.memory_kind or eager.memory_kind,
        eager_final_loss=eager.final_loss,
        compiled_final_loss=compiled.final_loss,
        graphs=stats.graphs,
        graph_breaks=stats.graph_breaks,
        recompiles=stats.recompiles,
        compile_phases=stats.phases,
        compile_skipped=compile_skipped_reason(stats.to_dict(), spec.backend, spec.mode, spec.cache)
        if compiled.steps
        else None,
        profile={
            "eager": eager.profile,
            "compiled": compiled.profile,
            "reading": profile_reading(eager.profile, compiled.profile),
        }
        if eager.profile or compiled.profile
        else None,
        compile_failed=compile_failed,
    )
    return summary.replace(stop_reason=stop_reading(summary, spec.target_interval, spec.total_steps))


def _apart(spec: RunSpec, eager_steps: int) -> str | None:
    """How the first process's variants ran apart, as analysis.summarize_events reads it from the
    stored order of their steps (so a live view and the result agree): turns longer than a block
    (the alternating schedule's epochs, or everything: sequential, or one epoch), else None."""
    if spec.schedule not in APART_SCHEDULES:
        return None
    one_turn = spec.schedule == "sequential" or spec.epochs == 1
    longest = eager_steps if one_turn else spec.steps_per_epoch
    if longest <= BLOCK_STEPS:
        return None
    return "sequential" if one_turn else "alternating"
