"""The backend ladder: the same race at eager, aot_eager, aot_eager_decomp_partition and inductor, read
as PyTorch's guide to reporting torch.compile issues reads it: at which rung the compile's cost, the
step's change or an error comes in.

Each rung adds one layer to the one below: eager is Dynamo's capture alone (the captured graph runs
op by op), aot_eager adds AOT autograd's tracing of forward and backward, aot_eager_decomp_partition
adds Inductor's decompositions and its forward/backward partition, inductor adds the code generation.
So what a rung adds to the compile is its compile time less the rung below's, and a rung that fails
where the one below ran names the layer the bug is in.

Every figure comes from each rung's race as its Summary holds it (its headline speedup, interval,
verdict and compile cost: the one derivation), and a change per step is claimed only where the rung's
verdict says so: an interval that spans 1x changes nothing. Torch-free and pure.

    ladder_reading([Rung("aot_eager", s1), Rung("inductor", s2)]).text
    'The compile's cost comes in at inductor, and so does the step's change: tracing alone (aot_eager)
     costs 1.20 s and changes nothing per step; Inductor's code generation (inductor) adds 6.10 s and
     gives the 1.30x (1.20-1.40x).'
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from core.engine import words
from core.engine.summary import BUSY, FASTER, NO_CLEAR_DIFFERENCE, SLOWER, Summary

# The rungs, lowest first: each adds one layer of torch.compile to the one below.
LADDER = ("eager", "aot_eager", "aot_eager_decomp_partition", "inductor")
# What a rung's whole compile is, where it is the lowest rung measured, and what it adds to the rung below.
_ALONE = {
    "eager": "capture alone (eager)",
    "aot_eager": "tracing alone (aot_eager)",
    "aot_eager_decomp_partition": "tracing with decompositions and partitioning (aot_eager_decomp_partition)",
    "inductor": "the whole compile (inductor)",
}
_ADDS = {
    "aot_eager": "AOT autograd's tracing (aot_eager)",
    "aot_eager_decomp_partition": "decompositions and partitioning (aot_eager_decomp_partition)",
    "inductor": "Inductor's code generation (inductor)",
}
# Where the bug is when this rung fails and the rungs below it ran (as the reporting guide bisects it).
_BUG = {
    "eager": "the bug is in Dynamo's graph capture, not in AOT autograd or Inductor",
    "aot_eager": "the bug is in AOT autograd, not Inductor",
    "aot_eager_decomp_partition": "the bug is in decompositions/partitioning, not Inductor",
    "inductor": "the bug is in Inductor",
}
# A rung adds compile time only where its compile is longer than the one below by more than this share
# of it (or than what its steps could measure): two cold compiles of one graph are never equal to the ms.
SAME_COMPILE_SHARE = 0.1


@dataclass(frozen=True)
class Rung:
    """One rung's race: its backend, its Summary where it finished (`done`), else its status and error."""

    backend: str
    summary: Summary | None = None
    status: str = "done"
    error: str | None = None


@dataclass(frozen=True)
class LadderReading:
    """What the ladder says: the rung that adds the most compile time (`cost_rung`), the first rung
    whose steps change against the one below (`step_rung`), the lowest rung that fails (`failed_rung`),
    each None where there is none, and the sentence that says it (`text`, one clause per rung)."""

    cost_rung: str | None
    step_rung: str | None
    failed_rung: str | None
    clauses: tuple[str, ...]
    untold: bool = False  # some rung's step could not be told (a busy machine): no "changes nothing" then

    @property
    def text(self) -> str:
        sentence = _head(self) + "; ".join(self.clauses) + "."
        return sentence[0].upper() + sentence[1:]


def _head(r: LadderReading) -> str:
    if r.failed_rung is not None:
        return ""  # the failing rung's clause is the finding
    if r.cost_rung is not None and r.cost_rung == r.step_rung:
        return f"The compile's cost comes in at {r.cost_rung}, and so does the step's change: "
    parts = [f"the compile's cost comes in at {r.cost_rung}" if r.cost_rung else ""]
    if r.step_rung:
        parts.append(f"the step's change at {r.step_rung}")
    else:
        parts.append("where the step changes cannot be told here" if r.untold else "no rung changes the step")
    return ", ".join(p for p in parts if p) + ": "


def first_line(text: str | None) -> str:
    """The first line of an error, as a bug report quotes it."""
    lines = [line.strip() for line in str(text or "").splitlines() if line.strip()]
    return lines[0] if lines else "no reason recorded"


def ladder_reading(rungs: Iterable[Rung]) -> LadderReading | None:
    """Read the rungs (any order, each backend once; backends off the ladder are left out); None
    with fewer than two rungs, where there is no ladder to read."""
    by_backend = {r.backend: r for r in rungs if r.backend in LADDER}
    ordered = [by_backend[b] for b in LADDER if b in by_backend]
    if len(ordered) < 2:
        return None
    clauses: list[str] = []
    cost_rung = step_rung = failed_rung = None
    below_cost: float | None = None  # the compile time of the last rung below that compiled
    below_verdict, below_interval = NO_CLEAR_DIFFERENCE, None  # eager itself: no change
    largest = 0.0
    ran_below = untold = False
    for rung in ordered:
        s = rung.summary
        if s is None:
            if rung.status == "failed":
                clauses.append(f"at {rung.backend} the race itself failed ({first_line(rung.error)}): no reading there")
            else:
                clauses.append(f"{rung.backend} has not finished ({rung.status})")
            continue
        if s.compile_failed:
            if failed_rung is None:
                failed_rung = rung.backend
                bug = (
                    _BUG[rung.backend] if ran_below or rung.backend == "eager" else "the rungs below it would say where"
                )
                clauses.append(f"fails at {rung.backend}: {first_line(s.compile_failed)}: {bug}")
            else:
                clauses.append(f"{rung.backend} fails too")
            continue
        if s.compile_skipped:
            clauses.append(f"at {rung.backend} compile did not happen ({first_line(s.compile_skipped)})")
            continue
        cost = s.compile_time_s if s.compile_time_s is not None else 0.0
        if below_cost is None:
            # 'costs too little to measure here (under 12 ms)' where its compile hid in the steps' noise
            clause = f"{_ALONE[rung.backend]} costs {words.compile_cost(s).replace('too small', 'too little', 1)}"
            added = cost
        else:
            added = cost - below_cost
            noise = max(SAME_COMPILE_SHARE * max(cost, below_cost), s.compile_time_under_s or 0.0)
            if added > noise:
                in_all = f" ({words.seconds(cost)} in all)" if below_cost > 0 else ""
                clause = f"{_ADDS[rung.backend]} adds {words.seconds(added)}{in_all}"
            else:
                clause = f"{_ADDS[rung.backend]} adds no compile time measurable here ({words.compile_cost(s)} in all)"
                added = 0.0
        if added > largest:
            largest, cost_rung = added, rung.backend
        step, changed = _step_words(s, below_verdict, below_interval)
        untold = untold or s.verdict not in (FASTER, SLOWER, NO_CLEAR_DIFFERENCE)
        if changed and step_rung is None:
            step_rung = rung.backend
        clauses.append(f"{clause} and {step}")
        below_cost, ran_below = cost, True
        if s.verdict in (FASTER, SLOWER, NO_CLEAR_DIFFERENCE):
            below_verdict, below_interval = s.verdict, s.speedup_ci95
    return LadderReading(cost_rung, step_rung, failed_rung, tuple(clauses), untold)


def _step_words(s: Summary, below: str, below_interval: tuple[float, float] | None) -> tuple[str, bool]:
    """What this rung does to the step against the rung below, and whether that is a change."""
    if s.verdict == BUSY:  # its figure said, no claim made of it
        read = (
            f": it read {words.speedup_with_range(s.steady_state_speedup, *s.speedup_ci95)}"
            if s.steady_state_speedup is not None and s.speedup_ci95 is not None
            else ""
        )
        return f"its step cannot be told (the machine was busy{read})", False
    if s.steady_state_speedup is None or s.speedup_ci95 is None or s.verdict is None:
        return "has no steady steps to compare", False
    x = words.speedup_with_range(s.steady_state_speedup, *s.speedup_ci95)
    if s.verdict == NO_CLEAR_DIFFERENCE:
        if below in (FASTER, SLOWER):
            return f"loses the step's change ({x}: no clear difference)", True
        return "changes nothing per step", False
    if s.verdict == below:  # faster (or slower) as the rung below: a further change only if the intervals part
        low, high = s.speedup_ci95
        if below_interval is not None and (low > below_interval[1] or high < below_interval[0]):
            return f"moves the step further, to {x}", True
        return f"changes the step no further ({x})", False
    if s.verdict == FASTER:
        return f"gives the {x}", True
    return f"makes the step slower: {x}", True
