"""One replicate process of a race: both variants again in a fresh process, from the warm compile
cache the first process left, taking turns every step (REPLICATE_TURN_STEPS), for a short stretch of
timed steps (core.engine.replicates.replicate_steps). What it measures is one more process's speedup for
the headline (core.engine.replicates.combine): the spread between processes is what no single
process can see.

Everything else is the race's own: the same spec, seed, weights, batches, precision and compile
options (core.engine.variant) and Inductor settings (its profiler scopes: part of the cache key, so the
first process's cache serves), the same busy watch (a look every 5 of a variant's steps, across the
other's turns). The compiled variant's first block (its first 5 steps) pays the warm compile and is
dropped with the first block of eager, which pays the process's one-time costs (the
first oneDNN primitives, the allocator's growth): those dropped blocks are the replicate's warm-up,
so it runs no separate untimed step first, as the first process must (its eager steps all count).
That step was 0.24-0.39 s of the 0.5 s a warm replicate took to its first step here.
"""

from __future__ import annotations

import dataclasses
import gc
import math
import os
import time
from collections.abc import Callable
from typing import Any

import torch

from core.engine import analysis
from core.engine.cpu_probe import probe_cpu_vector_isa
from core.engine.data import BatchSource
from core.engine.device_state import (
    cache_environment,
    precision_settings,
    random_state,
    release_device_cache,
    set_random_state,
)
from core.engine.events import ReplicateEvent, StatusEvent
from core.engine.failures import explain_failure
from core.engine.intervals import BLOCK_STEPS
from core.engine.models.resolve import workload_for
from core.engine.noise import busy_share
from core.engine.profiling import kernel_profiling, shows_cpu_kernels
from core.engine.replicates import (
    REPLICATE_TURN_STEPS,
    ProcessResult,
    more_wanted,
    replicate_steps,
    replicates_asked,
    spans,
)
from core.engine.spec import RunSpec, detect_device_caps, resolve_device
from core.engine.variant import VariantRun, set_stance


def replicate_spec(spec: RunSpec, steps: int) -> RunSpec:
    """The race as a replicate runs it: one epoch of a warm-up block and `steps` timed steps per
    variant, in blocks, nothing evaluated or profiled, no stopping rule."""
    return dataclasses.replace(
        spec,
        epochs=1,
        steps_per_epoch=steps + BLOCK_STEPS,
        eval_steps=0,
        profile_steps=0,
        target_interval=None,
        schedule="blocks",
        replicates=0,
    )


def run_replicate(
    spec: RunSpec, number: int, steps: int, cache_dir: str, sent_at: float | None = None
) -> dict[str, Any]:
    """Run replicate `number` of the race `spec` in this process, compiling from `cache_dir` (the
    first process's cache). Returns {"process": ProcessResult.to_dict(), "eager_step_times_s": [...],
    "compiled_step_times_s": [...], "first_step_at": time.time() as its first step began}; `sent_at`
    (time.time() when it was started) gives its start cost."""
    os.environ.update(cache_environment(cache_dir))  # before anything compiles: Inductor reads it then
    caps = detect_device_caps()
    device = torch.device(resolve_device(spec.device, caps))
    run_spec = replicate_spec(spec, steps)
    probe_cpu_vector_isa(device, spec.backend)
    workload = workload_for(run_spec)
    torch.manual_seed(spec.seed)
    init_state = {k: v.clone() for k, v in workload.build().state_dict().items()}
    ready: float | None = None
    # compiled as the first process compiled it (profiler scopes included), so its cache serves
    with precision_settings(run_spec), kernel_profiling(shows_cpu_kernels(spec.profile_steps, device)):
        gc.freeze()  # what the process holds so far stays out of the collector, as warm_up_device does
        runs, sources, streams = {}, {}, {}
        for name in ("eager", "compiled"):
            runs[name] = VariantRun(name, run_spec, device, init_state, lambda event: None, workload)
            runs[name].model.train()
            sources[name] = BatchSource(run_spec, device, workload)
            sources[name].prepare()
            streams[name] = random_state(device)
            runs[name].start_epoch(sources[name], 1)
        first_step_at = time.time()  # the process's start is behind it: what a replicate costs before measuring
        try:
            running = list(runs)
            while running:
                for name in list(running):
                    set_random_state(device, streams[name])
                    if runs[name].run_block(REPLICATE_TURN_STEPS) < REPLICATE_TURN_STEPS:
                        running.remove(name)
                    streams[name] = random_state(device)
                    if ready is None and name == "compiled":  # the warm compile is behind it
                        ready = time.time()
        finally:
            if spec.stance != "default":
                set_stance("default")
    eager, compiled = (runs[name].result.times("train") for name in ("eager", "compiled"))
    return {
        "process": measured_process(number, eager, compiled, runs, sent_at, ready).to_dict(),
        "eager_step_times_s": eager,
        "compiled_step_times_s": compiled,
        "first_step_at": first_step_at,
    }


def measured_process(
    number: int,
    eager: list[float],
    compiled: list[float],
    runs: dict[str, Any],
    sent_at: float | None,
    ready: float | None,
) -> ProcessResult:
    """A replicate's steady speedup and own interval, its first block of each variant dropped (the
    compile, the first touches of memory), and the steps a busy machine touched."""
    e, c = eager[BLOCK_STEPS:], compiled[BLOCK_STEPS:]
    speed = analysis.steady_state_speedup(e, c, warmup=0, paired=True)
    n = min(len(e), len(c))
    busy = {name: [s - BLOCK_STEPS for s in runs[name].result.busy_steps if s > BLOCK_STEPS] for name in runs}
    share = max((busy_share(busy[name], 0, n) for name in busy), default=0.0)
    half = math.log(speed.within[1] / speed.speedup) if speed is not None and speed.within else None
    return ProcessResult(
        number,
        speed.speedup if speed is not None else None,
        half,
        n,
        speed.eager_median_s if speed is not None else None,
        speed.compiled_median_s if speed is not None else None,
        round(share, 3),
        {name: spans(steps) for name, steps in busy.items() if steps},
        None,
        None if sent_at is None or ready is None else round(ready - sent_at, 2),
    )


REPLICATE_MIN_LIMIT_S = 120.0  # a replicate's time limit: this, or three times the first process's time
# (spec, number, steps per variant, compile cache folder, time limit in s) -> what the replicate measured
ReplicateRunner = Callable[[RunSpec, int, int, str, float], dict[str, Any]]


def add_replicates(race: Any, replicate: ReplicateRunner, cache_dir: str, first_s: float) -> None:
    """After the first process: replicate processes, one at a time, while the race wants more
    (core.engine.replicates.more_wanted), each said as it lands. Only after a first process whose
    compiled code ran; a cancel ends the race there, with every process measured so far."""
    spec = race.spec
    asked = replicates_asked(spec.replicates, spec.target_interval)
    first = race.result({}).summary
    if asked == 0 or race.error or race.compile_failed or first.compile_skipped:
        return
    if first.steady_state_speedup is None:
        return
    steps = replicate_steps(
        first.eager_median_step_s, first.compiled_median_step_s, len(race.variants["compiled"].times("train"))
    )
    release_device_cache(race.device)  # a GPU's cached blocks are the replicate's to use now
    limit_s = max(REPLICATE_MIN_LIMIT_S, 3 * first_s)
    first_process = ProcessResult.from_dict(first.first_process)
    try:
        while more_wanted([first_process, *race.processes], race.spread, spec.target_interval, asked):
            number = len(race.processes) + 2
            upto = "up to " if spec.target_interval else ""
            race.emit(
                StatusEvent("replicate", "replicating", number, asked + 1, f"replicate {number - 1} of {upto}{asked}")
            )
            measured = replicate(spec, number, steps, cache_dir, limit_s)
            process = ProcessResult.from_dict(measured.get("process"))
            if process is None:
                break
            race.processes.append(process)
            race.replicate_steps.append(measured)
            race.emit(ReplicateEvent(process.to_dict()))
            if process.error:  # said with its reason; the next would most likely fail the same way
                break
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - reported, not hidden
        race.error = explain_failure(exc, spec, race.device)
