"""Reading one run from the store: read only new events, keep chart-ready frames, and compute
the headline numbers from whatever has been measured so far (live, partial, or finished).

The page keeps one RunView per followed run in its session; each refresh costs one indexed query
for the events after the last one seen, plus frame building only when something arrived.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from core.engine import analysis
from core.runs.store import DamagedEvents, Run, Store

STEP_COLUMNS = ["run", "variant", "phase", "epoch", "step", "time_s", "loss", "cumulative_s"]
EPOCH_COLUMNS = ["run", "variant", "epoch", "train_time_s", "eval_time_s"]
COMPILE_COLUMNS = ["run", "variant", "phase", "epoch", "step", "note"]


def run_label(run: Run) -> str:
    params = run.params or {}
    return f"run {run.id} {params.get('model', '?')} bs{params.get('batch_size', '?')} {params.get('precision', '')}"


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
        self.label = label or f"run {run_id}"
        self.last_id = 0
        self._steps: list[dict[str, Any]] = []
        self._epochs: list[dict[str, Any]] = []
        self._compiles: list[dict[str, Any]] = []  # compiles and recompiles, at the step that paid for them
        self._frames: tuple[pd.DataFrame, pd.DataFrame] | None = None
        self.last_recorded_at: dict[str, float] = {}  # per variant: when its latest event was stored
        self.damaged: str | None = None  # why some of the run's events cannot be read (DamagedEvents)

    def poll(self, store: Store) -> int:
        """Read events newer than the last one seen; returns how many arrived. Where the store's
        file is damaged, what lies before the damage is still taken, and `damaged` says so."""
        try:
            return self.feed(store.events_after(self.run_id, self.last_id))
        except DamagedEvents as exc:
            self.damaged = str(exc)
            return self.feed(exc.readable)

    def feed(self, new: list[dict[str, Any]]) -> int:
        """Take events in stored order (each with its `id`): the store's, or a replay's."""
        for e in new:
            {"step": self._steps, "compile": self._compiles}.get(e["kind"], self._epochs).append(e)
            if e.get("recorded_at") is not None:
                self.last_recorded_at[e["variant"]] = float(e["recorded_at"])
        if new:
            self.last_id = new[-1]["id"]
            self._frames = None
        return len(new)

    def counts(self) -> dict[str, int]:
        out = {"eager": 0, "compiled": 0}
        for e in self._steps:
            if e["phase"] == "train":
                out[e["variant"]] += 1
        return out

    def frames(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """(steps, epochs) DataFrames in the shape core.view.race_charts expects."""
        if self._frames is None:
            steps = pd.DataFrame(self._steps, columns=[*STEP_COLUMNS[1:6], "loss"])
            if not steps.empty:
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
        return [*self._steps, *self._epochs, *self._compiles]


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
