"""A race's numbers: its summary as one typed record, the steady speedup and its verdict, and every
figure derived once from the headline (throughput, break-even, payoff, the plan).

`Summary` is what analysis.summarize and the trainer found, read by attribute and kept as JSON
(`to_dict`/`from_dict`, safe for any stored summary). The speedup is one process's median eager step
over its median compiled step with an interval over blocks, and the race's headline is that over all
its processes. `Headline` derives every other figure from three things (the headline speedup, its
interval, and how far compiled is behind when the race's steps end), so no surface can disagree with
another: a surface reads `Summary.headline`, never re-derives a figure. Torch-free, pure.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import statistics
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import median
from typing import Any

from core.engine import intervals

# ----------------------------------------------------------------------
# Every figure about a race, derived once from its headline: the steady speedup every card shows,
# its 95% interval, and how far compiled is behind when the race's steps end (its compile cost plus
# whatever its measured steps gave back since: the gap the race chart shows). The throughput change,
# where the break-even stands and its range, whether compile pays off, never does or cannot tell, and
# the plan over a user's run all come from those three here, so no surface can disagree with another:
# a surface reads `Summary.headline` (or `Headline.of(summary)`), never re-derives a figure from
# step medians of its own.
#
#     h = Headline.of(summary)
#     h.throughput_change        0.11 beside 1.11x: compiled throughput is eager's times the speedup
#     h.state, h.payoff          'projected', 'pays off' | 'never' | 'cannot tell' | ...
#     h.projected_position       w + head start / saving per step at the headline (fractional steps)
#     h.projected_range          the same at the interval's two ends (earliest, latest)
#     h.plan(50_000)             a TrainingPlan: its saving's interval is the headline interval applied
#
# The steady eager step (the first process's median) is the one measured rate; compiled's is that over
# the speedup, so a figure at the interval's end is the same arithmetic at another speedup. Torch-free,
# pure.

FASTER, NO_CLEAR_DIFFERENCE, SLOWER = "faster", "no clear difference", "slower"
BUSY = "machine busy"  # no verdict: every process of the race measured while other work had its cores
NOT_WITHIN_RUN = "not within this run"
NEVER_SLOWER = "never: compiled is slower"
NEVER_NO_GAIN = "never: no clear per-step gain"
NO_VERDICT_BUSY = "no verdict: the machine was busy"

# Where a race's break-even stands: what every surface words (core.engine.words.break_even).
REACHED = "reached"  # compiled pulled ahead during the race, for good
PROJECTED = "projected"  # not within the run; a clear gain lets the steady rates project it
NOT_REACHED = "not reached"  # a clear gain but nothing to project from (an older summary): not within this run
NO_GAIN = "no clear gain"  # the interval spans 1: no break-even to count on
NEVER = "never"  # compiled steps are clearly slower
NO_COMPILE = "no compile"  # compile failed or did not happen, or too few steps to compare
NO_VERDICT = "no verdict"  # the machine was busy during every process: nothing to judge it from
BREAK_EVEN_STATES = (REACHED, PROJECTED, NOT_REACHED, NO_GAIN, NEVER, NO_COMPILE, NO_VERDICT)


# Whether compile pays for itself over a long enough run: the one answer every surface words.
PAYS = "pays off"  # the whole interval lies above 1x: some run length earns the compile back
NEVER_PAYS = "never"  # the whole interval lies at or below 1x: no run length earns it back
CANNOT_TELL = "cannot tell"  # the interval spans 1x: the race cannot say whether it ever pays
NO_ANSWER = "no answer"  # no compile to judge, or the machine was busy during every process
PAYOFFS = (PAYS, NEVER_PAYS, CANNOT_TELL, NO_ANSWER)


def interval_verdict(verdict: str | None, interval: Sequence[float] | None, measured: bool) -> str | None:
    """The verdict a speedup's interval gives: faster only where the whole interval lies above 1x,
    slower only where it lies below, else no clear difference; a busy machine's race keeps "no
    verdict", and a race with too few blocks for an interval (its point twice, `measured` False)
    keeps what it says. Summary.from_dict reads every stored verdict through it, so a summary
    stored by an older version, or without a verdict, reads as its own interval says."""
    if verdict == BUSY or interval is None or len(interval) != 2:
        return verdict
    low, high = interval
    if not (high > low or measured):
        return verdict
    return FASTER if low > 1 else SLOWER if high < 1 else NO_CLEAR_DIFFERENCE


@dataclass(frozen=True)
class TrainingPlan:
    """A run of `steps` steps, eager and compiled (compile included), in seconds, with intervals:
    the saving's and the compiled total's are the headline interval applied to the eager step."""

    steps: int
    compile_s: float
    eager_total_s: float
    eager_ci: tuple[float, float]  # from eager's own steady blocks: what another race could measure
    compiled_total_s: float
    compiled_ci: tuple[float, float]
    saved_s: float  # > 0: compile saves this much; < 0: it costs this much
    saved_ci: tuple[float, float]
    break_even_step: float | None  # None: no clear per-step gain (or slower): no break-even to count on
    eager_step_s: float = 0.0  # the steady rates the plan extends with
    compiled_step_s: float = 0.0
    break_even_measured: bool = False  # the race itself crossed there (not a projection)
    verdict: str = NO_CLEAR_DIFFERENCE  # the headline's verdict
    break_even_range: tuple[float, float] | None = None  # the crossing at the interval's two ends
    race_steps: int = 0  # the race's own steps: a run this short is as the race measured it

    @property
    def within_race(self) -> bool:
        """The run is no longer than the race: its totals are the race's own, measured."""
        return self.steps <= self.race_steps

    @property
    def shorter_than_break_even(self) -> bool:
        return self.break_even_step is not None and self.steps < self.break_even_step

    @property
    def slower_steps_cost_s(self) -> float:
        """What compiled's slower steady steps cost over the run (0 when they are not slower)."""
        return max(self.compiled_step_s - self.eager_step_s, 0.0) * self.steps


@dataclass(frozen=True)
class Headline:
    """The race's headline and the race's end, from which every figure below is computed."""

    speedup: float | None = None
    low: float | None = None
    high: float | None = None
    verdict: str | None = None
    compiled: bool = False  # compiled code ran (compile neither failed nor was skipped)
    eager_step_s: float | None = None  # the steady eager step: the one measured rate
    eager_samples_per_s: float | None = None
    eager_steps: tuple[float, ...] = ()  # each variant's timed steps (the summary's own tuples, not copies)
    compiled_steps: tuple[float, ...] = ()  # (compile included: it lands in the first compiled steps)
    compile_s: float | None = None  # the measured compile cost (None: too small to measure, or none)
    reached_step: int | None = None  # the race itself crossed here, for good
    reached_wall_s: float | None = None
    warmup_steps: int = 0  # eager's steps before its steady ones
    alpha: float | None = None  # the race's error rate (below 5% for a race that stopped on its interval)
    measured_interval: bool = False  # the race's own steps gave an interval (however narrow)

    @classmethod
    def of(cls, s: Any) -> Headline:
        """The headline of a core.engine.summary.Summary (a dict: Summary.of(d).headline); read by
        attribute, so this module needs no Summary and the summary can name it."""
        low, high = s.speedup_ci95 or (None, None)  # none: too few blocks for an interval, no plan
        eager, compiled = s.eager_step_times_s, s.compiled_step_times_s
        return cls(
            speedup=s.steady_state_speedup,
            low=low,
            high=high,
            verdict=s.verdict,
            compiled=s.compiled,
            eager_step_s=s.eager_median_step_s,
            eager_samples_per_s=s.eager_samples_per_s,
            eager_steps=eager,
            compiled_steps=compiled,
            compile_s=s.compile_time_s,
            reached_step=s.break_even_step,
            reached_wall_s=s.break_even_wall_s,
            measured_interval=s.speedup_ci95_within is not None,
            warmup_steps=s.warmup_steps or 0,
            alpha=s.interval_alpha,
        )

    @functools.cached_property
    def steps(self) -> int:
        """The steps both variants ran."""
        return min(len(self.eager_steps), len(self.compiled_steps))

    def _totals(self, k: int) -> tuple[float, float]:
        """Each variant's time over its first k steps (compile included); without steps (a summary
        stored without them) the compile is the whole head start."""
        if not k:
            return 0.0, float(self.compile_s or 0.0)
        return math.fsum(self.eager_steps[:k]), math.fsum(self.compiled_steps[:k])

    @functools.cached_property
    def eager_ci_per_step(self) -> tuple[float, float] | None:
        """Eager's own steady-step interval (its median's, over blocks): a plan's eager total's."""
        return _eager_interval(self.eager_steps, self.warmup_steps, self.alpha)

    @functools.cached_property
    def eager_total_s(self) -> float:
        return self._totals(self.steps)[0]

    @functools.cached_property
    def compiled_total_s(self) -> float:
        return self._totals(self.steps)[1]

    @property
    def has_interval(self) -> bool:
        """The race had blocks enough for an interval (with too few, the point stands for both ends)."""
        return self.low is not None and self.high is not None and (self.high > self.low or self.measured_interval)

    # -- per step ----------------------------------------------------------------------------------

    def _at(self, at: float | None) -> float | None:
        x = self.speedup if at is None else at
        return x if x is not None and x > 0 and math.isfinite(x) else None

    def compiled_step_s(self, at: float | None = None) -> float | None:
        """Compiled's steady step at the headline (or at speedup `at`): the eager step over it."""
        x = self._at(at)
        return None if x is None or not self.eager_step_s else self.eager_step_s / x

    def saving_s(self, at: float | None = None) -> float | None:
        """What each steady step saves at the headline (or at `at`); negative where compiled is slower."""
        c = self.compiled_step_s(at)
        return None if c is None else self.eager_step_s - c

    @property
    def compiled_samples_per_s(self) -> float | None:
        """Compiled throughput: eager's at its steady step times the headline speedup (the same steps)."""
        x = self._at(None)
        return None if x is None or not self.eager_samples_per_s else self.eager_samples_per_s * x

    @property
    def throughput_change(self) -> float | None:
        """Compiled throughput against eager's, as a fraction: the headline speedup less one."""
        x = self._at(None)
        return None if x is None else x - 1

    # -- the break-even ----------------------------------------------------------------------------

    @property
    def head_start_s(self) -> float:
        """How far compiled is behind when the race's steps end (compile included; < 0: ahead)."""
        return self.compiled_total_s - self.eager_total_s

    def crossing(self, at: float | None = None) -> float | None:
        """The fractional step at which compiled catches up at the headline (or at `at`), counting
        on from the race's end; None where it does not (no saving per step, or already ahead)."""
        saving = self.saving_s(at)
        if saving is None or saving <= 0 or self.head_start_s <= 0:
            return None
        return self.steps + self.head_start_s / saving

    @property
    def state(self) -> str:
        """Where the break-even stands, one of summary.BREAK_EVEN_STATES: the same on every surface."""
        if not self.compiled or self.speedup is None:
            return NO_COMPILE
        if self.reached_step is not None:
            return REACHED
        if self.verdict == BUSY:
            return NO_VERDICT
        if self.verdict == SLOWER:
            return NEVER
        if self.verdict != FASTER:
            return NO_GAIN
        return PROJECTED if self.crossing() is not None else NOT_REACHED

    @property
    def projected_position(self) -> float | None:
        """The projected break-even (fractional steps) where the race has not crossed and its whole
        interval lies above 1x (the one projection rule); else None."""
        return self.crossing() if self.state == PROJECTED else None

    @property
    def projected_range(self) -> tuple[float, float | None] | None:
        """The projected break-even at the interval's two ends: (earliest, latest); the headline's
        point lies between them, and the range only narrows as the interval does."""
        if self.projected_position is None or self.high is None or self.low is None:
            return None
        return (self.crossing(self.high) or self.projected_position, self.crossing(self.low))

    @property
    def projected_wall_s(self) -> float | None:
        """The compiled run's cumulative time at the projected break-even."""
        position, step = self.projected_position, self.compiled_step_s()
        if position is None or step is None:
            return None
        return self.compiled_total_s + (position - self.steps) * step

    @property
    def payoff(self) -> str:
        """Whether compile pays for itself over a long enough run (one of PAYOFFS): 'never' only
        where the whole interval lies at or below 1x, 'cannot tell' where it spans 1x."""
        if not self.compiled or self.speedup is None or self.verdict == BUSY:
            return NO_ANSWER
        low, high = self.low, self.high
        if self.verdict == FASTER and (low is None or low > 1):  # (a summary kept without its interval)
            return PAYS
        if self.verdict == SLOWER or (self.has_interval and high <= 1):
            return NEVER_PAYS
        return CANNOT_TELL  # the interval spans 1x, or too few steps for one

    def kept_figures(self) -> dict[str, Any]:
        """The figures a stored summary keeps that are derived here: kept so that a bundle's reader
        outside this app sees them; every surface here derives them again and never reads them back."""
        span = self.projected_range
        return {
            "compiled_samples_per_s": self.compiled_samples_per_s,
            "break_even_extrapolated_step": self.projected_position,
            "break_even_projected_wall_s": self.projected_wall_s,
            "break_even_projected_range": list(span) if span else None,
        }

    # -- a user's run ------------------------------------------------------------------------------

    def plan(self, steps: int) -> TrainingPlan | None:
        """The user's run of `steps` steps: the race's own steps as measured as far as they go, then
        the steady eager step and compiled's at the headline (its interval's ends for the saving's
        interval). None without a steady eager step or a compile to plan around."""
        if steps < 1:
            raise ValueError(f"a run has at least one step (got {steps})")
        e, c = self.eager_step_s, self.compiled_step_s()
        if not self.compiled or not e or c is None or not self.has_interval:
            return None  # a plan is not a guess: no steady eager step, or too few blocks for an interval
        k = min(steps, self.steps)  # the race's own steps, as measured, as far as they go
        e0, c0 = (self.eager_total_s, self.compiled_total_s) if k == self.steps else self._totals(k)
        rest = steps - k
        eager_total = e0 + rest * e

        def saved(at: float) -> float:
            return e0 - c0 + rest * (e - e / at)

        point, lows, highs = saved(self.speedup), saved(self.low), saved(self.high)
        e_ci = self.eager_ci_per_step or (e, e)  # computed only here: a plan is asked for, the cards are not
        measured = self.reached_step is not None
        if measured:
            break_even: float | None = float(self.reached_step)
            span = None
        elif self.verdict == FASTER:
            break_even = self.crossing()
            late = self.crossing(self.low)
            span = (self.crossing(self.high) or break_even, late) if break_even is not None and late else None
        else:
            break_even, span = None, None
        return TrainingPlan(
            steps=steps,
            compile_s=max(float(self.compile_s or 0.0), 0.0),
            eager_total_s=eager_total,
            eager_ci=(e0 + rest * e_ci[0], e0 + rest * e_ci[1]),
            compiled_total_s=eager_total - point,
            compiled_ci=(eager_total - highs, eager_total - lows),
            saved_s=point,
            saved_ci=(lows, highs),
            break_even_step=break_even,
            eager_step_s=e,
            compiled_step_s=c,
            break_even_measured=measured,
            verdict=self.verdict or NO_CLEAR_DIFFERENCE,
            break_even_range=span,
            race_steps=self.steps,
        )


def _eager_interval(eager: Sequence[float], warmup: int | None, alpha: float | None) -> tuple[float, float] | None:
    """Eager's own steady-step interval (its median's, over blocks): a plan's eager total's."""
    w = warmup if warmup is not None else 0
    steady = list(eager[w:])
    if len(steady) < 2:
        return None
    a = alpha if alpha is not None and 0 < alpha <= intervals.ALPHA else intervals.ALPHA
    half = intervals.own_log_half_width(steady, a)
    if half is None:
        return None
    return intervals.interval(statistics.median(steady), half)


# ----------------------------------------------------------------------
# A race's summary as one typed record: what analysis.summarize and the trainer found, read by
# attribute, with the facts derived from it (whether compile ran, the break-even's state, the
# projection the one rule allows) computed here and nowhere else. Torch-free.
#
# The store and bundles keep it as JSON (`to_dict`); `from_dict` reads any stored summary back: a
# run stored before a field existed gets the field's default, a key no field names (an old stored
# `reading`, which is now derived) is dropped, and a value of the wrong type (a damaged or foreign
# summary) reads as missing, so no view needs its own isinstance guard.
#
#     s = Summary.from_dict(run.summary)      # or Summary.of(x): a Summary or a dict, either way
#     s.steady_state_speedup, s.verdict, s.break_even  # attributes; break_even: one of BREAK_EVEN_STATES

# The verdicts and the break-even's states are the one derivation's (core.engine.summary), named
# here too, where every reader has always found them.


@dataclass(frozen=True)
class Summary:
    """One race's headline numbers and what qualifies them (core.engine.analysis.summarize, plus
    the trainer's memory, losses and compile counters). Times in seconds, memory in bytes."""

    warmup_steps: int | None = None
    compile_time_s: float | None = None  # None where too small to measure: then compile_time_under_s
    compile_time_under_s: float | None = None  # the noise a compile too small to measure hides under
    first_epoch_overhead_s: float | None = None
    eval_first_epoch_overhead_s: float | None = None
    steady_state_speedup: float | None = None
    speedup_ci95: tuple[float, float] | None = None
    speedup_ci95_within: tuple[float, float] | None = None  # the race's own, before the run-to-run spread
    run_to_run: dict | None = None  # intervals.RunToRun.to_dict(): the prior of the processes' spread
    first_process: dict | None = None  # intervals.ProcessResult.to_dict() of the first process
    replicates: tuple[dict, ...] = ()  # each replicate process's, in order (core.engine.intervals)
    replicates_asked: int | None = None  # how many the race runs, or adds at most with a target interval
    processes_counted: int | None = None  # how many processes the headline rests on
    busy_steps: dict | None = None  # the first process's steps timed on a busy machine, per variant
    conditions: dict | None = None  # what the race's process ran under (core.runs.race_conditions)
    verdict: str | None = None  # FASTER | NO_CLEAR_DIFFERENCE | SLOWER | BUSY
    eager_median_step_s: float | None = None
    compiled_median_step_s: float | None = None
    eager_samples_per_s: float | None = None
    compiled_samples_per_s: float | None = None
    break_even_step: int | None = None
    break_even_wall_s: float | None = None
    break_even_reason: str | None = None
    break_even_extrapolated_step: float | None = None
    break_even_projected_wall_s: float | None = None
    break_even_projected_range: tuple[float, float | None] | None = None  # latest None: "maybe never"
    whole_run_speedup: float | None = None
    eager_step_times_s: tuple[float, ...] = ()
    compiled_step_times_s: tuple[float, ...] = ()
    eager_epoch_times_s: tuple[float, ...] = ()
    compiled_epoch_times_s: tuple[float, ...] = ()
    eager_eval_epoch_times_s: tuple[float, ...] = ()
    compiled_eval_epoch_times_s: tuple[float, ...] = ()
    eager_eval_step_times_s: tuple[float, ...] = ()
    compiled_eval_step_times_s: tuple[float, ...] = ()
    compile_events: tuple[dict, ...] = ()
    interval_paired: bool = False
    interval_alpha: float | None = None  # below 5%: a race that stopped on its interval
    noise_warnings: tuple[str, ...] = ()
    machine_load: tuple[dict, ...] = ()
    stop_reason: str | None = None
    eager_peak_memory_bytes: int | None = None
    compiled_peak_memory_bytes: int | None = None
    eager_peak_reserved_bytes: int | None = None
    compiled_peak_reserved_bytes: int | None = None
    eager_reserved_growth_bytes: int | None = None
    compiled_reserved_growth_bytes: int | None = None
    memory_kind: str | None = None
    eager_final_loss: float | None = None
    compiled_final_loss: float | None = None
    graphs: int | None = None
    graph_breaks: int | None = None
    recompiles: int | None = None
    compile_phases: dict | None = None
    compile_skipped: str | None = None  # why compile did not happen (compiled ran eager code)
    compile_failed: str | None = None  # why torch.compile could not handle the model (eager ran)
    profile: dict | None = None
    model_params: int | None = None
    cpu_isa_probe_s: float | None = None
    extra: dict = field(default_factory=dict, compare=False)  # keys a newer writer added: kept, not read

    # -- reading and writing ------------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Summary:
        """A stored, exported or live summary read back; see the module's docstring for what an old
        or damaged one gives."""
        if not isinstance(data, Mapping):
            return cls()
        values, extra = {}, {}
        for key, value in data.items():
            kind = _KINDS.get(key)
            if kind is None:
                if key not in _DERIVED and isinstance(key, str):
                    extra[key] = value
                continue
            value = _checked(value, kind)
            if value is not None:
                values[key] = value
        if values.get("steady_state_speedup") is not None:  # the verdict its interval gives (one rule)
            found = interval_verdict(
                values.get("verdict"), values.get("speedup_ci95"), values.get("speedup_ci95_within") is not None
            )
            if found is not None:
                values["verdict"] = found
        return cls(**values, extra=extra)

    @classmethod
    def of(cls, summary: Summary | Mapping[str, Any] | None) -> Summary:
        """`summary` as a Summary: itself, or read from a dict (from_dict)."""
        return summary if isinstance(summary, Summary) else cls.from_dict(summary)

    def to_dict(self) -> dict[str, Any]:
        """The JSON the store and bundles keep (tuples as lists; the derived reading is not kept)."""
        out = dict(self.extra)
        for f in _FIELDS:
            value = getattr(self, f.name)
            out[f.name] = [list(v) if isinstance(v, tuple) else v for v in value] if isinstance(value, tuple) else value
        return out

    def replace(self, **changes: Any) -> Summary:
        return dataclasses.replace(self, **changes)

    # -- derived facts, one place for each ------------------------------------------------------

    @property
    def compiled(self) -> bool:
        """Compiled code ran: compile neither failed nor was skipped."""
        return not self.compile_failed and not self.compile_skipped

    @property
    def interval(self) -> tuple[float, float] | None:
        """The speedup's 95% interval (the point twice where a race had too few blocks for one)."""
        if self.speedup_ci95 is not None:
            return self.speedup_ci95
        s = self.steady_state_speedup
        return None if s is None else (s, s)

    @property
    def projection_stands(self) -> bool:
        """The one rule for a projected break-even, which every view follows: only from a speedup
        whose interval lies above 1 (verdict "faster"), compiled code having run and compile not
        yet paid off. From a gain in doubt there is no crossing to name."""
        return self.verdict == FASTER and self.break_even_step is None and self.compiled

    @functools.cached_property
    def headline(self) -> Headline:
        """Every figure derived from the headline speedup, its interval and the race's end
        (core.engine.summary): the one derivation every surface reads."""
        return Headline.of(self)

    @property
    def projected_position(self) -> float | None:
        """The projected break-even (fractional steps) where the rule allows one, from the headline
        (a stored projection, which older versions computed otherwise, is not read)."""
        return self.headline.projected_position

    @property
    def projected_range(self) -> tuple[float, float | None] | None:
        """The projected break-even as the span its speedup's interval allows (earliest, latest),
        under the same rule, from the headline; None where there is none."""
        return self.headline.projected_range

    @property
    def break_even(self) -> str:
        """Where the break-even stands (one of BREAK_EVEN_STATES), from the verdict and the steps,
        never from a stored reason's wording: the same state on every surface."""
        return self.headline.state


_FIELDS = tuple(f for f in dataclasses.fields(Summary) if f.name != "extra")
_DERIVED = frozenset({"reading"})  # stored by older versions; derived now (core.engine.reading)


def _kind(annotation: Any) -> Any:
    """A field's annotation, resolved: what from_dict checks a stored value against."""
    hint = typing.get_type_hints(Summary)[annotation]
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        hint = args[0] if len(args) == 1 else hint
    return hint


_KINDS = {f.name: _kind(f.name) for f in _FIELDS}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value  # NaN is missing


def _checked(value: Any, kind: Any) -> Any:
    """`value` if it is of `kind` (ints read as floats where a float is declared), else None."""
    if value is None:
        return None
    if kind is float:
        return float(value) if _is_number(value) else None
    if kind is int:  # a whole number written as a float by another tool is still one
        return int(value) if _is_number(value) and float(value).is_integer() else None
    if kind is bool:
        return value if isinstance(value, bool) else None
    if kind is str:
        return value if isinstance(value, str) else None
    if kind is dict:
        return value if isinstance(value, dict) else None
    if typing.get_origin(kind) is tuple:
        return _checked_tuple(value, typing.get_args(kind))
    return None


def _checked_tuple(value: Any, args: tuple) -> tuple | None:
    if not isinstance(value, list | tuple):
        return None
    if len(args) == 2 and args[1] is Ellipsis:  # a series: its well-formed items
        item = args[0]
        if item is float:
            if all(type(v) is float and v == v for v in value):  # what this app writes (no NaN): kept whole
                return tuple(value)
            return tuple(float(v) for v in value if _is_number(v))
        return tuple(v for v in value if isinstance(v, item))
    if len(value) != len(args):  # a pair: both ends well formed, or none
        return None
    out = []
    for v, arg in zip(value, args):
        optional = typing.get_origin(arg) in (typing.Union, types.UnionType)
        if v is None and optional:
            out.append(None)
        elif _is_number(v):
            out.append(float(v))
        else:
            return None
    return tuple(out)


# ----------------------------------------------------------------------
# The steady-state speedup and its verdict: one process's (median eager step / median compiled step
# over its steady steps, with an interval over blocks: core.engine.intervals), and the race's headline
# over all its processes, the first and its replicates (core.engine.intervals). Pure functions.


def default_warmup(n: int, at_least: int = 1) -> int:
    """Warm-up steps to drop from a series of n: ~10% (at least `at_least`, at most 10), leaving >= 2
    (>= 1 when `at_least` asks for a longer window than that allows)."""
    if n <= 2:
        return max(0, n - 1)
    if at_least <= 1:
        return min(max(1, n // 10), 10, n - 2)
    return min(max(at_least, n // 10), max(10, at_least), n - 1)


def steady(times: Sequence[float], warmup: int) -> list[float]:
    """The samples after warm-up (never empty when times is not)."""
    return list(times[warmup:]) or list(times[-1:])


@dataclass(frozen=True)
class Speedup:
    """Steady-state speedup (eager time / compiled time: >1 means compiled is faster)."""

    speedup: float
    ci_low: float
    ci_high: float
    verdict: str
    eager_median_s: float
    compiled_median_s: float
    within: tuple[float, float] | None = None  # the race's own interval, before the run-to-run spread


def steady_state_speedup(
    eager: Sequence[float],
    compiled: Sequence[float],
    warmup: int | None = None,
    paired: bool = False,
    alpha: float = intervals.ALPHA,
    spread: intervals.RunToRun | None = None,
) -> Speedup | None:
    """Ratio of steady-state medians with a (1 - alpha) interval from blocks of steps and a verdict.

    `paired`: the variants took turns (their block i ran side by side), so the interval is over
    pair ratios (core.engine.intervals); else over each variant's blocks apart. None when either
    series is empty. The verdict is "faster"/"slower" only when the whole interval lies on one side
    of 1; with too few steps for two blocks there is no interval to stand behind, so no verdict.
    `spread`: the device's run-to-run spread; the interval is then the wider of it and the race's own.
    """
    if not eager or not compiled:
        return None
    w = default_warmup(min(len(eager), len(compiled))) if warmup is None else warmup
    e, c = steady(eager, w), steady(compiled, w)
    e_med, c_med = median(e), median(c)
    if c_med <= 0:
        return None
    point = e_med / c_med
    within = intervals.log_half_width(e, c, paired, alpha)
    if within is None:
        return Speedup(point, point, point, NO_CLEAR_DIFFERENCE, e_med, c_med)
    low, high = intervals.interval(point, intervals.headline_half_width(within, spread))
    verdict = FASTER if low > 1 else SLOWER if high < 1 else NO_CLEAR_DIFFERENCE
    return Speedup(point, low, high, verdict, e_med, c_med, intervals.interval(point, within))


def first_process(
    speed: Speedup | None,
    steps: int,
    busy: dict[str, list[int]] | None = None,
    warmup: int = 0,
    apart: str | None = None,
) -> intervals.ProcessResult:
    """The first process as one of the race's processes: its steady speedup and own interval (from
    steady_state_speedup without a spread), and the steady steps a busy machine touched."""
    busy = busy or {}
    share = max(
        (intervals.busy_share(busy.get(name) or [], warmup, steps) for name in ("eager", "compiled")), default=0
    )
    half = math.log(speed.within[1] / speed.speedup) if speed is not None and speed.within else None
    return intervals.ProcessResult(
        1,
        speed.speedup if speed is not None else None,
        half,
        max(steps - warmup, 0),
        speed.eager_median_s if speed is not None else None,
        speed.compiled_median_s if speed is not None else None,
        round(share, 3),
        {name: intervals.spans(busy[name]) for name in ("eager", "compiled") if busy.get(name)},
        apart=apart,
    )


def headline_speedup(
    own: Speedup | None,
    first: intervals.ProcessResult,
    others: Sequence[intervals.ProcessResult],
    spread: intervals.RunToRun | None,
) -> Speedup | None:
    """The race's headline over all its processes (intervals.combine: the first and its replicates,
    the store's spread as their prior): the point and interval every view shows, and its verdict.
    `own`: the first process alone (steady_state_speedup without a spread); its medians stay (they
    are the first-epoch story's). Where every process ran busy: the numbers as measured, no verdict."""
    if own is None:
        return None
    processes = [first, *others]
    combined = intervals.combine(processes, spread)
    if combined is None and any(p.was_busy for p in processes):
        quiet = [dataclasses.replace(p, busy_share=0.0) for p in processes]
        combined, verdict = intervals.combine(quiet, spread), BUSY
        if combined is not None:
            return Speedup(combined.speedup, combined.low, combined.high, verdict, *_medians(own), own.within)
    if combined is None:
        return own  # too few blocks for an interval anywhere: no verdict to stand behind
    alone = combined.processes == 1 and intervals.counted(processes) == [first]
    if alone and combined.log_half <= (first.log_half or 0) * (1 + 1e-9):
        return own  # the first process alone, its own interval the wider: exactly as it measured
    verdict = FASTER if combined.low > 1 else SLOWER if combined.high < 1 else NO_CLEAR_DIFFERENCE
    return Speedup(combined.speedup, combined.low, combined.high, verdict, *_medians(own), own.within)


def _medians(speed: Speedup) -> tuple[float, float]:
    return speed.eager_median_s, speed.compiled_median_s
