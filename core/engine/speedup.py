"""The steady-state speedup and its verdict: one process's (median eager step / median compiled step
over its steady steps, with an interval over blocks: core.engine.intervals), and the race's headline
over all its processes, the first and its replicates (core.engine.replicates). Pure functions.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median

from core.engine import intervals, noise, replicates
from core.engine.summary import BUSY, FASTER, NO_CLEAR_DIFFERENCE, SLOWER


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
) -> replicates.ProcessResult:
    """The first process as one of the race's processes: its steady speedup and own interval (from
    steady_state_speedup without a spread), and the steady steps a busy machine touched."""
    busy = busy or {}
    share = max((noise.busy_share(busy.get(name) or [], warmup, steps) for name in ("eager", "compiled")), default=0)
    half = math.log(speed.within[1] / speed.speedup) if speed is not None and speed.within else None
    return replicates.ProcessResult(
        1,
        speed.speedup if speed is not None else None,
        half,
        max(steps - warmup, 0),
        speed.eager_median_s if speed is not None else None,
        speed.compiled_median_s if speed is not None else None,
        round(share, 3),
        {name: replicates.spans(busy[name]) for name in ("eager", "compiled") if busy.get(name)},
        apart=apart,
    )


def headline_speedup(
    own: Speedup | None,
    first: replicates.ProcessResult,
    others: Sequence[replicates.ProcessResult],
    spread: intervals.RunToRun | None,
) -> Speedup | None:
    """The race's headline over all its processes (replicates.combine: the first and its replicates,
    the store's spread as their prior): the point and interval every view shows, and its verdict.
    `own`: the first process alone (steady_state_speedup without a spread); its medians stay (they
    are the first-epoch story's). Where every process ran busy: the numbers as measured, no verdict."""
    if own is None:
        return None
    processes = [first, *others]
    combined = replicates.combine(processes, spread)
    if combined is None and any(p.was_busy for p in processes):
        quiet = [dataclasses.replace(p, busy_share=0.0) for p in processes]
        combined, verdict = replicates.combine(quiet, spread), BUSY
        if combined is not None:
            return Speedup(combined.speedup, combined.low, combined.high, verdict, *_medians(own), own.within)
    if combined is None:
        return own  # too few blocks for an interval anywhere: no verdict to stand behind
    alone = combined.processes == 1 and replicates.counted(processes) == [first]
    if alone and combined.log_half <= (first.log_half or 0) * (1 + 1e-9):
        return own  # the first process alone, its own interval the wider: exactly as it measured
    verdict = FASTER if combined.low > 1 else SLOWER if combined.high < 1 else NO_CLEAR_DIFFERENCE
    return Speedup(combined.speedup, combined.low, combined.high, verdict, *_medians(own), own.within)


def _medians(speed: Speedup) -> tuple[float, float]:
    return speed.eager_median_s, speed.compiled_median_s
