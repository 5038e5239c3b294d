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
from collections.abc import Mapping
from typing import Any

from core.engine.intervals import ALPHA
from core.engine.summary import NEVER, NO_COMPILE, NO_GAIN, NO_VERDICT, NOT_REACHED, PROJECTED, REACHED, Summary

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
