"""The result cards of one run's screen: compile time, first-epoch overhead, steady-state speedup,
break-even, throughput and peak memory, each a short value for a projector with its details in the
help text. Pure: a summary dict (and the run's memory peaks) in, cards out; the Streamlit page and
the live feed show the same cards (core.view.run_screen.layout)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from core.engine import analysis
from core.engine.interval_words import interval_words
from core.engine.reading import COMPILE_TOO_SMALL, fmt_ms, processes_note
from core.runs.store import Run
from core.view.report import fmt_about, fmt_seconds, probe_worth_naming
from core.view.run_screen.sentences import overhead_bridge, projected_words, range_words
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


def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:,.0f} MiB"


def _change(new: float | None, old: float | None) -> str | None:
    """Signed relative change, compiled against eager ("-7% vs eager"); "same as eager" where it
    rounds to 0%, which has no sign to show."""
    if not new or not old:
        return None
    pct = (new / old - 1) * 100
    if round(abs(pct)) == 0:
        return "same as eager"
    return f"{'+' if pct >= 0 else '-'}{abs(pct):.0f}% vs eager"


def _change_delta(new: float | None, old: float | None, less_is_better: bool = False) -> dict[str, str | None]:
    """A card's delta for a change against eager: its arrow follows the sign, its colour whether
    that sign is good here (green up for throughput, green down for memory); no arrow and no
    colour for no change."""
    text = _change(new, old)
    if text is None or text == "same as eager":
        return {"delta": text, "delta_color": "off", "delta_arrow": "off"}
    return {"delta": text, "delta_color": "inverse" if less_is_better else "normal", "delta_arrow": "auto"}


def samples_per_s(rate: float | None) -> str:
    """Throughput with its unit, short enough for a card: '1,250 samples/s', '62.9k samples/s'."""
    if rate is None:
        return "-"
    if rate >= 10_000:
        return f"{rate / 1000:,.1f}k samples/s"
    return f"{rate:,.0f} samples/s"


def break_even_card(summary: dict[str, Any], total: int | None, running: bool) -> Card:
    """Break-even: the step (of how many) and when; projected (and marked so) when not reached."""
    about = "When the compiled run's total time drops below eager's for good. "
    step, reason = summary.get("break_even_step"), summary.get("break_even_reason") or ""
    extra = analysis.projected_position(summary)  # the one projection rule: only from a clear gain
    if step is not None:
        wall = summary.get("break_even_wall_s")
        when = f"{wall:.0f} s in" if wall is not None else None
        of = f"of {total:,}" if total else None
        return Card(
            "Break-even",
            f"step {step:,}",
            about + (f"{wall:.1f} s into the compiled run." if wall is not None else ""),
            delta=", ".join(p for p in (of, when) if p) or None,
            delta_color="off",
            delta_arrow="off",
        )
    if reason == analysis.NO_VERDICT_BUSY:
        return Card("Break-even", "no verdict", about + "Not judged: the machine was busy while the race measured.")
    if reason.startswith("never"):
        if running:  # the rest of the run could still change it: no final word yet
            return Card(
                "Break-even",
                "not yet",
                about + f"So far {reason.split(': ', 1)[-1]}.",
                delta="not on course so far",
                delta_color="off",
                delta_arrow="off",
            )
        return Card("Break-even", "never", about + f"{reason}.")
    if extra is None:
        value = "not yet" if running and summary.get("steady_state_speedup") is not None else "-"
        if not running and summary.get("steady_state_speedup") is not None:
            value = "not reached"
        in_doubt = summary.get("verdict") == analysis.NO_CLEAR_DIFFERENCE
        why = " No clear per-step gain to project a break-even from." if in_doubt else ""
        off_course = running and summary.get("verdict") == analysis.SLOWER
        return Card(
            "Break-even",
            value,
            about + "Not within this run." + why,
            delta="not on course so far" if off_course else None,
            delta_color="off",
            delta_arrow="off",
        )
    projected_step = math.floor(extra) + 1
    wall = summary.get("break_even_projected_wall_s")
    span = analysis.projected_range(summary)  # the range the speedup's 95% interval allows
    within = f" Within the speedup's 95% interval: {range_words(span, total, running=False)}." if span else ""
    if running:
        shown = range_words(span, total, running=True, short=True) if span else None
        return Card(
            "Break-even",
            "not yet",
            about + f"At the steady rates so far: about step {projected_step:,}." + within,
            delta=f"projected {shown}" if shown else projected_words(extra, total, running=True),
            delta_color="off",
            delta_arrow="off",
        )
    return Card(
        "Break-even",
        f"≈ step {projected_step:,}",
        about + f"Not within this run{f' of {total:,} steps' if total else ''}; at the steady rates about "
        f"step {projected_step:,}" + (f", {wall:.0f} s into the compiled run." if wall is not None else ".") + within,
        delta="projected" + (f", {fmt_about(wall)}" if wall is not None else ""),
        delta_color="off",
        delta_arrow="off",
    )


def result_cards(
    summary: dict[str, Any], memory: dict[str, Any] | None = None, total: int | None = None, running: bool = False
) -> list[Card]:
    """The result cards: compile cost, overhead, speedup, break-even, throughput, memory.

    Values stay short (a projector shows ~10 characters per card); details go in the help text.
    `total` is each variant's step count (for "step 1,035 of 1,500"); `running` keeps a projection
    marked as one ("not yet", "projected ≈ step 1,000 of 1,500").
    """
    ci = summary.get("speedup_ci95")
    speed = summary.get("steady_state_speedup")
    memory = memory or {}
    eager_tput, compiled_tput = summary.get("eager_samples_per_s"), summary.get("compiled_samples_per_s")
    bridge = overhead_bridge(summary)
    recompiles = recompile_count(summary)
    under = summary.get("compile_time_under_s") if summary.get("compile_time_s") is None else None
    cards = [
        Card(
            "Compile time",
            f"under {fmt_ms(under)}"
            if isinstance(under, int | float)
            else fmt_seconds(summary.get("compile_time_s"), ms_digits=0, s_digits=1),
            "First compiled steps minus the same eager steps: what torch.compile cost up front."
            + (
                f" Compile cost {COMPILE_TOO_SMALL} (under {fmt_ms(under)}): compiled's first steps were not "
                "measurably slower than its steady steps or eager's first ones."
                if isinstance(under, int | float)
                else ""
            )
            + (f" {_recompiles_help(recompiles)}" if recompiles is not None else "")
            + _probe_help(summary.get("cpu_isa_probe_s")),
            delta=COMPILE_TOO_SMALL if isinstance(under, int | float) else _recompiles_delta(recompiles),
            delta_color="inverse" if recompiles and not isinstance(under, int | float) else "off",
            delta_arrow="off",
        ),
        Card(
            "First-epoch overhead",
            fmt_seconds(summary.get("first_epoch_overhead_s"), signed=True, ms_digits=0, s_digits=1),
            "Compiled epoch 1 minus eager epoch 1, as in the original tutorial." + (f" {bridge[1]}" if bridge else ""),
            delta=bridge[0] if bridge else None,
            delta_color="off",
            delta_arrow="off",
        ),
        Card(
            "Steady-state speedup",
            "-" if speed is None else f"{speed:.2f}x",
            "Median eager step / median compiled step after warm-up"
            + (f"; {interval_words(summary)}." if ci else ".")
            + processes_note(summary),
            delta=summary.get("verdict"),
            # Unsigned text reads as "up": green and up for faster, red and down for slower, grey otherwise.
            delta_color={"faster": "normal", "slower": "inverse"}.get(summary.get("verdict") or "", "off"),
            delta_arrow={"faster": "up", "slower": "down"}.get(summary.get("verdict") or "", "off"),
        ),
        break_even_card(summary, total, running),
        Card(
            "Throughput (compiled)",
            samples_per_s(compiled_tput),
            "Training samples per second at the steady median step"
            + (f"; eager: {samples_per_s(eager_tput)}." if eager_tput else "."),
            **_change_delta(compiled_tput, eager_tput),
        ),
        Card(
            "Peak memory (compiled)",
            _mib(memory.get("compiled")),
            f"Eager: {_mib(memory.get('eager'))}; {memory.get('kind') or 'measured when each variant finishes'}.",
            **_change_delta(memory.get("compiled"), memory.get("eager"), less_is_better=True),
        ),
    ]
    if summary.get("compile_failed"):
        return _without_compiled_figures(
            cards, f"Compile failed on this model: {summary['compile_failed']}; eager ran.", "compile failed"
        )
    skipped = summary.get("compile_skipped")
    return _compile_did_not_happen(cards, skipped) if skipped else cards


def _recompiles_delta(recompiles: int | None) -> str | None:
    if recompiles is None:
        return None
    return "no recompiles" if recompiles == 0 else f"{recompiles} recompile{'s' if recompiles != 1 else ''}"


def _probe_help(probe_s: Any) -> str:
    """Where Inductor's one-time CPU feature probe went (core.engine.cpu_probe): not in this figure."""
    probe_s = probe_worth_naming(probe_s)
    if probe_s is None:
        return ""
    return (
        f" Not counted: Inductor's one-time CPU feature probe ({probe_s:.1f} s, run before timing), which a "
        "machine pays once, not once per model."
    )


def _recompiles_help(recompiles: int) -> str:
    if recompiles == 0:
        return "No recompiles: every step ran the graphs compiled first."
    return (
        f"{recompiles} recompile{'s' if recompiles != 1 else ''}: a guard failed (a new shape, a new value) and torch "
        "compiled again; the step chart marks each, with the guard that failed."
    )


# The cards whose figures compare compiled code with eager code: meaningless when none compiled.
_COMPILE_CARDS = ("Compile time", "Steady-state speedup", "Break-even")


def _compile_did_not_happen(cards: list[Card], reason: str) -> list[Card]:
    """No figure that needs compiled code is shown as a finding when compile did not happen."""
    return _without_compiled_figures(
        cards, f"Compile did not happen: {reason}. Both variants ran eager code.", "compile did not happen"
    )


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
    s = run.summary or {}
    return {
        "eager": s.get("eager_peak_memory_bytes"),
        "compiled": s.get("compiled_peak_memory_bytes"),
        "kind": s.get("memory_kind"),
    }
