"""Reading one run from the store: read only new events, keep chart-ready frames, and compute
the headline numbers from whatever has been measured so far (live, partial, or finished).

The page keeps one RunView per followed run in its session; each refresh costs one indexed query
for the events after the last one seen, plus frame building only when something arrived.

Rows are read through their kinds' codec (core.engine.events), never their packed fields by hand:
epoch and compile rows back into their events here, every row in the numbers (analysis.summarize_events).
A step row is StepEvent's own fields as they are (StepEvent.to_row), and a view reads many of them
per refresh (a long run's hundreds of thousands while thinning), so the frames and the thinning
read steps by those field names from the row itself: decoding each into a StepEvent costs several
times as much.
"""

from __future__ import annotations

import dataclasses
from array import array
from typing import Any

import pandas as pd

from core.engine import analysis, events
from core.engine.events import CompileEvent, EpochEvent, StepEvent
from core.engine.intervals import ALPHA, RunToRun
from core.engine.spec import RunSpec
from core.engine.stopping import stored_alpha
from core.engine.summary import Summary
from core.runs.store import DamagedEvents, Run, Store

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
