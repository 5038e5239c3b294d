"""Turning step and epoch times into the numbers a user decides on. Pure functions only.

The definitions follow PyTorch's own compiler benchmark harness where it has one:
- compile overhead = compiled warm-up time - eager warm-up time (first-step costs that both
  variants pay, like allocator growth, cancel out);
- steady-state speedup = median(eager) / median(compiled) over the steps after warm-up, with a
  95% interval over blocks of steps (core.engine.intervals: drift and load last many steps, so
  single steps are not independent) so that noise is not sold as a speedup, widened to this
  device's run-to-run spread where the race's own is narrower (a second race must land in it);
- break-even = the point after which cumulative compiled time stays below cumulative eager time.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import median
from typing import Any

import numpy as np

from core.engine import events, intervals
from core.engine.compile_stats import CompileStats, compile_skipped_reason
from core.engine.events import BusyEvent, CompileEvent, EpochEvent, ReplicateEvent, StepEvent, VariantResult
from core.engine.intervals import APART_SCHEDULES, ASSUMED, BLOCK_STEPS, ProcessResult, RunToRun, replicates_asked
from core.engine.profile_reading import profile_reading
from core.engine.spec import CUDA_GRAPH_MODES, RunSpec
from core.engine.summary import (
    BUSY,
    FASTER,
    NEVER_NO_GAIN,
    NEVER_SLOWER,
    NO_CLEAR_DIFFERENCE,
    NO_VERDICT_BUSY,
    NOT_WITHIN_RUN,
    Speedup,
    Summary,
    default_warmup,
    first_process,
    headline_speedup,
    steady,
    steady_state_speedup,
)


def warmup_floor(mode: str, backend: str = "inductor") -> int:
    """The fewest compiled steps the compile window must cover. CUDA-graph trees warm up on the
    first call and record the graph on the second, so with a CUDA-graph mode the compile cost
    lands in the first three steps, not the first one."""
    return 3 if backend == "inductor" and mode in CUDA_GRAPH_MODES else 1


def compile_overhead(eager: Sequence[float], compiled: Sequence[float], warmup: int) -> float | None:
    """Extra time the compiled variant spent in its first `warmup` items (steps or epochs)."""
    if len(eager) < warmup or len(compiled) < warmup or warmup < 1:
        return None
    return sum(compiled[:warmup]) - sum(eager[:warmup])


def compile_noise(eager: Sequence[float], compiled: Sequence[float], warmup: int) -> float:
    """The least compile cost the steps can show: `warmup` steps' worth of the steady steps' own
    scatter (the 90th percentile less the median, the wider variant's), at least 1 ms a step."""
    scatter = [float(np.percentile(x, 90) - median(x)) for x in (steady(eager, warmup), steady(compiled, warmup)) if x]
    return warmup * max([0.001, *scatter])


def measured_compile(
    eager: Sequence[float], compiled: Sequence[float], warmup: int
) -> tuple[float | None, float | None]:
    """(compile time, None) where compiled's first `warmup` steps are measurably slower than both
    eager's first steps and its own steady steps; else (None, the noise it hides under: "too small to
    measure here, under N ms"); (None, None) without steps past the window."""
    n = min(len(eager), len(compiled))
    cost = compile_overhead(eager, compiled, warmup) if n > warmup else None
    if cost is None:
        return None, None
    noise_s = compile_noise(eager[:n], compiled[:n], warmup)
    over_own = sum(compiled[:warmup]) - warmup * median(steady(compiled[:n], warmup))
    return (cost, None) if cost > noise_s and over_own > noise_s else (None, noise_s)


@dataclass(frozen=True)
class BreakEven:
    """When compile has paid for itself, or why it has not."""

    step: int | None  # 1-based item during which compiled pulls ahead for good
    position: float | None  # fractional items at the crossing (2.1 = a tenth into item 3)
    wall_s: float | None  # compiled wall time at the crossing
    reason: str | None  # None when it broke even; else NOT_WITHIN_RUN / NEVER_SLOWER
    extrapolated_position: float | None  # where it would break even at the steady rates


def cumulative(times: Sequence[float]) -> list[float]:
    total, out = 0.0, []
    for t in times:
        total += t
        out.append(total)
    return out


def break_even(eager: Sequence[float], compiled: Sequence[float], warmup: int | None = None) -> BreakEven:
    """The item after which cumulative compiled time stays at or below cumulative eager time.

    Works on steps or epochs alike. If the run ends with compiled behind, extrapolates with the
    steady-state medians, or says compiled never catches up because its steady steps are slower.
    """
    n = min(len(eager), len(compiled))
    deficit = [c - e for c, e in zip(cumulative(compiled[:n]), cumulative(eager[:n]))]
    if n == 0:
        return BreakEven(None, None, None, NOT_WITHIN_RUN, None)
    if deficit[-1] <= 0:
        k = n  # last index (1-based) at which compiled was still behind, +1
        while k > 0 and deficit[k - 1] <= 0:
            k -= 1
        before = deficit[k - 1] if k > 0 else 0.0
        step_gain = before - deficit[k]
        position = k + (before / step_gain if step_gain > 0 else 0.0)
        wall = sum(compiled[:k]) + (position - k) * compiled[k]
        return BreakEven(k + 1, position, wall, None, None)
    w = default_warmup(n) if warmup is None else warmup
    saving = median(steady(eager[:n], w)) - median(steady(compiled[:n], w))
    if saving <= 0:
        return BreakEven(None, None, None, NEVER_SLOWER, None)
    projection = projected_break_even(eager, compiled)
    return BreakEven(None, None, None, NOT_WITHIN_RUN, projection.position if projection else None)


@dataclass(frozen=True)
class Projection:
    """Where compile would pay for itself if both variants kept their steady step times."""

    position: float  # fractional steps at the projected crossing (947.3: during step 948)
    wall_s: float  # the compiled run's cumulative time there
    eager_step_s: float  # the steady rates the lines are extended with
    compiled_step_s: float

    @property
    def step(self) -> int:
        """The step during which compiled would pull ahead (as BreakEven.step counts)."""
        return math.floor(self.position) + 1


def projected_break_even(
    eager: Sequence[float],
    compiled: Sequence[float],
    compiled_step_s: float | None = None,
    speedup: float | None = None,
) -> Projection | None:
    """The projected crossing of the cumulative lines, for a run where compiled is still behind.

    Compiled continues from its last measured step at its steady median, or at `compiled_step_s`, or
    at eager's steady median over `speedup` (the headline's, or an end of its interval:
    headline_projection, projected_span); eager follows its own measured steps as far as it has
    them (during the compiled run it has all of them), then its steady median. Using every eager
    step, not only as many as compiled has done, is what keeps the projection steady while the
    compiled run goes on. None when compiled has no steps yet, is not faster per step, or is
    already ahead.
    """
    n_e, n_c = len(eager), len(compiled)
    if n_e == 0 or n_c == 0:
        return None
    m_e = median(steady(eager, default_warmup(n_e)))
    if compiled_step_s is not None:
        m_c = compiled_step_s
    elif speedup is not None:
        m_c = m_e / speedup if speedup > 0 else math.inf
    else:
        m_c = median(steady(compiled, default_warmup(n_c)))
    if m_e <= m_c:
        return None
    eager_cum = np.cumsum(np.asarray(eager, dtype=float))
    start = float(np.sum(compiled))
    if n_c <= n_e and start <= eager_cum[n_c - 1]:
        return None  # already ahead: that is a break-even, not a projection
    # Deficit of projected compiled against measured eager at each step from n_c to n_e.
    s = np.arange(n_c, n_e + 1)
    deficit = start + (s - n_c) * m_c - eager_cum[s - 1] if n_c <= n_e else np.array([])
    ahead = np.flatnonzero(deficit <= 0)
    if len(ahead):
        i = int(ahead[0])
        before, after = deficit[i - 1], deficit[i]
        position = float(s[i] - 1 + before / (before - after))
    else:
        last = max(n_e, n_c)
        eager_at = float(eager_cum[-1]) + (last - n_e) * m_e
        compiled_at = start + (last - n_c) * m_c
        position = last + (compiled_at - eager_at) / (m_e - m_c)
    return Projection(position, start + (position - n_c) * m_c, m_e, m_c)


def whole_run_speedup(eager_total_s: float, compiled_total_s: float) -> float | None:
    """Eager total / compiled total, compile included (>1: the compiled run finished sooner)."""
    if compiled_total_s <= 0:
        return None
    return eager_total_s / compiled_total_s


def throughput(samples_per_step: int, median_step_s: float | None) -> float | None:
    return samples_per_step / median_step_s if median_step_s else None


def summarize(
    eager_steps: Sequence[float],
    compiled_steps: Sequence[float],
    eager_epochs: Sequence[float],
    compiled_epochs: Sequence[float],
    batch_size: int,
    eager_eval_epochs: Sequence[float] = (),
    compiled_eval_epochs: Sequence[float] = (),
    warmup: int | None = None,
    min_warmup: int = 1,
    compile_events: Sequence[dict[str, Any]] = (),
    paired: bool = False,
    alpha: float = intervals.ALPHA,
    spread: intervals.RunToRun | None = None,
    replicated: Sequence[intervals.ProcessResult] = (),
    busy: dict[str, list[int]] | None = None,
    apart: str | None = None,
) -> dict[str, Any]:
    """The race's headline numbers from per-step and per-epoch train times of both variants.

    Any figure that the data cannot support (a variant that failed early, a single step) is None.
    `min_warmup` is the shortest compile window (warmup_floor: 3 for CUDA-graph modes). `paired`:
    the variants took turns (steady_state_speedup); `alpha`: the interval's error rate (smaller than
    5% for a race that stopped on its interval: core.engine.intervals.look_alpha); `spread`: the
    device's run-to-run spread, the prior of the spread between processes (None: the race's own
    interval alone); `replicated`: the race's replicate processes (core.engine.intervals), whose
    speedups the headline combines with the first process's; `busy`: per variant, the first
    process's train steps timed while the machine was busy (core.engine.intervals); `apart`: the
    schedule, where the first process's variants ran apart (replicates.APART_SCHEDULES).
    """
    n = min(len(eager_steps), len(compiled_steps))
    w = default_warmup(n, min_warmup) if warmup is None else warmup
    # No steady step yet while every compiled step is a compile step (the first one, or three with CUDA
    # graphs): a ratio then is the compile against a step ("0.01x"), not a speedup.
    own = (
        steady_state_speedup(eager_steps, compiled_steps, warmup=w, paired=paired, alpha=alpha)
        if n > min_warmup
        else None
    )
    first = first_process(own, n, busy, w, apart)
    speed = headline_speedup(own, first, replicated, spread)
    be = break_even(eager_steps, compiled_steps, warmup=w) if n else None
    epochs_done = min(len(eager_epochs), len(compiled_epochs))
    compile_s, compile_under_s = measured_compile(eager_steps, compiled_steps, w)
    out = {
        "warmup_steps": w,
        "compile_time_s": compile_s,  # None where it is too small to measure: then compile_time_under_s
        "compile_time_under_s": compile_under_s,
        "first_epoch_overhead_s": compile_overhead(eager_epochs, compiled_epochs, 1),
        "eval_first_epoch_overhead_s": compile_overhead(eager_eval_epochs, compiled_eval_epochs, 1),
        "steady_state_speedup": speed.speedup if speed else None,
        "speedup_ci95": [speed.ci_low, speed.ci_high] if speed else None,
        "speedup_ci95_within": list(speed.within) if speed and speed.within else None,
        "run_to_run": spread.to_dict() if spread else None,
        "first_process": first.to_dict(),
        "replicates": [p.to_dict() for p in replicated],
        "processes_counted": len(intervals.counted([first, *replicated])),
        "busy_steps": first.busy,  # the first process's steps timed while the machine was busy
        "verdict": speed.verdict if speed else None,
        "eager_median_step_s": speed.eager_median_s if speed else None,
        "compiled_median_step_s": speed.compiled_median_s if speed else None,
        "eager_samples_per_s": throughput(batch_size, speed.eager_median_s) if speed else None,
        "break_even_step": be.step if be else None,
        "break_even_wall_s": be.wall_s if be else None,
        "break_even_reason": _break_even_reason(be, speed),
        "whole_run_speedup": (
            whole_run_speedup(sum(eager_epochs[:epochs_done]), sum(compiled_epochs[:epochs_done]))
            if epochs_done
            else None
        ),
        "eager_step_times_s": list(eager_steps),
        "compiled_step_times_s": list(compiled_steps),
        "eager_epoch_times_s": list(eager_epochs),
        "compiled_epoch_times_s": list(compiled_epochs),
        "eager_eval_epoch_times_s": list(eager_eval_epochs),
        "compiled_eval_epoch_times_s": list(compiled_eval_epochs),
        "compile_events": list(compile_events),  # compiles and recompiles, at the step that paid for them
        "interval_paired": paired,
        "interval_alpha": alpha,  # below 5%: a race that stopped on its interval (words.interval says so)
        "noise_warnings": intervals.drift_warnings(steady(eager_steps, w), steady(compiled_steps, w), paired)
        if n > w
        else [],
    }
    return {**out, **Summary.from_dict(out).headline.kept_figures()}


def _break_even_reason(be: BreakEven | None, speed: Speedup | None) -> str | None:
    """Do not call compiled 'slower' when the interval cannot tell the two apart."""
    if be is None:
        return NOT_WITHIN_RUN
    if be.reason == NEVER_SLOWER and speed is not None and speed.verdict == NO_CLEAR_DIFFERENCE:
        return NEVER_NO_GAIN
    if be.reason == NEVER_SLOWER and speed is not None and speed.verdict == FASTER:
        return NOT_WITHIN_RUN  # the first process's own steps read slower, its processes together faster
    if be.step is None and speed is not None and speed.verdict == BUSY:
        return NO_VERDICT_BUSY
    return be.reason


def summarize_events(
    rows: Iterable[dict[str, Any]],
    batch_size: int,
    min_warmup: int = 1,
    alpha: float = intervals.ALPHA,
    spread: intervals.RunToRun | None = None,
) -> dict[str, Any]:
    """`summarize` over stored event rows (as core.runs.store keeps them, in stored order, each read
    back through its kind's codec: core.engine.events): what a live view and an imported bundle both
    compute from the events alone.
    Whether the variants took turns is read from that order; `spread`: the run-to-run spread the
    race was measured with (in its environment: `spread_of`)."""
    steps: dict[str, list[float]] = {"eager": [], "compiled": []}
    epochs: dict[str, list[float]] = {"eager": [], "compiled": []}
    evals: dict[str, list[float]] = {"eager": [], "compiled": []}
    compiles: list[dict[str, Any]] = []
    replicated: list[intervals.ProcessResult] = []
    busy: dict[str, list[int]] = {"eager": [], "compiled": []}
    paired = False  # a compiled train step before an eager one: the variants took turns
    turn, longest, last = 0, 0, None  # the longest run of one variant's train steps: how far apart they ran
    for row in rows:
        e = events.from_row(row)  # None: a row this app did not write, skipped
        if isinstance(e, StepEvent):
            if e.phase != "train":
                continue
            paired = paired or (e.variant == "eager" and bool(steps["compiled"]))
            turn = turn + 1 if e.variant == last else 1
            last, longest = e.variant, max(longest, turn)
            steps[e.variant].append(e.time_s)
        elif isinstance(e, EpochEvent):
            epochs[e.variant].append(e.train_time_s)
            if e.eval_time_s is not None:
                evals[e.variant].append(e.eval_time_s)
        elif isinstance(e, CompileEvent):
            compiles.append(dataclasses.asdict(e))
        elif isinstance(e, ReplicateEvent):
            process = intervals.ProcessResult.from_dict(e.process)
            if process is not None:
                replicated.append(process)
        elif isinstance(e, BusyEvent) and e.variant in busy:
            busy[e.variant].extend(range(e.first_step, e.last_step + 1))
    return summarize(
        steps["eager"],
        steps["compiled"],
        epochs["eager"],
        epochs["compiled"],
        batch_size,
        evals["eager"],
        evals["compiled"],
        min_warmup=min_warmup,
        compile_events=compiles,
        paired=paired,
        alpha=alpha,
        spread=spread,
        replicated=sorted(replicated, key=lambda p: p.number),
        busy=busy,
        apart=None if longest <= intervals.BLOCK_STEPS else "alternating" if paired else "sequential",
    )


def spread_of(environment: dict[str, Any] | None) -> intervals.RunToRun | None:
    """The run-to-run spread a race was measured with, from its environment (None: a run stored
    before races kept one, whose interval is its own)."""
    return intervals.RunToRun.from_dict((environment or {}).get("run_to_run"))


# ----------------------------------------------------------------------
# Stop when the answer is known: a race with a target interval ends each variant's timed phase once
# the steady speedup's 95% interval is within ±target of it.
#
# The looks are fixed before the race (core.engine.intervals.looks: from ADAPTIVE_MIN_STEPS steps per
# variant, each half as many again, up to the race's epochs x steps per epoch, which is the maximum),
# and the 5% is spent across them (Bonferroni), so the interval reported at the stop keeps its 95%
# coverage however many times it was looked at. Paired schedules (blocks, alternating) stop both
# variants together on the pair interval. The sequential one stops eager on its own precision
# (±target/√2 of its median: if compiled is as steady, the ratio is then known to about ±target) and
# compiled on the ratio; its looks are counted for both variants.
#
# The headline interval is never narrower than the device's run-to-run spread (core.engine.intervals.
# RunToRun): once the race's own interval is inside that spread, more steps cannot narrow what it
# reports, so the race stops there too, and says so, even when the target is narrower.
#
# A first process whose variants run apart (alternating, sequential) in a race that adds replicates
# stops at its first look: once a replicate counts, its speedup is shown, not counted
# (core.engine.intervals.counted), so more of its steps buy the headline nothing. It has told its
# story by then (the compile, a first epoch, the steady step times). Torch-free.


def race_alpha(spec: RunSpec) -> float:
    """The error rate of each look's interval for this race (5% for a fixed-length race)."""
    return alpha_of(spec.target_interval, spec.total_steps, spec.schedule)


def alpha_of(target: float | None, max_steps: int, schedule: str) -> float:
    """The one rule for the error rate of a race's interval, which the stopping rule, the live view
    and the final reading all use: 5% for a fixed-length race; with a target, the 5% spread over the
    race's looks (counted for both variants when they run one after the other)."""
    if not target:
        return intervals.ALPHA
    looks = intervals.looks(max_steps)
    return intervals.look_alpha(len(looks) * (2 if schedule == "sequential" else 1))


def stored_alpha(params: Mapping[str, Any]) -> float:
    """race_alpha from a stored run's params (what a live view has), so the interval it shows while
    the race runs is the one the stopping rule looks at; 5% when the params name no target."""
    spec = RunSpec.stored(dict(params))
    if spec is None or not isinstance(spec.target_interval, int | float) or not spec.target_interval > 0:
        return intervals.ALPHA
    return race_alpha(spec)


class StopRule:
    """The looks of one race and the decision at each. Stateful: a look is taken once, when the
    variant's steps first reach it (a short last block of an epoch may step past it)."""

    def __init__(
        self,
        target: float,
        max_steps: int,
        schedule: str,
        min_warmup: int = 1,
        spread: intervals.RunToRun | None = None,
        replicates_follow: bool = False,
    ):
        self.target, self.max_steps, self.min_warmup = target, max_steps, min_warmup
        # the first process's own interval is not what the race reports: it ends at its first look
        self.story_only = replicates_follow and schedule in APART_SCHEDULES
        self.spread_half = spread.log_half_width() if spread else 0.0  # the narrowest the headline can be
        self.looks = intervals.looks(max_steps)
        self.paired = schedule != "sequential"
        self.alpha = alpha_of(target, max_steps, schedule)
        self._taken: dict[str, int] = {}  # looks taken so far, by who looks

    def _due(self, who: str, n: int) -> bool:
        taken = self._taken.get(who, 0)
        if taken < len(self.looks) and n >= self.looks[taken]:
            while taken < len(self.looks) and n >= self.looks[taken]:
                taken += 1
            self._taken[who] = taken
            return n < self.max_steps  # at the maximum the race ends anyway
        return False

    def ratio_known(self, eager: Sequence[float], compiled: Sequence[float]) -> bool:
        """At a look of the compiled variant (both variants, when they take turns): is the ratio known?"""
        n = min(len(eager), len(compiled)) if self.paired else len(compiled)
        if not self._due("ratio", n):
            return False
        if self.story_only:
            return True
        w = default_warmup(min(len(eager), len(compiled)), self.min_warmup)
        speed = steady_state_speedup(eager, compiled, warmup=w, paired=self.paired, alpha=self.alpha)
        if speed is None or speed.ci_low <= 0:
            return False
        own = math.log(speed.ci_high / speed.speedup)
        return intervals.known_within(max(own, self.spread_half), self.target) or own <= self.spread_half

    def eager_known(self, eager: Sequence[float]) -> bool:
        """Sequential: at a look of eager's, is eager's own median known to ±target/√2?"""
        if not self._due("eager", len(eager)):
            return False
        if self.story_only:
            return True
        times = steady(eager, default_warmup(len(eager), self.min_warmup))
        half = intervals.own_log_half_width(times, self.alpha)
        if half is None:
            return False
        return intervals.known_within(half, self.target / math.sqrt(2)) or half <= self.spread_half / math.sqrt(2)


def stop_reading(summary: Summary | dict[str, Any], target: float | None, max_steps: int) -> str | None:
    """Why the race ended when it did, in the words the reading adds: "Known to ±3% after 240 steps."
    or "Stopped at the maximum of 600 steps: known to ±5%."; None for a fixed-length race."""
    if not target:
        return None
    s = Summary.of(summary)
    steps = min(len(s.eager_step_times_s), len(s.compiled_step_times_s))
    speedup, ci = s.steady_state_speedup, s.speedup_ci95
    if not speedup or not ci or not ci[0]:
        return f"Stopped at {steps:,} steps: too few to know the speedup to ±{target:.0%}."
    reached = intervals.relative_half_width(math.log(ci[1] / speedup))
    ran, asked = len(s.replicates), s.replicates_asked
    if ran:  # the race added replicate processes until the target or its maximum (core.engine.intervals)
        processes = (
            f"{ran + 1} processes (the first, {steps:,} steps per variant, and {ran} replicate{'s' * (ran > 1)})"
        )
        if reached <= target + 1e-9:
            return f"Known to ±{target:.0%} from {processes}: no more were added."
        if isinstance(asked, int) and ran >= asked:
            return f"Stopped at the most replicates asked for ({asked}): known to ±{reached:.0%} from {processes}."
        return f"Stopped after {processes}: known to ±{reached:.0%}."
    if steps >= max_steps:
        return f"Stopped at the maximum of {max_steps:,} steps per variant: known to ±{reached:.0%}."
    if reached <= target + 1e-9:
        return f"Known to ±{target:.0%} after {steps:,} steps per variant (the race stopped there)."
    spread = intervals.RunToRun.from_dict(s.run_to_run)
    if spread is not None and intervals.relative_half_width(spread.log_half_width()) > target:
        return (
            f"Stopped after {steps:,} steps per variant: known to ±{reached:.0%}, as close as races here "
            f"agree from run to run (±{intervals.relative_half_width(spread.log_half_width()):.0%}, wider than "
            f"±{target:.0%}), so more steps would not narrow it."
        )
    return f"Stopped after {steps:,} steps per variant: known to ±{reached:.0%}."


# ----------------------------------------------------------------------
# A race's summary from what its variants recorded: analysis.summarize over their steps and epochs
# (with the race's replicate processes and the steps a busy machine touched), plus memory, losses,
# compile counters, the profile's reading and why the race stopped: a Summary (its reading is derived,
# never stored: core.engine.reading).


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
    `replicated`: the race's replicate processes (core.engine.intervals); `conditions`: what its
    process ran under, which the reading names."""
    measured = summarize(
        eager.times("train"),
        compiled.times("train"),
        [e.train_time_s for e in eager.epochs],
        [e.train_time_s for e in compiled.epochs],
        spec.batch_size,
        [e.eval_time_s for e in eager.epochs if e.eval_time_s is not None],
        [e.eval_time_s for e in compiled.epochs if e.eval_time_s is not None],
        min_warmup=warmup_floor(spec.mode, spec.backend),
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
        noise_warnings=summary.noise_warnings + tuple(intervals.load_warnings(load)),
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
