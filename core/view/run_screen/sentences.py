"""The words beside a race's charts, written for someone who has never used torch.compile: what is
happening now (eager running, compiling, compiled running), what the numbers say so far, and
how the two compile costs on the cards relate. Pure functions: summary dicts and numbers in,
sentences out, the numbers in core.engine.words' words. What the race says, live or finished, is
core.engine.reading.reading; words about a run in progress never claim a final outcome.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from statistics import median
from typing import Any

import numpy as np
import pandas as pd

from core.engine import words
from core.engine.intervals import BLOCK_STEPS
from core.engine.spec import COMPILE, RunSpec
from core.engine.summary import Summary

# Losses of the two variants closer than this (relative) are the same curve to the eye; and at the
# first steps (same weights, same batch) it is the rounding compile's reordered arithmetic may give:
# fp32 sums reordered differ by ~1e-6 to 1e-5 relative, tf32/fp16 by ~1e-4 to 1e-3.
LOSS_COINCIDE_RTOL = 1e-3
LOSS_EARLY_STEPS = 3  # the steps before rounding differences have been carried through many updates


def total_steps(params: Mapping[str, Any] | None) -> int | None:
    """Training steps each variant of a stored race runs (RunSpec.total_steps; None when unknown)."""
    spec = RunSpec.stored(dict(params or {}))
    return spec.total_steps if spec is not None and spec.total_steps > 0 else None


def schedule_words(schedule: str | None, steps: int | None = None) -> str:
    """How the two variants share the race, as the form promises and the live words say it: 'eager and
    compiled taking turns every 5 steps (300 steps each)', '300 steps eager, then 300 compiled'."""
    each = f" ({words.count(steps, 'step')} each)" if steps else ""
    if schedule == "sequential":
        return f"{words.count(steps, 'step')} eager, then {steps:,} compiled" if steps else "eager, then compiled"
    if schedule == "alternating":
        return f"eager and compiled taking turns epoch by epoch{each}"
    return f"eager and compiled taking turns every {BLOCK_STEPS} steps{each}"


def eager_phase_text(
    eager_steps: int,
    total: int | None,
    expected_compile_s: float | None,
    estimated: bool,
    schedule: str | None = "sequential",
) -> str:
    """Before the first compiled step: where eager is and what comes next, as the schedule has it
    (eager's whole run first, or its first turn: blocks of 5 steps, or its first epoch)."""
    compile_part = f" (about {words.duration(expected_compile_s)} on this device)" if expected_compile_s else ""
    if estimated and expected_compile_s:
        compile_part = f" (roughly {words.duration(expected_compile_s)}, estimated)"
    if schedule in ("blocks", "alternating"):
        turn = f"first {BLOCK_STEPS} steps" if schedule == "blocks" else "first epoch"
        return (
            f"Eager's {turn}: {words.of_total(eager_steps, total)}. Next: compile{compile_part}, then "
            f"{schedule_words(schedule)}."
        )
    return f"Eager run: {words.of_total(eager_steps, total)}. Next: compile{compile_part}, then the compiled run."


def compiling_text(
    elapsed_s: float | None, expected_compile_s: float | None, estimated: bool, phase: str | None = None
) -> str:
    """During the compile: 'Compiling (about 11 s on this device): 6 s so far. Now: AOT autograd.'"""
    if expected_compile_s:
        expected = words.duration(expected_compile_s)
        about = f"roughly {expected}, estimated" if estimated else f"about {expected}"
        head = f"Compiling ({about} on this device)"
    else:
        head = "Compiling"
    if elapsed_s is None:
        return f"{head}. The compiled run's first step waits for it."
    longer = " — longer than usual" if expected_compile_s and elapsed_s > 1.5 * expected_compile_s + 5 else ""
    now = f" Now: {phase}." if phase else ""
    return f"{head}: {words.duration(elapsed_s)} so far{longer}.{now} The compiled run's first step waits for it."


def is_compiling(phase: str | None) -> bool:
    """The worker's phase text says the compiled variant is compiling (core.runs.worker.phase_text)."""
    return (phase or "").startswith("compiling")


def expected_compile_seconds(previous: Iterable[Mapping[str, Any]], params: Mapping[str, Any]) -> float | None:
    """Median compile time of earlier finished races on this device that compile the same thing (the
    options that change the compile: spec.same_race(COMPILE)); None when there are none.
    `previous`: summaries with their spec under "params"."""
    spec = RunSpec.stored(dict(params))
    if spec is None:
        return None
    wanted, times = spec.same_race(COMPILE), []
    for earlier in previous:
        theirs, summary = RunSpec.stored(earlier.get("params")), Summary.of(earlier.get("summary"))
        if theirs is None or theirs.same_race(COMPILE) != wanted or summary.compile_skipped:
            continue  # another compile, or nothing compiled: its "compile time" is noise
        if summary.compile_time_s is not None and summary.compile_time_s > 0:
            times.append(summary.compile_time_s)
    return median(times) if times else None


def overhead_bridge(summary: Summary | Mapping[str, Any]) -> tuple[str, str] | None:
    """How the compile time and the first-epoch overhead relate, as (short line, full sentence):
    the overhead is the compile time less what faster compiled steps won back in epoch 1."""
    s = Summary.of(summary)
    compile_s, overhead_s = s.compile_time_s, s.first_epoch_overhead_s
    if compile_s is None or overhead_s is None:
        return None
    won = compile_s - overhead_s
    c, o, w = words.seconds(compile_s), words.seconds(overhead_s), words.seconds(abs(won))
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
    eager, compiled = (s[~s.index.duplicated(keep="last")] for s in (eager, compiled))  # one loss a step
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
