"""Drift and load seen during a race, said beside the verdict when they may make its interval too narrow.

An interval can only describe the noise it saw. Steps that drift (a machine warming up, clocks
changing) or a machine busy with other work during part of the race move a variant's times in a
way one run cannot tell from a real difference, above all when the variants ran one after the
other. These are plain sentences the reading carries ("the machine was busy during eager's epoch 2
(load 3.4 on 2 cores): this interval may be too narrow"); the numbers stay as measured.
Torch-free.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from statistics import median
from typing import Any

DRIFT = 0.15  # a variant's last third of steady steps this much slower or faster than its first
BUSY_MARGIN = 0.5  # load above the machine's cores by this much: something else wants them too
TOO_NARROW = "this interval may be too narrow"
# A block of timed steps during which the race's threads waited for a core (on a run queue, while
# they could have run) this share of its time ran on a busy machine: some other process had the
# core. And a process with more than BUSY_STEPS_SHARE of its steady steps busy gives no verdict.
BUSY_WAIT = 0.10
BUSY_STEPS_SHARE = 0.10


def drift_warnings(eager: Sequence[float], compiled: Sequence[float], paired: bool) -> list[str]:
    """A sentence per variant whose steady steps drifted by more than DRIFT from first to last third,
    when the variants ran one after the other (when they took turns, each pair of blocks shares its
    moment's drift and the paired interval carries what is left: nothing to warn of)."""
    out: list[str] = []
    if paired:
        return out
    for name, times in (("eager", eager), ("compiled", compiled)):
        third = len(times) // 3
        if third < 2:
            continue
        first, last = median(times[:third]), median(times[-third:])
        if first <= 0 or abs(last / first - 1) <= DRIFT:
            continue
        moved = f"{name}'s steps drifted from {first * 1e3:.3g} ms to {last * 1e3:.3g} ms during the race"
        out.append(f"{moved}, and eager and compiled ran one after the other: {TOO_NARROW}")
    return out


def load_sample(started_wall: float, started_cpu: float) -> dict[str, Any]:
    """What the machine was doing over a stretch of a race that began at (started_wall, started_cpu)
    (time.perf_counter, time.process_time): the 1-minute load average at its end, the cores, and
    the CPU seconds this process got per wall second."""
    wall = time.perf_counter() - started_wall
    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):  # not on every platform
        load = None
    cpu_share = (time.process_time() - started_cpu) / wall if wall > 0 else None
    return {"load": load, "cores": os.cpu_count() or 1, "cpu_share": cpu_share}


def load_warnings(samples: Sequence[dict[str, Any]]) -> list[str]:
    """One sentence on the epochs during which the machine was busy (samples: one per variant and
    epoch, each with variant, epoch, load and cores), or none."""
    busy = [
        s for s in samples if isinstance(s.get("load"), int | float) and s["load"] > (s.get("cores") or 1) + BUSY_MARGIN
    ]
    if not busy:
        return []
    peak = max(busy, key=lambda s: s["load"])
    load = f"load up to {peak['load']:.1f} on {peak['cores']} core{'s' if peak['cores'] != 1 else ''}"
    if len(busy) == len(samples):
        where = "throughout the race"
    else:
        parts = []
        for name in ("eager", "compiled"):
            epochs = [str(s["epoch"]) for s in busy if s.get("variant") == name]
            if epochs:
                parts.append(f"{name}'s epoch{'s' if len(epochs) > 1 else ''} {', '.join(epochs)}")
        where = "during " + " and ".join(parts)
    return [f"the machine was busy {where} ({load}): {TOO_NARROW}"]


def run_queue_wait_s() -> float | None:
    """Seconds this process's threads have spent waiting on a run queue so far: runnable, but a
    core was running something else (Linux's /proc/self/task/*/schedstat, second field, in ns).
    None where the kernel does not keep it."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    total, read = 0, False
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/schedstat") as fh:
                total += int(fh.read().split()[1])
                read = True
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
    return total / 1e9 if read else None


class BusyWatch:
    """The share of a stretch of timed steps that the race's threads spent waiting for a core, by
    run-queue delay: 0 on a machine that gives the race its cores, up to 1 and more (several
    threads) when other work has them. Read between steps, never inside a step's clock."""

    def __init__(self, threads: int = 1):
        self.threads = max(1, threads)
        self._wall = 0.0
        self._wait: float | None = None

    def start(self) -> None:
        self._wall, self._wait = time.perf_counter(), run_queue_wait_s()

    def share(self) -> float | None:
        """The share since start() (and start again); None where the kernel cannot say."""
        wall, wait = time.perf_counter(), run_queue_wait_s()
        before, self._wall, self._wait = (self._wall, self._wait), wall, wait
        if wait is None or before[1] is None or wall <= before[0]:
            return None
        return max(wait - before[1], 0.0) / ((wall - before[0]) * self.threads)


def busy_share(busy_steps: Sequence[int], steady_from: int, steps: int) -> float:
    """The share of a variant's steady steps (steady_from + 1 .. steps, 1-based) that ran busy."""
    steady = steps - steady_from
    if steady <= 0:
        return 0.0
    return sum(1 for s in busy_steps if steady_from < s <= steps) / steady


def busy_steps_words(busy: dict[str, Sequence[Sequence[int]]]) -> str:
    """ "eager's steps 41-80 and compiled's step 3": the steps a busy machine touched, per variant."""
    parts = []
    for name in ("eager", "compiled"):
        ranges = [f"{a:,}" if a == b else f"{a:,}-{b:,}" for a, b in busy.get(name) or []]
        if ranges:
            many = len(ranges) > 1 or "-" in ranges[0]
            shown = ", ".join(ranges[:4]) + (f" and {len(ranges) - 4} more stretches" if len(ranges) > 4 else "")
            parts.append(f"{name}'s step{'s' if many else ''} {shown}")
    return " and ".join(parts)
