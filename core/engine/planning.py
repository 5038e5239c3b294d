"""From a short measured race to decisions about a real one. Pure functions only.

- `step_rates` + `plan_training`: a user's run of N steps predicted eager and compiled, compile
  included, with the race's own intervals (core.engine.intervals, over blocks of steps): the
  per-step saving's is the race's speedup interval, at the race's error rate (paired when the
  variants took turns, widened for the looks of a race that stopped on its interval, and to the
  run-to-run spread the race was measured with), so "Plan
  your training" and the race's headline never disagree; each total's is its variant's own blocks'.
  The compile time is one measurement and carries no interval of its own.
- `regime`: how the eager step time grows with batch size says what bounds the step. Fitting
  t(b) = overhead + b x per-sample cost: where overhead dominates (flat), per-step costs such as
  kernel launches and Python dominate and CUDA graphs (reduce-overhead) help most; where the
  per-sample cost dominates (linear), the step is bandwidth- or compute-bound, fusion helps, and a
  bigger batch amortises the one-time compile over more samples. They meet at b = overhead / cost.

How long a race takes before it is measured is core.engine.race_estimates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median

import numpy as np

from core.engine import intervals, words
from core.engine.analysis import FASTER, NO_CLEAR_DIFFERENCE, SLOWER, default_warmup, steady
from core.engine.summary import BUSY, Summary


@dataclass(frozen=True)
class StepRates:
    """Steady step times (medians) of both variants and their intervals: of each median, and of
    the per-step saving (eager - compiled), which is the race's speedup interval (`speedup_ci`)
    said in seconds: eager x [its low, its high] / speedup - compiled."""

    eager_s: float
    compiled_s: float
    eager_ci: tuple[float, float]
    compiled_ci: tuple[float, float]
    saving_ci: tuple[float, float]
    speedup_ci: tuple[float, float] | None = None  # the race's interval of eager / compiled


def step_rates(
    eager: Sequence[float],
    compiled: Sequence[float],
    warmup: int | None = None,
    paired: bool = False,
    alpha: float = intervals.ALPHA,
    spread: intervals.RunToRun | None = None,
) -> StepRates | None:
    """The steady rates of a race from its per-step times, with the intervals the race's headline
    has (analysis.steady_state_speedup: the same steps, blocks, pairing and error rate, widened to the
    same run-to-run spread). None when
    a variant has no steps, or too few blocks for an interval (a plan is not a guess)."""
    if not eager or not compiled:
        return None
    w = default_warmup(min(len(eager), len(compiled))) if warmup is None else warmup
    e, c = steady(eager, w), steady(compiled, w)
    e_med, c_med = median(e), median(c)
    half = intervals.headline_half_width(intervals.log_half_width(e, c, paired, alpha), spread)
    e_half, c_half = intervals.own_log_half_width(e, alpha), intervals.own_log_half_width(c, alpha)
    if half is None or e_half is None or c_half is None or c_med <= 0:
        return None
    speedup_ci = intervals.interval(e_med / c_med, half)
    return StepRates(
        e_med,
        c_med,
        intervals.interval(e_med, e_half),
        intervals.interval(c_med, c_half),
        (c_med * speedup_ci[0] - c_med, c_med * speedup_ci[1] - c_med),  # c x (ratio - 1) = e - c
        speedup_ci,
    )


@dataclass(frozen=True)
class RaceStart:
    """A race's own steps, cumulative: a plan follows them as far as they go, then the steady rates,
    so its break-even is the race's (the one its card shows), not a second one from the medians."""

    eager_cum: tuple[float, ...]
    compiled_cum: tuple[float, ...]  # compile included: it lands in the first compiled steps


@dataclass(frozen=True)
class TrainingPlan:
    """A run of `steps` steps, eager and compiled (compile included), in seconds, with intervals."""

    steps: int
    compile_s: float
    eager_total_s: float
    eager_ci: tuple[float, float]
    compiled_total_s: float
    compiled_ci: tuple[float, float]
    saved_s: float  # > 0: compile saves this much; < 0: it costs this much
    saved_ci: tuple[float, float]
    break_even_step: float | None  # None: no clear per-step gain (or slower): no break-even to count on
    eager_step_s: float = 0.0  # the steady rates the plan extends with
    compiled_step_s: float = 0.0
    break_even_measured: bool = False  # the race itself crossed there (not a projection)
    verdict: str = NO_CLEAR_DIFFERENCE  # the per-step verdict the race's interval gives (analysis' words)

    @property
    def shorter_than_break_even(self) -> bool:
        return self.break_even_step is not None and self.steps < self.break_even_step

    @property
    def slower_steps_cost_s(self) -> float:
        """What compiled's slower steady steps cost over the run (0 when they are not slower)."""
        return max(self.compiled_step_s - self.eager_step_s, 0.0) * self.steps


def plan_training(rates: StepRates, compile_s: float, steps: int, start: RaceStart | None = None) -> TrainingPlan:
    """Eager = steps x eager step; compiled = compile time + steps x compiled step. With the race's
    own steps (`start`), the first of them are the measured ones (compile included) and the rest the
    steady rates: the plan then breaks even where the race does, or where its projection does.

    A break-even is named only from a per-step saving whose interval lies above 0: the race's
    speedup interval above 1, so the same rule as Summary.projection_stands."""
    if steps < 1:
        raise ValueError(f"a run has at least one step (got {steps})")
    compile_s = max(compile_s, 0.0)
    n = min(len(start.eager_cum), len(start.compiled_cum)) if start else 0
    k = min(steps, n)
    e0 = start.eager_cum[k - 1] if start and k else 0.0
    c0 = start.compiled_cum[k - 1] if start and k else compile_s
    rest = steps - k
    saving = rates.eager_s - rates.compiled_s
    measured, break_even = False, None
    if start and n and start.compiled_cum[n - 1] <= start.eager_cum[n - 1]:
        measured, break_even = True, float(_crossed_at(start))
    elif rates.saving_ci[0] > 0:  # a clear gain: where the steady rates earn the head start back
        head_start = (start.compiled_cum[n - 1] - start.eager_cum[n - 1]) if start and n else compile_s
        break_even = n + head_start / saving
    return TrainingPlan(
        steps=steps,
        compile_s=compile_s,
        eager_total_s=e0 + rest * rates.eager_s,
        eager_ci=(e0 + rest * rates.eager_ci[0], e0 + rest * rates.eager_ci[1]),
        compiled_total_s=c0 + rest * rates.compiled_s,
        compiled_ci=(c0 + rest * rates.compiled_ci[0], c0 + rest * rates.compiled_ci[1]),
        saved_s=e0 - c0 + rest * saving,
        saved_ci=(e0 - c0 + rest * rates.saving_ci[0], e0 - c0 + rest * rates.saving_ci[1]),
        break_even_step=break_even,
        eager_step_s=rates.eager_s,
        compiled_step_s=rates.compiled_s,
        break_even_measured=measured,
        verdict=FASTER if rates.saving_ci[0] > 0 else SLOWER if rates.saving_ci[1] < 0 else NO_CLEAR_DIFFERENCE,
    )


def _crossed_at(start: RaceStart) -> int:
    """The step from which the race's compiled run stayed ahead (analysis.break_even's step)."""
    n = min(len(start.eager_cum), len(start.compiled_cum))
    k = n
    while k > 0 and start.compiled_cum[k - 1] <= start.eager_cum[k - 1]:
        k -= 1
    return k + 1


def plan_from_summary(summary: Summary | dict, steps: int) -> TrainingPlan | None:
    """The plan for a stored race's summary (None when it lacks the steps or the compile time): the
    race's own steps, then its steady rates, so the plan's break-even is the card's."""
    s = Summary.of(summary)
    eager, compiled, compile_s = s.eager_step_times_s, s.compiled_step_times_s, s.compile_time_s
    if s.compile_skipped or compile_s is None:
        return None
    alpha = (
        s.interval_alpha
        if s.interval_alpha is not None and 0 < s.interval_alpha <= intervals.ALPHA
        else intervals.ALPHA
    )
    rates = step_rates(
        eager, compiled, s.warmup_steps, s.interval_paired, alpha, intervals.RunToRun.from_dict(s.run_to_run)
    )
    if rates is None:
        return None
    n = min(len(eager), len(compiled))
    start = RaceStart(tuple(np.cumsum(eager[:n]).tolist()), tuple(np.cumsum(compiled[:n]).tolist()))
    return plan_training(rates, compile_s, steps, start)


def plan_sentence(plan: TrainingPlan) -> str:
    """One sentence: what compile saves or costs over the user's run, and what the cost is (the
    compile, or slower steps), with the break-even the race's card shows. Steps are called slower
    only where the race's interval says so (its verdict), as every other surface says it."""
    over = f"Over {plan.steps:,} steps"
    low, high = plan.saved_ci
    compile_words = f"the {words.duration(plan.compile_s)} compile"
    be = None if plan.break_even_step is None else words.break_even_step(plan.break_even_step, plan.break_even_measured)
    if plan.saved_s < 0 and not plan.shorter_than_break_even and plan.verdict == SLOWER:
        ends = (
            "it never pays off"
            if be is None
            else f"ahead from {be} of the race, it falls behind again over a longer run"
        )
        return (
            f"{over} compiled takes about {words.duration(plan.saved_s)} longer: its slower steps "
            f"({words.seconds(plan.compiled_step_s)} against {words.seconds(plan.eager_step_s)}) cost about "
            f"{words.duration(plan.slower_steps_cost_s)} and {compile_words} is paid once; {ends}."
        )
    if plan.saved_s <= 0 and not plan.shorter_than_break_even:
        return f"{over} compile costs about {words.duration(plan.saved_s)}: {_no_clear_gain(plan, compile_words, be)}."
    if plan.shorter_than_break_even:
        return f"{over} compile costs about {words.duration(plan.saved_s)}: your run is shorter than the break-even ({be})."
    if low <= 0:  # the interval reaches a loss: no saving to stand behind
        return (
            f"{over} compile saves about {words.duration(plan.saved_s)} at the measured medians, but the "
            f"interval runs from a loss to a gain ({words.signed_duration(low)} to {words.signed_duration(high)}): "
            "no clear saving."
        )
    return (
        f"{over} compile saves about {words.duration(plan.saved_s)} ({words.duration_range(low, high, plan.saved_s)})."
    )


def _no_clear_gain(plan: TrainingPlan, compile_words: str, be: str | None) -> str:
    """Why a run with no clear per-step gain costs what it does: the compile, less (or plus) what
    the steps win (or lose) at the medians, which the interval cannot tell from nothing."""
    won = plan.saved_s + plan.compile_s  # what the steps themselves gave back over the run
    ahead = "" if be is None else f"; the race was ahead from {be}, but a longer run cannot count on staying ahead"
    if abs(won) < 0.05 * max(plan.compile_s, 1e-9):
        return f"compiled steps are not clearly faster here, so nothing earns {compile_words} back{ahead}"
    way = "less" if won > 0 else "plus"
    what = "win back" if won > 0 else "lose"
    return (
        f"{compile_words}, {way} about {words.duration(won)} that compiled steps {what} at the measured medians; "
        f"they are not clearly faster or slower here, so there is no break-even to count on{ahead}"
    )


OVERHEAD_BOUND = "overhead-bound"
THROUGHPUT_BOUND = "bandwidth- or compute-bound"
CHANGES = "changes with batch size"
OVERHEAD_ADVICE = "reduce-overhead / CUDA graphs help most here"
THROUGHPUT_ADVICE = "fusion helps; bigger batches amortise compile"
# Off a CUDA GPU there are no CUDA graphs to offer (core.engine.spec refuses those modes there).
OVERHEAD_ADVICE_NO_CUDA = (
    "bigger batches spread that fixed cost over more samples (CUDA graphs, which cut it, need a CUDA GPU)"
)
# The same advice where the measured points do not bear it out (most read no clear gain).
HEDGED_ADVICE = {
    OVERHEAD_ADVICE: "reduce-overhead / CUDA graphs are what could help most here",
    THROUGHPUT_ADVICE: "fusion is what could help; bigger batches amortise compile",
    OVERHEAD_ADVICE_NO_CUDA: "bigger batches are what could spread that fixed cost (CUDA graphs need a CUDA GPU)",
}
MIN_BATCH_SIZES = 3
MAX_FIT_ERROR = 0.35  # a fit worse than this (relative error) is no pattern to read


@dataclass(frozen=True)
class Regime:
    """What bounds a step across the measured batch sizes, from t(b) = overhead + b x per_sample."""

    kind: str  # OVERHEAD_BOUND | THROUGHPUT_BOUND | CHANGES
    overhead_s: float
    per_sample_s: float
    crossover_batch: float | None  # overhead = b x per-sample cost here; None when per_sample is 0
    fit_error: float  # largest relative error of the fit over the points
    text: str


def regime(
    batch_sizes: Sequence[int],
    eager_step_s: Sequence[float],
    verdicts: Sequence[str | None] = (),
    cuda: bool = True,
) -> Regime | None:
    """Read the regime from eager step times at 3 or more batch sizes; None when the points do not
    allow a reading (fewer sizes, or times that no overhead-plus-linear model fits). `verdicts`, the
    points' speedup verdicts: unless most are "faster", the advice is hedged and the count said
    (never "fusion helps" beside points that read no clear difference). `cuda`: whether the device
    is a CUDA GPU (elsewhere CUDA graphs are not advised)."""
    points = sorted((int(b), float(t)) for b, t in zip(batch_sizes, eager_step_s) if t and t > 0 and b and b > 0)
    if len({b for b, _ in points}) < MIN_BATCH_SIZES:
        return None
    b = np.array([p[0] for p in points], dtype=float)
    t = np.array([p[1] for p in points], dtype=float)
    overhead, per_sample = _fit_relative(b, t)
    fit_error = float(np.max(np.abs(overhead + per_sample * b - t) / t))
    if fit_error > MAX_FIT_ERROR:
        return None
    lo, hi = b.min(), b.max()
    crossover = overhead / per_sample if per_sample > 0 else None
    # Overhead's share of the step at the smallest and largest batch decides the reading.
    share_lo = overhead / (overhead + per_sample * lo)
    share_hi = overhead / (overhead + per_sample * hi)
    doubt = _doubt(verdicts)
    overhead_advice, throughput_advice = (
        HEDGED_ADVICE[a] if doubt else a
        for a in (OVERHEAD_ADVICE if cuda else OVERHEAD_ADVICE_NO_CUDA, THROUGHPUT_ADVICE)
    )
    if share_hi >= 0.5:
        kind = OVERHEAD_BOUND
        text = (
            f"Overhead-bound from batch {lo:,.0f} to {hi:,.0f}: the eager step barely grows with the batch "
            f"({words.seconds(overhead)} fixed per step, {words.seconds(per_sample)} per sample), so {overhead_advice}."
        )
    elif share_lo <= 0.5:
        kind = THROUGHPUT_BOUND
        text = (
            f"Bandwidth- or compute-bound from batch {lo:,.0f} to {hi:,.0f}: the eager step grows in "
            f"proportion to the batch ({words.seconds(per_sample)} per sample, {words.seconds(overhead)} fixed), so {throughput_advice}."
        )
    else:
        kind = CHANGES
        text = (
            f"Overhead-bound below about batch {crossover:,.0f}, bandwidth- or compute-bound above it: the eager "
            f"step is {words.seconds(overhead)} fixed plus {words.seconds(per_sample)} per sample. Below it, {overhead_advice}; above "
            f"it, {throughput_advice}."
        )
    if doubt:
        text += f" {doubt}"
    return Regime(kind, overhead, per_sample, crossover, fit_error, text)


def _doubt(verdicts: Sequence[str | None]) -> str | None:
    """What the measured points say against the advice, unless most of them read "faster"."""
    counted = [v for v in verdicts if v]
    faster = sum(v == FASTER for v in counted)
    if not counted or faster * 2 > len(counted):
        return None
    named = {NO_CLEAR_DIFFERENCE: "no clear difference", SLOWER: "slower", BUSY: "no verdict, the machine busy"}
    tally = ", ".join(f"{n} {name}" for v, name in named.items() if (n := counted.count(v)))
    return (
        f"But compiled steps were clearly faster at only {faster} of {len(counted)} batch sizes ({tally}): "
        "the measurements here do not bear that out."
    )


def _fit_relative(b: np.ndarray, t: np.ndarray) -> tuple[float, float]:
    """Least squares of (overhead + per_sample x b - t) / t, both coefficients >= 0: relative
    errors, so the small batches count as much as the large ones."""
    design = np.stack([1 / t, b / t], axis=1)
    (overhead, per_sample), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    if overhead < 0:  # one coefficient alone: the best of each, fitted on its own
        overhead, per_sample = 0.0, float(np.sum(b / t) / np.sum((b / t) ** 2))
    elif per_sample < 0:
        overhead, per_sample = float(np.sum(1 / t) / np.sum((1 / t) ** 2)), 0.0
    return float(overhead), float(per_sample)
