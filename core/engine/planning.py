"""From a short measured race to decisions about a real one. Pure functions only.

- `plan_from_summary` + `plan_sentence`: a user's run of N steps, eager and compiled, compile
  included: the race's headline's plan (core.engine.headline, the one derivation), so "Plan your
  training", the cards and the race's headline never disagree; this module words it.
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

import numpy as np

from core.engine import words
from core.engine.headline import TrainingPlan
from core.engine.summary import BUSY, FASTER, NO_CLEAR_DIFFERENCE, SLOWER, Summary


def plan_from_summary(summary: Summary | dict, steps: int) -> TrainingPlan | None:
    """The plan for a stored race's summary over `steps` steps: its headline's (core.engine.headline),
    so its break-even, its saving's interval and its verdict are the cards'. None where compile
    did not run or the race measured no steady eager step."""
    return Summary.of(summary).headline.plan(steps)


def plan_sentence(plan: TrainingPlan) -> str:
    """One sentence: what compile saves or costs over the user's run, and what the cost is (the
    compile, or slower steps), with the break-even the race's card shows. The sign of every claim
    follows the saving's interval, which is the headline interval applied: a saving only where its
    whole interval is one, "never" only where the headline's whole interval is at or below 1x."""
    over = f"Over {plan.steps:,} steps"
    low, high = plan.saved_ci
    compile_words = f"the {words.duration(plan.compile_s)} compile"
    be = None if plan.break_even_step is None else words.break_even_step(plan.break_even_step, plan.break_even_measured)
    if plan.within_race:  # the race's own steps: what it measured, no interval to apply
        does = "saves" if plan.saved_s > 0 else "costs"
        shorter = f": your run is shorter than the break-even ({be})" if plan.shorter_than_break_even else ""
        return (
            f"{over} compile {does} about {words.duration(plan.saved_s)}, as this race measured its first "
            f"{plan.steps:,} steps{shorter}."
        )
    if plan.verdict == SLOWER:
        ends = (
            "it never pays off"
            if not plan.break_even_measured
            else f"ahead from {be} of the race, it falls behind again over a longer run"
        )
        return (
            f"{over} compiled takes about {words.duration(plan.saved_s)} longer: its slower steps "
            f"({words.seconds(plan.compiled_step_s)} against {words.seconds(plan.eager_step_s)}) cost about "
            f"{words.duration(plan.slower_steps_cost_s)} and {compile_words} is paid once; {ends}."
        )
    if plan.verdict != FASTER:
        return f"{over} {_no_clear_gain(plan, compile_words, be)}."
    if low > 0:
        return (
            f"{over} compile saves about {words.duration(plan.saved_s)} "
            f"({words.duration_range(low, high, plan.saved_s)})."
        )
    span = plan.break_even_range
    within = f"between step {words.step_at(span[0]):,} and {words.step_at(span[1]):,}" if span else be
    if high < 0:
        return f"{over} compile costs about {words.duration(plan.saved_s)}: your run is shorter than the break-even ({within})."
    does = "saves" if plan.saved_s > 0 else "costs"
    return (
        f"{over} compile {does} about {words.duration(plan.saved_s)} at the headline speedup, but your run ends "
        f"near the break-even ({within}): within the speedup's interval it ranges from "
        f"{words.signed_duration(low)} to {words.signed_duration(high)}."
    )


def _no_clear_gain(plan: TrainingPlan, compile_words: str, be: str | None) -> str:
    """A run whose headline interval spans 1x: what it gives at the headline speedup, and the
    range its interval allows, which reaches both a loss and a gain: the race cannot tell."""
    ahead = "" if be is None else f"; the race was ahead from {be}, but a longer run cannot count on staying ahead"
    won = plan.saved_s + plan.compile_s  # what the steps themselves gave back over the run
    low, high = plan.saved_ci
    if abs(won) < 0.05 * max(plan.compile_s, 1e-9) and abs(high - low) < 0.05 * max(plan.compile_s, 1e-9):
        return f"compile costs about {words.duration(plan.saved_s)}: compiled steps are not clearly faster here, so nothing earns {compile_words} back{ahead}"
    does = "saves" if plan.saved_s > 0 else "costs"
    return (
        f"compile {does} about {words.duration(plan.saved_s)} at the headline speedup, but compiled steps are not "
        f"clearly faster or slower here: within the speedup's interval it ranges from {words.signed_duration(low)} "
        f"to {words.signed_duration(high)}, so the race cannot tell whether it pays off{ahead}"
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
