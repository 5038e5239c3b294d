"""The result cards of one run's screen: compile time, first-epoch overhead, steady-state speedup,
break-even, throughput and peak memory, each a short value for a projector with its details in the
help text. Pure: a summary dict (and the run's memory peaks) in, cards out; the Streamlit page and
the live feed show the same cards (core.view.run_screen.layout)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.engine import words
from core.engine.reading import compile_failed_reading, compile_skipped_reading, processes_note
from core.engine.summary import NEVER, NO_COMPILE, NO_GAIN, NO_VERDICT, PROJECTED, REACHED, Summary
from core.runs.store import Run
from core.view.report import probe_worth_naming
from core.view.run_screen.sentences import overhead_bridge
from core.view.run_screen.why_per_step import recompile_count


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
    """Where Inductor's one-time CPU feature probe went (core.engine.cpu_probe): not in this figure."""
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
