"""Following a run from the store: read only new events, keep chart-ready frames, and compute
the headline numbers from whatever has been measured so far (live, partial, or finished).

The page keeps one RunView per followed run in its session; each refresh costs one indexed query
for the events after the last one seen, plus frame building only when something arrived.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import pandas as pd

from core.engine import analysis
from core.runs.store import Run, Store
from core.view.report import fmt_about, fmt_seconds, probe_worth_naming
from core.view.story import overhead_bridge, projected_words
from core.view.why import recompile_count

STEP_COLUMNS = ["run", "variant", "phase", "epoch", "step", "time_s", "loss", "cumulative_s"]
EPOCH_COLUMNS = ["run", "variant", "epoch", "train_time_s", "eval_time_s"]
COMPILE_COLUMNS = ["run", "variant", "phase", "epoch", "step", "note"]


def run_label(run: Run) -> str:
    params = run.params or {}
    return f"#{run.id} {params.get('model', '?')} bs{params.get('batch_size', '?')} {params.get('precision', '')}"


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

    def poll(self, store: Store) -> int:
        """Read events newer than the last one seen; returns how many arrived."""
        return self.feed(store.events_after(self.run_id, self.last_id))

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
        """(steps, epochs) DataFrames in the shape core.view.charts expects."""
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
        """Headline numbers from what has been measured so far (same definitions as the CLI)."""
        return analysis.summarize_events([*self._steps, *self._epochs, *self._compiles], batch_size, min_warmup)

    def compiles(self) -> pd.DataFrame:
        """Every compile and recompile so far: variant, phase, epoch, step and what happened."""
        return pd.DataFrame(
            [{k: e.get(k) for k in COMPILE_COLUMNS[1:]} for e in self._compiles], columns=COMPILE_COLUMNS[1:]
        ).assign(run=self.label)

    def train_times(self, variant: str) -> list[float]:
        return [e["time_s"] for e in self._steps if e["phase"] == "train" and e["variant"] == variant]

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


@dataclass(frozen=True)
class Card:
    label: str
    value: str
    help: str
    delta: str | None = None  # shown under the value, with an arrow for its sign
    delta_color: str = "normal"  # "normal": up is good; "inverse": down is good; "off": neutral
    delta_arrow: str = "auto"  # "auto" follows the sign of the delta text


def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:,.0f} MiB"


def _change(new: float | None, old: float | None) -> str | None:
    """Signed relative change, compiled against eager ("-7% vs eager")."""
    if not new or not old:
        return None
    pct = (new / old - 1) * 100
    return f"{'+' if pct >= 0 else '-'}{abs(pct):.0f}% vs eager"


def samples_per_s(rate: float | None) -> str:
    """Throughput with its unit, short enough for a card: '1,250 samples/s', '62.9k samples/s'."""
    if rate is None:
        return "-"
    if rate >= 10_000:
        return f"{rate / 1000:,.1f}k samples/s"
    return f"{rate:,.0f} samples/s"


def break_even_card(summary: dict[str, Any], total: int | None, running: bool) -> Card:
    """Break-even: the step (of how many) and when; projected (and marked so) when not reached."""
    about = "When the compiled run's total time drops below eager's for good. "
    step, reason = summary.get("break_even_step"), summary.get("break_even_reason") or ""
    extra = summary.get("break_even_extrapolated_step")
    if step is not None:
        wall = summary.get("break_even_wall_s")
        when = f"{wall:.0f} s in" if wall is not None else None
        of = f"of {total:,}" if total else None
        return Card(
            "Break-even",
            f"step {step:,}",
            about + (f"{wall:.1f} s into the compiled run." if wall is not None else ""),
            delta=", ".join(p for p in (of, when) if p) or None,
            delta_color="off",
            delta_arrow="off",
        )
    if reason.startswith("never"):
        if running:  # the rest of the run could still change it: no final word yet
            return Card(
                "Break-even",
                "not yet",
                about + f"So far {reason.split(': ', 1)[-1]}.",
                delta="not on course so far",
                delta_color="off",
                delta_arrow="off",
            )
        return Card("Break-even", "never", about + f"{reason}.")
    if extra is None or summary.get("verdict") != analysis.FASTER:  # no projection from a gain in doubt
        value = "not yet" if running and summary.get("steady_state_speedup") is not None else "-"
        if not running and summary.get("steady_state_speedup") is not None:
            value = "not reached"
        why = "" if extra is None else " No clear per-step gain to project a break-even from."
        off_course = running and summary.get("verdict") == analysis.SLOWER
        return Card(
            "Break-even",
            value,
            about + "Not within this run." + why,
            delta="not on course so far" if off_course else None,
            delta_color="off",
            delta_arrow="off",
        )
    projected_step = math.floor(extra) + 1
    wall = summary.get("break_even_projected_wall_s")
    if running:
        return Card(
            "Break-even",
            "not yet",
            about + f"At the steady rates so far: about step {projected_step:,}.",
            delta=projected_words(extra, total, running=True),
            delta_color="off",
            delta_arrow="off",
        )
    return Card(
        "Break-even",
        f"≈ step {projected_step:,}",
        about + f"Not within this run{f' of {total:,} steps' if total else ''}; at the steady rates about "
        f"step {projected_step:,}" + (f", {wall:.0f} s into the compiled run." if wall is not None else "."),
        delta="projected" + (f", {fmt_about(wall)}" if wall is not None else ""),
        delta_color="off",
        delta_arrow="off",
    )


def result_cards(
    summary: dict[str, Any], memory: dict[str, Any] | None = None, total: int | None = None, running: bool = False
) -> list[Card]:
    """The result cards: compile cost, overhead, speedup, break-even, throughput, memory.

    Values stay short (a projector shows ~10 characters per card); details go in the help text.
    `total` is each variant's step count (for "step 1,035 of 1,500"); `running` keeps a projection
    marked as one ("not yet", "projected ≈ step 1,000 of 1,500").
    """
    ci = summary.get("speedup_ci95")
    speed = summary.get("steady_state_speedup")
    memory = memory or {}
    eager_tput, compiled_tput = summary.get("eager_samples_per_s"), summary.get("compiled_samples_per_s")
    bridge = overhead_bridge(summary)
    recompiles = recompile_count(summary)
    cards = [
        Card(
            "Compile time",
            fmt_seconds(summary.get("compile_time_s"), ms_digits=0, s_digits=1),
            "First compiled steps minus the same eager steps: what torch.compile cost up front."
            + (f" {_recompiles_help(recompiles)}" if recompiles is not None else "")
            + _probe_help(summary.get("cpu_isa_probe_s")),
            delta=_recompiles_delta(recompiles),
            delta_color="inverse" if recompiles else "off",
            delta_arrow="off",
        ),
        Card(
            "First-epoch overhead",
            fmt_seconds(summary.get("first_epoch_overhead_s"), signed=True, ms_digits=0, s_digits=1),
            "Compiled epoch 1 minus eager epoch 1, as in the original tutorial." + (f" {bridge[1]}" if bridge else ""),
            delta=bridge[0] if bridge else None,
            delta_color="off",
            delta_arrow="off",
        ),
        Card(
            "Steady-state speedup",
            "-" if speed is None else f"{speed:.2f}x",
            "Median eager step / median compiled step after warm-up"
            + (f"; 95% interval {ci[0]:.2f}-{ci[1]:.2f}x." if ci else "."),
            delta=summary.get("verdict"),
            # Unsigned text reads as "up": green and up for faster, red and down for slower, grey otherwise.
            delta_color={"faster": "normal", "slower": "inverse"}.get(summary.get("verdict") or "", "off"),
            delta_arrow={"faster": "up", "slower": "down"}.get(summary.get("verdict") or "", "off"),
        ),
        break_even_card(summary, total, running),
        Card(
            "Throughput (compiled)",
            samples_per_s(compiled_tput),
            "Training samples per second at the steady median step"
            + (f"; eager: {samples_per_s(eager_tput)}." if eager_tput else "."),
            delta=_change(compiled_tput, eager_tput),
        ),
        Card(
            "Peak memory (compiled)",
            _mib(memory.get("compiled")),
            f"Eager: {_mib(memory.get('eager'))}; {memory.get('kind') or 'measured when each variant finishes'}.",
            delta=_change(memory.get("compiled"), memory.get("eager")),
            delta_color="inverse",  # less memory is better
        ),
    ]
    if summary.get("compile_failed"):
        return _without_compiled_figures(
            cards, f"Compile failed on this model: {summary['compile_failed']}; eager ran.", "compile failed"
        )
    skipped = summary.get("compile_skipped")
    return _compile_did_not_happen(cards, skipped) if skipped else cards


def _recompiles_delta(recompiles: int | None) -> str | None:
    if recompiles is None:
        return None
    return "no recompiles" if recompiles == 0 else f"{recompiles} recompile{'s' if recompiles != 1 else ''}"


def _probe_help(probe_s: Any) -> str:
    """Where Inductor's one-time CPU feature probe went (core.engine.cpu_probe): not in this figure."""
    probe_s = probe_worth_naming(probe_s)
    if probe_s is None:
        return ""
    return (
        f" Not counted: Inductor's one-time CPU feature probe ({probe_s:.1f} s, run before timing), which a "
        "machine pays once, not once per model."
    )


def _recompiles_help(recompiles: int) -> str:
    if recompiles == 0:
        return "No recompiles: every step ran the graphs compiled first."
    return (
        f"{recompiles} recompile{'s' if recompiles != 1 else ''}: a guard failed (a new shape, a new value) and torch "
        "compiled again; the step chart marks each, with the guard that failed."
    )


# The cards whose figures compare compiled code with eager code: meaningless when none compiled.
_COMPILE_CARDS = ("Compile time", "Steady-state speedup", "Break-even")


def _compile_did_not_happen(cards: list[Card], reason: str) -> list[Card]:
    """No figure that needs compiled code is shown as a finding when compile did not happen."""
    return _without_compiled_figures(
        cards, f"Compile did not happen: {reason}. Both variants ran eager code.", "compile did not happen"
    )


def _without_compiled_figures(cards: list[Card], note: str, delta: str) -> list[Card]:
    """The compile figures replaced by what happened instead (compile skipped, or failed)."""
    value = "failed" if delta == "compile failed" else "no compile"
    return [
        Card(c.label, value, note, delta=delta, delta_color="off", delta_arrow="off")
        if c.label in _COMPILE_CARDS
        else c
        for c in cards
    ]


def memory_of(run: Run) -> dict[str, Any]:
    s = run.summary or {}
    return {
        "eager": s.get("eager_peak_memory_bytes"),
        "compiled": s.get("compiled_peak_memory_bytes"),
        "kind": s.get("memory_kind"),
    }


def run_row(run: Run) -> dict[str, Any]:
    """The flat row the runs table shows (also the Runs page's table)."""
    p, s = run.params or {}, run.summary or {}
    env = run.environment or {}
    return {
        "id": run.id,
        "status": run.status,
        "imported": bool(run.imported),
        "created": time.strftime("%Y-%m-%d %H:%M", time.localtime(run.created_at)),
        "device": str(env.get("device_type") or run.device_key),
        "device_name": None if env.get("device_name") is None else str(env["device_name"]),
        "model": str(p.get("model", "?")),
        "batch_size": p.get("batch_size", 0),
        "precision": str(p.get("precision", "?")),
        "mode": str(p.get("mode", "?")),
        "scope": str(p.get("compile_scope", "whole")),
        "sweep": run.sweep_id,
        "first_epoch_overhead_s": s.get("first_epoch_overhead_s"),
        "steady_state_speedup": None
        if s.get("compile_skipped") or s.get("compile_failed")
        else s.get("steady_state_speedup"),
        "break_even_step": s.get("break_even_step"),
        "error": run.error,
    }
