"""How far processes of one configuration land from each other on this device: the run-to-run
spread, the prior a new race's processes are pooled with (core.engine.replicates.combine).

Learnt from the store: the done races measured on the same device (its name, as the race's
environment records it) with the same torch. A race with replicate processes says it directly: how
far its own processes (the first and its replicates, each a fresh process) landed from each other.
Races of one process each (stored before replicates, or run with `replicates` 0) say it as before,
grouped by configuration: each configuration raced twice or more says how far a second race lands
from the first. Spreads differ by configuration (a small MLP race's can be several times narrower
than a small CNN's: docs/benchmarks.md#steady_mallocpy), so it is learnt in two tiers: the
device's, pooled over every configuration and shrunk towards the assumed one, is where a
configuration starts; that configuration's own races then take over. Imported races never count
(another machine's bundle says nothing of this one), nor races whose compile did not happen, nor
processes the machine was busy during. Which host of a fleet ran them does not matter: a second
race of the configuration may land on any box of this device type.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from core.engine.intervals import ASSUMED, PRIOR_RACES, RunToRun, run_to_run
from core.engine.options import STEP_TIME
from core.engine.replicates import ProcessResult, counted, processes_of
from core.engine.spec import RunSpec
from core.engine.summary import Summary
from core.runs.store import Run, Store

SCAN_LIMIT = 500  # newest done races looked at


def configuration(params: dict[str, Any]) -> tuple | None:
    """A race's configuration as far as its steady speedup goes (None: params that are no race)."""
    spec = RunSpec.stored(params)
    return None if spec is None else spec.same_race(STEP_TIME)  # the device name the race recorded decides the rest


def log_speedup(run: Run) -> float | None:
    """The log steady speedup a done race measured; None when it is no compile speedup."""
    summary = Summary.of(run.summary)
    speedup = summary.steady_state_speedup
    if not summary.compiled or speedup is None or not speedup > 0 or not math.isfinite(speedup):
        return None
    return math.log(speedup)


def spread_here(
    store: Store,
    params: dict[str, Any],
    device_name: str | None,
    torch_version: str | None,
    exclude: int | None = None,
) -> RunToRun:
    """The run-to-run spread for a race of `params` on this device and torch: this configuration's
    own earlier races, shrunk towards the device's spread (the assumed one while no configuration
    has been raced twice here). `exclude`: the race about to start."""
    if not device_name:
        return ASSUMED
    groups: dict[tuple, list[float]] = defaultdict(list)  # races of one process each, by configuration
    replicated: dict[tuple, list[list[float]]] = defaultdict(list)  # a race with replicates: its processes
    for run in store.list_runs(kind="race", status=["done"], limit=SCAN_LIMIT):
        env = run.environment or {}
        if run.id == exclude or run.imported or env.get("device_name") != device_name:
            continue
        if env.get("torch") != torch_version:
            continue
        key, value = configuration(run.params or {}), log_speedup(run)
        if key is None or value is None:
            continue
        processes = process_log_speedups(run)
        if len(processes) >= 2:
            replicated[key].append(processes)
        else:
            groups[key].append(value)
    everything = list(groups.values()) + [p for races in replicated.values() for p in races]
    device = run_to_run(everything)
    start = RunToRun(device.log_sd, min(device.df, PRIOR_RACES), device.races)
    key = configuration(params)
    return run_to_run([groups.get(key, []), *replicated.get(key, [])], prior=start)


def process_log_speedups(run: Run) -> list[float]:
    """The log speedups of a done race's processes that counted (its first and its replicates: the
    spread between them is the run-to-run spread, measured inside the race)."""
    summary = Summary.of(run.summary)
    first = ProcessResult.from_dict(summary.first_process)
    return [math.log(p.speedup) for p in counted(([first] if first else []) + processes_of(list(summary.replicates)))]
