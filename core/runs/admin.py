"""The host's admin: every run (cancel any), pause and resume the queue, purge old runs, see the
workers and their lanes.

Unlocked by a token from the host's environment (COMPILE_LAB_ADMIN_TOKEN), compared in constant
time; with no token set there is no admin at all. The page shows nothing of this module's
answers to a session that has not given the token.
"""

from __future__ import annotations

import hmac
import logging
import math
import os
import threading
import time
from collections import deque
from dataclasses import dataclass

from core.runs import disk_budget, fleet, processes, queue
from core.runs.limits import ConfigError, HostLimits
from core.runs.run_files import Freed, remove_run_files, sweep_orphans
from core.runs.store import ACTIVE_STATES, Run, Store

TOKEN_VARIABLE = "COMPILE_LAB_ADMIN_TOKEN"
MIN_TOKEN_LENGTH = 16  # long enough that guessing it through the page is hopeless
SECONDS_PER_DAY = 86400.0


def admin_token(environ: dict[str, str] | None = None) -> str | None:
    """The configured admin token, None when the host set none (no admin). Raises ConfigError
    for one too short to be a secret."""
    env = os.environ if environ is None else environ
    token = (env.get(TOKEN_VARIABLE) or "").strip()
    if not token:
        return None
    if len(token) < MIN_TOKEN_LENGTH:
        raise ConfigError(f"{TOKEN_VARIABLE} must be at least {MIN_TOKEN_LENGTH} characters long (a secret)")
    return token


def token_matches(given: str | None, environ: dict[str, str] | None = None) -> bool:
    """Whether `given` is the admin token (False when no admin is configured)."""
    try:
        token = admin_token(environ)
    except ConfigError:
        return False
    if token is None or not isinstance(given, str):
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())


# Wrong tokens the page takes, counted in the app process across every session (a new session, a
# new browser, is no new allowance): per visitor (their address where known), and from everyone
# together, so that guessing from many browsers at once is as slow as from one. Each is logged.
GUESSES_PER_VISITOR = 5
GUESSES_FROM_EVERYONE = 20
GUESS_WINDOW_S = 900.0
_LOGGER = logging.getLogger("compile_lab")


class TokenGuesses:
    """The wrong admin tokens given to this process in the last GUESS_WINDOW_S, by whom."""

    def __init__(self) -> None:
        self._wrong: deque[tuple[float, str]] = deque()
        self._lock = threading.Lock()

    def refusal(self, who: str, now: float | None = None) -> str | None:
        """Why `who` may not try a token now (None: they may)."""
        now = time.time() if now is None else now
        with self._lock:
            while self._wrong and now - self._wrong[0][0] > GUESS_WINDOW_S:
                self._wrong.popleft()
            mine = sum(1 for _, by in self._wrong if by == who)
            if mine >= GUESSES_PER_VISITOR or len(self._wrong) >= GUESSES_FROM_EVERYONE:
                minutes = max(1, math.ceil((GUESS_WINDOW_S - (now - self._wrong[0][0])) / 60))
                return f"Too many wrong admin tokens lately: try again in {minutes} min."
        return None

    def wrong(self, who: str, now: float | None = None) -> None:
        """A wrong token from `who` (never the token itself) is counted and logged."""
        now = time.time() if now is None else now
        with self._lock:
            self._wrong.append((now, who))
            count = len(self._wrong)
        _LOGGER.warning("admin token refused (from %s; %d wrong in the last %.0f min)", who, count, GUESS_WINDOW_S / 60)


GUESSES = TokenGuesses()


def cancel_any(store: Store, run_id: int) -> str:
    """Cancel a queued or running job whoever owns it; returns its resulting status."""
    run = store.get_run(run_id)
    if run is None:
        raise queue.JobError(f"there is no run {run_id}")
    return queue.cancel(store, run_id, run.owner)


def set_queue_paused(store: Store, paused: bool) -> None:
    """Paused: queued jobs wait and nothing new starts (what runs now finishes); resumed: the queue moves."""
    store.set_queue_paused(paused)
    if not paused:
        queue.tick(store)


@dataclass(frozen=True)
class Purged:
    """What a purge deleted: runs (with their events), and the files freed with them."""

    runs: int
    freed: Freed


def purge_older_than(store: Store, days: float, now: float | None = None) -> Purged:
    """Delete finished runs (and their events) that ended more than `days` days ago, with their files
    (traces, logs), and the files of runs already gone; returns what went.

    Queued and running jobs are never touched, nor this host's latest device probe (the app needs it).
    """
    if isinstance(days, bool) or not isinstance(days, (int, float)) or not math.isfinite(days) or days <= 0:
        raise ValueError(f"days must be a number above 0 (got {days!r})")
    cutoff = (time.time() if now is None else now) - days * SECONDS_PER_DAY
    probe = fleet.latest_probe(store)
    keep = probe.id if probe else -1
    with store.transaction(immediate=True) as c:
        ids = store.ended_before(c, cutoff, keep)
        store.delete_runs(c, ids)
    freed = remove_run_files(store.path, ids) + sweep_orphans(store.path, store.run_ids)
    if freed.files:
        disk_budget.say_freed(store.path, freed, f"purge of {len(ids)} runs")
    return Purged(len(ids), freed)


def free_to_budget(store: Store, limits: HostLimits) -> Freed:
    """The disk budget kept now (as after every job): what it freed."""
    return disk_budget.keep_within_budget(store, limits.disk_budget)


@dataclass(frozen=True)
class Lane:
    """One device's queue: the job its worker runs now, and how many wait behind it."""

    device_key: str
    running: Run | None
    waiting: int
    worker_alive: bool | None  # None: the worker runs on another host (judged by its heartbeat)
    heartbeat_age_s: float | None


def lanes(store: Store, now: float | None = None) -> list[Lane]:
    """Every lane with a job running or waiting, by device."""
    now = time.time() if now is None else now
    active = {r.device_key: r for r in store.list_runs(status=ACTIVE_STATES)}
    waiting: dict[str, int] = {}
    for run in store.list_runs(status=("queued",), limit=100_000):
        waiting[run.device_key] = waiting.get(run.device_key, 0) + 1
    out = []
    for key in sorted(set(active) | set(waiting)):
        run = active.get(key)
        alive = None
        if run is not None and run.host == fleet.HOST:
            alive = processes.pid_alive(run.pid) if run.pid else False
        age = now - run.heartbeat_at if run is not None and run.heartbeat_at else None
        out.append(Lane(key, run, waiting.get(key, 0), alive, age))
    return out
