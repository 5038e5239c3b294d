"""Which cores a CPU race's worker has to itself, how many torch threads it runs, and which cores
the app's own CPU work (the pages watching the race) keeps to.

Why: on a small machine the page watching a race shares the CPU it is timed on. Left to the
scheduler, the server's refreshes and the race's threads land on the same core now and then, and
torch's threads wait for the one that was preempted. Where the machine has two cores or more, a
CPU race's worker is pinned to all of them but the first (as many torch threads as it has cores),
and the app's refreshes and feed builds, already at a lower priority while a race is measured
(core.view.run_screen.shared_board.yield_to_measurements), keep to the first. The browser is the
visitor's: on the same machine the scheduler gives it the core the worker leaves free. On one core
nothing can be set aside; the page says so (core.view.run_screen.cadence.watching_note).

Host settings (docs/hosting.md): COMPILE_LAB_WORKER_CPUS ("auto", the default; "off": no pinning;
or a list such as "1-3" or "2,3": the worker's cores) and COMPILE_LAB_WORKER_THREADS (torch threads;
"0": torch's default), which wins over the count of cores. Linux only: elsewhere nothing is pinned.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass

CPUS_SETTING = "COMPILE_LAB_WORKER_CPUS"
THREADS_SETTING = "COMPILE_LAB_WORKER_THREADS"


class CoreSettingError(ValueError):
    """COMPILE_LAB_WORKER_CPUS cannot be read; the message names the setting and what it takes."""


@dataclass(frozen=True)
class CoreShare:
    """worker: the cores a CPU race's worker is pinned to (None: not pinned); threads: its torch
    threads (None: torch's default); app: the cores the app's deprioritised threads keep to (None:
    anywhere)."""

    worker: tuple[int, ...] | None
    threads: int | None
    app: tuple[int, ...] | None


def parse_cpus(text: str) -> tuple[int, ...]:
    """'1-3' or '2,3' or '1,4-5' -> the cores named, sorted."""
    cores: set[int] = set()
    try:
        for part in text.split(","):
            part = part.strip()
            if not part:
                continue
            low, _, high = part.partition("-")
            first, last = int(low), int(high) if high else int(low)
            if first < 0 or last < first:
                raise ValueError(part)
            cores.update(range(first, last + 1))
    except ValueError:
        raise CoreSettingError(
            f'{CPUS_SETTING}={text!r}: expected "auto", "off" or a list of cores such as "1-3" or "2,3"'
        ) from None
    if not cores:
        raise CoreSettingError(f'{CPUS_SETTING}={text!r}: names no core; "off" turns pinning off')
    return tuple(sorted(cores))


def core_share(allowed: Iterable[int], cpus: str | None = None, threads: str | None = None) -> CoreShare:
    """How a CPU race and the app share `allowed` (the cores this process may run on), by the host's
    settings `cpus` (COMPILE_LAB_WORKER_CPUS) and `threads` (COMPILE_LAB_WORKER_THREADS)."""
    cores = tuple(sorted(set(allowed)))
    setting = (cpus or "").strip().lower()
    if setting == "off":
        worker, app = None, None
        default_threads = len(cores) - 1 if len(cores) >= 2 else None  # still leave the app a core's worth
    elif setting in ("", "auto"):
        worker, app = (cores[1:], cores[:1]) if len(cores) >= 2 else (None, None)
        default_threads = len(worker) if worker else None
    else:
        named = parse_cpus(setting)
        worker = tuple(c for c in named if c in cores)
        if not worker:
            raise CoreSettingError(f"{CPUS_SETTING}={cpus!r}: none of these cores is available here ({cores})")
        app = tuple(c for c in cores if c not in worker) or None
        default_threads = len(worker)
    if threads is not None and threads.strip() != "":
        try:
            count = int(threads)
        except ValueError:
            raise CoreSettingError(f"{THREADS_SETTING}={threads!r}: expected a whole number of threads") from None
        return CoreShare(worker, count if count > 0 else None, app)
    return CoreShare(worker, default_threads, app)


def allowed_cores() -> tuple[int, ...]:
    """The cores this process may run on (all of the machine's where affinity is not known)."""
    if hasattr(os, "sched_getaffinity"):
        return tuple(sorted(os.sched_getaffinity(0)))
    return tuple(range(os.cpu_count() or 1))


def this_host(environ: dict[str, str] | None = None) -> CoreShare:
    """The share on this machine by its environment's settings."""
    env = os.environ if environ is None else environ
    return core_share(allowed_cores(), env.get(CPUS_SETTING), env.get(THREADS_SETTING))


_UNPINNED: tuple[int, ...] | None = None  # this worker's cores before pin_worker, for what it starts


def pin_worker(share: CoreShare) -> bool:
    """Pin this process (a CPU race's worker) to its cores; False where it is not pinned."""
    global _UNPINNED
    if share.worker is None or not hasattr(os, "sched_setaffinity"):
        return False
    try:
        before = allowed_cores()
        os.sched_setaffinity(0, share.worker)
        _UNPINNED = before
        return True
    except OSError:
        return False


def unpinned_cores() -> list[int] | None:
    """The cores this worker had before pin_worker (None: it is not pinned), for what it starts."""
    return list(_UNPINNED) if _UNPINNED is not None else None


def unpin_child(pid: int) -> None:
    """Give a process this (pinned) worker just started the cores the worker had before it was
    pinned; right after starting it, before it has read them. Else the ticker a finishing worker
    starts, and the next worker that ticker starts, would see only the race's cores and share them
    out again: a core fewer for each race in turn."""
    if _UNPINNED is not None:
        try:
            os.sched_setaffinity(pid, _UNPINNED)
        except OSError:
            pass


def keep_thread_to_app_cores(share: CoreShare) -> bool:
    """Keep the calling thread (not the process's main thread) off the worker's cores, for as long
    as it lives (Linux: affinity is per thread). False where nothing was set."""
    tid = threading.get_native_id()
    if share.app is None or not sys.platform.startswith("linux") or tid == os.getpid():
        return False
    try:
        os.sched_setaffinity(tid, share.app)
        return True
    except OSError:
        return False
