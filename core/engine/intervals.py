"""The statistics of a race's speedup: its 95% interval, honest from run to run; the replicate
processes that measure the spread between processes inside the race and combine into the headline;
and the drift and load that may make an interval too narrow, said beside the verdict.

Step times are not independent (a machine drifts, load comes in bursts lasting many steps), so the
interval's unit is a block of consecutive steps; and a second process of the same race lands a few
percent away from the first however long either ran, so a race measures that spread with replicate
processes instead of assuming it. Pure functions, no torch.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from statistics import NormalDist, median
from typing import Any

import numpy as np

# ----------------------------------------------------------------------
# The speedup's interval, honest from run to run, and when a race may stop because it is known.
#
# Step times are not independent: a machine drifts (heat, clocks, a neighbour's job) and load comes
# in bursts lasting many steps, so an interval that resamples single steps describes the noise within
# one run, not what a second run would give. Here the unit is a *block* of consecutive steps:
#
# - paired (the variants took turns: the blocks or alternating schedule): block i of eager and block
#   i of compiled ran side by side, so each pair's log ratio has the drift of its moment cancelled;
#   the interval is Student's t over those pair ratios;
# - unpaired (sequential: eager's whole run, then compiled's): each variant's log block medians, and
#   the ratio's interval is Welch's t; drift between the two runs cannot be seen in it, which is why
#   that schedule is not the default (core.engine.intervals says so beside the verdict).
#
# The interval is centred on the headline (ratio of steady medians) and is the width of the block
# statistic's. A race that stops once its interval is narrow enough looks at it several times, which
# inflates the error rate of the interval it reports; `looks` fixes those points in advance (from a
# minimum to a maximum number of steps, growing by half each time) and `look_alpha` spends the 5%
# across them (Bonferroni), so the interval reported at the stop still covers the truth 95% of the
# time (tests/test_intervals.py simulates it).
#
# Blocks cancel the drift *within* a race, but not what differs between two races: each race is a new
# process that compiles, allocates and lays out memory afresh, so a second race of the same
# configuration reads a few percent differently however long either ran. `RunToRun` is that spread,
# learnt from this device's earlier races of the configuration and shrunk towards an assumed one
# while there are few; the headline interval is the wider of the race's own and the run-to-run one,
# so it says what a second race would give, not only what more steps of this one would.
# Torch-free, numpy only.

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
# (core.runs.device_history).
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


# ----------------------------------------------------------------------
# Drift and load seen during a race, said beside the verdict when they may make its interval too narrow.
#
# An interval can only describe the noise it saw. Steps that drift (a machine warming up, clocks
# changing) or a machine busy with other work during part of the race move a variant's times in a
# way one run cannot tell from a real difference, above all when the variants ran one after the
# other. These are plain sentences the reading carries ("the machine was busy during eager's epoch 2
# (load 3.4 on 2 cores): this interval may be too narrow"); the numbers stay as measured.
# Torch-free.

DRIFT = 0.15  # a variant's last third of steady steps this much slower or faster than its first
BUSY_MARGIN = 0.5  # load above the machine's cores by this much: something else wants them too
TOO_NARROW = "this interval may be too narrow"
# A block of timed steps during which the race's threads waited for a core (on a run queue, while
# they could have run) this share of its time ran on a busy machine: some other process had the
# core. And a process with more than BUSY_STEPS_SHARE of its steady steps busy gives no verdict.
BUSY_WAIT = 0.10
BUSY_STEPS_SHARE = 0.10


def drift_warnings(eager: Sequence[float], compiled: Sequence[float], paired: bool) -> list[str]:
    """A sentence per variant whose steady steps drifted by more than DRIFT from first to last third,
    when the variants ran one after the other (when they took turns, each pair of blocks shares its
    moment's drift and the paired interval carries what is left: nothing to warn of)."""
    out: list[str] = []
    if paired:
        return out
    for name, times in (("eager", eager), ("compiled", compiled)):
        third = len(times) // 3
        if third < 2:
            continue
        first, last = median(times[:third]), median(times[-third:])
        if first <= 0 or abs(last / first - 1) <= DRIFT:
            continue
        moved = f"{name}'s steps drifted from {first * 1e3:.3g} ms to {last * 1e3:.3g} ms during the race"
        out.append(f"{moved}, and eager and compiled ran one after the other: {TOO_NARROW}")
    return out


def load_sample(started_wall: float, started_cpu: float) -> dict[str, Any]:
    """What the machine was doing over a stretch of a race that began at (started_wall, started_cpu)
    (time.perf_counter, time.process_time): the 1-minute load average at its end, the cores, and
    the CPU seconds this process got per wall second."""
    wall = time.perf_counter() - started_wall
    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):  # not on every platform
        load = None
    cpu_share = (time.process_time() - started_cpu) / wall if wall > 0 else None
    return {"load": load, "cores": os.cpu_count() or 1, "cpu_share": cpu_share}


def load_warnings(samples: Sequence[dict[str, Any]]) -> list[str]:
    """One sentence on the epochs during which the machine was busy (samples: one per variant and
    epoch, each with variant, epoch, load and cores), or none."""
    busy = [
        s for s in samples if isinstance(s.get("load"), int | float) and s["load"] > (s.get("cores") or 1) + BUSY_MARGIN
    ]
    if not busy:
        return []
    peak = max(busy, key=lambda s: s["load"])
    load = f"load up to {peak['load']:.1f} on {peak['cores']} core{'s' if peak['cores'] != 1 else ''}"
    if len(busy) == len(samples):
        where = "throughout the race"
    else:
        parts = []
        for name in ("eager", "compiled"):
            epochs = [str(s["epoch"]) for s in busy if s.get("variant") == name]
            if epochs:
                parts.append(f"{name}'s epoch{'s' if len(epochs) > 1 else ''} {', '.join(epochs)}")
        where = "during " + " and ".join(parts)
    return [f"the machine was busy {where} ({load}): {TOO_NARROW}"]


def run_queue_wait_s() -> float | None:
    """Seconds this process's threads have spent waiting on a run queue so far: runnable, but a
    core was running something else (Linux's /proc/self/task/*/schedstat, second field, in ns).
    None where the kernel does not keep it."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    total, read = 0, False
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/schedstat") as fh:
                total += int(fh.read().split()[1])
                read = True
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
    return total / 1e9 if read else None


class BusyWatch:
    """The share of a stretch of timed steps that the race's threads spent waiting for a core, by
    run-queue delay: 0 on a machine that gives the race its cores, up to 1 and more (several
    threads) when other work has them. Read between steps, never inside a step's clock."""

    def __init__(self, threads: int = 1):
        self.threads = max(1, threads)
        self._wall = 0.0
        self._wait: float | None = None

    def start(self) -> None:
        self._wall, self._wait = time.perf_counter(), run_queue_wait_s()

    def share(self) -> float | None:
        """The share since start() (and start again); None where the kernel cannot say."""
        wall, wait = time.perf_counter(), run_queue_wait_s()
        before, self._wall, self._wait = (self._wall, self._wait), wall, wait
        if wait is None or before[1] is None or wall <= before[0]:
            return None
        return max(wait - before[1], 0.0) / ((wall - before[0]) * self.threads)


def busy_share(busy_steps: Sequence[int], steady_from: int, steps: int) -> float:
    """The share of a variant's steady steps (steady_from + 1 .. steps, 1-based) that ran busy."""
    steady = steps - steady_from
    if steady <= 0:
        return 0.0
    return sum(1 for s in busy_steps if steady_from < s <= steps) / steady


def busy_steps_words(busy: dict[str, Sequence[Sequence[int]]]) -> str:
    """ "eager's steps 41-80 and compiled's step 3": the steps a busy machine touched, per variant."""
    parts = []
    for name in ("eager", "compiled"):
        ranges = [f"{a:,}" if a == b else f"{a:,}-{b:,}" for a, b in busy.get(name) or []]
        if ranges:
            many = len(ranges) > 1 or "-" in ranges[0]
            shown = ", ".join(ranges[:4]) + (f" and {len(ranges) - 4} more stretches" if len(ranges) > 4 else "")
            parts.append(f"{name}'s step{'s' if many else ''} {shown}")
    return " and ".join(parts)


# ----------------------------------------------------------------------
# One race, several processes: the run-to-run spread measured inside the race, not assumed.
#
# A second process of the same race lands a few percent away from the first however long either ran:
# it compiles, allocates and lays out memory afresh (on a GPU, autotuning and cuDNN may pick other
# kernels). No interval built from one process's steps can see that, so a race measures it, as pyperf
# spreads its samples over worker processes: after the first process (the cold compile, the first
# epoch, the break-even: the story), short *replicate* processes each run both variants from the warm
# compile cache, taking turns in blocks (core.engine.trainer), and the headline speedup is the
# mean of the processes' log speedups.
#
# Its interval comes from the spread between the processes (each process's own noise is inside that
# spread), pooled with the run-to-run spread the store learnt earlier (core.runs.device_history; assumed
# on a fresh box) as a prior worth `prior.df` processes: more replicates outweigh it, and it is never
# a floor. From five processes on it is at least Student's t from the processes alone, so a device
# spreading more than the prior says is not hidden by it for long (tests/test_replicates.py: with an
# empty store, a device spreading twice the assumed spread is covered 95% of the time from five
# processes; with three, about 89%, until the store has learnt its spread). A process the machine was busy during (core.engine.intervals) is kept and shown, but
# counts for nothing. With a target interval the race adds replicates until the interval is within
# it or the maximum is reached. Torch-free.

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
    block = BLOCK_STEPS
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


def combine(processes: Sequence[ProcessResult], prior: RunToRun | None, alpha: float = ALPHA) -> Combined | None:
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
        half = max(half, t_quantile(1 - ALPHA / 2, df) * sd / math.sqrt(n))
    if n >= STUDENT_FROM:
        alone = math.sqrt(squares / (n - 1))
        half = max(half, t_quantile(1 - ALPHA / 2, n - 1) * alone / math.sqrt(n))
    point = used[0].speedup if n == 1 else math.exp(mean)
    low, high = interval(point, half)
    return Combined(point, low, high, n, sd, df)


def known(combined: Combined | None, target: float) -> bool:
    """Whether the headline is known to within ±target (both ends inside)."""
    return combined is not None and known_within(combined.log_half, target)


def more_wanted(
    processes: Sequence[ProcessResult],
    prior: RunToRun | None,
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
