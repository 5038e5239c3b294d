"""The words beside a race's charts, written for someone who has never used torch.compile: what is
happening now (eager running, compiling, compiled running), what the numbers say so far, and
how the two compile costs on the cards relate. Pure functions: summary dicts and numbers in,
sentences out. Words about a run in progress never claim a final outcome.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from statistics import median
from typing import Any

import numpy as np
import pandas as pd

from core.engine.analysis import BUSY, NO_CLEAR_DIFFERENCE, SLOWER, projected_position, projected_range
from core.engine.interval_words import interval_words
from core.engine.reading import plain_reading, processes_note
from core.view.report import fmt_about, fmt_seconds

# Losses of the two variants closer than this (relative) are the same curve to the eye; and at the
# first steps (same weights, same batch) it is the rounding compile's reordered arithmetic may give:
# fp32 sums reordered differ by ~1e-6 to 1e-5 relative, tf32/fp16 by ~1e-4 to 1e-3.
LOSS_COINCIDE_RTOL = 1e-3
LOSS_EARLY_STEPS = 3  # the steps before rounding differences have been carried through many updates


def total_steps(params: Mapping[str, Any] | None) -> int | None:
    """Training steps each variant runs: epochs x steps per epoch (None when unknown)."""
    params = params or {}
    epochs, per_epoch = params.get("epochs"), params.get("steps_per_epoch")
    if isinstance(epochs, int) and isinstance(per_epoch, int) and epochs > 0 and per_epoch > 0:
        return epochs * per_epoch
    return None


def steady_round(n: float) -> int:
    """A projected step rounded to two significant digits (948 -> 950, 1,035 -> 1,000), so a live
    projection that moves by a few steps each second does not flicker."""
    if n <= 0 or not math.isfinite(n):
        return 0
    digits = max(int(math.floor(math.log10(n))) - 1, 0)
    return int(math.floor(n / 10**digits + 0.5) * 10**digits)  # half up: 1,050 -> 1,100


def _two_digits(n: float, up: bool) -> int:
    """n rounded down (or up) to two significant digits: a range's ends, widened, never narrowed."""
    n = max(int(math.ceil(n) if up else math.floor(n)), 1)
    scale = 10 ** max(len(str(n)) - 2, 0)
    return (-(-n // scale) if up else n // scale) * scale


def range_words(span: tuple[float, float | None], total: int | None, running: bool, short: bool = False) -> str:
    """A projected break-even as the range the speedup's interval allows (analysis.projected_range):
    'between step 300 and 380 of 600' ('step 300-380 of 600' short, for a card or a chart); running,
    its ends widened to two significant digits so it does not flicker; 'from step 1,200 on, or
    never' where the interval's slow end never catches up."""
    early = math.floor(span[0]) + 1
    late = None if span[1] is None else math.floor(span[1]) + 1
    if running:
        early, late = _two_digits(early, up=False), None if late is None else _two_digits(late, up=True)
    if late is None:
        text = f"from step {early:,} on, or never"
    elif late <= early:
        text = f"at about step {early:,}"
    else:
        text = f"step {early:,}-{late:,}" if short else f"between step {early:,} and {late:,}"
    if not total:
        return text
    if early > total:
        return f"{text}, past this run's {total:,} steps"
    return f"{text} of {total:,}" if late is not None and late <= total else f"{text} (this run has {total:,} steps)"


def rests_on(summary: Mapping[str, Any], counts: Mapping[str, int], total: int | None) -> tuple[str, str]:
    """Which steps a live reading stands on, and what waits: 'After 200 of 600 compiled steps and 200
    eager', and, while eager's next turn has no compiled steps to meet it yet (alternating, blocks;
    store_reader.held_events), ' Eager's 57 newer steps count once compiled steps meet them.'"""
    done = counts.get("compiled")
    if not done:
        return "So far", ""
    where = f"After {_of_total(done, total).replace('step ', '')} compiled steps"
    held = summary.get("eager_step_times_s")
    if not isinstance(held, list | tuple) or not held:
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


def _of_total(step: int, total: int | None) -> str:
    return f"step {step:,}" + (f" of {total:,}" if total else "")


def projected_words(position: float | None, total: int | None, running: bool) -> str | None:
    """'projected ≈ step 1,000 of 1,500' (running: rounded), 'projected ≈ step 948' (finished)."""
    if position is None:
        return None
    step = math.floor(position) + 1
    shown = steady_round(step) if running else step
    if total and step > total:
        return f"projected ≈ step {shown:,}, past this run's {total:,} steps"
    return f"projected ≈ {_of_total(shown, total)}"


def race_reading(
    summary: Mapping[str, Any], running: bool, total: int | None = None, counts: Mapping[str, int] | None = None
) -> str:
    """One sentence on what the race says. Finished: the final reading. Running: what it says so
    far, never a verdict the rest of the run could overturn ("has not paid off yet")."""
    if not running or summary.get("compile_skipped"):  # no compile: say so, whatever the timings say
        return plain_reading(dict(summary))
    counts = counts or {}
    speedup, verdict = summary.get("steady_state_speedup"), summary.get("verdict")
    if speedup is None:
        return "Not enough compiled steps yet to compare the two."
    interval = interval_words(dict(summary))  # the stopping rule's interval, said as such
    where, later = rests_on(summary, counts, total)
    if summary.get("replicates"):  # the first process is done: replicates land one by one
        later = f"{later}{processes_note(dict(summary))} More replicate processes may follow."
    if verdict == BUSY:
        return f"{where}: the machine is busy ({speedup:.2f}x so far, {interval}), so no verdict yet.{later}"
    if verdict == SLOWER:
        return (
            f"{where}: compiled steps are slower ({speedup:.2f}x, {interval}); compile is not paying off here.{later}"
        )
    if verdict == NO_CLEAR_DIFFERENCE:
        return (
            f"{where}: no clear difference per step yet ({speedup:.2f}x, {interval}), so no break-even to "
            f"project.{later}"
        )
    faster = f"{where}: compiled steps are {speedup:.2f}x faster ({interval})"
    if summary.get("break_even_step") is not None:
        return f"{faster}; compiled has been ahead since step {summary['break_even_step']:,}.{later}"
    span = projected_range(dict(summary))  # the one projection rule, as the range its interval allows
    if span is not None:
        shown = range_words(span, total, running=True)
        return f"{faster}; compile has not paid off yet: at these rates it breaks even {shown}.{later}"
    projected = projected_words(projected_position(dict(summary)), total, running=True)
    return f"{faster}; compile has not paid off yet" + (f", {projected}." if projected else ".") + later


def projection_label(projection: Mapping[str, Any], running: bool) -> str:
    """The race chart's label at the projected crossing, worded as the cards word it: while running,
    the range the interval allows where the projection carries one ("span")."""
    span = projection.get("span")
    if running and span:
        return f"{range_words(span, None, running=True, short=True)} (projected)"
    step = math.floor(float(projection["position"])) + 1
    shown = steady_round(step) if running else step
    wall = projection.get("wall_s")
    return f"≈ step {shown:,} (projected" + (f", {fmt_about(float(wall))})" if wall else ")")


def eager_phase_text(eager_steps: int, total: int | None, expected_compile_s: float | None, estimated: bool) -> str:
    """While the eager run goes: where it is and what comes next."""
    compile_part = f" (about {expected_compile_s:.0f} s on this device)" if expected_compile_s else ""
    if estimated and expected_compile_s:
        compile_part = f" (roughly {expected_compile_s:.0f} s, estimated)"
    return f"Eager run: {_of_total(eager_steps, total)}. Next: compile{compile_part}, then the compiled run."


def compiling_text(
    elapsed_s: float | None, expected_compile_s: float | None, estimated: bool, phase: str | None = None
) -> str:
    """During the compile: 'Compiling (about 11 s on this device): 6 s so far. Now: AOT autograd.'"""
    if expected_compile_s:
        about = f"roughly {expected_compile_s:.0f} s, estimated" if estimated else f"about {expected_compile_s:.0f} s"
        head = f"Compiling ({about} on this device)"
    else:
        head = "Compiling"
    if elapsed_s is None:
        return f"{head}. The compiled run's first step waits for it."
    longer = " — longer than usual" if expected_compile_s and elapsed_s > 1.5 * expected_compile_s + 5 else ""
    now = f" Now: {phase}." if phase else ""
    return f"{head}: {elapsed_s:.0f} s so far{longer}.{now} The compiled run's first step waits for it."


def is_compiling(phase: str | None) -> bool:
    """The worker's phase text says the compiled variant is compiling (core.runs.worker.phase_text)."""
    return (phase or "").startswith("compiling")


def expected_compile_seconds(previous: Iterable[Mapping[str, Any]], params: Mapping[str, Any]) -> float | None:
    """Median compile time of earlier finished races of the same model, batch size, precision,
    backend, mode and cache on this device; None when there are none. `previous`: summaries with
    their spec under "params"."""
    keys = ("model", "batch_size", "precision", "backend", "mode", "cache")
    times = [
        float(p["summary"]["compile_time_s"])
        for p in previous
        if all((p.get("params") or {}).get(k) == params.get(k) for k in keys)
        and isinstance((p.get("summary") or {}).get("compile_time_s"), int | float)
        and p["summary"]["compile_time_s"] > 0
        and not p["summary"].get("compile_skipped")  # nothing compiled: its "compile time" is noise
    ]
    return median(times) if times else None


def overhead_bridge(summary: Mapping[str, Any]) -> tuple[str, str] | None:
    """How the compile time and the first-epoch overhead relate, as (short line, full sentence):
    the overhead is the compile time less what faster compiled steps won back in epoch 1."""
    compile_s, overhead_s = summary.get("compile_time_s"), summary.get("first_epoch_overhead_s")
    if compile_s is None or overhead_s is None:
        return None
    won = compile_s - overhead_s
    c, o = fmt_seconds(compile_s, ms_digits=0, s_digits=1), fmt_seconds(overhead_s, ms_digits=0, s_digits=1)
    w = fmt_seconds(abs(won), ms_digits=0, s_digits=1)
    if won >= 0:
        return (
            f"{w} won back in epoch 1",
            f"The overhead ({o}) is the compile time ({c}) less the {w} that faster compiled steps won back "
            "during the rest of epoch 1.",
        )
    return (
        f"{w} more lost in epoch 1",
        f"The overhead ({o}) is the compile time ({c}) plus {w} lost to slower compiled steps in the rest of epoch 1.",
    )


def loss_agreement(steps: pd.DataFrame | None) -> str | None:
    """Whether the two loss curves coincide, with the largest difference at the same step."""
    if steps is None or steps.empty or not {"variant", "step", "loss", "phase"} <= set(steps.columns):
        return None
    train = steps[(steps["phase"] == "train") & np.isfinite(steps["loss"].astype(float))]
    eager = train[train["variant"] == "eager"].set_index("step")["loss"].astype(float)
    compiled = train[train["variant"] == "compiled"].set_index("step")["loss"].astype(float)
    both = eager.index.intersection(compiled.index)
    if len(both) == 0:
        return None
    both = both.sort_values()
    diff = (compiled.loc[both] - eager.loc[both]).abs()
    worst_step = int(diff.idxmax())
    worst = float(diff.loc[worst_step])
    scale = max(float(eager.loc[both].abs().max()), 1e-12)
    shown = f"{worst:.2g}" if worst else "0"
    if worst <= LOSS_COINCIDE_RTOL * scale:
        return (
            f"The two loss curves coincide (compile does not change the numerics): the largest difference "
            f"at the same step is {shown}, at step {worst_step:,}."
        )
    return _loss_drift_words(eager, diff, worst, worst_step)


def _loss_drift_words(eager: pd.Series, diff: pd.Series, worst: float, worst_step: int) -> str:
    """Curves that differ: a change to the numerics only if they differ from the first steps on,
    where both variants start from the same weights and batch and only rounding may part them
    (LOSS_COINCIDE_RTOL of the loss); a later gap is set against the loss's own step-to-step scatter."""
    early = diff.iloc[:LOSS_EARLY_STEPS]
    allowed = LOSS_COINCIDE_RTOL * eager.loc[early.index].abs()
    apart = early[early > allowed]
    shown, pct = f"{worst:.2g}", f"{worst / max(abs(float(eager.loc[worst_step])), 1e-12):.1%}"
    if not apart.empty:
        step = int(apart.index[0])
        return (
            f"The loss curves differ already at step {step:,} (by {float(apart.iloc[0]):.2g}, more than the "
            f"{LOSS_COINCIDE_RTOL:.1%} of the loss that rounding allows where both start from the same weights and "
            f"batch), and by up to {shown} (at step {worst_step:,}): compile changed the numerics of this model here."
        )
    start = (
        f"The loss curves agree to rounding over the first {len(early)} steps (within {LOSS_COINCIDE_RTOL:.1%} of "
        f"the loss, where both start from the same weights and batch), then drift apart by up to {shown} "
        f"(at step {worst_step:,}, {pct} of the loss)"
    )
    scatter = eager.sort_index().diff().abs().dropna()
    noise = float(scatter.median()) if len(scatter) >= 2 else None
    if noise is not None and worst <= noise:
        return (
            f"{start}: less than the loss moves from one step to the next (typically {noise:.2g}). Compile computed "
            "the same first steps to rounding; the later drift is that rounding carried through training, not a "
            "change to the numerics."
        )
    moved = f" (typically {noise:.2g})" if noise is not None else ""
    return (
        f"{start}: more than the loss moves from one step to the next{moved}. The two trainings started a rounding "
        "apart and took different paths; a second eager run with another seed would show how far this model's "
        "runs usually spread."
    )
