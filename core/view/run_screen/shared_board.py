"""One live board per app process: what every viewer of a run sees, read and summarised once per
refresh for all of them, not once per browser tab.

Streamlit serves every session from one Python process, so a talk's audience of 50 tabs following
one race would otherwise each read the store, rebuild the frames, rerun the analysis and redraw four
charts every second. Here a run's snapshot (run row, events so far as frames, summary, what its
state reads as) is built once and shared; anything a page derives from it (result cards, a chart
ready for the browser) is memoised on the snapshot, so it too is built once per change. A snapshot
whose data did not change is the same object, so what a page draws from it is byte-identical and
Streamlit's message cache sends the browser a reference instead of the chart again.

Freshness: a viewer accepts a snapshot up to VIEWER_MAX_AGE_S old (its page refreshes every second,
so it is about 1.4 s behind the store at most, plus the time to draw); the run's owner asks for a
fresh read each time, as before. Threads (one per session) share the board; reads and builds are
serialised per run.
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from core.engine import analysis
from core.engine.intervals import ALPHA, RunToRun
from core.engine.spec import DeviceCaps
from core.engine.summary import Summary
from core.runs import devices, worker_cores
from core.runs.store import Run, Store
from core.view.job_status import describe
from core.view.run_screen.store_reader import (
    RunView,
    expected_steps,
    held_events,
    run_label,
    run_summary,
)

VIEWER_MAX_AGE_S = 0.4  # a viewer's page refreshes every 1 s: about 1.4 s behind the store at most
QUEUE_MAX_AGE_S = 1.0  # the sidebar's device card and queue
IDLE_EVICT_S = 300.0  # a run nobody asked about for this long is dropped from the board
# The board keeps at most this many runs (the least recently asked go first), and a finished run's
# steps thinned to store_reader.MAX_VIEW_STEPS rows: what one process holds for viewers is bounded
# by this, whatever runs a visitor asks for (a run at the bundle cap held about 450 MB unthinned).
MAX_BOARD_RUNS = 32
AUDIENCE_WINDOW_S = 5.0  # a session that asked about a run this recently is following it
VIEWER_REFRESH_S = 1.0  # a viewer's live view refreshes this often, up to AUDIENCE_REFRESHES_PER_S viewers
# All the viewers of one run together refresh about this often per second at most. Each refresh is a
# Streamlit script run in the one server process; past this, a talk's audience saturates the process
# and views fall many seconds behind instead of about one (docs/benchmarks.md#viewerspy).
AUDIENCE_REFRESHES_PER_S = 35.0


# A viewer's refresh runs at this niceness (Linux: per thread; Streamlit runs each script run on a
# new thread, so it lasts one refresh): on a CPU box the race being measured gets the CPU first, and
# an audience's refreshes wait.
VIEWER_NICE = 10


def yield_to_measurements() -> bool:
    """Lower this thread's CPU priority to VIEWER_NICE, for the rest of this script run, and keep it
    off the cores a CPU race's worker has to itself (core.runs.worker_cores). Raising a thread's
    niceness needs no privilege. False where the system does not allow it per thread."""
    tid = threading.get_native_id()
    if not sys.platform.startswith("linux") or tid == os.getpid():
        return False  # elsewhere a thread id is no process id; and never the process's main thread
    try:
        if os.getpriority(os.PRIO_PROCESS, tid) < VIEWER_NICE:
            os.setpriority(os.PRIO_PROCESS, tid, VIEWER_NICE)
    except OSError:
        return False
    share = _app_share()
    if share is not None:
        worker_cores.keep_thread_to_app_cores(share)
    return True


_SHARE: list[worker_cores.CoreShare | None] = []


def _app_share() -> worker_cores.CoreShare | None:
    """This host's core share, read once per process (None: a setting that cannot be read; the race
    that reads it says why)."""
    if not _SHARE:
        try:
            _SHARE.append(worker_cores.this_host())
        except worker_cores.CoreSettingError:
            _SHARE.append(None)
    return _SHARE[0]


def viewer_refresh_s(audience: int, current: float | None = None) -> float:
    """How often a viewer (not the run's owner) refreshes its live view, for `audience` sessions
    following the run: every second up to AUDIENCE_REFRESHES_PER_S of them, then in half-second
    steps so that all of them together stay near that rate (50 viewers: 1.5 s). `current`, the
    session's interval now: it steps back down only once the audience is a fifth below the step,
    so an audience at a boundary does not make every viewer switch back and forth."""
    wanted = max(VIEWER_REFRESH_S, math.ceil(2 * audience / AUDIENCE_REFRESHES_PER_S) / 2)
    if current is not None and wanted < current:
        if audience > 0.8 * AUDIENCE_REFRESHES_PER_S * (current - 0.5):
            return current
    return wanted


class LiveSnapshot:
    """One run as of one store read: what show_run draws. Reads like a RunView (frames, counts,
    summary) and memoises what pages derive from it (`derive`), once for every viewer."""

    def __init__(
        self,
        run: Run,
        view: RunView,
        state: str,
        version: tuple,
        previous: LiveSnapshot | None = None,
    ):
        self.run = run
        self.state = state  # 'queued (position 2)', 'compiled epoch 2/3', 'failed: ...'
        self.version = version
        self._lock = threading.RLock()  # a build may read the summary, which takes it too
        self._memo: dict[Any, Any] = {}
        same_events = previous is not None and previous.version[0] == version[0] and previous.run.id == run.id
        self.damaged = view.damaged  # why some of its events cannot be read, if the store is damaged
        self.bucket = view.bucket  # steps per drawn row: more than 1 for a long finished run (RunView.thin_steps)
        if same_events:  # only the run row moved (phase, progress): keep what the events gave
            self._frames, self._counts, self._events = previous._frames, previous._counts, previous._events
            self.last_recorded_at = previous.last_recorded_at
            self._compiles = previous._compiles
        else:
            self._frames, self._counts, self._events = view.frames(), view.counts(), view.events()
            self.last_recorded_at = dict(view.last_recorded_at)
            self._compiles = view.compiles()

    def frames(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        return self._frames

    def counts(self) -> dict[str, int]:
        return dict(self._counts)

    def compiles(self) -> pd.DataFrame:
        """RunView.compiles as of this snapshot: every compile and recompile, at its step."""
        return self._compiles

    def summary(self, *args: Any) -> Summary:
        """What store_reader.run_summary gives for this run as of this snapshot: the finished
        run's stored summary, else the one computed from its events so far (computed once)."""
        with self._lock:
            if self._memo.get("summary") is None:
                self._memo["summary"] = run_summary(self.run, _Events(self._events))
            return self._memo["summary"]

    def derive(self, key: Any, build: Callable[[], Any]) -> Any:
        """build(), once per snapshot and key, however many sessions ask (the others wait for it)."""
        with self._lock:
            if key not in self._memo:
                self._memo[key] = build()
            return self._memo[key]


class _Events:
    """The events a snapshot captured, read the way run_summary reads a RunView."""

    def __init__(self, events: list[dict[str, Any]]):
        self._events = events

    def summary(
        self, batch_size: int, min_warmup: int = 1, alpha: float = ALPHA, spread: RunToRun | None = None
    ) -> dict[str, Any]:
        batch = batch_size if isinstance(batch_size, int) and batch_size > 0 else 1
        return analysis.summarize_events(held_events(self._events), batch, min_warmup, alpha, spread)


def snapshot_of(run: Run, view: RunView, state: str = "") -> LiveSnapshot:
    """A one-off snapshot of a session's own RunView (the Runs page reopening a stored run)."""
    return LiveSnapshot(run, view, state or run.status, (view.last_id, run.status))


@dataclass
class _Entry:
    view: RunView
    lock: threading.Lock
    snapshot: LiveSnapshot | None = None
    read_at: float = 0.0  # time.monotonic() of the read that the snapshot reflects
    asked_at: float = 0.0
    followers: dict[str, float] = field(default_factory=dict)  # session -> when it last asked


@dataclass(frozen=True)
class QueueSnapshot:
    """The sidebar's view of the machine: what the device probe recorded, what runs, what waits."""

    probe_summary: dict[str, Any] | None
    caps: DeviceCaps | None
    active: tuple[Run, ...]
    queued: tuple[Run, ...]
    paused: bool

    @property
    def environment(self) -> dict[str, Any] | None:
        return (self.probe_summary or {}).get("environment")

    @property
    def cuda(self) -> bool:
        return bool(self.caps and self.caps.cuda)


class LiveBoard:
    """Shared snapshots of the runs being followed in this process, for one store."""

    def __init__(self, store_path: str, viewer_max_age_s: float = VIEWER_MAX_AGE_S):
        self.store_path = store_path
        self.viewer_max_age_s = viewer_max_age_s
        self._store: Store | None = None
        self._store_lock = threading.Lock()
        self._entries: dict[int, _Entry] = {}
        self._entries_lock = threading.Lock()
        self._queue: tuple[float, QueueSnapshot] | None = None
        self._queue_lock = threading.Lock()
        self.reads = 0  # store reads made for snapshots (what tests and the benchmark count)

    def _db(self) -> Store:
        if self._store is None:
            self._store = Store(self.store_path)
        return self._store

    def snapshot(
        self, run_id: int, fresh: bool = False, follower: str | None = None, max_age_s: float | None = None
    ) -> LiveSnapshot | None:
        """The run as every viewer sees it now; None if it does not exist.

        `fresh` (the run's owner): read the store now, as a page of one's own did before. Otherwise a
        snapshot younger than viewer_max_age_s is returned as is; an older one is read again once,
        by whichever session asks first, while the others wait for that read. `follower`: the
        asking session, counted in the run's audience. `max_age_s`: the age accepted, if not
        viewer_max_age_s (the live feed's, core.view.run_screen.feed).
        """
        max_age = self.viewer_max_age_s if max_age_s is None else max_age_s
        now = time.monotonic()
        entry = self._entry(run_id, now)
        if follower is not None:
            entry.followers[follower] = now
        if not fresh and entry.snapshot is not None and now - entry.read_at < max_age:
            return entry.snapshot
        # Too old: read, or wait for the session reading right now (a newer snapshot in a moment is
        # better than handing out one older than the age a viewer accepts).
        with entry.lock:
            if entry.read_at > now or (not fresh and time.monotonic() - entry.read_at < max_age):
                return entry.snapshot  # read by another session while this one waited
            self._refresh(entry, run_id)
            snapshot = entry.snapshot
        self._forget(run_id, entry, now)
        return snapshot

    def read(self, query: Callable[[Store], Any]) -> Any:
        """query(store) on this board's store connection (one connection, used by one thread at a time)."""
        with self._store_lock:
            return query(self._db())

    def audience(self, run_id: int) -> int:
        """How many sessions follow this run now (asked about it in the last AUDIENCE_WINDOW_S)."""
        now = time.monotonic()
        with self._entries_lock:
            entry = self._entries.get(run_id)
            if entry is None:
                return 0
            for session, asked in list(entry.followers.items()):
                if now - asked > AUDIENCE_WINDOW_S:
                    entry.followers.pop(session, None)
            return len(entry.followers)

    def _entry(self, run_id: int, now: float) -> _Entry:
        with self._entries_lock:
            entry = self._entries.get(run_id)
            if entry is None:
                entry = self._entries[run_id] = _Entry(RunView(run_id), threading.Lock())
            entry.asked_at = now
            return entry

    def _forget(self, run_id: int, entry: _Entry, now: float) -> None:
        """After a read: an id that names no run takes no place on the board (asking for 33 such ids
        once pushed out a run whose rebuild then cost seconds); then runs nobody follows any more,
        and past MAX_BOARD_RUNS the least recently asked."""
        with self._entries_lock:
            if entry.snapshot is None and self._entries.get(run_id) is entry:
                del self._entries[run_id]
            by_age = sorted(self._entries.items(), key=lambda item: item[1].asked_at)
            for other_id, _ in by_age[: max(0, len(by_age) - MAX_BOARD_RUNS)]:
                del self._entries[other_id]
            for other_id, other in by_age:
                if now - other.asked_at > IDLE_EVICT_S and other is not entry:
                    self._entries.pop(other_id, None)

    def _refresh(self, entry: _Entry, run_id: int) -> None:
        read_at = time.monotonic()
        with self._store_lock:
            run = self._db().get_run(run_id)
        if run is None:
            entry.snapshot, entry.read_at = None, read_at
            return
        entry.view.label = run_label(run)
        if run.finished and run.summary:  # its numbers are the stored summary: draw from thinned steps
            entry.view.thin_steps(expected=expected_steps(run.params))
        entry.view.poll(_OneQueryAtATime(self))  # a long run's chunks leave the store to other runs between them
        with self._store_lock:
            state = describe(self._db(), run)
            self.reads += 1
        skipped = (run.details or {}).get("compile_skipped") if isinstance(run.details, dict) else None
        version = (
            entry.view.last_id,  # first: a snapshot whose events are unchanged reuses their frames
            run.status,
            run.phase,
            run.progress,
            state,
            run.error,
            skipped,
            run.summary is not None,
            json.dumps(run.details, sort_keys=True, default=str),  # the live compile phase among them
        )
        if entry.snapshot is None or entry.snapshot.version != version:
            entry.snapshot = LiveSnapshot(run, entry.view, state, version, entry.snapshot)
        entry.read_at = read_at

    def queue(self) -> QueueSnapshot:
        """The device card's and the queue's contents, read at most once a QUEUE_MAX_AGE_S."""
        now = time.monotonic()
        with self._queue_lock:
            if self._queue is not None and now - self._queue[0] < QUEUE_MAX_AGE_S:
                return self._queue[1]
            with self._store_lock:
                db = self._db()
                probe = devices.latest_probe(db)
                snap = QueueSnapshot(
                    probe_summary=probe.summary if probe else None,
                    caps=devices.known_caps(db),
                    active=tuple(db.list_runs(status=("starting", "running"))),
                    queued=tuple(db.list_runs(status=("queued",))),
                    paused=db.queue_paused(),
                )
            self._queue = (now, snap)
            return snap


class _OneQueryAtATime:
    """The board's store as RunView.poll reads it: the store's lock held for each query only, so
    the rebuild of one long run (390,000 events: 2.7 s) does not hold every other run's viewers."""

    def __init__(self, board: LiveBoard):
        self._board = board

    def events_after(self, run_id: int, after_id: int = 0, limit: int | None = None) -> list[dict[str, Any]]:
        return self._board.read(lambda db: db.events_after(run_id, after_id, limit))


_BOARDS: dict[str, LiveBoard] = {}
_BOARDS_LOCK = threading.Lock()


def board_for(store_path: str) -> LiveBoard:
    """The process's board for this store (created on first use)."""
    with _BOARDS_LOCK:
        if store_path not in _BOARDS:
            _BOARDS[store_path] = LiveBoard(store_path)
        return _BOARDS[store_path]
