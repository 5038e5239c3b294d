"""How often a live race's view refreshes, and what the page says when watching cannot be kept out
of the measurement.

Why: on a small machine the page that watches a race shares the CPU the race is timed on. Each
refresh costs the server a snapshot and a document (or a script run), and the browser a redraw of
every chart that changed: with the owner's page refreshing every second, the browser and the
server together can take a large share of a small CPU (docs/benchmarks.md#watchingpy). While steps are
timed the view refreshes every TIMED_REFRESH_S instead; while the race waits, compiles or
evaluates, nothing of interest is timed per step and the view stays lively (the compile's elapsed
seconds count up on the page). A young race stays lively too: until the variant being timed has
its first steps on the page, which then appear as soon as they are stored.
"""

from __future__ import annotations

import re
from typing import Any

LIVELY_REFRESH_S = 1.0  # queued, starting, compiling: the page's usual second
TIMED_REFRESH_S = 3.0  # while a variant's steps are timed
# The worker's phase while steps are timed (core.runs.worker.phase_text, state "training"):
# 'eager epoch 2/3', 'compiled epoch 1/3' (', evaluating': eval steps, timed too). Compiling reads
# 'compiling (compiled epoch 1/3)'.
_TIMED_PHASE = re.compile(r"(eager|compiled) epoch \d+/\d+(, evaluating)?")


def timed(run: Any, counts: dict[str, int] | None = None) -> bool:
    """Whether the run is timing steps right now (a running race in a training epoch) and the view
    already shows the variant being timed. `counts`: the steps of each variant the view has; while
    the timed variant has none there (a young race: eager's first steps, compiled's first after its
    compile) the view stays lively, so they are drawn as soon as they are stored."""
    variant = timed_variant(run)
    return variant is not None and (counts is None or bool(counts.get(variant)))


def timed_variant(run: Any) -> str | None:
    """The variant whose steps are timed now ('eager', 'compiled'), from the worker's phase; None otherwise."""
    match = _TIMED_PHASE.fullmatch(run.phase or "")
    return match.group(1) if match is not None and run.status == "running" else None


def refresh_s(run: Any, counts: dict[str, int] | None = None) -> float:
    """How often a live view of this run refreshes now, at the least (`counts`: as for `timed`)."""
    return TIMED_REFRESH_S if timed(run, counts) else LIVELY_REFRESH_S


def one_core(run: Any) -> bool:
    """Whether the race runs (or ran) on the CPU of a machine with a single core, where the worker
    cannot have a core of its own and an open page takes its CPU from the race."""
    env = run.environment if isinstance(getattr(run, "environment", None), dict) else {}
    return env.get("device_type") == "cpu" and env.get("cpu_count") == 1


def watching_note(run: Any) -> str | None:
    """The plain-text note beside the verdict on a one-core machine (None elsewhere)."""
    if not one_core(run):
        return None
    if run.finished:
        return (
            "This race ran on a machine with one core: any page open on it while the race ran took CPU "
            "from the race, so watching was part of what was measured."
        )
    return (
        "This machine has one core: this page takes its CPU from the race, so watching is part of the "
        "measurement. Close the tab and come back for a result without it."
    )
