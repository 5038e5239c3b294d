"""The screen's plan: what one race's view holds, live or finished, and when: the sentence on what
is happening, the cards, the charts and which data they show. One plan for the Streamlit page
(app_pages/run_screen/show.py) and for the live feed that viewers' browsers draw themselves
(core.view.run_screen.feed), so the two cannot drift apart.

Everything here is plain text and Altair charts; the page escapes the text for markdown, the feed
sends it as text.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.engine import words
from core.engine.race_estimates import expected_compile_estimate
from core.engine.reading import reading
from core.engine.summary import Summary
from core.runs.store import Run, Store
from core.view import race_charts
from core.view.chart_style import for_projector
from core.view.compare import run_name
from core.view.process_chart import process_chart
from core.view.run_screen import glance, sentences, why_per_step
from core.view.run_screen.cards import Card, memory_of, result_cards

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
    return Words(quote(view.derive("verdict_line", lambda: glance.verdict_line(summary))))


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
    its rates (core.engine.headline), the one the cards and the words name; None where the one
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
