"""Following a run from the store: read only new events, keep chart-ready frames, and compute
the headline numbers from whatever has been measured so far (live, partial, or finished).

The page keeps one RunView per followed run in its session; each refresh costs one indexed query
for the events after the last one seen, plus frame building only when something arrived.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import pandas as pd

from core.engine import analysis
from core.runs.store import Run, Store
from core.view.report import fmt_seconds

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

    def poll(self, store: Store) -> int:
        """Read events newer than the last one seen; returns how many arrived."""
        new = store.events_after(self.run_id, self.last_id)
        for e in new:
            {"step": self._steps, "compile": self._compiles}.get(e["kind"], self._epochs).append(e)
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


def result_cards(summary: dict[str, Any], memory: dict[str, Any] | None = None) -> list[Card]:
    """The result cards: compile cost, overhead, speedup, break-even, throughput, memory.

    Values stay short (a projector shows ~10 characters per card); details go in the help text.
    """
    ci = summary.get("speedup_ci95")
    speed = summary.get("steady_state_speedup")
    extra = summary.get("break_even_extrapolated_step")
    if summary.get("break_even_step") is not None:
        be_value, be_help = (
            f"step {summary['break_even_step']}",
            f"{summary['break_even_wall_s']:.1f} s into the compiled run.",
        )
    elif (summary.get("break_even_reason") or "").startswith("never"):
        be_value, be_help = "never", f"{summary['break_even_reason']}."
    else:
        be_value = "not yet" if speed is not None else "-"
        be_help = f"Not within this run{f'; at the steady rates about step {extra:.0f}' if extra else ''}."
    memory = memory or {}
    eager_tput, compiled_tput = summary.get("eager_samples_per_s"), summary.get("compiled_samples_per_s")
    cards = [
        Card(
            "Compile time",
            fmt_seconds(summary.get("compile_time_s"), ms_digits=0, s_digits=1),
            "First compiled steps minus the same eager steps: what torch.compile cost up front.",
        ),
        Card(
            "First-epoch overhead",
            fmt_seconds(summary.get("first_epoch_overhead_s"), signed=True, ms_digits=0, s_digits=1),
            "Compiled epoch 1 minus eager epoch 1, as in the original tutorial.",
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
        Card("Break-even", be_value, "When the compiled run's total time drops below eager's for good. " + be_help),
        Card(
            "Throughput (compiled)",
            "-" if compiled_tput is None else f"{compiled_tput:,.0f}/s",
            "Samples per second at the steady median step" + (f"; eager: {eager_tput:,.0f}/s." if eager_tput else "."),
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
        "first_epoch_overhead_s": s.get("first_epoch_overhead_s"),
        "steady_state_speedup": None
        if s.get("compile_skipped") or s.get("compile_failed")
        else s.get("steady_state_speedup"),
        "break_even_step": s.get("break_even_step"),
        "error": run.error,
    }
