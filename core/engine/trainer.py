"""The race: one short training run in eager mode, then the same run under torch.compile.

Fairness is the point. Both variants start from the same initial weights, see the same batches
in the same order, use the same optimizer, loss and precision; only torch.compile differs.
Every step is timed device-correctly (core.engine.device_state); epochs are timed between synchronizations.
Events go to a callback as they happen, so the CLI and the background worker share this code.

This file is the race and its two schedules; one variant's training is core.engine.variant, the
records it emits core.engine.events, what it sets on the device core.engine.device_state, and
what its failures mean core.engine.failures. Both schedules give every turn the same guard
(`_take_turn`): watch it, play it, catch its failure, release its variants, report them.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import gc
import math
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from core.engine import analysis
from core.engine.analysis import StopRule, summarize_variants
from core.engine.compile_stats import (
    CompileStats,
    PhaseWatcher,
    compile_skipped_reason,
    read_compile_stats,
    reset_compile_state,
)
from core.engine.device_state import (
    cache_environment,
    cache_record,
    inductor_cache,
    precision_settings,
    probe_cpu_vector_isa,
    random_state,
    release_device_cache,
    release_variant,
    reset_peak_memory,
    set_random_state,
)
from core.engine.environment import environment_record
from core.engine.events import (
    VARIANTS,
    EventCallback,
    RaceResult,
    ReplicateEvent,
    StartEvent,
    StatusEvent,
    VariantResult,
)
from core.engine.failures import build_failure, compile_failure, explain_failure
from core.engine.intervals import (
    ASSUMED,
    BLOCK_STEPS,
    REPLICATE_TURN_STEPS,
    ProcessResult,
    RunToRun,
    busy_share,
    more_wanted,
    replicate_steps,
    replicates_asked,
    spans,
)
from core.engine.models.workload import Workload, workload_for
from core.engine.profiling import kernel_profiling, shows_cpu_kernels
from core.engine.spec import DeviceCaps, RunSpec, SpecError, check, detect_device_caps, resolve_device
from core.engine.variant import (
    BatchSource,
    VariantRun,
    precompile_ahead,
    set_stance,
    torch_feature_problems,
    warm_up_device,
)

# ----------------------------------------------------------------------
# One replicate process of a race: both variants again in a fresh process, from the warm compile
# cache the first process left, taking turns every step (REPLICATE_TURN_STEPS), for a short stretch of
# timed steps (core.engine.intervals.replicate_steps). What it measures is one more process's speedup for
# the headline (core.engine.intervals.combine): the spread between processes is what no single
# process can see.
#
# Everything else is the race's own: the same spec, seed, weights, batches, precision and compile
# options (core.engine.variant) and Inductor settings (its profiler scopes: part of the cache key, so the
# first process's cache serves), the same busy watch (a look every 5 of a variant's steps, across the
# other's turns). The compiled variant's first block (its first 5 steps) pays the warm compile and is
# dropped with the first block of eager, which pays the process's one-time costs (the
# first oneDNN primitives, the allocator's growth): those dropped blocks are the replicate's warm-up,
# so it runs no separate untimed step first, as the first process must (its eager steps all count).
# That step was 0.24-0.39 s of the 0.5 s a warm replicate took to its first step here.


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


def measure_replicate(
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
    (core.engine.intervals.more_wanted), each said as it lands. Only after a first process whose
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


ALTERNATING_MEMORY = "peak of both variants together (they take turns: both models in memory)"


def run_race(
    spec: RunSpec,
    on_event: EventCallback | None = None,
    caps: DeviceCaps | None = None,
    trace_dir: str | None = None,
    spread: RunToRun = ASSUMED,
    replicate: ReplicateRunner | None = None,
    conditions: dict[str, Any] | None = None,
    run_id: int | None = None,
) -> RaceResult:
    """Validate, then race eager against compiled. Raises SpecError before any work if invalid.

    An exception during training (out of memory, a compile error, Ctrl-C) ends the race early:
    the result keeps every event so far and carries a readable `error`. With `trace_dir`, each
    variant's profiled steps are written there as a Chrome/Perfetto trace. `spread`: this device's
    run-to-run spread (core.runs.device_history learns it from the store; alone, the assumed one), the
    prior of the spread between the race's processes. `replicate`: how this process starts a
    replicate process and waits for it (core.runs.processes.run_replicate), called while the
    first process's compile cache is still there; without it, the race is its first process alone.
    `conditions`: what this process runs under (core.runs.race_conditions), kept with the race.
    `run_id`: the stored run this race is, named in the warm cache's list of the races that filled it.
    """
    caps = caps or detect_device_caps()
    check(spec, caps)
    problems = torch_feature_problems(spec)
    if problems:
        raise SpecError(problems)
    if trace_dir:
        os.makedirs(trace_dir, exist_ok=True)
    device = torch.device(resolve_device(spec.device, caps))
    race = _Race(spec, device, on_event or (lambda event: None), trace_dir, spread=spread)
    if spec.target_interval:
        floor = analysis.warmup_floor(spec.mode, spec.backend)
        follow = replicate is not None and replicates_asked(spec.replicates, spec.target_interval) > 0
        race.stop_rule = StopRule(spec.target_interval, spec.total_steps, spec.schedule, floor, spread, follow)
    started = time.perf_counter()
    cache_notes: dict = {}  # what the warm cache held, or whether a cold one was kept (core.engine.warm_cache)
    with precision_settings(spec), inductor_cache(spec, device, cache_notes, {"run": run_id}) as cache_dir:
        environment = environment_record(device)
        environment.update(cache_notes)
        environment["precision"] = spec.precision
        environment["inductor_cache"] = spec.cache
        environment["run_to_run"] = spread.to_dict()  # the prior of the processes' spread (analysis.spread_of)
        if conditions is not None:  # and where its compile caches are (every door's race alike)
            conditions = {**conditions, "caches": cache_record(cache_dir, spec.cache != "warm")}
            environment["conditions"] = race.conditions = conditions
        race.emit(StartEvent(environment))
        try:  # a model that cannot be built ends the race here, with the reason, before any timing
            initial = _initial_model(spec)
        except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - reported, not hidden
            race.error = build_failure(exc, spec, device)
            race.emit(StatusEvent("eager", "failed", 0, spec.epochs, race.error))
            return race.result(environment)
        if spec.cache == "precompiled":  # compiled ahead of time by another process: what this one loads
            environment["precompiled"] = ahead = precompile_ahead(spec, cache_dir)
            if "error" in ahead:
                race.error = f"the ahead-of-time compile failed: {ahead['error']}"
                race.emit(StatusEvent("compiled", "failed", 0, spec.epochs, race.error))
                return race.result(environment)
        probe_s = probe_cpu_vector_isa(device, spec.backend)  # once per machine, not this model's compile
        if probe_s is not None:
            environment["cpu_isa_probe_s"] = round(probe_s, 3)
        SCHEDULES[spec.schedule](race, initial)
        if replicate is not None:
            add_replicates(race, replicate, cache_dir, time.perf_counter() - started)
    environment.update(cache_notes)  # a cold race's cache is kept for warm races as it ends
    return race.result(
        environment, model_params=initial.model_params, cpu_isa_probe_s=environment.get("cpu_isa_probe_s")
    )


@dataclass
class _InitialModel:
    """What both variants start from: the workload, the initial weights and how many there are."""

    workload: Workload
    init_state: dict
    model_params: int

    def starting(self, spec: RunSpec, name: str) -> StatusEvent:
        return StatusEvent(name, "starting", 0, spec.epochs, f"{spec.model}, {self.model_params:,} parameters")


def _initial_model(spec: RunSpec) -> _InitialModel:
    """Build the model once, seeded, and keep its weights for both variants."""
    workload = workload_for(spec)
    torch.manual_seed(spec.seed)
    model = workload.build()
    model_params = sum(p.numel() for p in model.parameters())
    init_state = copy.deepcopy(model.state_dict())
    del model
    return _InitialModel(workload, init_state, model_params)


@dataclass
class _Race:
    """What a race has so far, shared by its turns: each variant's result, torch's compile counters,
    the error that ended the race and the finding that torch.compile could not handle the model."""

    spec: RunSpec
    device: torch.device
    emit: EventCallback
    trace_dir: str | None
    spread: RunToRun = ASSUMED  # the device's run-to-run spread (core.engine.intervals)
    variants: dict[str, VariantResult] = field(default_factory=lambda: {name: VariantResult(name) for name in VARIANTS})
    stats: CompileStats = field(default_factory=CompileStats)
    error: str | None = None
    compile_failed: str | None = None
    trained: dict[str, tuple] = field(default_factory=dict)  # a variant's state and batches, to profile it later
    stop_rule: StopRule | None = None  # a race that stops once its speedup is known (core.engine.analysis)
    processes: list[ProcessResult] = field(default_factory=list)  # its replicate processes, in order
    replicate_steps: list[dict[str, Any]] = field(default_factory=list)  # what each replicate measured, whole
    conditions: dict[str, Any] | None = None  # what this process runs under (core.runs.race_conditions)

    def result(self, environment: dict[str, Any], **extra: Any) -> RaceResult:
        eager, compiled = self.variants["eager"], self.variants["compiled"]
        summary = summarize_variants(
            self.spec, eager, compiled, self.stats, self.compile_failed, self.spread, self.processes, self.conditions
        )
        result = RaceResult(self.spec, environment, eager, compiled, self.stats, summary.replace(**extra), self.error)
        result.replicates = list(self.replicate_steps)
        return result


def _race_sequential(race: _Race, initial: _InitialModel) -> None:
    """Eager runs all its epochs, then compiled runs all of its; a failure ends the race there.

    No profiling happens between the two timed runs: the profiler can leave CUPTI attached (torch
    keeps it for CUDA-graph modes below CUDA 12.6, TEARDOWN_CUPTI=0), which slows every later
    launch, so only compiled would pay. Compiled is profiled after its timed epochs, and eager,
    rebuilt as it ended training, after that."""
    for name in VARIANTS:
        race.emit(initial.starting(race.spec, name))
        if name == "compiled":
            reset_compile_state()
        _take_turn(race, (name,), functools.partial(_whole_run, name=name, initial=initial))
        if race.error:
            return
    if "eager" in race.trained:
        _profile_later(race, "eager", *race.trained.pop("eager"), initial)


def _whole_run(turn: _Turn, name: str, initial: _InitialModel) -> None:
    """Sequential: one variant's every epoch (eager after the warm-up); compiled's profiled steps
    follow its own, eager's trained state is kept (off the device) to be profiled after compiled."""
    race = turn.race
    try:
        if name == "eager":
            warm_up_device(race.spec, race.device, initial.init_state, initial.workload)
        after = turn.report_compile_skipped if name == "compiled" else None
        run = turn.set_up(name, initial)
        source = BatchSource(race.spec, race.device, initial.workload)
        profile_now = name == "compiled" or not race.spec.profile_steps
        rule = race.stop_rule
        should_stop = None
        if rule is not None and name == "eager":
            should_stop = lambda: rule.eager_known(run.result.times("train"))  # noqa: E731
        elif rule is not None:
            eager_times = race.variants["eager"].times("train")
            should_stop = lambda: rule.ratio_known(eager_times, run.result.times("train"))  # noqa: E731
        run.run(source, after_first_epoch=after, trace_dir=race.trace_dir, profile=profile_now, should_stop=should_stop)
        if not profile_now:  # its batches too: DataLoader workers (idle meanwhile) are not started twice
            race.trained[name] = (run.trained_state(), source)
    except Exception as exc:
        if not turn.compile_failed(name, exc):
            raise


def _profile_later(race: _Race, name: str, state: dict[str, Any], source: BatchSource, initial: _InitialModel) -> None:
    """Profile a variant after both timed runs, rebuilt from the state it ended training with. Its
    memory peaks were recorded at its release; a failure here fails the race, said as usual."""
    spec, device = race.spec, race.device
    run = VariantRun(name, spec, device, initial.init_state, lambda event: None, initial.workload)
    try:
        run.restore_trained_state(state)
        run.result = race.variants[name]
        run.model.train()
        run.profile(source, race.trace_dir)
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - reported, not hidden
        race.error = race.variants[name].error = explain_failure(exc, spec, device)
        race.emit(StatusEvent(name, "failed", spec.epochs, spec.epochs, race.error))
    finally:
        del run
        gc.collect()


def _race_side_by_side(race: _Race, initial: _InitialModel, turns: Callable[..., None]) -> None:
    """Eager and compiled take turns (`turns`: epoch by epoch, or block by block), so both lines
    grow together on the live charts and slow drift (heat, background load) falls on both alike, as
    PyTorch's harness interleaves its repeats. Both models and their optimizers are in memory the
    whole race, so peak memory is of both together (said so). Each variant keeps its own random
    stream (saved and restored around its turns), so its losses are the ones a sequential race
    gives for the same seed."""
    for name in VARIANTS:
        race.emit(initial.starting(race.spec, name))
    reset_compile_state()
    _take_turn(race, VARIANTS, functools.partial(turns, initial=initial))
    for result in race.variants.values():
        if result.peak_memory_bytes is not None:
            result.memory_kind = ALTERNATING_MEMORY


def _epoch_by_epoch(turn: _Turn, initial: _InitialModel) -> None:
    """Alternating: both variants set up, then one epoch each in turn, then their profiled steps.
    A compile failure drops the compiled variant and eager goes on."""
    spec, device = turn.race.spec, turn.race.device
    sources, streams = _set_up_both(turn, initial)
    rule = turn.race.stop_rule
    try:
        # The stance (set after compiled's first step) stays for the whole race: eager's model is
        # not compiled, so it never consults it.
        for epoch in range(1, spec.epochs + 1):
            for name in list(turn.runs):
                turn.active = name
                set_random_state(device, streams[name])
                after = turn.report_compile_skipped if name == "compiled" else None
                try:
                    turn.runs[name].run_epoch(sources[name], epoch, after)
                except Exception as exc:  # noqa: BLE001 - a compile failure is a finding; eager goes on
                    if not turn.compile_failed(name, exc):
                        raise
                    del turn.runs[name]
                    continue
                streams[name] = random_state(device)
            if rule is not None and len(turn.runs) == 2 and rule.ratio_known(*_train_times(turn)):
                break
        for name in list(turn.runs):
            turn.active = name
            turn.runs[name].profile(sources[name], turn.race.trace_dir)
    finally:
        if spec.stance != "default":
            set_stance("default")


def _set_up_both(turn: _Turn, initial: _InitialModel) -> tuple[dict[str, BatchSource], dict[str, Any]]:
    """Both variants built, their batches ready and their random streams kept (right after each
    variant's own seeding, so each keeps the losses a sequential race gives), memory counted from here."""
    spec, device = turn.race.spec, turn.race.device
    sources: dict[str, BatchSource] = {}
    streams: dict[str, Any] = {}
    warm_up_device(spec, device, initial.init_state, initial.workload)
    for name in VARIANTS:
        turn.set_up(name, initial).model.train()
        sources[name] = BatchSource(spec, device, initial.workload)
        sources[name].prepare()
        streams[name] = random_state(device)
    reserved_at_start = reset_peak_memory(device)
    for run in turn.runs.values():
        run.result.reserved_at_start_bytes = reserved_at_start
    return sources, streams


def _train_times(turn: _Turn) -> tuple[list[float], list[float]]:
    return turn.race.variants["eager"].times("train"), turn.race.variants["compiled"].times("train")


def _block_by_block(turn: _Turn, initial: _InitialModel) -> None:
    """Blocks: each epoch, a block of each variant in turn until both have run the epoch's steps;
    then each variant's evaluation and epoch event; with a target interval, a look after each pair
    of blocks (the rule decides which are its looks). A compile failure drops compiled; eager goes on."""
    spec, device = turn.race.spec, turn.race.device
    sources, streams = _set_up_both(turn, initial)
    rule = turn.race.stop_rule
    try:
        for epoch in range(1, spec.epochs + 1):
            for name, run in turn.runs.items():
                run.start_epoch(sources[name], epoch)
            running, known = list(turn.runs), False
            while running and not known:
                for name in list(running):
                    turn.active = name
                    set_random_state(device, streams[name])
                    turn.runs[name].announce()  # the status line follows the turn
                    try:
                        ran = turn.runs[name].run_block(BLOCK_STEPS)
                    except Exception as exc:  # noqa: BLE001 - a compile failure is a finding; eager goes on
                        if not turn.compile_failed(name, exc):
                            raise
                        del turn.runs[name]
                        running.remove(name)
                        continue
                    streams[name] = random_state(device)
                    if ran < BLOCK_STEPS:
                        running.remove(name)
                known = rule is not None and len(turn.runs) == 2 and rule.ratio_known(*_train_times(turn))
            for name in list(turn.runs):
                turn.active = name
                set_random_state(device, streams[name])
                turn.runs[name].end_epoch(sources[name], turn.report_compile_skipped if name == "compiled" else None)
                streams[name] = random_state(device)
            if known:
                break
        for name in list(turn.runs):
            turn.active = name
            turn.runs[name].profile(sources[name], turn.race.trace_dir)
    finally:
        if spec.stance != "default":
            set_stance("default")


SCHEDULES: dict[str, Callable[[_Race, _InitialModel], None]] = {
    # blocks, the default: turns every BLOCK_STEPS steps within each epoch, so each pair of blocks ran
    # side by side (the interval is over those pairs: core.engine.intervals); compiled's first block
    # still pays its compile, so compiled's epoch 1 still carries it.
    "blocks": functools.partial(_race_side_by_side, turns=_block_by_block),
    "sequential": _race_sequential,
    "alternating": functools.partial(_race_side_by_side, turns=_epoch_by_epoch),
}


class _Turn:
    """The variants of one turn (one in the sequential schedule, both in the alternating one), the
    one running now (`active`: a failure is its) and the warnings torch gave while they ran."""

    def __init__(self, race: _Race, names: tuple[str, ...]):
        self.race = race
        self.watched = "compiled" if "compiled" in names else names[0]  # compile phases are compiled's
        self.active = names[0]
        self.runs: dict[str, VariantRun] = {}
        self.caught: list[warnings.WarningMessage] = []

    def set_up(self, name: str, initial: _InitialModel) -> VariantRun:
        """Build a variant from the initial model; what it measures is the race's from now on."""
        self.active = name
        spec, device = self.race.spec, self.race.device
        run = self.runs[name] = VariantRun(name, spec, device, initial.init_state, self.race.emit, initial.workload)
        self.race.variants[name] = run.result
        return run

    def compile_failed(self, name: str, exc: BaseException) -> bool:
        """Whether the compiled variant failed because torch.compile could not handle the model: then
        that is recorded as the race's finding and said (eager's results stand)."""
        spec = self.race.spec
        reason = compile_failure(exc, spec, self.race.device) if name == "compiled" else None
        if not reason:
            return False
        self.race.compile_failed = self.race.variants[name].error = reason
        self.race.emit(StatusEvent(name, "compile_failed", 0, spec.epochs, reason))
        return True

    def report_phase(self, phase: str | None, since: float) -> None:
        """Compile phases as status events while they happen (from the phase watcher's thread)."""
        run = self.runs.get(self.watched)
        epoch = run.epoch if run is not None else 0
        self.race.emit(StatusEvent(self.watched, "compile_phase", epoch, self.race.spec.epochs, phase or ""))

    def report_compile_skipped(self) -> None:
        """After compiled epoch 1 (untimed): if no compiled code ran, say so while the run goes on."""
        spec = self.race.spec
        stats = read_compile_stats()
        stats.warnings = torch_warnings(self.caught)
        reason = compile_skipped_reason(stats.to_dict(), spec.backend, spec.mode, spec.cache)
        if reason:
            self.race.emit(StatusEvent("compiled", "compile_skipped", 1, spec.epochs, reason))


def _take_turn(race: _Race, names: tuple[str, ...], play: Callable[[_Turn], None]) -> None:
    """The guard every turn of both schedules runs under: watch it (torch's warnings, compiled kernels
    named for the profile, compile phases), play it, catch its failure, release its variants, and
    report each one done or failed."""
    spec, device = race.spec, race.device
    turn = _Turn(race, names)
    # On a CPU, compiled kernels show up in the per-step profile only if compiled to say so.
    visible_kernels = "compiled" in names and shows_cpu_kernels(spec.profile_steps, device)
    with (
        warnings.catch_warnings(record=True) as caught,
        kernel_profiling(visible_kernels),
        PhaseWatcher(turn.report_phase),
    ):
        warnings.simplefilter("default")  # once per place: a per-step warning must not pile up
        turn.caught = caught
        try:
            play(turn)
        except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - reported, not hidden
            race.error = race.variants[turn.active].error = explain_failure(exc, spec, device)
    _replay_warnings(caught)
    if "compiled" in names:
        race.stats = read_compile_stats()
        race.stats.warnings = torch_warnings(caught)
    turn.runs.clear()  # the models go before their release collects them
    for name in names:
        cleanup_error = release_variant(race.variants[name], device)
        if cleanup_error and race.error is None:
            race.error = race.variants[name].error = cleanup_error
    for name in names:
        race.emit(StatusEvent(name, "failed" if race.error else "done", spec.epochs, spec.epochs, race.error or ""))


def torch_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    """What was warned while the compiled variant ran (Inductor announces a skipped frame this
    way): first lines, deduplicated, at most 10."""
    texts = [str(w.message).strip().splitlines()[0] for w in caught if str(w.message).strip()]
    return list(dict.fromkeys(texts))[:10]


def _replay_warnings(caught: list[warnings.WarningMessage]) -> None:
    """Show the recorded warnings as Python would have (they were captured to be stored)."""
    for w in caught:
        warnings.showwarning(w.message, w.category, w.filename, w.lineno)
