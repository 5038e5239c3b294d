"""The reading: one sentence a person can repeat about a race (is compile worth it here?), with
what qualifies it: why the race stopped, the run-to-run spread its interval was widened to, and the
drift or load seen meanwhile. `reading(summary, live=...)` is the one every surface calls (the live
words, the finished reading, the CLI, a bundle, presenter mode and the feed), built from a summary
(core.engine.summary) alone with the numbers in core.engine.words' words. Pure functions; a
summary's reading is derived, never stored.

Words about a race in progress never claim a final outcome ("has not paid off yet").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.engine import intervals, words
from core.engine.intervals import busy_steps_words
from core.engine.spec import OPTIONS
from core.engine.summary import BUSY, NO_CLEAR_DIFFERENCE, PROJECTED, REACHED, SLOWER, Summary


def compile_failed_reading(reason: str) -> str:
    """What a run whose compile failed found, in the words every view uses."""
    return f"Compile failed on this model: {reason}; eager ran."


def compile_skipped_reading(reason: str, speedup: float | None = None) -> str:
    """What a run whose compiled variant compiled nothing found: no compile speedup to speak of."""
    ratio = f" {words.speedup(speedup)}" if speedup is not None else ""
    return (
        f"Compile did not happen: {reason}. Both variants ran eager code, so the{ratio} "
        "ratio between them is not a compile speedup."
    )


def reading(
    summary: Summary | Mapping[str, Any],
    live: bool = False,
    total: int | None = None,
    counts: Mapping[str, int] | None = None,
) -> str:
    """One sentence on what the race says. Finished (`live` False): the final reading, with its
    graph breaks and caveats. Live: what it says so far, on which steps (`counts`, the steps each
    variant has recorded; `total`, each variant's steps), never a verdict the rest of the run could
    overturn."""
    s = Summary.of(summary)
    if s.compile_failed:
        return compile_failed_reading(s.compile_failed)
    if s.compile_skipped:  # no compile: say so, whatever the timings say
        return compile_skipped_reading(s.compile_skipped, s.steady_state_speedup)
    if live:
        return _live_reading(s, total, counts or {})
    return _verdict(s) + _graph_breaks(s) + caveats(s)


def _verdict(s: Summary) -> str:
    if s.steady_state_speedup is None:
        return "Not enough steps finished in both variants to compare them."
    x, interval = words.speedup(s.steady_state_speedup), words.interval(s)
    cost = compile_words(s)
    state = s.break_even
    if s.verdict == BUSY:
        return (
            f"The machine was busy during {busy_processes(s) or 'the race'}: other work had the race's cores, "
            f"so {x} ({interval}) is no verdict on this model. Run it again when the machine is quieter."
        )
    if s.verdict == SLOWER:
        return (
            f"Compiled steps are slower here ({x}, {interval}){cost}: "
            "compile does not pay off for this model on this device."
        )
    if s.verdict in (NO_CLEAR_DIFFERENCE, None):
        return f"No clear difference per step ({x}, {interval}){cost}: compile costs time here and gains none you can measure."
    faster = f"Compiled steps are {x} faster ({interval}){cost}"
    if state == REACHED:
        return f"{faster}; compile paid for itself at {words.break_even(s)}."
    later = ""
    if state == PROJECTED:
        later = f"; at these rates it would at about step {words.step_at(s.projected_position):,}"
        if s.projected_range is not None:  # the steps its interval allows, as the live words and the card give them
            later += f" ({words.steps_range(s.projected_range, None, live=False)} within its 95% interval)"
    return f"{faster}, but compile did not pay off within this run{later}."


def _graph_breaks(s: Summary) -> str:
    """A model split by graph breaks: the breaks are part of the finding."""
    if not s.graph_breaks or s.graph_breaks < 0:
        return ""
    pieces = f" into {s.graphs} graphs" if s.graphs is not None and s.graphs > 1 else ""
    return f" torch.compile split this model{pieces} at {words.count(s.graph_breaks, 'graph break')}."


def _live_reading(s: Summary, total: int | None, counts: Mapping[str, int]) -> str:
    if s.steady_state_speedup is None:
        return "Not enough compiled steps yet to compare the two."
    x, interval = words.speedup(s.steady_state_speedup), words.interval(s)
    where, later = rests_on(s, counts, total)
    if s.replicates:  # the first process is done: replicates land one by one
        later = f"{later}{processes_note(s)} More replicate processes may follow."
    if s.verdict == BUSY:
        return f"{where}: the machine is busy ({x} so far, {interval}), so no verdict yet.{later}"
    if s.verdict == SLOWER:
        return f"{where}: compiled steps are slower ({x}, {interval}); compile is not paying off here.{later}"
    if s.verdict in (NO_CLEAR_DIFFERENCE, None):
        return f"{where}: no clear difference per step yet ({x}, {interval}), so no break-even to project.{later}"
    faster = f"{where}: compiled steps are {x} faster ({interval})"
    if s.break_even == REACHED:
        return f"{faster}; compiled has been ahead since step {s.break_even_step:,}.{later}"
    if s.projected_range is not None:  # the one projection rule, as the range its interval allows
        shown = words.steps_range(s.projected_range, total, live=True)
        return f"{faster}; compile has not paid off yet: at these rates it breaks even {shown}.{later}"
    projected = words.projected_step(s.projected_position, total, live=True)
    return f"{faster}; compile has not paid off yet" + (f", {projected}." if projected else ".") + later


def rests_on(summary: Summary | Mapping[str, Any], counts: Mapping[str, int], total: int | None) -> tuple[str, str]:
    """Which steps a live reading stands on, and what waits: 'After 200 of 600 compiled steps and 200
    eager', and, while eager's next turn has no compiled steps to meet it yet (alternating, blocks;
    store_reader.held_events), ' Eager's 57 newer steps count once compiled steps meet them.'"""
    done = counts.get("compiled")
    if not done:
        return "So far", ""
    where = f"After {words.of_total(done, total).replace('step ', '')} compiled steps"
    held = Summary.of(summary).eager_step_times_s
    if not held:
        return where, ""
    eager = f"all {len(held):,}" if total and len(held) >= total else f"{len(held):,}"
    waiting = counts.get("eager", 0) - len(held)
    many = waiting != 1
    later = (
        f" Eager's {waiting:,} newer step{'s count' if many else ' counts'} once compiled steps meet "
        f"{'them' if many else 'it'}."
        if waiting > 0
        else ""
    )
    return f"{where} and {eager} eager", later


def caveats(summary: Summary | Mapping[str, Any]) -> str:
    """What the reading adds after the verdict: why the race stopped when it did (a race with a
    target interval) and the drift or load that may make its interval too narrow (core.engine.intervals)."""
    s = Summary.of(summary)
    if s.steady_state_speedup is None or not s.compiled:
        return ""  # no verdict on a speedup to qualify
    out = f" {s.stop_reason}" if s.stop_reason else ""
    out += processes_note(s) if s.replicates else spread_note(s)
    out += busy_note(s)
    for warning in s.noise_warnings:
        if warning and not (s.verdict == BUSY and "busy" in warning):  # the verdict says it already
            out += f" Note: {warning}."
    return out + conditions_note(s.conditions)


def compile_words(summary: Summary | Mapping[str, Any]) -> str:
    """' after 9.5 s of compilation', or where compiled's first steps were not measurably slower than
    its steady ones, ' after a compile too small to measure here (under 12 ms)'; '' where unknown."""
    s = Summary.of(summary)
    cost = words.compile_cost(s)
    if s.compile_time_s is None and s.compile_time_under_s is None:
        return ""
    return f" after {cost} of compilation" if s.compile_time_s is not None else f" after a compile {cost}"


def counted_processes(summary: Summary | Mapping[str, Any]) -> list[intervals.ProcessResult]:
    """The race's processes whose speedups the headline rests on (core.engine.intervals), in order."""
    s = Summary.of(summary)
    first = intervals.ProcessResult.from_dict(s.first_process)
    return intervals.counted(([first] if first else []) + intervals.processes_of(list(s.replicates)))


def processes_note(summary: Summary | Mapping[str, Any]) -> str:
    """What the interval rests on when the race ran replicates: ' It rests on 5 processes (1.29x to
    1.36x each; the run-to-run spread assumed here as a prior).'"""
    s = Summary.of(summary)
    counted = counted_processes(s)
    if not counted:
        return ""
    speedups = [p.speedup for p in counted]
    low, high = words.speedup(min(speedups)), words.speedup(max(speedups))
    each = ""
    if len(counted) > 1:
        each = f"{low} each" if low == high else f"{low} to {high} each"  # alike once rounded: said once
    spread = intervals.RunToRun.from_dict(s.run_to_run)
    prior = ""
    if spread is not None:
        learnt = f"learnt from {words.count(spread.races, 'race')} here" if spread.races else "assumed here"
        prior = f"the run-to-run spread {learnt} as a prior"
    inside = "; ".join(part for part in (each, prior) if part)
    failed = [p.error for p in intervals.processes_of(list(s.replicates)) if p.error]
    ended = f" Then {failed[-1][0].lower()}{failed[-1][1:]}." if failed else ""  # the replicate that ended them
    # Where the first process did not count (busy, or failed), the ones that did are all replicates:
    # said, so the busy note after it ("the first process ... does not count") reads as one account.
    kind = "" if any(p.number == 1 for p in counted) else "replicate "
    return (
        f" It rests on {words.count(len(counted), kind + 'process', kind + 'processes')}"
        + (f" ({inside})." if inside else ".")
        + apart_note(s, counted)
        + ended
    )


def apart_note(summary: Summary, counted: list[intervals.ProcessResult]) -> str:
    """Why a first process that counts is not among the processes the headline rests on: its
    variants ran apart (core.engine.intervals.counted); '' otherwise."""
    first = intervals.ProcessResult.from_dict(summary.first_process)
    if first is None or not first.counts or first.apart is None or any(p.number == 1 for p in counted):
        return ""
    how = OPTIONS["schedule"].choice_labels.get(first.apart, first.apart)
    turn = intervals.REPLICATE_TURN_STEPS
    every = "step" if turn == 1 else words.count(turn, "step")
    return (
        f" The first process ({words.speedup(first.speedup)}) is shown, not counted: its variants ran apart"
        f" ({how}), so drift between their stretches fell on one and not the other, where the replicates'"
        f" took turns every {every}."
    )


def busy_processes(summary: Summary | Mapping[str, Any]) -> str:
    """'the first process (eager's steps 41-80) and replicate 3': the processes a busy machine
    touched (core.engine.intervals), in words; '' where none."""
    s = Summary.of(summary)
    first = intervals.ProcessResult.from_dict(s.first_process)
    parts = []
    if first is not None and first.was_busy:
        steps = busy_steps_words(first.busy)
        parts.append("the first process" + (f" ({steps})" if steps else ""))
    numbers = [str(p.number - 1) for p in intervals.processes_of(list(s.replicates)) if p.was_busy]
    if numbers:
        parts.append(f"replicate{'s' if len(numbers) > 1 else ''} {', '.join(numbers)}")
    return " and ".join(parts)


def busy_note(summary: Summary | Mapping[str, Any]) -> str:
    """Which processes a busy machine touched, where some did and the others still give a verdict:
    those do not count (a race whose every process was busy says so in its verdict)."""
    s = Summary.of(summary)
    busy = busy_processes(s)
    if not busy or s.verdict == BUSY:
        return ""
    return (
        f" The machine was busy during {busy}: {'they do' if ' and ' in busy or ', ' in busy else 'it does'} not count."
    )


def conditions_note(conditions: Any) -> str:
    """What shaped the number besides the model: ' Measured on 1 of this machine's 2 cores, 1
    thread.', and what this race's process had that a standard race here has not
    (core.runs.race_conditions)."""
    if not isinstance(conditions, Mapping):
        return ""
    total, cores, threads = conditions.get("machine_cores"), conditions.get("cores"), conditions.get("threads")
    if not isinstance(total, int) or total < 1:
        return ""
    if total == 1:
        on = "on this machine's one core"
    elif isinstance(cores, list):
        on = f"on {len(cores)} of this machine's {total} cores"
    else:
        on = f"on {total} cores, unpinned"
    threads = f", {words.count(threads, 'thread')}" if isinstance(threads, int) else ""
    differs = [d for d in conditions.get("differs") or [] if isinstance(d, str)]
    other = f" Unlike a standard race here: {'; '.join(differs)}." if differs else ""
    if conditions.get("device", "cpu") != "cpu":  # a GPU race: its cores are the host thread's, not the number's
        return other
    return f" Measured {on}{threads}.{other}"


def spread_note(summary: Summary | Mapping[str, Any]) -> str:
    """What the reading says when the interval was widened to the run-to-run spread: how wide, where
    the spread comes from, and what this race alone would have said ("" when it was not widened)."""
    s = Summary.of(summary)
    spread = intervals.RunToRun.from_dict(s.run_to_run)
    if spread is None or not words.widened_to_spread(s):
        return ""
    source = f"learnt from {spread.races} races here" if spread.races else "assumed until a configuration has run twice"
    half = words.percent(intervals.relative_half_width(spread.log_half_width()))
    return (
        f" The interval allows for ±{half} from run to run here ({source}); this race alone: "
        f"{words.speedup_range(*s.speedup_ci95_within)}."
    )
