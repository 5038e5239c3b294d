"""One voice: every number a person reads is put into words here, one formatter per unit (as
pyperf's `_formatter.py`), so a card, a sentence, the terminal, a sweep, a plan and the feed say the
same number the same way. The sentences built from them (the reading) are core.engine.reading.
Torch-free, pure; importable by the engine, the CLI on a bare GPU box and the view alike.

    from core.engine import words
    words.speedup(1.234)                  '1.23x'          (None: '-')
    words.speedup_range(1.1, 1.2)         '1.10-1.20x'     a speedup's interval, its ends
    words.speedup_with_range(1.12, 1.05, 1.2)  '1.12x (1.05-1.20x)'  a table cell
    words.interval(summary)               '95% interval 1.10-1.20x' (+ the stopping rule's looks)
    words.ratio(3.24)                     '3.2x'           a growth factor, not a speedup (digits=0: '256x')
    words.seconds(0.01234)                '12.3 ms'        a measured time: 3 significant figures, µs/ms/s
    words.duration(150)                   '2.5 min'        a span in a sentence: s below 90 s, min below 90 min, h
    words.about(150)                      '~2.5 min'       the same, rough
    words.signed_duration(-40)            '-40 s'
    words.duration_range(38, 44, like=40) '38-44'          an interval in the unit `like` is said in
    words.duration_interval(a, b, like)   '95% interval 1.58-1.63 h'
    words.ago(700)                        '12 min ago'
    words.bytes_(3 * 2**30)               '3.0 GiB'
    words.count(3, "recompile")           '3 recompiles'   words.number(12345) '12,345'
    words.compile_cost(summary)           '9.5 s', 'too small to measure here (under 12 ms)'
    words.rate(62_900)                    '62.9k samples/s'
    words.change(90, 100)                 '-10% vs eager'
    words.step_at(947.3)                  948              the step a fractional position falls in
    words.break_even(summary)             'step 1,037 (12.3 s in)', 'never: compiled steps are slower', ...
    words.break_even(summary, short=True) 'step 1,037', '≈ step 948', 'never', 'none', 'not reached'
    words.break_even_step(948, measured=False)  'about step 948'
    words.steps_range(span, total, live=True)   'between step 300 and 380 of 600'
    words.projected_step(947.3, 1500, live=True)  'projected ≈ step 950 of 1,500'
    words.projection_label(947.3, None, 80.4, live=False)  '≈ step 948 (projected, ~80 s)'
    words.percent(0.07), words.of_total(200, 600)   '7%', 'step 200 of 600'

A summary is a core.engine.summary.Summary or its dict; its break-even's state (Summary.break_even)
decides the words, never a stored reason's wording. Duration cut-offs live here only:
MINUTES_FROM_S and HOURS_FROM_S.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.engine.intervals import ALPHA
from core.engine.summary import (
    BUSY,
    FASTER,
    NEVER,
    NO_CLEAR_DIFFERENCE,
    NO_COMPILE,
    NO_GAIN,
    NO_VERDICT,
    NOT_REACHED,
    PROJECTED,
    REACHED,
    SLOWER,
    Summary,
    TrainingPlan,
)

MINUTES_FROM_S = 90.0  # a span this long or longer is said in minutes
HOURS_FROM_S = 90 * 60.0  # and this long or longer in hours
NONE = "-"  # a figure that is not there
SPEEDUP_FORMAT = "%.2fx"  # a speedup, for a table that keeps the number (a sortable column's printf format)

# -- speed ----------------------------------------------------------------------------------------


def speedup(x: float | None) -> str:
    """'1.23x': eager time / compiled time (above 1: compiled is faster); '-' when there is none."""
    return NONE if x is None or not math.isfinite(x) else SPEEDUP_FORMAT % x


def speedup_range(low: float, high: float) -> str:
    """'1.10-1.20x': a speedup's interval."""
    return f"{low:.2f}-{high:.2f}x"


def speedup_with_range(x: float, low: float, high: float) -> str:
    """'1.12x (1.05-1.20x)': a speedup and its 95% interval in a table's cell."""
    return f"{speedup(x)} ({speedup_range(low, high)})"


def ratio(x: float, digits: int = 1) -> str:
    """'3.2x' ('256x' digits=0): how many times larger (a time's growth, more data), not a speedup."""
    return f"{x:,.{digits}f}x"


def interval(summary: Summary | Mapping[str, Any]) -> str:
    """'95% interval 1.10-1.20x', with the looks it was widened for where a race stopped on it
    ('95% interval 1.08-1.22x, widened for the stopping rule's 6 looks')."""
    s = Summary.of(summary)
    low, high = s.interval or (math.nan, math.nan)
    return f"95% interval {speedup_range(low, high)}{looks_note(s)}"


def looks_note(summary: Summary | Mapping[str, Any]) -> str:
    """', widened for the stopping rule's 6 looks' where the interval's error rate was spread over
    looks (interval_alpha below 5%, Bonferroni) and they, not the run-to-run spread, set its width
    (reading.spread_note says when the spread did); else ''."""
    s = Summary.of(summary)
    alpha = s.interval_alpha
    if alpha is None or not 0 < alpha < ALPHA or widened_to_spread(s) or s.replicates:
        return ""  # (with replicates the interval rests on the processes, not on the first one's looks)
    return f", widened for the stopping rule's {round(ALPHA / alpha)} looks"


def widened_to_spread(summary: Summary) -> bool:
    """The interval is wider than the race's own: the run-to-run spread set it."""
    within, ci = summary.speedup_ci95_within, summary.speedup_ci95
    return bool(within and ci and ci[1] > within[1] * (1 + 1e-9))


def percent(x: float, signed: bool = False) -> str:
    """'7%' ('+7%' signed): a fraction as a percentage."""
    return f"{x:+.0%}" if signed else f"{x:.0%}"


def change(new: float | None, old: float | None, against: str = "eager") -> str | None:
    """'-7% vs eager': compiled's figure against eager's; 'same as eager' where it rounds to 0%."""
    if not new or not old:
        return None
    pct = (new / old - 1) * 100
    if round(abs(pct)) == 0:
        return f"same as {against}"
    return f"{'+' if pct >= 0 else '-'}{abs(pct):.0f}% vs {against}"


# -- time ---------------------------------------------------------------------------------------


def _three_figures(x: float) -> str:
    """x to three significant figures, trailing zeros dropped, no exponent: 0.0123 -> '0.0123',
    12.34 -> '12.3', 2.0 -> '2', 1234 -> '1,234'."""
    if x == 0:
        return "0"
    digits = max(2 - int(math.floor(math.log10(abs(x)))), 0)
    text = f"{x:,.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def seconds(s: float | None, signed: bool = False) -> str:
    """A measured time to three significant figures (trailing zeros dropped) in µs, ms or s:
    '850 µs', '12.3 ms', '1.25 s', '4 s', '108 s' ('+1.5 s' signed). Never minutes: a measured
    figure keeps its unit in a table."""
    if s is None or not math.isfinite(s):
        return NONE
    sign = ("+" if s >= 0 else "-") if signed else ("-" if s < 0 else "")
    x = abs(s)
    x = float(_three_figures(x).replace(",", "")) if x else 0.0  # rounded first: 0.9996 s is '1.00 s'
    if x >= 1 or x == 0:
        return f"{sign}{_three_figures(x)} s"
    if x >= 1e-3:
        return f"{sign}{_three_figures(x * 1e3)} ms"
    return f"{sign}{_three_figures(x * 1e6)} µs"


def _unit(s: float) -> tuple[float, str, int]:
    """(seconds per unit, unit name, decimals) for a span this long: no false precision."""
    s = abs(s)
    if s < MINUTES_FROM_S:
        return 1.0, "s", 0
    if s < HOURS_FROM_S:
        return 60.0, "min", 1 if s < 10 * 60 else 0
    return 3600.0, "h", 1


def duration(s: float) -> str:
    """'40 s', '2.5 min', '41 min', '3.2 h': how long, in a sentence (its sign dropped)."""
    unit, name, digits = _unit(s)
    return f"{abs(s) / unit:.{digits}f} {name}"


def about(s: float) -> str:
    """'~40 s', '~2.5 min': a rough duration."""
    return f"~{duration(s)}"


def signed_duration(s: float) -> str:
    """'+40 s', '-2.5 min'."""
    return ("-" if s < 0 else "+") + duration(s)


def duration_range(low: float, high: float, like: float) -> str:
    """'38-44': an interval in the unit (and decimals) duration() picks for `like`; ' to ' where
    its low end is negative ('-12 to 30')."""
    unit, _, digits = _unit(like)
    a, b = f"{low / unit:.{digits}f}", f"{high / unit:.{digits}f}"
    return f"{a}-{b}" if low >= 0 else f"{a} to {b}"


def duration_interval(low: float, high: float, like: float) -> str:
    """'95% interval 1.58-1.63 h': an interval in the unit duration() picks for `like`, with as
    many more decimals (up to three) as it takes for its two ends to differ, so its width shows
    ('1.6-1.6 h' said nothing); narrower than that, it says so."""
    unit, name, start = _unit(like)
    for digits in range(start, start + 4):
        a, b = f"{low / unit:.{digits}f}", f"{high / unit:.{digits}f}"
        if a != b:
            return f"95% interval {a}{'-' if low >= 0 else ' to '}{b} {name}"
    return f"95% interval too narrow to show (both ends {a} {name})"


def ago(s: float) -> str:
    """'just now', '40 s ago', '12 min ago', '3 h ago', '2 days ago' (the same cut-offs as duration)."""
    s = max(0.0, s)
    if s < 10:
        return "just now"
    if s < MINUTES_FROM_S:
        return f"{s:.0f} s ago"
    if s < HOURS_FROM_S:
        return f"{s / 60:.0f} min ago"
    if s < 36 * 3600:
        return f"{s / 3600:.0f} h ago"
    return f"{s / 86400:.0f} days ago"


COMPILE_TOO_SMALL = "too small to measure here"


def compile_cost(summary: Summary | Mapping[str, Any]) -> str:
    """A race's compile time ('9.5 s'), or where compiled's first steps were not measurably slower
    than its steady ones, 'too small to measure here (under 12 ms)'; '-' where unknown."""
    s = Summary.of(summary)
    if s.compile_time_s is None and s.compile_time_under_s is not None:
        return f"{COMPILE_TOO_SMALL} (under {seconds(s.compile_time_under_s)})"
    return seconds(s.compile_time_s)


# -- sizes and counts ------------------------------------------------------------------------------


def bytes_(n: float | None) -> str:
    """'512 B', '1.5 KiB', '3.2 GiB'; '-' when unknown."""
    if n is None:
        return NONE
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def number(n: float | None, digits: int = 0) -> str:
    """'12,345', '0.1234' (digits=4); '-' when unknown; an int as it is."""
    if n is None:
        return NONE
    return f"{n:,}" if isinstance(n, int) else f"{n:,.{digits}f}"


def count(n: int, noun: str, plural: str | None = None) -> str:
    """'1 recompile', '3 recompiles', '1,200 steps'."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def rate(samples_per_s: float | None) -> str:
    """Throughput short enough for a card: '1,250 samples/s', '62.9k samples/s'."""
    if samples_per_s is None:
        return NONE
    if samples_per_s >= 10_000:
        return f"{samples_per_s / 1000:,.1f}k samples/s"
    return f"{samples_per_s:,.0f} samples/s"


# -- steps and the break-even ---------------------------------------------------------------------


def step_at(position: float) -> int:
    """The step a fractional position falls in (947.3: a third into step 948)."""
    return math.floor(position) + 1


def of_total(step: int, total: int | None) -> str:
    """'step 200 of 600' ('step 200' where the run's length is unknown)."""
    return f"step {step:,}" + (f" of {total:,}" if total else "")


def steady_round(n: float) -> int:
    """A projected step rounded to two significant digits (948 -> 950, 1,035 -> 1,000), so a live
    projection that moves by a few steps each second does not flicker."""
    if n <= 0 or not math.isfinite(n):
        return 0
    digits = max(int(math.floor(math.log10(n))) - 1, 0)
    return int(math.floor(n / 10**digits + 0.5) * 10**digits)  # half up: 1,050 -> 1,100


def _two_digits(n: float, up: bool) -> int:
    """n rounded down (or up) to two significant digits: a range's ends, widened, never narrowed."""
    n = max(int(math.ceil(n) if up else math.floor(n)), 1)
    scale = 10 ** max(len(str(n)) - 2, 0)
    return (-(-n // scale) if up else n // scale) * scale


def break_even_step(step: float, measured: bool) -> str:
    """'step 344' where the race crossed, 'about step 400' where it is projected."""
    shown = max(math.ceil(step), 1)
    return f"step {shown:,}" if measured else f"about step {shown:,}"


def steps_range(span: tuple[float, float | None], total: int | None, live: bool, short: bool = False) -> str:
    """A projected break-even as the range the speedup's interval allows (Summary.projected_range):
    'between step 300 and 380 of 600' ('step 300-380 of 600' short, for a card or a chart); live,
    its ends widened to two significant digits so it does not flicker; 'from step 1,200 on, or
    never' where the interval's slow end never catches up."""
    early = step_at(span[0])
    late = None if span[1] is None else step_at(span[1])
    if live:
        early, late = _two_digits(early, up=False), None if late is None else _two_digits(late, up=True)
    if late is None:
        text = f"from step {early:,} on, or never"
    elif late <= early:
        text = f"at about step {early:,}"
    else:
        text = f"step {early:,}-{late:,}" if short else f"between step {early:,} and {late:,}"
    if not total:
        return text
    if early > total:
        return f"{text}, past this run's {total:,} steps"
    return f"{text} of {total:,}" if late is not None and late <= total else f"{text} (this run has {total:,} steps)"


def projected_step(position: float | None, total: int | None, live: bool) -> str | None:
    """'projected ≈ step 1,000 of 1,500' (live: rounded), 'projected ≈ step 948' (finished)."""
    if position is None:
        return None
    step = step_at(position)
    shown = steady_round(step) if live else step
    if total and step > total:
        return f"projected ≈ step {shown:,}, past this run's {total:,} steps"
    return f"projected ≈ {of_total(shown, total)}"


# What each state of a finished race's break-even is called: (short, long).
_SETTLED = {
    NO_VERDICT: ("no verdict", "no verdict: the machine was busy"),
    NOT_REACHED: ("not reached", "not within this run"),
    NO_GAIN: ("none", "none to count on: no clear per-step gain"),
    NEVER: ("never", "never: compiled steps are slower"),
    NO_COMPILE: (NONE, NONE),
}


def break_even(summary: Summary | Mapping[str, Any], short: bool = False) -> str:
    """A finished race's break-even, the same state in the same words on every surface:
    'step 1,037 (12.3 s in)' ('step 1,037' short); 'not within this run: about step 948 at the
    steady rates (between step 305 and 372 within its 95% interval)' ('≈ step 948' short);
    'not within this run' ('not reached'); 'none to count on: no clear per-step gain' ('none');
    'never: compiled steps are slower' ('never'); '-' where nothing compiled to compare."""
    s = Summary.of(summary)
    state = s.break_even
    if state == REACHED:
        step = f"step {s.break_even_step:,}"
        if short or s.break_even_wall_s is None:
            return step
        return f"{step} ({seconds(s.break_even_wall_s)} in)"
    if state == PROJECTED:
        step = step_at(s.projected_position)
        if short:
            return f"≈ step {step:,}"
        span = s.projected_range
        within = f" ({steps_range(span, None, live=False)} within its 95% interval)" if span else ""
        return f"not within this run: about step {step:,} at the steady rates{within}"
    short_words, long_words = _SETTLED[state]
    return short_words if short else long_words


def projection_label(position: float, span: tuple[float, float | None] | None, wall_s: float | None, live: bool) -> str:
    """The race chart's note at the projected crossing, as the cards word it: live, the range the
    interval allows where there is one ('step 300-380 (projected)'); else '≈ step 948 (projected, ~80 s)'."""
    if live and span:
        return f"{steps_range(span, None, live=True, short=True)} (projected)"
    step = step_at(position)
    shown = steady_round(step) if live else step
    return f"≈ step {shown:,} (projected" + (f", {about(wall_s)})" if wall_s else ")")


# -- verdicts --------------------------------------------------------------------------------------

# What each verdict is called in a table's cell (short) and in a sentence: a busy machine's race is
# no verdict, said whole (a cell cut at "machine" says nothing).
_VERDICTS = {
    "faster": ("faster", "faster"),
    "no clear difference": ("no clear difference", "no clear difference"),
    "slower": ("slower", "slower"),
    "machine busy": ("no verdict (busy)", "no verdict: the machine was busy"),
}


def verdict(name: str | None, short: bool = False) -> str:
    """'faster', 'no clear difference', 'slower', 'no verdict: the machine was busy' ('no verdict
    (busy)' short); '-' where there is none."""
    if name not in _VERDICTS:
        return NONE
    return _VERDICTS[name][0 if short else 1]


# ----------------------------------------------------------------------
# From a short measured race to decisions about a real one. Pure functions only.
#
# - `plan_from_summary` + `plan_sentence`: a user's run of N steps, eager and compiled, compile
#   included: the race's headline's plan (core.engine.summary, the one derivation), so "Plan your
#   training", the cards and the race's headline never disagree; this module words it.
# - `regime`: how the eager step time grows with batch size says what bounds the step. Fitting
#   t(b) = overhead + b x per-sample cost: where overhead dominates (flat), per-step costs such as
#   kernel launches and Python dominate and CUDA graphs (reduce-overhead) help most; where the
#   per-sample cost dominates (linear), the step is bandwidth- or compute-bound, fusion helps, and a
#   bigger batch amortises the one-time compile over more samples. They meet at b = overhead / cost.
#
# How long a race takes before it is measured is core.engine.race_estimates.


def plan_from_summary(summary: Summary | dict, steps: int) -> TrainingPlan | None:
    """The plan for a stored race's summary over `steps` steps: its headline's (core.engine.summary),
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
    compile_words = f"the {duration(plan.compile_s)} compile"
    be = None if plan.break_even_step is None else break_even_step(plan.break_even_step, plan.break_even_measured)
    if plan.within_race:  # the race's own steps: what it measured, no interval to apply
        does = "saves" if plan.saved_s > 0 else "costs"
        shorter = f": your run is shorter than the break-even ({be})" if plan.shorter_than_break_even else ""
        return (
            f"{over} compile {does} about {duration(plan.saved_s)}, as this race measured its first "
            f"{plan.steps:,} steps{shorter}."
        )
    if plan.verdict == SLOWER:
        ends = (
            "it never pays off"
            if not plan.break_even_measured
            else f"ahead from {be} of the race, it falls behind again over a longer run"
        )
        return (
            f"{over} compiled takes about {duration(plan.saved_s)} longer: its slower steps "
            f"({seconds(plan.compiled_step_s)} against {seconds(plan.eager_step_s)}) cost about "
            f"{duration(plan.slower_steps_cost_s)} and {compile_words} is paid once; {ends}."
        )
    if plan.verdict != FASTER:
        return f"{over} {_no_clear_gain(plan, compile_words, be)}."
    if low > 0:
        return f"{over} compile saves about {duration(plan.saved_s)} ({duration_range(low, high, plan.saved_s)})."
    span = plan.break_even_range
    within = f"between step {step_at(span[0]):,} and {step_at(span[1]):,}" if span else be
    if high < 0:
        return (
            f"{over} compile costs about {duration(plan.saved_s)}: your run is shorter than the break-even ({within})."
        )
    does = "saves" if plan.saved_s > 0 else "costs"
    return (
        f"{over} compile {does} about {duration(plan.saved_s)} at the headline speedup, but your run ends "
        f"near the break-even ({within}): within the speedup's interval it ranges from "
        f"{signed_duration(low)} to {signed_duration(high)}."
    )


def _no_clear_gain(plan: TrainingPlan, compile_words: str, be: str | None) -> str:
    """A run whose headline interval spans 1x: what it gives at the headline speedup, and the
    range its interval allows, which reaches both a loss and a gain: the race cannot tell."""
    ahead = "" if be is None else f"; the race was ahead from {be}, but a longer run cannot count on staying ahead"
    won = plan.saved_s + plan.compile_s  # what the steps themselves gave back over the run
    low, high = plan.saved_ci
    if abs(won) < 0.05 * max(plan.compile_s, 1e-9) and abs(high - low) < 0.05 * max(plan.compile_s, 1e-9):
        return f"compile costs about {duration(plan.saved_s)}: compiled steps are not clearly faster here, so nothing earns {compile_words} back{ahead}"
    does = "saves" if plan.saved_s > 0 else "costs"
    return (
        f"compile {does} about {duration(plan.saved_s)} at the headline speedup, but compiled steps are not "
        f"clearly faster or slower here: within the speedup's interval it ranges from {signed_duration(low)} "
        f"to {signed_duration(high)}, so the race cannot tell whether it pays off{ahead}"
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
            f"({seconds(overhead)} fixed per step, {seconds(per_sample)} per sample), so {overhead_advice}."
        )
    elif share_lo <= 0.5:
        kind = THROUGHPUT_BOUND
        text = (
            f"Bandwidth- or compute-bound from batch {lo:,.0f} to {hi:,.0f}: the eager step grows in "
            f"proportion to the batch ({seconds(per_sample)} per sample, {seconds(overhead)} fixed), so {throughput_advice}."
        )
    else:
        kind = CHANGES
        text = (
            f"Overhead-bound below about batch {crossover:,.0f}, bandwidth- or compute-bound above it: the eager "
            f"step is {seconds(overhead)} fixed plus {seconds(per_sample)} per sample. Below it, {overhead_advice}; above "
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
