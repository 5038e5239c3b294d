"""The speedup's interval, honest from run to run, and when a race may stop because it is known.

Step times are not independent: a machine drifts (heat, clocks, a neighbour's job) and load comes
in bursts lasting many steps, so an interval that resamples single steps describes the noise within
one run, not what a second run would give. Here the unit is a *block* of consecutive steps:

- paired (the variants took turns: the blocks or alternating schedule): block i of eager and block
  i of compiled ran side by side, so each pair's log ratio has the drift of its moment cancelled;
  the interval is Student's t over those pair ratios;
- unpaired (sequential: eager's whole run, then compiled's): each variant's log block medians, and
  the ratio's interval is Welch's t; drift between the two runs cannot be seen in it, which is why
  that schedule is not the default (core.engine.noise says so beside the verdict).

The interval is centred on the headline (ratio of steady medians) and is the width of the block
statistic's. A race that stops once its interval is narrow enough looks at it several times, which
inflates the error rate of the interval it reports; `looks` fixes those points in advance (from a
minimum to a maximum number of steps, growing by half each time) and `look_alpha` spends the 5%
across them (Bonferroni), so the interval reported at the stop still covers the truth 95% of the
time (tests/test_intervals.py simulates it).

Blocks cancel the drift *within* a race, but not what differs between two races: each race is a new
process that compiles, allocates and lays out memory afresh, so a second race of the same
configuration reads a few percent differently however long either ran. `RunToRun` is that spread,
learnt from this device's earlier races of the configuration and shrunk towards an assumed one
while there are few; the headline interval is the wider of the race's own and the run-to-run one,
so it says what a second race would give, not only what more steps of this one would.
Torch-free, numpy only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

ALPHA = 0.05  # a 95% interval
BLOCK_STEPS = 5  # steps per block: the blocks schedule's turn, and the unit the interval resamples
MIN_BLOCKS = 4  # fewer steps than this many blocks: smaller blocks (down to one step)
ADAPTIVE_MIN_STEPS = 40  # a race stopping on its interval runs at least this many steps per variant
LOOK_GROWTH = 1.5  # each look comes after half as many steps again as the one before


def t_quantile(p: float, df: float) -> float:
    """Student's t quantile (scipy-free, any df > 0): Newton's method on the exact CDF, started
    from the Cornish-Fisher expansion about the normal quantile."""
    if df <= 0 or not 0 < p < 1:
        raise ValueError("t_quantile needs df > 0 and 0 < p < 1")
    if p < 0.5:
        return -t_quantile(1 - p, df)
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    z = NormalDist().inv_cdf(p)
    t = z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
    for _ in range(50):
        density = math.exp(
            math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
            - (df + 1) / 2 * math.log1p(t * t / df)
        )  # fmt: skip
        step = (t_cdf(t, df) - p) / density
        t -= step
        if abs(step) < 1e-10 * max(1.0, abs(t)):
            break
    return t


def t_cdf(t: float, df: float) -> float:
    """Student's t CDF through the regularized incomplete beta function."""
    tail = 0.5 * _incomplete_beta(df / 2, 0.5, df / (df + t * t))
    return 1 - tail if t > 0 else tail


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b) by its continued fraction (Lentz's method), using the symmetry where it converges."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x > (a + 1) / (a + b + 2):
        return 1 - _incomplete_beta(b, a, 1 - x)
    tiny, c, d = 1e-300, 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    f = d
    for m in range(1, 300):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            f *= c * d
        if abs(c * d - 1) < 1e-14:
            break
    return front * f / a


def block_size(n: int, block: int = BLOCK_STEPS) -> int:
    """Steps per block for n steady steps: `block`, smaller when that leaves fewer than MIN_BLOCKS."""
    return max(1, min(block, n // MIN_BLOCKS))


def log_block_medians(times: Sequence[float], size: int) -> np.ndarray:
    """log(median) of each whole block of `size` consecutive steps (a short tail block is dropped)."""
    x = np.asarray(times, dtype=float)
    whole = len(x) // size
    if whole == 0:
        return np.array([])
    return np.log(np.maximum(np.median(x[: whole * size].reshape(whole, size), axis=1), 1e-12))


def log_half_width(
    eager: Sequence[float], compiled: Sequence[float], paired: bool, alpha: float = ALPHA, block: int = BLOCK_STEPS
) -> float | None:
    """The half-width, in log ratio, of the (1 - alpha) interval of eager/compiled from blocks of
    steady steps; None when there are too few blocks to say (under two pairs or two per variant)."""
    size = block_size(min(len(eager), len(compiled)), block)
    e, c = log_block_medians(eager, size), log_block_medians(compiled, size)
    q = 1 - alpha / 2
    if paired:
        n = min(len(e), len(c))
        if n < 2:
            return None
        d = e[:n] - c[:n]
        return t_quantile(q, n - 1) * float(np.std(d, ddof=1)) / math.sqrt(n)
    if len(e) < 2 or len(c) < 2:
        return None
    ve, vc = float(np.var(e, ddof=1)) / len(e), float(np.var(c, ddof=1)) / len(c)
    se = math.sqrt(ve + vc)
    if se == 0:
        return 0.0
    df = (ve + vc) ** 2 / (ve**2 / (len(e) - 1) + vc**2 / (len(c) - 1))  # Welch-Satterthwaite
    return t_quantile(q, df) * se


def interval(point: float, half_width: float) -> tuple[float, float]:
    """The interval around a ratio from its log half-width."""
    return point * math.exp(-half_width), point * math.exp(half_width)


def looks(max_steps: int, min_steps: int = ADAPTIVE_MIN_STEPS, block: int = BLOCK_STEPS) -> tuple[int, ...]:
    """The fixed step counts (per variant) at which a race stopping on its interval looks at it:
    from min_steps, each half as many again, whole blocks, and the maximum last. Fixed before the
    race, so the number of looks (what the error rate is spent over) is known in advance."""
    if max_steps <= min_steps:
        return (max_steps,)
    points, n = [], float(min_steps)
    while n < max_steps:
        step = int(math.ceil(n / block) * block)
        if step < max_steps and (not points or step > points[-1]):
            points.append(step)
        n *= LOOK_GROWTH
    return (*points, max_steps)


def look_alpha(number_of_looks: int, alpha: float = ALPHA) -> float:
    """Each look's error rate, so that all of them together stay within alpha (Bonferroni)."""
    return alpha / max(1, number_of_looks)


def known_within(half_width: float | None, target: float) -> bool:
    """Whether a log half-width means the ratio is known to within ±target (both ends inside)."""
    return half_width is not None and math.exp(half_width) - 1 <= target


def relative_half_width(half_width: float) -> float:
    """A log half-width as the ± fraction a person reads (the wider, upper side)."""
    return math.exp(half_width) - 1


def own_log_half_width(times: Sequence[float], alpha: float = ALPHA, block: int = BLOCK_STEPS) -> float | None:
    """One variant's own precision: the half-width, in log, of its blocks' mean log median (what
    decides eager's length in a sequential race that stops on its interval)."""
    logs = log_block_medians(times, block_size(len(times), block))
    if len(logs) < 2:
        return None
    return t_quantile(1 - alpha / 2, len(logs) - 1) * float(np.std(logs, ddof=1)) / math.sqrt(len(logs))


# The run-to-run spread assumed before this device has raced a configuration twice: a log-ratio
# standard deviation of 3%, about what a small CPU demo's races spread, each a fresh worker process
# with fixed malloc thresholds (docs/benchmarks.md#steady_mallocpy). It counts as PRIOR_RACES races' worth
# of evidence: each repeated race here moves the spread towards what the device shows
# (core.runs.run_to_run).
ASSUMED_LOG_SD = 0.03
PRIOR_RACES = 4


@dataclass(frozen=True)
class RunToRun:
    """How far one race's steady speedup lands from the next race's of the same configuration on the
    same device: a log standard deviation, its degrees of freedom, and how many earlier races on
    this device it rests on (0: the assumed spread alone)."""

    log_sd: float
    df: float
    races: int = 0

    def log_half_width(self, alpha: float = ALPHA) -> float:
        return t_quantile(1 - alpha / 2, self.df) * self.log_sd

    def to_dict(self) -> dict[str, Any]:
        return {"log_sd": self.log_sd, "df": self.df, "races": self.races}

    @classmethod
    def from_dict(cls, data: Any) -> RunToRun | None:
        """The spread a stored run was measured with; None for a run stored before there was one."""
        if not isinstance(data, dict):
            return None
        try:
            sd, df, races = float(data["log_sd"]), float(data["df"]), int(data.get("races", 0))
        except (KeyError, TypeError, ValueError):
            return None
        return cls(sd, df, races) if sd >= 0 and df > 0 and races >= 0 else None


ASSUMED = RunToRun(ASSUMED_LOG_SD, PRIOR_RACES, 0)


def run_to_run(groups: Sequence[Sequence[float]], prior: RunToRun = ASSUMED) -> RunToRun:
    """The spread from earlier races' log speedups, one group per configuration (a group of one
    race says nothing about spread), pooled with the prior as if it were `prior.df` races' worth of
    sample variance. Pooled over configurations: a device's spread is learnt from every
    configuration raced on it twice or more, not only from this one."""
    squares, df, races = 0.0, 0, 0
    for group in groups:
        x = np.asarray([v for v in group if math.isfinite(v)], dtype=float)
        if len(x) >= 2:
            squares += float(np.sum((x - x.mean()) ** 2))
            df += len(x) - 1
            races += len(x)
    if df == 0:
        return prior  # nothing raced twice: the prior as it stands
    variance = (prior.df * prior.log_sd**2 + squares) / (prior.df + df)
    return RunToRun(math.sqrt(variance), prior.df + df, races)


def headline_half_width(within: float | None, spread: RunToRun | None) -> float | None:
    """The headline interval's log half-width: the wider of the race's own (`within`, from its
    blocks) and the run-to-run spread's 95% (None: the race's own alone, as stored runs before the
    spread was kept). Taking the wider, not a sum: the spread between races already holds each
    race's own noise."""
    if within is None or spread is None:
        return within
    return max(within, spread.log_half_width(ALPHA))
