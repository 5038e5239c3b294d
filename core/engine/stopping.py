"""Stop when the answer is known: a race with a target interval ends each variant's timed phase once
the steady speedup's 95% interval is within ±target of it.

The looks are fixed before the race (core.engine.intervals.looks: from ADAPTIVE_MIN_STEPS steps per
variant, each half as many again, up to the race's epochs x steps per epoch, which is the maximum),
and the 5% is spent across them (Bonferroni), so the interval reported at the stop keeps its 95%
coverage however many times it was looked at. Paired schedules (blocks, alternating) stop both
variants together on the pair interval. The sequential one stops eager on its own precision
(±target/√2 of its median: if compiled is as steady, the ratio is then known to about ±target) and
compiled on the ratio; its looks are counted for both variants.

The headline interval is never narrower than the device's run-to-run spread (core.engine.intervals.
RunToRun): once the race's own interval is inside that spread, more steps cannot narrow what it
reports, so the race stops there too, and says so, even when the target is narrower.

A first process whose variants run apart (alternating, sequential) in a race that adds replicates
stops at its first look: once a replicate counts, its speedup is shown, not counted
(core.engine.replicates.counted), so more of its steps buy the headline nothing. It has told its
story by then (the compile, a first epoch, the steady step times). Torch-free.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from core.engine import intervals
from core.engine.analysis import default_warmup, steady, steady_state_speedup
from core.engine.replicates import APART_SCHEDULES
from core.engine.spec import RunSpec
from core.engine.summary import Summary


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
    if ran:  # the race added replicate processes until the target or its maximum (core.engine.replicates)
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
