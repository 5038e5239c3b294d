"""The reading: one sentence a person can repeat about a race (is compile worth it here?), with
what qualifies it: why the race stopped, the run-to-run spread its interval was widened to, and the
drift or load seen meanwhile. Built from a summary (core.engine.analysis) alone, so the CLI, the
pages and an imported bundle say the same words. Pure functions."""

from __future__ import annotations

import math
from typing import Any

from core.engine import intervals, replicates
from core.engine.analysis import BUSY, NO_CLEAR_DIFFERENCE, SLOWER, projected_position, projected_range
from core.engine.interval_words import interval_words
from core.engine.noise import busy_steps_words


def compile_failed_reading(reason: str) -> str:
    """What a run whose compile failed found, in the words every view uses."""
    return f"Compile failed on this model: {reason}; eager ran."


def plain_reading(summary: dict[str, Any]) -> str:
    """One sentence a person can repeat: is compile worth it for this run? A model split by graph
    breaks gets a second sentence saying so: the breaks are part of the finding."""
    reading = _headline_reading(summary)
    breaks, graphs = summary.get("graph_breaks"), summary.get("graphs")
    if isinstance(breaks, int) and breaks > 0 and not summary.get("compile_failed"):
        pieces = f" into {graphs} graphs" if isinstance(graphs, int) and graphs > 1 else ""
        reading += f" torch.compile split this model{pieces} at {breaks} graph break{'s' if breaks > 1 else ''}."
    return reading + caveats(summary)


def caveats(summary: dict[str, Any]) -> str:
    """What the reading adds after the verdict: why the race stopped when it did (a race with a
    target interval) and the drift or load that may make its interval too narrow (core.engine.noise)."""
    out = ""
    if summary.get("steady_state_speedup") is None or summary.get("compile_failed") or summary.get("compile_skipped"):
        return out  # no verdict on a speedup to qualify
    stop = summary.get("stop_reason")
    if isinstance(stop, str) and stop:
        out += " " + stop
    out += processes_note(summary) if replicates.processes_of(summary) else spread_note(summary)
    out += busy_note(summary)
    for warning in summary.get("noise_warnings") or []:
        if isinstance(warning, str) and warning and not (summary.get("verdict") == BUSY and "busy" in warning):
            out += f" Note: {warning}."
    return out + conditions_note(summary.get("conditions"))


def processes_note(summary: dict[str, Any]) -> str:
    """What the interval rests on when the race ran replicates: ' It rests on 5 processes (1.29x to
    1.36x; the spread assumed here as a prior).' (core.engine.replicates)."""
    counted = _counted(summary)
    if not counted:
        return ""
    low, high = min(p.speedup for p in counted), max(p.speedup for p in counted)
    each = f"{low:.2f}x to {high:.2f}x" if len(counted) > 1 else f"{low:.2f}x"
    spread = intervals.RunToRun.from_dict(summary.get("run_to_run"))
    prior = ""
    if spread is not None:
        learnt = f"learnt from {spread.races} races here" if spread.races else "assumed here"
        prior = f"; the run-to-run spread {learnt} as a prior"
    many = len(counted) != 1
    return f" It rests on {len(counted)} process{'es' if many else ''} ({each}{prior})."


def _counted(summary: dict[str, Any]) -> list[replicates.ProcessResult]:
    first = replicates.ProcessResult.from_dict(summary.get("first_process"))
    return [p for p in ([first] if first else []) + replicates.processes_of(summary) if p.counts]


def busy_note(summary: dict[str, Any]) -> str:
    """Which processes and steps a busy machine touched (core.engine.noise), when some did; a race
    whose every process was busy gives no verdict (the headline says so instead)."""
    busy = _busy_processes(summary)
    if not busy or summary.get("verdict") == BUSY:
        return ""
    return f" The machine was busy during {busy}, which {'does' if ' and ' not in busy else 'do'} not count."


def _busy_processes(summary: dict[str, Any]) -> str:
    """'the first process (eager's steps 41-80) and replicate 3': the busy processes in words."""
    first = replicates.ProcessResult.from_dict(summary.get("first_process"))
    parts = []
    if first is not None and first.was_busy:
        steps = busy_steps_words(first.busy)
        parts.append("the first process" + (f" ({steps})" if steps else ""))
    numbers = [p.number - 1 for p in replicates.processes_of(summary) if p.was_busy]
    if numbers:
        parts.append(f"replicate{'s' if len(numbers) > 1 else ''} {', '.join(map(str, numbers))}")
    return " and ".join(parts)


def conditions_note(conditions: Any) -> str:
    """What shaped the number besides the model: ' Measured on 1 of this machine's 2 cores, 1
    thread.', and what this race's process had that a standard race here has not
    (core.runs.race_conditions)."""
    if not isinstance(conditions, dict):
        return ""
    total, cores, threads = conditions.get("machine_cores"), conditions.get("cores"), conditions.get("threads")
    if not isinstance(total, int):
        return ""
    on = (
        f"on {len(cores)} of this machine's {total} cores" if isinstance(cores, list) else f"on {total} cores, unpinned"
    )
    if total == 1:
        on = "on this machine's one core"
    threads = f", {threads} thread{'s' if threads != 1 else ''}" if isinstance(threads, int) else ""
    differs = [d for d in conditions.get("differs") or [] if isinstance(d, str)]
    other = f" Unlike a standard race here: {'; '.join(differs)}." if differs else ""
    return f" Measured {on}{threads}.{other}"


def spread_note(summary: dict[str, Any]) -> str:
    """What the reading says when the interval was widened to the run-to-run spread: how wide, where
    the spread comes from, and what this race alone would have said ("" when it was not widened)."""
    spread = intervals.RunToRun.from_dict(summary.get("run_to_run"))
    within, ci = summary.get("speedup_ci95_within"), summary.get("speedup_ci95")
    if spread is None or not within or not ci or ci[1] <= within[1] * (1 + 1e-9):
        return ""
    source = f"learnt from {spread.races} races here" if spread.races else "assumed until a configuration has run twice"
    return (
        f" The interval allows for ±{intervals.relative_half_width(spread.log_half_width()):.0%} from run to run "
        f"here ({source}); this race alone: {within[0]:.2f}-{within[1]:.2f}x."
    )


def compile_words(summary: dict[str, Any]) -> str:
    """' after 9.5 s of compilation', or where compiled's first steps are not measurably slower than
    its steady ones, ' after a compile too small to measure here (under 12 ms)'."""
    compile_s, under = summary.get("compile_time_s"), summary.get("compile_time_under_s")
    if compile_s is not None:
        return f" after {compile_s:.1f} s of compilation"
    if isinstance(under, int | float):
        return f" after a compile {COMPILE_TOO_SMALL} (under {fmt_ms(under)})"
    return ""


COMPILE_TOO_SMALL = "too small to measure here"


def fmt_ms(seconds: float) -> str:
    """A small duration for 'under N ms': whole milliseconds below a second, else seconds."""
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


def span_words(span: tuple[float, float | None]) -> str:
    """A finished race's projected break-even range (analysis.projected_range) in words: 'between
    step 305 and 372', or 'from step 1,200 on, or never' where the interval's slow end never meets."""
    early = f"step {math.floor(span[0]) + 1:,}"
    return f"from {early} on, or never" if span[1] is None else f"between {early} and {math.floor(span[1]) + 1:,}"


def _headline_reading(summary: dict[str, Any]) -> str:
    speedup, verdict = summary.get("steady_state_speedup"), summary.get("verdict")
    if isinstance(summary.get("compile_failed"), str):
        return compile_failed_reading(summary["compile_failed"])
    if summary.get("compile_skipped"):
        ratio = f" {speedup:.2f}x" if speedup is not None else ""
        return (
            f"Compile did not happen: {summary['compile_skipped']}. Both variants ran eager code, so the{ratio} "
            "ratio between them is not a compile speedup."
        )
    if speedup is None:
        return "Not enough steps finished in both variants to compare them."
    cost = compile_words(summary)
    interval = interval_words(summary)  # the stopping rule's interval, and the looks that widened it
    if verdict == BUSY:
        busy = _busy_processes(summary) or "the race"
        return (
            f"The machine was busy during {busy}: other work had the race's cores, so {speedup:.2f}x "
            f"({interval}) is no verdict on this model. Run it again when the machine is quieter."
        )
    if verdict == SLOWER:
        return (
            f"Compiled steps are slower here ({speedup:.2f}x, {interval}){cost}: "
            "compile does not pay off for this model on this device."
        )
    if verdict == NO_CLEAR_DIFFERENCE:
        return (
            f"No clear difference per step ({speedup:.2f}x, {interval}){cost}: "
            "compile costs time here and gains none you can measure."
        )
    if summary.get("break_even_step") is not None:
        return (
            f"Compiled steps are {speedup:.2f}x faster ({interval}){cost}; compile paid for itself "
            f"at step {summary['break_even_step']:,} ({summary['break_even_wall_s']:.1f} s in)."
        )
    extra, span = projected_position(summary), projected_range(summary)
    later = f"; at these rates it would at about step {math.floor(extra) + 1:,}" if extra else ""
    if extra and span is not None:  # the steps its interval allows, as the live words and the card give them
        later += f" ({span_words(span)} within its 95% interval)"
    return f"Compiled steps are {speedup:.2f}x faster ({interval}){cost}, but compile did not pay off within this run{later}."
