"""One race, several processes: the run-to-run spread measured inside the race, not assumed.

A second process of the same race lands a few percent away from the first however long either ran:
it compiles, allocates and lays out memory afresh (on a GPU, autotuning and cuDNN may pick other
kernels). No interval built from one process's steps can see that, so a race measures it, as pyperf
spreads its samples over worker processes: after the first process (the cold compile, the first
epoch, the break-even: the story), short *replicate* processes each run both variants from the warm
compile cache, taking turns in blocks (core.engine.replicate), and the headline speedup is the
mean of the processes' log speedups.

Its interval comes from the spread between the processes (each process's own noise is inside that
spread), pooled with the run-to-run spread the store learnt earlier (core.runs.run_to_run; assumed
on a fresh box) as a prior worth `prior.df` processes: more replicates outweigh it, and it is never
a floor. From five processes on it is at least Student's t from the processes alone, so a device
spreading more than the prior says is not hidden by it for long (tests/test_replicates.py: with an
empty store, a device spreading twice the assumed spread is covered 95% of the time from five
processes; with three, about 89%, until the store has learnt its spread). A process the machine was busy during (core.engine.noise) is kept and shown, but
counts for nothing. With a target interval the race adds replicates until the interval is within
it or the maximum is reached. Torch-free.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from core.engine import intervals
from core.engine.noise import BUSY_STEPS_SHARE

AUTO_FIXED = 2  # replicates of a fixed-length race when none are asked for (three processes in all)
AUTO_TARGET = 14  # with a target interval, at most this many (fifteen processes; pyperf runs twenty).
# Why 14: with processes spreading about 4% (log sd), as a small CPU demo's do, a race adding
# replicates until ±3% reaches it by the fourteenth in 95% of races (tests/test_replicates.py simulates
# the whole rule); a race that agrees sooner stops sooner: the cap is paid only where processes disagree.
MAX_REPLICATES = 19
REPLICATE_SECONDS = 6.0  # a replicate's timed steps take about this long, both variants together.
# Why not longer: twice as long a replicate spreads less, but not by half its variance, so a race
# learns no more per second and stops less finely (docs/benchmarks.md#reproducibilitypy).
REPLICATE_TURN_STEPS = 1  # a replicate's variants take turns every step (the first process: every 5, or by epoch).
# Why: step-to-step drift (the core's clock, the allocator, the other core's work) then falls on both
# variants of a pair alike, so the pairs spread less than with turns of 5 steps, with no steady sign
# in the speedup read (docs/benchmarks.md#turn_lengthpy).
REPLICATE_MIN_STEPS = 20  # per variant: four blocks, whatever the step time
STUDENT_FROM = 5  # processes from which their own spread alone (Student's t) bounds the interval too


@dataclass(frozen=True)
class ProcessResult:
    """One process of a race as the headline uses it: its steady speedup, its own interval (log
    half-width, 95%, from its blocks), its timed steps per variant, how long it took, and where the
    machine was busy during its timed steps (`busy`: variant -> [[first step, last step], ...])."""

    number: int  # 1: the first process (it compiled cold); 2, 3, ...: replicates
    speedup: float | None
    log_half: float | None
    steps: int
    eager_median_s: float | None = None
    compiled_median_s: float | None = None
    busy_share: float = 0.0  # of its timed steps, the share run while the machine was busy
    busy: dict[str, list[list[int]]] = field(default_factory=dict)
    wall_s: float | None = None  # the whole process, start to result (replicates)
    start_s: float | None = None  # until its first timed step: process start, model, warm compile
    error: str | None = None
    started: str | None = None  # "warm" (forked from a warm server) or "cold" (a fresh interpreter)
    apart: str | None = None  # the first process's schedule where its variants ran apart (counted()), else None

    @property
    def counts(self) -> bool:
        """Whether this process's speedup counts toward the headline: measured, and on a quiet machine."""
        return (
            self.speedup is not None
            and self.speedup > 0
            and self.log_half is not None  # too few blocks for an interval of its own: no say
            and self.error is None
            and not self.was_busy
        )

    @property
    def was_busy(self) -> bool:
        return self.busy_share > BUSY_STEPS_SHARE

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> ProcessResult | None:
        """A stored process (a replicate event's note, a summary's list); None where it is not one."""
        if not isinstance(data, dict):
            return None
        try:
            number, steps = int(data["number"]), int(data.get("steps") or 0)
            speedup, half = _number(data.get("speedup")), _number(data.get("log_half"))
            busy = {
                str(v): [[int(a), int(b)] for a, b in spans]
                for v, spans in (data.get("busy") or {}).items()
                if v in ("eager", "compiled")
            }
            error = data.get("error")
            result = cls(
                number,
                speedup,
                half,
                steps,
                _number(data.get("eager_median_s")),
                _number(data.get("compiled_median_s")),
                _number(data.get("busy_share")) or 0.0,
                busy,
                _number(data.get("wall_s")),
                _number(data.get("start_s")),
                error if isinstance(error, str) else None,
                data.get("started") if data.get("started") in ("warm", "cold") else None,
                data.get("apart") if data.get("apart") in APART_SCHEDULES else None,
            )
        except (KeyError, TypeError, ValueError):
            return None
        if number < 1 or steps < 0 or (speedup is not None and speedup <= 0) or (half is not None and half < 0):
            return None
        return result


APART_SCHEDULES = ("alternating", "sequential")  # the first process's variants ran epochs, or all, apart


def counted(processes: Sequence[ProcessResult]) -> list[ProcessResult]:
    """The processes the headline rests on: those that count (ProcessResult.counts), less a first
    process whose variants ran apart (`apart`: turns epoch by epoch, or one after the other) while a
    process whose variants took turns every few steps counts. Slow drift between its stretches falls
    on one variant and not the other, which its own interval cannot see: in 22 stored demo races
    (alternating) it landed 6.8% (rms, in logs) from its replicates' mean, where replicates spread
    3.8% (pooled sd); the default race's first process (turns every 5 steps) 1.9% (16 races).
    It is still shown (a dot on the process chart, its reading in the story); alone it still counts."""
    counting = [p for p in processes if p.counts]
    side_by_side = [p for p in counting if p.apart is None]
    return side_by_side or counting


def _number(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(value)
    return float(value)


def processes_of(data: Any) -> list[ProcessResult]:
    """The replicate processes a summary (or a list of stored ones) carries, in order."""
    items = data.get("replicates") if isinstance(data, dict) else data
    found = [ProcessResult.from_dict(item) for item in items or []] if isinstance(items, list) else []
    return sorted((p for p in found if p is not None and p.number >= 2), key=lambda p: p.number)


def replicates_asked(replicates: int | None, target: float | None) -> int:
    """How many replicates a race runs (fixed-length) or may add at most (with a target interval)."""
    if replicates is not None:
        return int(replicates)
    return AUTO_TARGET if target else AUTO_FIXED


def replicate_steps(eager_median_s: float | None, compiled_median_s: float | None, first_steps: int) -> int:
    """Timed steps per variant for each replicate: about REPLICATE_SECONDS of both variants' steady
    steps, in whole blocks, at least REPLICATE_MIN_STEPS and at most what the first process ran."""
    per_pair = (eager_median_s or 0.0) + (compiled_median_s or 0.0)
    wanted = REPLICATE_SECONDS / per_pair if per_pair > 0 else REPLICATE_MIN_STEPS
    block = intervals.BLOCK_STEPS
    steps = int(math.ceil(max(wanted, REPLICATE_MIN_STEPS) / block) * block)
    return max(min(steps, max(first_steps, REPLICATE_MIN_STEPS)), block * 2)


@dataclass(frozen=True)
class Combined:
    """The headline from every process that counts: the speedup (geometric mean), its interval, and
    what it rests on (`processes` counted, the `log_sd` between them as pooled with the prior)."""

    speedup: float
    low: float
    high: float
    processes: int
    log_sd: float | None
    df: float | None

    @property
    def log_half(self) -> float:
        return math.log(self.high / self.speedup)


def combine(
    processes: Sequence[ProcessResult], prior: intervals.RunToRun | None, alpha: float = intervals.ALPHA
) -> Combined | None:
    """The headline over the processes that count (counted()); None when none does.

    log speedups y_1..y_P; the point is exp(mean y). Its log half-width is the widest of:
    - the pooled spread: t(prior.df + P - 1) * sqrt((prior.df * prior.log_sd^2 + sum (y - mean)^2)
      / (prior.df + P - 1) / P) (the prior counts as prior.df processes' worth; none without one);
    - from STUDENT_FROM processes: t(P - 1) * s / sqrt(P), the processes alone;
    - with one process, its own (from its blocks, at the race's `alpha`: spent over the stopping
      rule's looks). With a prior that is the single-race interval races had before replicates:
      the wider of its own and the prior's spread. From two processes on, the spread between them
      holds each one's own noise already.
    """
    used = counted(processes)
    if not used:
        return None
    y = np.log(np.asarray([p.speedup for p in used], dtype=float))
    n = len(y)
    mean = float(y.mean())
    squares = float(np.sum((y - mean) ** 2))
    # One process: its own interval where that is the wider (a noisy race keeps its width). From two
    # on, their spread holds each one's own noise already.
    half = used[0].log_half or 0.0 if n == 1 else 0.0
    sd = df = None
    if prior is not None or n >= 2:
        prior_df, prior_sd = (prior.df, prior.log_sd) if prior is not None else (0.0, 0.0)
        df = prior_df + n - 1
        sd = math.sqrt((prior_df * prior_sd**2 + squares) / df)
        half = max(half, intervals.t_quantile(1 - intervals.ALPHA / 2, df) * sd / math.sqrt(n))
    if n >= STUDENT_FROM:
        alone = math.sqrt(squares / (n - 1))
        half = max(half, intervals.t_quantile(1 - intervals.ALPHA / 2, n - 1) * alone / math.sqrt(n))
    point = used[0].speedup if n == 1 else math.exp(mean)
    low, high = intervals.interval(point, half)
    return Combined(point, low, high, n, sd, df)


def known(combined: Combined | None, target: float) -> bool:
    """Whether the headline is known to within ±target (both ends inside)."""
    return combined is not None and intervals.known_within(combined.log_half, target)


def more_wanted(
    processes: Sequence[ProcessResult],
    prior: intervals.RunToRun | None,
    target: float | None,
    asked: int,
) -> bool:
    """Whether a race adds another replicate: a fixed-length race until it has `asked`; with a
    target, until the headline is known to ±target or `asked` replicates ran (busy ones count: the
    maximum bounds the race's time)."""
    ran = sum(1 for p in processes if p.number >= 2)
    if ran >= asked:
        return False
    if not target:
        return True
    return not known(combine(processes, prior), target)


def spans(steps: Iterable[int]) -> list[list[int]]:
    """Sorted step numbers as [first, last] runs: 3, 4, 5, 9 -> [[3, 5], [9, 9]]."""
    out: list[list[int]] = []
    for step in sorted(set(steps)):
        if out and step == out[-1][1] + 1:
            out[-1][1] = step
        else:
            out.append([step, step])
    return out
