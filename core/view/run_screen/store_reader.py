"""Reading one run from the store: read only new events, keep chart-ready frames, and compute
the headline numbers from whatever has been measured so far (live, partial, or finished).

The page keeps one RunView per followed run in its session; each refresh costs one indexed query
for the events after the last one seen, plus frame building only when something arrived.
"""

from __future__ import annotations

from array import array
from typing import Any

import pandas as pd

from core.engine import analysis
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
    return f"#{run.id} {params.get('model', '?')} bs{params.get('batch_size', '?')} {params.get('precision', '')}"


def held_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events the live numbers stand on: all but the eager steps measured after the compiled
    run's latest step. Those (eager's next epoch, when the two take turns) wait for compiled steps
    to meet them: with no new compiled data the speedup and the projection hold still, as the words
    "after 200 of 600 compiled steps" say they do. Step events keep their stored order in `events`."""
    steps = [e for e in events if e["kind"] == "step"]
    last = next((i for i in range(len(steps) - 1, -1, -1) if steps[i]["variant"] == "compiled"), None)
    if last is None or last == len(steps) - 1:
        return list(events)
    late = {id(e) for e in steps[last + 1 :] if e["variant"] == "eager"}
    return [e for e in events if id(e) not in late]


class RunView:
    """Events of one run, accumulated incrementally."""

    def __init__(self, run_id: int, label: str = ""):
        self.run_id = run_id
        self.label = label or f"#{run_id}"
        self.last_id = 0
        self._steps: list[dict[str, Any]] = []
        self._epochs: list[dict[str, Any]] = []
        self._compiles: list[dict[str, Any]] = []  # compiles and recompiles, at the step that paid for them
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

    def thin_steps(self, max_steps: int = MAX_VIEW_STEPS) -> None:
        """From now on hold at most about `max_steps` step rows: consecutive steps of one variant and
        phase are merged, `bucket` at a time (the slowest step time of them, the last one's step,
        loss and cumulative time). For a finished run whose numbers are its stored summary: what the
        view still counts exactly is counts() and the projection's step times; events() and
        summary() then hold the merged rows."""
        if self._thin is None:
            self._thin = _Thinned(max_steps)
            steps, self._steps = self._steps, []
            self._add_steps(steps)
            self._frames = None

    def feed(self, new: list[dict[str, Any]]) -> int:
        """Take events in stored order (each with its `id`): the store's, or a replay's."""
        for e in new:
            if e["kind"] == "step" and self._thin is not None:
                self._add_steps((e,))
            else:
                {"step": self._steps, "compile": self._compiles}.get(e["kind"], self._epochs).append(e)
            if e.get("recorded_at") is not None:
                self.last_recorded_at[e["variant"]] = float(e["recorded_at"])
        if new:
            self.last_id = new[-1]["id"]
            self._frames = None
        return len(new)

    def _add_steps(self, steps) -> None:
        thin = self._thin
        for e in steps:
            row = thin.add(e)
            if row is not None:
                self._steps.append(row)
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
            epochs = pd.DataFrame(
                [
                    {
                        "variant": e["variant"],
                        "epoch": e["epoch"],
                        "train_time_s": e["time_s"],
                        "eval_time_s": e["eval_time_s"],
                    }
                    for e in self._epochs
                ],
                columns=EPOCH_COLUMNS[1:],
            )
            epochs.insert(0, "run", self.label)
            self._frames = (steps, epochs)
        return self._frames

    def summary(self, batch_size: int, min_warmup: int = 1) -> dict[str, Any]:
        """Headline numbers from what has been measured so far (same definitions as the CLI), as of
        the compiled run's latest step (held_events)."""
        return analysis.summarize_events(held_events(self.events()), batch_size, min_warmup)

    def compiles(self) -> pd.DataFrame:
        """Every compile and recompile so far: variant, phase, epoch, step and what happened."""
        return pd.DataFrame(
            [{k: e.get(k) for k in COMPILE_COLUMNS[1:]} for e in self._compiles], columns=COMPILE_COLUMNS[1:]
        ).assign(run=self.label)

    def train_times(self, variant: str) -> list[float]:
        """A variant's train step times as the live numbers use them (held_events)."""
        if self._thin is not None:
            return self._thin.held_train_times(variant)
        held = held_events(self._steps)
        return [e["time_s"] for e in held if e["phase"] == "train" and e["variant"] == variant]

    def projection(self) -> dict[str, Any] | None:
        """Where compile would pay for itself at the steady rates (analysis.projected_break_even),
        as the dict the race and lead charts take; None when there is nothing to project."""
        found = analysis.projected_break_even(self.train_times("eager"), self.train_times("compiled"))
        if found is None:
            return None
        return {
            "position": found.position,
            "step": found.step,
            "wall_s": found.wall_s,
            "eager_step_s": found.eager_step_s,
            "compiled_step_s": found.compiled_step_s,
        }

    def events(self) -> list[dict[str, Any]]:
        """Every event read so far (a copy: later polls do not change it)."""
        return [*self._rows(), *self._epochs, *self._compiles]


class _Thinned:
    """A thinned view's state (RunView.thin_steps): the exact counts, sums and train step times
    (8 bytes a step, for the projection), and each variant and phase's bucket being filled: its
    latest event, slowest step time and cumulative time (a row is made once a bucket is full)."""

    def __init__(self, max_steps: int):
        self.max_steps = max(2, max_steps)
        self.bucket = 1
        self.counts = {"eager": 0, "compiled": 0}
        self.cumulative = {"eager": 0.0, "compiled": 0.0}
        self.times = {"eager": array("d"), "compiled": array("d")}  # train step times, in order
        self.eager_at = array("q")  # each eager train step's place among all steps
        self.steps_seen = 0
        self.last_compiled_at: int | None = None
        self.pending: dict[tuple[str, str], list] = {}  # (variant, phase) -> [latest, slowest, cumulative, filled]

    def add(self, e: dict[str, Any]) -> dict[str, Any] | None:
        """Count one step event into its bucket; the bucket's row when that fills it."""
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
        held = self.pending.get((variant, phase))
        if held is None:
            held = self.pending[(variant, phase)] = [e, time_s, cumulative, 1]
        else:
            held[0], held[2], held[3] = e, cumulative, held[3] + 1
            if time_s > held[1]:
                held[1] = time_s
        if held[3] >= self.bucket:
            del self.pending[(variant, phase)]
            return _row(held)
        return None

    def open_rows(self) -> list[dict[str, Any]]:
        return [_row(held) for held in self.pending.values()]

    def merge_pairs(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Every two consecutive full buckets of a variant and phase as one: the bucket doubles."""
        self.bucket *= 2
        open_rows: dict[tuple[str, str], dict[str, Any]] = {}
        out = []
        for row in rows:
            key = (row["variant"], row["phase"])
            first = open_rows.pop(key, None)
            if first is None:
                open_rows[key] = row
            elif first["time_s"] > row["time_s"]:
                out.append({**row, "time_s": first["time_s"]})
            else:
                out.append(row)
        for key, row in open_rows.items():  # half a bucket: it becomes the open one, filled further
            held = self.pending.get(key)
            if held is None:
                self.pending[key] = [row, row["time_s"], row["cumulative_s"], self.bucket // 2]
            else:
                held[1], held[3] = max(held[1], row["time_s"]), held[3] + self.bucket // 2
        return out

    def held_train_times(self, variant: str) -> list[float]:
        """store_reader.held_events's train step times: eager's measured after compiled's last step wait."""
        if variant == "compiled" or self.last_compiled_at is None or self.last_compiled_at == self.steps_seen - 1:
            return self.times[variant].tolist()
        return [t for t, at in zip(self.times["eager"], self.eager_at) if at < self.last_compiled_at]


def _row(held: list) -> dict[str, Any]:
    latest, slowest, cumulative, _ = held
    row = {k: latest.get(k) for k in ("id", "kind", "variant", "phase", "epoch", "step", "loss", "recorded_at")}
    row.update(time_s=slowest, cumulative_s=cumulative)
    return row


def run_summary(run: Run, view: RunView) -> dict[str, Any]:
    """The summary a page shows: the stored one when the run is finished, else computed from the
    events so far with the run's compile window, and the compile-did-not-happen reason as soon as
    the worker knows it."""
    if run.finished and run.summary:
        return run.summary
    params = run.params or {}
    floor = analysis.warmup_floor(str(params.get("mode", "default")), str(params.get("backend", "inductor")))
    summary = view.summary(params.get("batch_size", 1), floor)
    skipped = (run.details or {}).get("compile_skipped") if isinstance(run.details, dict) else None
    if isinstance(skipped, str):
        summary["compile_skipped"] = skipped
    return summary
