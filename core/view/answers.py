"""A finished race's answers, for every surface that shows one (the Race page, a run reopened on the
Runs page, the CLI's table): why compiled is faster, slower or the same here (core.engine.cause),
its recompiles with the guard that failed and what avoids it (core.engine.compile_stats), what to try
next on its device with a link that fills the Race form with it (core.engine.recommend), and
whether a warm race found a cache (core.engine.warm_cache). Plain text; the page escapes it.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import urlencode

from core import PROJECT_ROOT
from core.engine import analysis, words
from core.engine.cause import Cause, race_cause
from core.engine.compile_stats import recompile_words
from core.engine.recommend import Advice, advise, sweep_advice
from core.engine.spec import RunSpec, SpecError
from core.engine.summary import Summary
from core.engine.warm_cache import cache_words
from core.view.race_form import spec_to_query


@dataclass(frozen=True)
class NextRace:
    """One suggestion as the page offers it: its label, the Race page link that fills the form with
    it, and why; `spec`, the race it suggests (what a terminal's command is built from)."""

    label: str
    link: str
    why: str
    spec: RunSpec | None = None


@dataclass(frozen=True)
class Answers:
    """What a finished race answers beyond its verdict, each None where it has nothing to say."""

    cause: Cause | None
    recompiles: str | None
    advice: Advice | None
    next_races: tuple[NextRace, ...]
    warm_cache: str | None = None

    @property
    def cause_text(self) -> str | None:
        return self.cause.sentence if self.cause else None

    def lines(self, command: Callable[[RunSpec], str] | None = None) -> list[str]:
        """Every answer as a line of text, for a terminal. `command`: what runs a suggested race
        there (the CLI's core.cli.races.race_command), printed on its own line under it, in
        place of the page's link."""
        out = []
        if self.cause_text:
            out.append(f"Why: {self.cause_text}")
        if self.recompiles:
            out.append(f"Recompiles: {self.recompiles}")
        if self.warm_cache:
            out.append(f"Cache: {self.warm_cache}")
        if self.advice and self.advice.cost:
            out.append(f"Cost: {self.advice.cost}")
        for race in self.next_races:
            if command is not None and race.spec is not None:
                out += [f"Try next: {race.label}: {race.why}", f"  {command(race.spec)}"]
            else:
                out.append(f"Try next: {race.label}: {race.why} ({race.link})")
        if self.advice and not self.next_races and not self.advice.cost:
            out.append(f"Next: {self.advice.sentence()}")
        return out


def suggested_spec(params: dict[str, Any], changes: dict[str, Any]) -> RunSpec | None:
    """The race a suggestion makes of this one: its spec with `changes` (None where they do not apply)."""
    try:
        return dataclasses.replace(RunSpec.from_dict(params), **changes)
    except (SpecError, TypeError):
        return None


def race_link(params: dict[str, Any], changes: dict[str, Any]) -> str | None:
    """The Race page's link for this race with `changes` (the options table says what travels); a
    terminal prints the command for the same spec instead (core.cli.races.race_command)."""
    spec = suggested_spec(params, changes)
    return None if spec is None else "/?" + urlencode(spec_to_query(spec))


def finished_answers(
    summary: Summary | dict[str, Any] | None,
    params: dict[str, Any] | None,
    environment: dict[str, Any] | None,
    compile_info: dict[str, Any] | None = None,
) -> Answers:
    """The answers of one finished race from what it stored (`compile_info`: torch's counters, the
    run's details["compile"], for whether a warm cache was read)."""
    summary, params, env = Summary.of(summary), params or {}, environment or {}
    cause = race_cause(summary, params, env)
    advice = advise(summary, params, env, cause)
    races = []
    for suggestion in advice.suggestions if advice else ():
        link = race_link(params, suggestion.changes)
        if link:
            races.append(NextRace(suggestion.label, link, suggestion.why, suggested_spec(params, suggestion.changes)))
    cache = cache_words(env, compile_info)
    return Answers(
        cause, recompile_words(summary, params), advice, tuple(races), cache[0].upper() + cache[1:] if cache else None
    )


@dataclass(frozen=True)
class SweepNext:
    """What a finished sweep says to try next, the race that launches it, and why its best point
    reads as it does (that point's cause)."""

    text: str
    race: NextRace | None
    why: str | None = None
    point: str = ""


def sweep_next(points: list[dict[str, Any]], runs: list[Any]) -> SweepNext | None:
    """What a finished sweep says to try next: its surest gain with a link to race that point alone,
    else (no point clearly faster) the advice of its best point on its device, with that link; and
    the cause of that point's verdict. `points`: the sweep frame's measured rows as dicts (label,
    verdict, speedup, ci_low, ci_high, run_id)."""
    if not points:
        return None
    by_id = {r.id: r for r in runs}
    best_text = sweep_advice(points)
    if best_text:
        best = max((p for p in points if p.get("verdict") == "faster"), key=lambda p: p["ci_low"])
    else:
        best = max(points, key=lambda p: p.get("speedup") or 0.0)
    run = by_id.get(best["run_id"])
    if run is None:
        return None
    found = finished_answers(run.summary, run.params, run.environment)
    if best_text:
        link = race_link(run.params or {}, {})
        race = NextRace(f"race {best['label']} alone", link, "", suggested_spec(run.params or {}, {})) if link else None
        return SweepNext(best_text, race, found.cause_text, best["label"])
    head = f"No point reads clearly faster; the best, {best['label']}, reads {words.speedup(best['speedup'])}."
    if found.next_races:
        first = found.next_races[0]
        return SweepNext(f"{head} {first.why}", first, found.cause_text, best["label"])
    cost = f" {found.advice.cost}" if found.advice and found.advice.cost else ""
    return SweepNext(head + cost, None, found.cause_text, best["label"])


def latest_cause(runs: list[Any], owner: str) -> tuple[str, str] | None:
    """The newest finished race with a cause to name, this visitor's first (else any here), as
    (which race, why): what the Overhead and Fusion tabs tie their measurement to. `runs`: done races,
    newest first."""
    mine = [r for r in runs if r.owner == owner]
    for run in mine + [r for r in runs if r.owner != owner]:
        cause = race_cause(run.summary, run.params, run.environment)
        if cause is not None:
            p = run.params or {}
            whose = "Your latest race" if run.owner == owner else "The latest race here"
            return (
                f"{whose}, run {run.id} ({p.get('model')}, batch {words.number(p.get('batch_size'))})",
                cause.sentence,
            )
    return None


# ----------------------------------------------------------------------
# Published torch.compile figures, shown beside a user's own result so they can place it.
#
# The tutorial's per-epoch table is derived with the same analysis functions as a user's run, so
# both are measured by one ruler. Sources: assets/reference/ (copied from the project's shared
# reference folder, with their origins).

REFERENCE_DIR = os.path.join(PROJECT_ROOT, "assets", "reference")
TUTORIAL_CSV = os.path.join(REFERENCE_DIR, "tutorial_resnet50_cifar10_epochs.csv")
REGIONAL_CSV = os.path.join(REFERENCE_DIR, "regional_compile_figures.csv")

PYTORCH2_RELEASE = {
    "source": "PyTorch 2.0 release (pytorch.org, March 2023): 163 open-source models, NVIDIA A100",
    "training_speedup_weighted": 1.43,  # 0.75 x AMP + 0.25 x float32
    "training_speedup_amp": 1.51,
    "training_speedup_fp32": 1.21,
    "models": 163,
    "works_on": 0.93,
}
TUTORIAL_SOURCE = (
    "PyTorch 2.0 intro tutorial (mrdbourke/pytorch-deep-learning, extras/pytorch_2_results): ResNet50, "
    "CIFAR-10 at 224 px, batch 128, fp32 with TF32 matmuls, 5 epochs, torch 2.0.0"
)


@dataclass(frozen=True)
class ReferenceRun:
    gpu: str
    first_epoch_overhead_s: float
    steady_speedup: float
    whole_run_speedup: float
    break_even_epochs: float | None  # observed or extrapolated, in epochs
    break_even_observed: bool


@lru_cache(maxsize=1)
def tutorial_runs() -> tuple[ReferenceRun, ...]:
    """The tutorial's A100 and RTX 4080 runs, derived from their epoch times."""
    with open(TUTORIAL_CSV) as fh:
        rows = list(csv.DictReader(line for line in fh if not line.startswith("#")))
    runs = []
    for gpu in dict.fromkeys(r["gpu"] for r in rows):
        times = {
            v: [float(r["train_epoch_time_s"]) for r in rows if r["gpu"] == gpu and r["variant"] == v]
            for v in ("eager", "compiled")
        }
        eager, compiled = times["eager"], times["compiled"]
        speed = analysis.steady_state_speedup(eager, compiled, warmup=1)
        be = analysis.break_even(eager, compiled, warmup=1)
        runs.append(
            ReferenceRun(
                gpu=gpu,
                first_epoch_overhead_s=analysis.compile_overhead(eager, compiled, 1),
                steady_speedup=speed.speedup,
                whole_run_speedup=analysis.whole_run_speedup(sum(eager), sum(compiled)),
                break_even_epochs=be.position if be.step is not None else be.extrapolated_position,
                break_even_observed=be.step is not None,
            )
        )
    return tuple(runs)


def reference_rows() -> list[dict[str, str]]:
    """Rows for a small table: the release average and the tutorial's two GPUs."""
    rel = PYTORCH2_RELEASE
    rows = [
        {
            "source": "PyTorch 2.0 release, A100, 163 models",
            "steady speedup": f"{words.speedup(rel['training_speedup_weighted'])} "
            f"(AMP {words.speedup(rel['training_speedup_amp'])}, fp32 {words.speedup(rel['training_speedup_fp32'])})",
            "first-epoch overhead": "not published",
            "break-even": "not published",
        }
    ]
    for run in tutorial_runs():
        x = run.break_even_epochs
        when = (
            f"at {x:.1f} epochs (during epoch {math.ceil(x)})" if run.break_even_observed else f"about {x:.1f} epochs"
        )
        rows.append(
            {
                "source": f"tutorial ResNet50, {run.gpu}",
                "steady speedup": words.speedup(run.steady_speedup),
                "first-epoch overhead": words.seconds(run.first_epoch_overhead_s, signed=True),
                "break-even": when + ("" if run.break_even_observed else ", beyond its 5"),
            }
        )
    return rows


@lru_cache(maxsize=1)
def regional_reference_rows() -> tuple[dict[str, str], ...]:
    """Published whole-model vs regional compile figures, each with its hardware and source."""
    with open(REGIONAL_CSV) as fh:
        rows = list(csv.DictReader(line for line in fh if not line.startswith("#")))
    return tuple(
        {
            "source": r["source"],
            "hardware": r["hardware"],
            "model, workload": f"{r['model']}, {r['workload']}",
            "whole: compile": words.seconds(float(r["whole_compile_s"])),
            "regional: compile": words.seconds(float(r["regional_compile_s"])),
            "whole: steady": r["whole_steady"],
            "regional: steady": r["regional_steady"],
        }
        for r in rows
    )
