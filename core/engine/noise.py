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
