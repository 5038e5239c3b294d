"""The screen's plan: what one race's view holds, live or finished, and when: the sentence on what
is happening, the cards, the charts and which data they show. One plan for the Streamlit page
(app_pages/run_screen/show.py) and for the live feed that viewers' browsers draw themselves
(core.view.run_screen.feed), so the two cannot drift apart.

Everything here is plain text and Altair charts; the page escapes the text for markdown, the feed
sends it as text.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from core.engine import words
from core.engine.cause import BOTH, DISAGREES, KERNELS, OUTSIDE, Cause
from core.engine.compile_stats import recompiles_of
from core.engine.race_estimates import expected_compile_estimate
from core.engine.reading import compile_failed_reading, compile_skipped_reading, processes_note, reading
from core.engine.summary import (
    BUSY,
    FASTER,
    NEVER,
    NO_COMPILE,
    NO_GAIN,
    NO_VERDICT,
    NOT_REACHED,
    PROJECTED,
    REACHED,
    SLOWER,
    Summary,
)
from core.runs.store import Run, Store
from core.view import race_charts
from core.view.answers import Answers
from core.view.compare import run_name
from core.view.race_charts import for_projector, process_chart
from core.view.report import probe_worth_naming
from core.view.run_screen import sentences, why_per_step
from core.view.run_screen.sentences import overhead_bridge
from core.view.run_screen.why_per_step import recompile_count

# ----------------------------------------------------------------------
# The result cards of one run's screen: compile time, first-epoch overhead, steady-state speedup,
# break-even, throughput and peak memory, each a short value for a projector with its details in the
# help text. Pure: a summary dict (and the run's memory peaks) in, cards out; the Streamlit page and
# the live feed show the same cards (core.view.run_screen.layout).


@dataclass(frozen=True)
class Card:
    """One result card: a short value, what it means (help), and a line under the value."""

    label: str
    value: str
    help: str
    delta: str | None = None  # shown under the value, with an arrow for its sign
    delta_color: str = "normal"  # "normal": up is good; "inverse": down is good; "off": neutral
    delta_arrow: str = "auto"  # "auto" follows the sign of the delta text


def _change_delta(new: float | None, old: float | None, less_is_better: bool = False) -> dict[str, str | None]:
    """A card's delta for a change against eager: its arrow follows the sign, its colour whether
    that sign is good here (green up for throughput, green down for memory); no arrow and no
    colour for no change."""
    text = words.change(new, old)
    if text is None or text == "same as eager":
        return {"delta": text, "delta_color": "off", "delta_arrow": "off"}
    return {"delta": text, "delta_color": "inverse" if less_is_better else "normal", "delta_arrow": "auto"}


def _throughput_delta(compiled: float | None, eager: float | None, verdict: str | None) -> dict[str, str | None]:
    """Throughput's change against eager (the headline speedup less one: Headline.throughput_change),
    green or red only where the speedup's verdict is clear: beside "no clear difference" a +3% is
    grey, no gain or loss to colour (the same steps, in samples)."""
    delta = _change_delta(compiled, eager)
    if verdict not in ("faster", "slower") and delta["delta_color"] != "off":
        return {**delta, "delta_color": "off"}
    return delta


_QUIET = {"delta_color": "off", "delta_arrow": "off"}


def break_even_card(summary: Summary | dict[str, Any], total: int | None, live: bool) -> Card:
    """Break-even: the step (of how many) and when; projected (and marked so) when not reached.
    Finished, its value and help are words.break_even's short and long words for the same state."""
    s = Summary.of(summary)
    about = "When the compiled run's total time drops below eager's for good. "
    state = s.break_even
    if state == REACHED:
        wall = s.break_even_wall_s
        when = f"{words.seconds(wall)} in" if wall is not None else None
        of = f"of {total:,}" if total else None
        return Card(
            "Break-even",
            words.break_even(s, short=True),
            about + (f"{words.seconds(wall)} into the compiled run." if wall is not None else ""),
            delta=", ".join(p for p in (of, when) if p) or None,
            **_QUIET,
        )
    if live:  # the rest of the run could still change it: no final word yet
        return _live_break_even_card(s, total, about)
    help_text, delta, wall = about + words.break_even(s).capitalize() + ".", None, s.headline.projected_wall_s
    if state == PROJECTED:
        delta = "projected" + (f", {words.about(wall)}" if wall is not None else "")
        help_text += f" At the steady rates that is {words.seconds(wall)} into the compiled run." if wall else ""
    return Card("Break-even", words.break_even(s, short=True), help_text, delta=delta, **_QUIET)


def _live_break_even_card(s: Summary, total: int | None, about: str) -> Card:
    state = s.break_even
    if state == PROJECTED:
        span = s.projected_range
        within = f" Within the speedup's 95% interval: {words.steps_range(span, total, live=False)}." if span else ""
        shown = words.steps_range(span, total, live=True, short=True) if span else None
        return Card(
            "Break-even",
            "not yet",
            about + f"At the steady rates so far: about step {words.step_at(s.projected_position):,}." + within,
            delta=f"projected {shown}" if shown else words.projected_step(s.projected_position, total, live=True),
            **_QUIET,
        )
    value = words.NONE if state == NO_COMPILE else "no verdict" if state == NO_VERDICT else "not yet"
    so_far = {NEVER: "compiled steps are slower", NO_GAIN: "no clear per-step gain to project a break-even from"}
    help_text = about + (f"So far {so_far[state]}." if state in so_far else "Not within the steps so far.")
    return Card("Break-even", value, help_text, delta="not on course so far" if state == NEVER else None, **_QUIET)


def result_cards(
    summary: Summary | dict[str, Any],
    memory: dict[str, Any] | None = None,
    total: int | None = None,
    live: bool = False,
) -> list[Card]:
    """The result cards: compile cost, overhead, speedup, break-even, throughput, memory.

    Values stay short (a projector shows ~10 characters per card); details go in the help text.
    `total` is each variant's step count (for "step 1,035 of 1,500"); `live` keeps a projection
    marked as one ("not yet", "projected ≈ step 1,000 of 1,500").
    """
    s = Summary.of(summary)
    memory = memory or {}
    eager_tput, compiled_tput = s.eager_samples_per_s, s.headline.compiled_samples_per_s
    bridge = overhead_bridge(s)
    recompiles = recompile_count(s)
    verdict = s.verdict or ""
    too_small = s.compile_time_s is None and s.compile_time_under_s is not None
    cards = [
        Card(
            "Compile time",
            f"under {words.seconds(s.compile_time_under_s)}" if too_small else words.seconds(s.compile_time_s),
            "First compiled steps minus the same eager steps: what torch.compile cost up front."
            + (
                f" Compile cost {words.compile_cost(s)}: compiled's first steps were not measurably slower than "
                "its steady steps or eager's first ones."
                if too_small
                else ""
            )
            + (f" {_recompiles_help(recompiles)}" if recompiles is not None else "")
            + _probe_help(s.cpu_isa_probe_s),
            delta=words.COMPILE_TOO_SMALL if too_small else _recompiles_delta(recompiles),
            delta_color="inverse" if recompiles and not too_small else "off",
            delta_arrow="off",
        ),
        Card(
            "First-epoch overhead",
            words.seconds(s.first_epoch_overhead_s, signed=True),
            "Compiled epoch 1 minus eager epoch 1, as in the original tutorial." + (f" {bridge[1]}" if bridge else ""),
            delta=bridge[0] if bridge else None,
            delta_color="off",
            delta_arrow="off",
        ),
        Card(
            "Steady-state speedup",
            words.speedup(s.steady_state_speedup),
            "Median eager step / median compiled step after warm-up"
            + (f"; {words.interval(s)}." if s.speedup_ci95 else ".")
            + processes_note(s),
            delta=_verdict_and_interval(s),
            # Unsigned text reads as "up": green and up for faster, red and down for slower, grey otherwise.
            delta_color={"faster": "normal", "slower": "inverse"}.get(verdict, "off"),
            delta_arrow={"faster": "up", "slower": "down"}.get(verdict, "off"),
        ),
        break_even_card(s, total, live),
        Card(
            "Throughput (compiled)",
            words.rate(compiled_tput),
            "Training samples per second: eager's at its steady median step, compiled's that times the headline "
            "speedup (the same steps, counted in samples)"
            + (f"; eager: {words.rate(eager_tput)}." if eager_tput else "."),
            **_throughput_delta(compiled_tput, eager_tput, s.verdict),
        ),
        Card(
            "Peak memory (compiled)",
            words.bytes_(memory.get("compiled")),
            f"Eager: {words.bytes_(memory.get('eager'))}; {memory.get('kind') or 'measured when each variant finishes'}.",
            **_change_delta(memory.get("compiled"), memory.get("eager"), less_is_better=True),
        ),
    ]
    if s.compile_failed:
        return _without_compiled_figures(cards, compile_failed_reading(s.compile_failed), "compile failed")
    return _compile_did_not_happen(cards, s.compile_skipped) if s.compile_skipped else cards


def _verdict_and_interval(s: Summary) -> str | None:
    """The speedup card's line under its value: the verdict and the interval it rests on
    ('faster, 1.20-1.42x'), so the card says how sure the figure is without opening its help."""
    if not s.verdict:
        return None
    return (
        f"{s.verdict}, {words.speedup_range(s.headline.low, s.headline.high)}" if s.headline.has_interval else s.verdict
    )


def _recompiles_delta(recompiles: int | None) -> str | None:
    if recompiles is None:
        return None
    return "no recompiles" if recompiles == 0 else words.count(recompiles, "recompile")


def _probe_help(probe_s: Any) -> str:
    """Where Inductor's one-time CPU feature probe went (core.engine.device_state): not in this figure."""
    probe_s = probe_worth_naming(probe_s)
    if probe_s is None:
        return ""
    return (
        f" Not counted: Inductor's one-time CPU feature probe ({words.seconds(probe_s)}, run before timing), which a "
        "machine pays once, not once per model."
    )


def _recompiles_help(recompiles: int) -> str:
    if recompiles == 0:
        return "No recompiles: every step ran the graphs compiled first."
    return (
        f"{words.count(recompiles, 'recompile')}: a guard failed (a new shape, a new value) and torch "
        "compiled again; the step chart marks each, with the guard that failed."
    )


# The cards whose figures compare compiled code with eager code: meaningless when none compiled.
_COMPILE_CARDS = ("Compile time", "Steady-state speedup", "Break-even")


def _compile_did_not_happen(cards: list[Card], reason: str) -> list[Card]:
    """No figure that needs compiled code is shown as a finding when compile did not happen."""
    return _without_compiled_figures(cards, compile_skipped_reading(reason), "compile did not happen")


def _without_compiled_figures(cards: list[Card], note: str, delta: str) -> list[Card]:
    """The compile figures replaced by what happened instead (compile skipped, or failed)."""
    value = "failed" if delta == "compile failed" else "no compile"
    return [
        Card(c.label, value, note, delta=delta, delta_color="off", delta_arrow="off")
        if c.label in _COMPILE_CARDS
        else c
        for c in cards
    ]


def memory_of(run: Run) -> dict[str, Any]:
    s = Summary.of(run.summary)
    return {"eager": s.eager_peak_memory_bytes, "compiled": s.compiled_peak_memory_bytes, "kind": s.memory_kind}


# ----------------------------------------------------------------------
# A finished race at a glance: the one verdict line it leads with, and the short line each of its
# answers (why, recompiles, cache, next) is shown as, with the whole text one click away. The page
# shows the verdict line over the four lead cards and the race chart, the short lines under the
# chart, and the full reading and answers in one expander (app_pages/run_screen/show.py).
#
# Pure: a summary and a race's answers (core.view.answers) in, plain text out; the numbers in
# core.engine.words' words. What the race says is still core.engine.reading.reading, in full, in
# the expander: a short line only leaves out, never says otherwise.

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


# Before the first step there is nothing to chart: empty axes (a lone "0.000000" tick) read as a
# broken chart, so the page says this instead.
WAITING_FOR_STEPS = "Waiting for the first steps: the charts start with eager's first measured step."
# Presenter mode: the race and step charts side by side under the verdict and the cards, as tall as
# the screen leaves them ("container": the page's CSS gives their box the height, so they fill a
# 1920x1080 screen and still fit a 1280x720 projector).
PRESENT_CHART_HEIGHT = "container"
# The four cards a race leads with (over its race chart, above the fold): what it cost, what the
# first epoch paid, how much faster a step is (with its interval) and when it paid back. The rest
# (throughput, memory) follow the chart; presenter mode shows these four alone.
LEAD_CARDS = ("Compile time", "First-epoch overhead", "Steady-state speedup", "Break-even")


@dataclass(frozen=True)
class Words:
    """What is happening, or what the race says, in one sentence of plain text."""

    text: str
    compiling: bool = False  # a notice with an hourglass (the compile is running), else a bold sentence


def device_of(run: Run) -> str:
    """The device a run measured on, by name where known (GPU lanes share a model, not an index)."""
    return str((run.environment or {}).get("device_name") or run.device_key)


def expected_compile(store: Store, run: Run) -> tuple[float | None, bool]:
    """About how long this run's compile takes here: the median of earlier finished races with the
    same settings on this device, else the estimate it was launched with (scaled from this device's
    races of the same model, else the zoo's figures; then marked as estimated). An
    imported race was measured elsewhere, whatever device name its bundle claims: it never counts."""
    device = device_of(run)
    earlier = [
        {"params": r.params, "summary": r.summary}
        for r in store.list_runs(kind="race", status=["done"], limit=50)
        if device_of(r) == device and r.id != run.id and not r.imported
    ]
    measured = sentences.expected_compile_seconds(earlier, run.params or {})
    if measured:
        return measured, False
    launched_with = (run.details or {}).get("estimate") or {}  # scaled from this device's races, where any
    if isinstance(launched_with.get("compile_s"), (int, float)) and launched_with["compile_s"] > 0:
        return float(launched_with["compile_s"]), True
    return expected_compile_estimate(run.params or {}, run.device_key.startswith("cuda")), True


def progress_line(view: Any, quote: Callable[[str], str] = str) -> str:
    """The progress bar's text: 'Run 3: compiled epoch 2/3'. `quote`: how the state is written (it
    can hold a failed run's error). A long finished race's thinned steps are said (RunView.thin_steps)."""
    line = f"{run_name(view.run.id).capitalize()}: {quote(view.state)}"
    bucket = getattr(view, "bucket", 1)
    if bucket > 1:
        line += f" (a long race: its charts draw one point per {bucket} steps, its numbers stand on every step)"
    return line


def progress_fraction(run: Run) -> float:
    return 1.0 if run.status == "done" else min(max(run.progress, 0.0), 1.0)  # a finished race is all there


def live_words(
    run: Run,
    view: Any,
    summary: Summary,
    total: int | None,
    expected: Callable[[], tuple[float | None, bool]],
    now: float | None = None,
    quote: Callable[[str], str] = str,
) -> Words | None:
    """What is happening now, or what the race says: never ahead of the data, never behind it.
    `view`: a LiveSnapshot; `expected`: the expected compile time (asked only before the compile
    ends); `quote`: how torch's or a bundle's words in it are written (the page: as markdown text)."""
    counts = view.counts()
    if run.status in ("queued", "starting") and not counts["eager"]:
        return None  # the state line says where it waits; nothing has run to talk about yet
    if not run.finished and counts["compiled"] == 0:
        seconds, estimated = expected()
        if sentences.is_compiling(run.phase):
            live = _compile_phase(run)
            phase = quote(live["phase"]) if isinstance(live.get("phase"), str) else None
            elapsed = compile_clock(run, view, now)
            return Words(sentences.compiling_text(elapsed, seconds, estimated, phase), compiling=True)
        schedule = (run.params or {}).get("schedule", "blocks")
        return Words(sentences.eager_phase_text(counts["eager"], total, seconds, estimated, schedule))
    said = view.derive(("reading", total), lambda: reading(summary, not run.finished, total, counts))
    # All this app's words and numbers, except a compile-skipped or -failed reason (torch's, or a bundle's).
    from_torch = not summary.compiled
    return Words(quote(said) if from_torch else said)


def headline(
    run: Run,
    view: Any,
    summary: Summary,
    total: int | None,
    expected: Callable[[], tuple[float | None, bool]],
    now: float | None = None,
    quote: Callable[[str], str] = str,
) -> Words | None:
    """The line the screen leads with: a finished race's one verdict line (glance.verdict_line: the
    whole reading is one click away, finished_reading), else what is happening now (live_words)."""
    if not run.finished or not any(view.counts().values()):
        return live_words(run, view, summary, total, expected, now, quote)
    return Words(quote(view.derive("verdict_line", lambda: verdict_line(summary))))


def finished_reading(
    run: Run, view: Any, summary: Summary, total: int | None, quote: Callable[[str], str] = str
) -> str:
    """A finished race's reading in full (core.engine.reading.reading: the verdict with its caveats,
    the run-to-run spread, the busy steps), for the details under its short lines."""
    said = view.derive(("reading", total), lambda: reading(summary, False, total, view.counts()))
    return quote(said) if not summary.compiled else said  # torch's or a bundle's words: a skipped compile's reason


def _compile_phase(run: Run) -> dict:
    live = (run.details or {}).get("compile_phase") if isinstance(run.details, dict) else None
    return live if isinstance(live, dict) else {}


def compile_clock(run: Run, view: Any, now: float | None = None) -> float | None:
    """How long the first compile has run so far, while it runs (None otherwise): the worker records
    when it began; before it does, the eager run's last event stands for it."""
    if run.finished or not sentences.is_compiling(run.phase) or view.counts()["compiled"]:
        return None
    since = _compile_phase(run).get("compile_started") or view.last_recorded_at.get("eager")
    if not since:
        return None
    return max((time.time() if now is None else now) - float(since), 0.0)


def chart_stamp(run: Run, view: Any, now: float | None = None) -> int | None:
    """What makes a snapshot's charts change besides its data: the compile clock's second (the bar
    on the race chart grows once a second). Part of the key a chart is memoised under."""
    clock = compile_clock(run, view, now)
    return None if clock is None else int(clock)


def headline_projection(summary: Summary) -> dict[str, Any] | None:
    """The dashed crossing the race and lead charts draw: the headline's projected break-even and
    its rates (core.engine.summary), the one the cards and the words name; None where the one
    projection rule names none."""
    h = summary.headline
    position, compiled_s = h.projected_position, h.compiled_step_s()
    if position is None or compiled_s is None:
        return None
    return {
        "position": position,
        "step": words.step_at(position),
        "wall_s": h.projected_wall_s,
        "eager_step_s": h.eager_step_s,
        "compiled_step_s": compiled_s,
    }


def chart_builders(
    run: Run, view: Any, summary: Summary, present: bool, log_scale: bool = False, now: float | None = None
) -> dict[Any, Callable]:
    """The charts of this view, in the order they are shown, by the key a snapshot memoises them
    under (with chart_stamp). Presenter mode: the race and the step times only, tall. Otherwise the
    race, the lead (once both variants have steps), the step times, the epochs and the loss. The race
    is drawn from eager's first stored step on, with a growing bar where compiled's line will start
    while its compile runs."""
    if not any(view.counts().values()):
        return {}  # nothing measured yet: WAITING_FOR_STEPS, not empty axes
    steps, epochs = view.frames()
    be = {"step": summary.break_even_step, "wall_s": summary.break_even_wall_s} if summary.break_even_step else None
    # The one projection rule (Summary.projection_stands): a dashed crossing only from a clear gain.
    projection = headline_projection(summary) if not be else None
    if projection:
        projection["span"] = summary.projected_range  # the words' range: the same interval's
        projection["label"] = words.projection_label(
            float(projection["position"]), projection["span"], projection.get("wall_s"), live=not run.finished
        )
    marks = view.derive("compile_marks", lambda: why_per_step.compile_marks(view.compiles()))
    clock = compile_clock(run, view, now)
    stamp = None if clock is None else int(clock)
    built = _chart_builders(run, view, steps, epochs, be, projection, marks, present, log_scale, stamp, summary)
    # Each chart built once per snapshot (and compile clock second), for the page's viewers and the feed's alike.
    return {key: (lambda k=key, b=build: view.derive(("altair", k, stamp), b)) for key, build in built.items()}


def _chart_builders(  # noqa: PLR0913
    run, view, steps, epochs, be, projection, marks, present, log_scale, clock, summary
) -> dict[Any, Callable]:
    if present:  # the race itself first: at 1280x720 the sentence and both charts fill the first screen
        return {
            "present_cumulative": lambda: for_projector(
                race_charts.cumulative_chart(steps, break_even=be, projection=projection, compiling_s=clock),
                PRESENT_CHART_HEIGHT,
            ),
            "present_steps": lambda: for_projector(
                race_charts.step_time_chart(steps, marks=marks), PRESENT_CHART_HEIGHT
            ),
        }
    built: dict[Any, Callable] = {
        "cumulative": lambda: race_charts.cumulative_chart(
            steps, break_even=be, projection=projection, compiling_s=clock
        )
    }
    if view.counts()["compiled"]:  # a lead needs both variants at the same step
        built["lead"] = lambda: race_charts.lead_chart(steps, break_even=be, projection=projection)
    if summary.replicates:  # a dot per process, as each replicate lands
        built["processes"] = lambda: process_chart(summary)
    built[("step_time", log_scale)] = lambda: race_charts.step_time_chart(steps, log_scale=log_scale, marks=marks)
    built["epochs"] = lambda: race_charts.epoch_chart(epochs)
    built["loss"] = lambda: race_charts.loss_chart(steps)
    return built


def cards(run: Run, view: Any, summary: Summary, total: int | None) -> list[Card]:
    """The result cards, once per snapshot; none while nothing is measured to compare (the eager run,
    the compile): six dashes would only push the race down."""
    built = view.derive(
        ("cards", total), lambda: result_cards(summary, memory_of(run), total=total, live=not run.finished)
    )
    return [] if all(card.value == "-" for card in built) else built


def split_cards(cards: list[Card]) -> tuple[list[Card], list[Card]]:
    """The cards a race leads with (LEAD_CARDS, in their order) and the others, in theirs."""
    return [c for c in cards if c.label in LEAD_CARDS], [c for c in cards if c.label not in LEAD_CARDS]


def cards_before_chart(run: Run) -> bool:
    """A finished race leads with its verdict and cards, then the race chart; a live one shows the
    race first (its cards fill in as it goes), as the live feed draws it."""
    return run.finished


def loss_words(view: Any) -> str | None:
    """Whether the loss curves agree, once per snapshot."""
    steps, _ = view.frames()
    return view.derive("loss_agreement", lambda: sentences.loss_agreement(steps))
