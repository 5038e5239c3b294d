"""The reading: one sentence a person can repeat about a race (is compile worth it here?), with
what qualifies it: why the race stopped, the run-to-run spread its interval was widened to, and the
drift or load seen meanwhile. Built from a summary (core.engine.analysis) alone, so the CLI, the
pages and an imported bundle say the same words. Pure functions."""

from __future__ import annotations

import math
from typing import Any

from core.engine import intervals
from core.engine.analysis import NO_CLEAR_DIFFERENCE, SLOWER, projected_position, projected_range
from core.engine.interval_words import interval_words


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
    out += spread_note(summary)
    for warning in summary.get("noise_warnings") or []:
        if isinstance(warning, str) and warning:
            out += f" Note: {warning}."
    return out


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


def span_words(span: tuple[float, float | None]) -> str:
    """A finished race's projected break-even range (analysis.projected_range) in words: 'between
    step 305 and 372', or 'from step 1,200 on, or never' where the interval's slow end never meets."""
    early = f"step {math.floor(span[0]) + 1:,}"
    return f"from {early} on, or never" if span[1] is None else f"between {early} and {math.floor(span[1]) + 1:,}"


def _headline_reading(summary: dict[str, Any]) -> str:
    speedup, verdict = summary.get("steady_state_speedup"), summary.get("verdict")
    compile_s = summary.get("compile_time_s")
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
    cost = f" after {compile_s:.1f} s of compilation" if compile_s is not None else ""
    interval = interval_words(summary)  # the stopping rule's interval, and the looks that widened it
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
