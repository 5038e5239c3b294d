"""A finished race at a glance: the one verdict line it leads with, and the short line each of its
answers (why, recompiles, cache, next) is shown as, with the whole text one click away. The page
shows the verdict line over the four lead cards and the race chart, the short lines under the
chart, and the full reading and answers in one expander (app_pages/run_screen/show.py).

Pure: a summary and a race's answers (core.view.answers) in, plain text out; the numbers in
core.engine.words' words. What the race says is still core.engine.reading.reading, in full, in
the expander: a short line only leaves out, never says otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.engine import words
from core.engine.cause import BOTH, DISAGREES, KERNELS, OUTSIDE, Cause
from core.engine.recompiles import recompiles_of
from core.engine.summary import BUSY, FASTER, NOT_REACHED, PROJECTED, REACHED, SLOWER, Summary
from core.view.answers import Answers

# A short line past this many words is cut (with an ellipsis): one line on a 1280-wide screen.
SHORT_WORDS = 16
DETAILS_LABEL = "The whole reading: why, recompiles, cache and what to try, in full"


@dataclass(frozen=True)
class ShortLine:
    """One answer as its short line ('Why', 'the kernels: ...'), its links (label, link) for Next."""

    head: str
    text: str
    links: tuple[tuple[str, str], ...] = ()


def verdict_line(summary: Summary | Mapping[str, Any]) -> str:
    """The one line a finished race leads with: is compile worth it here, and the figure that says
    so. Its interval, the compile and the break-even are on the cards beside it; the reading in full
    (core.engine.reading.reading: caveats, spread, busy steps) is a click away."""
    s = Summary.of(summary)
    if s.compile_failed:
        return "Compile failed on this model; eager ran (the reason is in the details)."
    if s.compile_skipped:
        return "Compile did not happen: both variants ran eager code, so there is no compile speedup to read."
    if s.steady_state_speedup is None:
        return "Not enough steps finished in both variants to compare them."
    x = words.speedup(s.steady_state_speedup)
    if s.verdict == BUSY:
        return f"No verdict: the machine was busy during the race ({x}); run it again when it is quieter."
    if s.verdict == SLOWER:
        return f"Compile does not pay off here: compiled steps are slower ({x})."
    if s.verdict != FASTER:
        return f"No clear difference per step ({x}): compile costs time here and gains none you can measure."
    state = s.break_even
    if state == REACHED:
        return f"Compile paid off: compiled steps are {x} faster, ahead for good from {words.break_even(s)}."
    if state == PROJECTED:
        step = words.step_at(s.projected_position)
        return f"Compiled steps are {x} faster, but compile did not pay off within this run (about step {step:,})."
    if state == NOT_REACHED:
        return f"Compiled steps are {x} faster, but compile did not pay off within this run."
    return f"Compiled steps are {x} faster."


def first_clause(text: str, max_words: int = SHORT_WORDS) -> str:
    """The first clause of a sentence (up to its first ': ', '; ' or '. ' outside parentheses), its
    parentheses left out, at most `max_words` words (cut with an ellipsis)."""
    depth, end = 0, len(text)
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(depth - 1, 0)
        elif depth == 0 and ch in ":;." and (i + 1 == len(text) or text[i + 1] == " "):
            end = i
            break
    clause = re.sub(r"\s*\([^()]*\)", "", text[:end]).strip()
    clause = re.sub(r"\s+", " ", clause)
    said = clause.split(" ")
    if len(said) > max_words:
        return " ".join(said[:max_words]).rstrip(",") + "…"
    return clause


def why_short(cause: Cause | None) -> str | None:
    """Why, in one line: which part of the step carries the difference, with its figures."""
    if cause is None:
        return None
    word = {FASTER: "faster", SLOWER: "slower"}.get(cause.verdict)
    if cause.kind == DISAGREES:
        return "This race cannot say why: its few profiled steps do not show what the timed ones do."
    if word and cause.kernel_s and cause.host_s:
        (ke, kc), (he, hc) = cause.kernel_s, cause.host_s
        if cause.kind == KERNELS:
            return f"Compiled is {word} in its kernels: {words.seconds(kc)} a step against eager's {words.seconds(ke)}."
        if cause.kind == OUTSIDE:
            oe, oc = max(he - ke, 0.0), max(hc - kc, 0.0)
            return f"Compiled is {word} outside its kernels: {words.seconds(oc)} a step against eager's {words.seconds(oe)}."
        if cause.kind == BOTH:
            return f"Compiled is {word} both in its kernels and outside them."
    return first_clause(cause.sentence) + "."


def recompiles_short(summary: Summary | Mapping[str, Any]) -> str | None:
    """The recompiles in one line: how many, where the first was, and its guard's first clause."""
    found = recompiles_of(summary)
    if not found:
        return None
    times = "once" if len(found) == 1 else f"{words.number(len(found))} times"
    first = found[0]
    where = (
        ""
        if first.step is None
        else (f", at step {first.step:,}" if len(found) == 1 else f", first at step {first.step:,}")
    )
    guard = first_clause(first.guard, 10) if first.guard else "torch did not record which guard failed"
    return f"Compiled recompiled {times}{where}: {guard}."


def next_short(answers: Answers) -> ShortLine | None:
    """What to try next in one line: the suggestions as links; without any, the cost's first clause."""
    advice = answers.advice
    if advice is None or not (advice.cost or answers.next_races):
        return None
    if answers.next_races:
        return ShortLine("Next", "Try", tuple((race.label, race.link) for race in answers.next_races))
    return ShortLine("Next", first_clause(advice.cost or "") + ".")


def short_lines(answers: Answers, summary: Summary | Mapping[str, Any]) -> list[ShortLine]:
    """The answers a finished race has, each as its one short line, in the page's order."""
    lines = []
    why = why_short(answers.cause)
    if why:
        lines.append(ShortLine("Why", why))
    if answers.recompiles:
        lines.append(ShortLine("Recompiles", recompiles_short(summary) or first_clause(answers.recompiles) + "."))
    if answers.warm_cache:
        lines.append(ShortLine("Cache", first_clause(answers.warm_cache) + "."))
    found = next_short(answers)
    if found:
        lines.append(found)
    return lines


def full_lines(answers: Answers) -> list[tuple[str, str]]:
    """The answers in full, as (head, text), for the details: why, recompiles, cache, the cost."""
    out = [(head, text) for head, text in (("Why", answers.cause_text), ("Recompiles", answers.recompiles)) if text]
    if answers.warm_cache:
        out.append(("Cache", answers.warm_cache))
    if answers.advice is not None and answers.advice.cost:
        out.append(("Cost", answers.advice.cost))
    return out
