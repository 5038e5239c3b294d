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

import dataclasses
import json
import math
import os
import re
import sys
import threading
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from core.engine import analysis, events
from core.engine.analysis import stored_alpha
from core.engine.events import CompileEvent, EpochEvent, StepEvent
from core.engine.intervals import ALPHA, RunToRun
from core.engine.spec import DeviceCaps, RunSpec
from core.engine.summary import Summary
from core.runs import fleet, race_conditions
from core.runs.store import DamagedEvents, Run, Store
from core.view.host_tables import describe

# ----------------------------------------------------------------------
# Reading one run from the store: read only new events, keep chart-ready frames, and compute
# the headline numbers from whatever has been measured so far (live, partial, or finished).
#
# The page keeps one RunView per followed run in its session; each refresh costs one indexed query
# for the events after the last one seen, plus frame building only when something arrived.
#
# Rows are read through their kinds' codec (core.engine.events), never their packed fields by hand:
# epoch and compile rows back into their events here, every row in the numbers (analysis.summarize_events).
# A step row is StepEvent's own fields as they are (StepEvent.to_row), and a view reads many of them
# per refresh (a long run's hundreds of thousands while thinning), so the frames and the thinning
# read steps by those field names from the row itself: decoding each into a StepEvent costs several
# times as much.

STEP_COLUMNS = ["run", "variant", "phase", "epoch", "step", "time_s", "loss", "cumulative_s"]
# A finished run's view holds at most this many step rows (thin_steps): a 64 MiB bundle is about
# 560,000 step events, which as rows read from the store held about 450 MB per view. Its charts draw
# at most chart_style.MAX_POINTS_PER_VARIANT points per variant anyway.
MAX_VIEW_STEPS = 8_000
POLL_CHUNK = 20_000  # events read per query while thinning: a long run is never read whole at once
EPOCH_COLUMNS = ["run", "variant", "epoch", "train_time_s", "eval_time_s"]
COMPILE_COLUMNS = ["run", "variant", "phase", "epoch", "step", "note"]


def run_label(run: Run) -> str:
    params = run.params or {}
    return f"run {run.id} {params.get('model', '?')} bs{params.get('batch_size', '?')} {params.get('precision', '')}"


def held_events(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events the live numbers stand on: all but the eager steps measured after the compiled
    run's latest step. Those (eager's next epoch, when the two take turns) wait for compiled steps
    to meet them: with no new compiled data the speedup and the projection hold still, as the words
    "after 200 of 600 compiled steps" say they do. Step rows keep their stored order in `rows`."""
    steps = [e for e in rows if e["kind"] == StepEvent.kind]
    last = next((i for i in range(len(steps) - 1, -1, -1) if steps[i]["variant"] == "compiled"), None)
    if last is None or last == len(steps) - 1:
        return list(rows)
    late = {id(e) for e in steps[last + 1 :] if e["variant"] == "eager"}
    return [e for e in rows if id(e) not in late]


class RunView:
    """Events of one run, accumulated incrementally."""

    def __init__(self, run_id: int, label: str = ""):
        self.run_id = run_id
        self.label = label or f"run {run_id}"
        self.last_id = 0
        self._steps: list[dict[str, Any]] = []
        self._epochs: list[dict[str, Any]] = []
        self._compiles: list[dict[str, Any]] = []  # compiles and recompiles, at the step that paid for them
        self._others: list[dict[str, Any]] = []  # replicate processes that landed, busy stretches
        self._frames: tuple[pd.DataFrame, pd.DataFrame] | None = None
        self.last_recorded_at: dict[str, float] = {}  # per variant: when its latest event was stored
        self.damaged: str | None = None  # why some of the run's events cannot be read (DamagedEvents)
        self.bucket = 1  # consecutive steps of a variant and phase per step row (thin_steps)
        self._thin: _Thinned | None = None

    def poll(self, store: Store) -> int:
        """Read events newer than the last one seen; returns how many arrived. Where the store's
        file is damaged, what lies before the damage is still taken, and `damaged` says so. A thinned
        view reads in chunks of POLL_CHUNK, so a long run is never held whole."""
        arrived = 0
        while True:
            limit = POLL_CHUNK if self._thin is not None else None
            try:
                new = store.events_after(self.run_id, self.last_id, limit=limit)
            except DamagedEvents as exc:
                self.damaged = str(exc)
                return arrived + self.feed(exc.readable)
            arrived += self.feed(new)
            if limit is None or len(new) < limit:
                return arrived

    def thin_steps(self, max_steps: int = MAX_VIEW_STEPS, expected: int | None = None) -> None:
        """From now on hold at most about `max_steps` step rows: of each `bucket` consecutive steps
        of one variant and phase, the median one's row, and the slowest one's where it stands out
        (_Thinned). `expected`: how many step events the run records at most (expected_steps), so
        that the bucket is right from the start. For a finished run whose numbers are its stored
        summary: counts() and the projection's step times stay exact; events() and summary() then
        hold the kept rows."""
        if self._thin is None:
            self._thin = _Thinned(max_steps, expected)
            steps, self._steps = self._steps, []
            self._add_steps(steps)
            self._frames = None

    def feed(self, new: list[dict[str, Any]]) -> int:
        """Take events in stored order (each with its `id`): the store's, or a replay's."""
        kept = {StepEvent.kind: self._steps, CompileEvent.kind: self._compiles, EpochEvent.kind: self._epochs}
        thinned, step = self._thin is not None, StepEvent.kind
        for e in new:
            if thinned and e["kind"] == step:
                self._add_steps((e,))
            else:
                kept.get(e["kind"], self._others).append(e)
            if e.get("recorded_at") is not None:
                self.last_recorded_at[e["variant"]] = float(e["recorded_at"])
        if new:
            self.last_id = new[-1]["id"]
            self._frames = None
        return len(new)

    def _add_steps(self, steps) -> None:
        thin = self._thin
        for e in steps:
            rows = thin.add(e)
            if rows:
                self._steps.extend(rows)
                if len(self._steps) > thin.max_steps:
                    self._steps = thin.merge_pairs(self._steps)
        self.bucket = thin.bucket

    def _rows(self) -> list[dict[str, Any]]:
        """The step rows, with a thinned view's partly filled buckets at their place."""
        if self._thin is None or not self._thin.pending:
            return self._steps
        return sorted([*self._steps, *self._thin.open_rows()], key=lambda r: r["id"])

    def counts(self) -> dict[str, int]:
        if self._thin is not None:
            return dict(self._thin.counts)
        out = {"eager": 0, "compiled": 0}
        for e in self._steps:
            if e["phase"] == "train":
                out[e["variant"]] += 1
        return out

    def frames(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """(steps, epochs) DataFrames in the shape core.view.race_charts expects."""
        if self._frames is None:
            thinned = self._thin is not None
            columns = [*STEP_COLUMNS[1:6], "loss", *(["cumulative_s"] if thinned else [])]
            steps = pd.DataFrame(self._rows(), columns=columns)
            if thinned:  # each row carries the cumulative time of every step up to it
                steps.loc[steps["phase"] != "train", "cumulative_s"] = float("nan")
                steps["cumulative_s"] = steps["cumulative_s"].astype(float)
            elif not steps.empty:
                steps["cumulative_s"] = steps[steps["phase"] == "train"].groupby("variant")["time_s"].cumsum()
            else:
                steps["cumulative_s"] = pd.Series(dtype=float)
            steps.insert(0, "run", self.label)
            epochs = pd.DataFrame(_decoded(self._epochs), columns=EPOCH_COLUMNS[1:])
            epochs.insert(0, "run", self.label)
            self._frames = (steps, epochs)
        return self._frames

    def summary(
        self, batch_size: int, min_warmup: int = 1, alpha: float = ALPHA, spread: RunToRun | None = None
    ) -> dict[str, Any]:
        """Headline numbers from what has been measured so far (same definitions as the CLI), as of
        the compiled run's latest step (held_events); `alpha`: the race's error rate (the stopping
        rule's: stopping.stored_alpha); `spread`: the run-to-run spread the race runs with."""
        return analysis.summarize_events(held_events(self.events()), batch_size, min_warmup, alpha, spread)

    def compiles(self) -> pd.DataFrame:
        """Every compile and recompile so far: variant, phase, epoch, step and what happened."""
        return pd.DataFrame(_decoded(self._compiles), columns=COMPILE_COLUMNS[1:]).assign(run=self.label)

    def train_times(self, variant: str) -> list[float]:
        """A variant's train step times as the live numbers use them (held_events)."""
        if self._thin is not None:
            return self._thin.held_train_times(variant)
        held = held_events(self._steps)
        return [e["time_s"] for e in held if e["phase"] == "train" and e["variant"] == variant]

    def events(self) -> list[dict[str, Any]]:
        """Every event read so far (a copy: later polls do not change it)."""
        return [*self._rows(), *self._epochs, *self._compiles, *self._others]


def _decoded(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of one kind as their events' fields (an epoch's train time under its own name), read
    back through the codec; a row this app did not write is left out."""
    return [dataclasses.asdict(e) for e in map(events.from_row, rows) if e is not None]


class _Thinned:
    """A thinned view's state (RunView.thin_steps): the exact counts, sums and train step times
    (8 bytes a step, for the projection), and each variant and phase's bucket being filled. A full
    bucket becomes the row of its median step (that step's own time, step, loss and cumulative
    time: a real step, so medians and the steady level read as they do unthinned) and, where its
    slowest step took over twice that (a compile, a recompile, a stall), that step's row too."""

    def __init__(self, max_steps: int, expected: int | None = None):
        self.max_steps = max(4, max_steps)
        self.bucket = max(1, -(-expected // self.max_steps)) if expected else 1
        self.counts = {"eager": 0, "compiled": 0}
        self.cumulative = {"eager": 0.0, "compiled": 0.0}
        self.times = {"eager": array("d"), "compiled": array("d")}  # train step times, in order
        self.eager_at = array("q")  # each eager train step's place among all steps
        self.steps_seen = 0
        self.last_compiled_at: int | None = None
        self.pending: dict[tuple[str, str], list] = {}  # (variant, phase) -> its open bucket's steps

    def add(self, e: dict[str, Any]) -> list[dict[str, Any]]:
        """Count one step event into its bucket; the bucket's rows when that fills it."""
        variant, phase = e["variant"], e["phase"]
        time_s = float(e["time_s"])
        cumulative = None
        if phase == "train":
            self.counts[variant] += 1
            cumulative = self.cumulative[variant] = self.cumulative[variant] + time_s
            self.times[variant].append(time_s)
            if variant == "eager":
                self.eager_at.append(self.steps_seen)
        if variant == "compiled":
            self.last_compiled_at = self.steps_seen
        self.steps_seen += 1
        steps = self.pending.setdefault((variant, phase), [])
        steps.append((time_s, cumulative, e))
        if len(steps) >= self.bucket:
            del self.pending[(variant, phase)]
            return _bucket_rows(steps)
        return []

    def open_rows(self) -> list[dict[str, Any]]:
        return [row for steps in self.pending.values() for row in _bucket_rows(steps)]

    def merge_pairs(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Double the bucket: of every two consecutive median rows of a variant and phase the later
        stays; slow steps stay (the slowest max_steps // 4 of them)."""
        self.bucket *= 2
        spikes = sorted((r for r in rows if r["spike"]), key=lambda r: r["time_s"])[-(self.max_steps // 4) :]
        kept, waiting = {id(r) for r in spikes}, set()
        for row in rows:
            if not row["spike"]:
                key = (row["variant"], row["phase"])
                if key in waiting:
                    waiting.discard(key)
                    kept.add(id(row))
                else:
                    waiting.add(key)
        return [r for r in rows if id(r) in kept]

    def held_train_times(self, variant: str) -> list[float]:
        """store_reader.held_events's train step times: eager's measured after compiled's last step wait."""
        if variant == "compiled" or self.last_compiled_at is None or self.last_compiled_at == self.steps_seen - 1:
            return self.times[variant].tolist()
        return [t for t, at in zip(self.times["eager"], self.eager_at) if at < self.last_compiled_at]


SPIKE_FACTOR = 2.0  # a step over this many times its bucket's median keeps a row of its own


def _bucket_rows(steps: list[tuple[float, float | None, dict[str, Any]]]) -> list[dict[str, Any]]:
    ranked = sorted(range(len(steps)), key=lambda i: steps[i][0])
    median, slowest = ranked[(len(ranked) - 1) // 2], ranked[-1]
    chosen = [median]
    if slowest != median and steps[slowest][0] > SPIKE_FACTOR * steps[median][0]:
        chosen = sorted((median, slowest))
    return [_row(*steps[i], spike=i != median) for i in chosen]


def _row(time_s: float, cumulative: float | None, e: dict[str, Any], spike: bool) -> dict[str, Any]:
    row = {k: e.get(k) for k in ("id", "kind", "variant", "phase", "epoch", "step", "loss", "recorded_at")}
    row.update(time_s=time_s, cumulative_s=cumulative, spike=spike)
    return row


def expected_steps(params: Any) -> int | None:
    """The most step events a race of these params records (both variants, training and
    evaluation), None where the params cannot say."""
    spec = RunSpec.stored(params)
    return spec.recorded_steps if spec is not None and spec.recorded_steps > 0 else None


def run_summary(run: Run, view: RunView) -> Summary:
    """The summary a page shows: the stored one when the run is finished (the worker's), else
    computed here from the events so far with the run's compile window, and the
    compile-did-not-happen reason as soon as the worker knows it."""
    if run.finished and run.summary:
        return Summary.of(run.summary)
    params = run.params or {}
    floor = analysis.warmup_floor(str(params.get("mode", "default")), str(params.get("backend", "inductor")))
    summary = view.summary(  # the interval the stopping rule looks at, widened as the race's headline is
        params.get("batch_size", 1), floor, stored_alpha(params), analysis.spread_of(run.environment)
    )
    skipped = (run.details or {}).get("compile_skipped") if isinstance(run.details, dict) else None
    return Summary.from_dict({**summary, "compile_skipped": skipped})


VIEWER_MAX_AGE_S = 0.4  # a viewer's page refreshes every 1 s: about 1.4 s behind the store at most
QUEUE_MAX_AGE_S = 1.0  # the sidebar's device card and queue
IDLE_EVICT_S = 300.0  # a run nobody asked about for this long is dropped from the board
# How long a read waits for the store (a pooled PostgreSQL connection, SQLite's lock) before it fails
# as unavailable: while the database is away a viewer is told at once to try again (the feed's 503),
# instead of every viewer's thread waiting out the pool's 30 s. Reads take milliseconds.
READ_WAIT_S = 3.0
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
    off the cores a CPU race's worker has to itself (core.runs.race_conditions). Raising a thread's
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
        race_conditions.keep_thread_to_app_cores(share)
    return True


_SHARE: list[race_conditions.CoreShare | None] = []


def _app_share() -> race_conditions.CoreShare | None:
    """This host's core share, read once per process (None: a setting that cannot be read; the race
    that reads it says why)."""
    if not _SHARE:
        try:
            _SHARE.append(race_conditions.this_host())
        except race_conditions.CoreSettingError:
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
            self._store = Store(self.store_path, wait_s=READ_WAIT_S)
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
                probe = fleet.latest_probe(db)
                snap = QueueSnapshot(
                    probe_summary=probe.summary if probe else None,
                    caps=fleet.known_caps(db),
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


# ----------------------------------------------------------------------
# How often a live race's view refreshes, and what the page says when watching cannot be kept out
# of the measurement.
#
# Why: on a small machine the page that watches a race shares the CPU the race is timed on. Each
# refresh costs the server a snapshot and a document (or a script run), and the browser a redraw of
# every chart that changed: with the owner's page refreshing every second, the browser and the
# server together can take a large share of a small CPU (docs/benchmarks.md#watchingpy). While steps are
# timed the view refreshes every TIMED_REFRESH_S instead; while the race waits, compiles or
# evaluates, nothing of interest is timed per step and the view stays lively (the compile's elapsed
# seconds count up on the page). A young race stays lively too: until the variant being timed has
# its first steps on the page, which then appear as soon as they are stored.

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
