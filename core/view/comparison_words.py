"""Comparisons in words: what differs between the runs compared on the Runs page (configuration,
device, door, load) and whether their verdicts agree. Runs of one configuration on one device are
one race measured more than once (core.runs.run_to_run.configuration says what "the same" means),
so they are shown as one configuration with each result, never as two truths: where they read
differently the words say so, and that together they do not settle it. Plain text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.engine import words
from core.engine.summary import FASTER, SLOWER, Summary
from core.runs.run_to_run import configuration
from core.runs.store import Run
from core.view.compare import SETTING_WORDS, differing_settings, run_name

# A 1-minute load past this share of the cores at a race's start: other work was running.
BUSY_SHARE = 0.5


@dataclass(frozen=True)
class Configuration:
    """Runs of one configuration on one device: one race, measured len(runs) times."""

    runs: tuple[Run, ...]
    device: str

    @property
    def verdicts(self) -> list[str | None]:
        return [Summary.of(r.summary).verdict for r in self.runs]

    @property
    def agree(self) -> bool:
        return len(set(self.verdicts)) <= 1


def door(run: Run) -> str:
    """How a race came in: imported, a sweep's point, the terminal (submit), or the app's Launch."""
    if run.imported:
        return "imported"
    if run.sweep_id is not None:
        return "a sweep"
    if str(run.owner).startswith("cli:"):
        return "the terminal"
    return "the app"


def device_of(run: Run) -> str:
    env = run.environment or {}
    return str(env.get("device_name") or env.get("device_type") or run.device_key)


def load_at_start(run: Run) -> tuple[float, int] | None:
    """The 1-minute load and the cores when the race started (its environment's record)."""
    start = (run.environment or {}).get("load_at_start") or {}
    average, cores = start.get("load_average"), start.get("cpu_count")
    if not isinstance(average, list | tuple) or not average or not isinstance(average[0], int | float):
        return None
    return float(average[0]), int(cores or 1)


def result_words(run: Run) -> str:
    """'1.12x faster (1.05-1.20x)', 'no clear difference (0.99x, 0.91-1.08x)', or the run's state."""
    s = Summary.of(run.summary)
    if run.status != "done" or s.steady_state_speedup is None:
        return run.status
    if not s.compiled:
        return "compile did not happen" if s.compile_skipped else "compile failed"
    low, high = s.interval
    ranged = words.speedup_range(low, high)
    if s.verdict == FASTER:
        return f"{words.speedup(s.steady_state_speedup)} faster ({ranged})"
    if s.verdict == SLOWER:
        return f"slower ({words.speedup(s.steady_state_speedup)}, {ranged})"
    return f"no clear difference ({words.speedup(s.steady_state_speedup)}, {ranged})"


def configurations(runs: Sequence[Run]) -> list[Configuration]:
    """The runs grouped by configuration and device, in the order first seen."""
    groups: dict[tuple, list[Run]] = {}
    for run in runs:
        key = (configuration(run.params or {}) or ("run", run.id), device_of(run))
        groups.setdefault(key, []).append(run)
    return [Configuration(tuple(group), key[1]) for key, group in groups.items()]


def _names(runs: Sequence[Run]) -> str:
    ids = [str(r.id) for r in runs]
    return ("runs " + ", ".join(ids[:-1]) + " and " + ids[-1]) if len(ids) > 1 else run_name(runs[0].id)


def _values(runs: Sequence[Run], value) -> str:
    return " vs ".join(f"{value(r)} (run {r.id})" for r in runs)


def differences(runs: Sequence[Run]) -> str:
    """What differs between the runs: settings, device, door and load at the start."""
    parts = []
    fields = differing_settings([r.params or {} for r in runs])
    for field in fields:
        name = SETTING_WORDS[field] or field.replace("_", " ")
        parts.append(f"{name} ({_values(runs, lambda r, f=field: _setting(r, f))})")
    for name, value in (("device", device_of), ("door", door)):
        if len({value(r) for r in runs}) > 1:
            parts.append(f"{name} ({_values(runs, value)})")
    loads = {r.id: load_at_start(r) for r in runs}
    if any(loads.values()) and len({_busy(v) for v in loads.values()}) > 1:
        parts.append(f"load at the start ({_values(runs, lambda r: _load_words(loads[r.id]))})")
    if not parts:
        return "Nothing differs between them: the same configuration, device, door and a like load at the start."
    return "What differs: " + "; ".join(parts) + "."


def _setting(run: Run, field: str) -> str:
    value = (run.params or {}).get(field)
    if isinstance(value, bool) or value is None:
        return str(value).lower() if value is not None else "auto"
    return words.number(value) if isinstance(value, int) else str(value)


def _busy(load: tuple[float, int] | None) -> bool | None:
    return None if load is None else load[0] > BUSY_SHARE * load[1]


def _load_words(load: tuple[float, int] | None) -> str:
    if load is None:
        return "not recorded"
    one, cores = load
    return f"{words.number(one, 1)} on {words.count(cores, 'core')}" + (" (busy)" if _busy(load) else "")


def verdict_words(runs: Sequence[Run]) -> list[str]:
    """Whether the verdicts agree: each configuration measured more than once in a sentence (both
    results as one race's), then whether the configurations' verdicts agree across them."""
    groups = configurations(runs)
    out = []
    for group in groups:
        if len(group.runs) < 2:
            continue
        results = "; ".join(f"run {r.id} {result_words(r)}" for r in group.runs)
        if group.agree:
            out.append(
                f"{_names(group.runs).capitalize()} are one configuration on {group.device}, and agree: {results}."
            )
        else:
            out.append(
                f"{_names(group.runs).capitalize()} are one configuration on {group.device} measured "
                f"{len(group.runs)} times, with different readings: {results}. They are one race's results, not two "
                "truths: together they do not settle it (race it again, or with a target interval)."
            )
    if len(groups) > 1:
        verdicts = {g.verdicts[0] if g.agree else None for g in groups}
        if verdicts == {None} or None in verdicts:
            out.append("Across the configurations no verdict stands for all: some are not settled.")
        elif len(verdicts) == 1:
            out.append(f"Every configuration compared reads the same: {next(iter(verdicts))}.")
        else:
            shown = "; ".join(f"{_names(g.runs)} {g.verdicts[0]}" for g in groups)
            out.append(
                f"The configurations' verdicts differ ({shown}): they differ in what is listed above, so each can hold."
            )
    return out


def comparison_rows(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """One row per configuration and device, with every result it has (one race, each time measured)."""
    labels = differing_settings([r.params or {} for r in runs])
    rows = []
    for group in configurations(runs):
        first = group.runs[0]
        setting = ", ".join(f"{SETTING_WORDS[f] or f} {_setting(first, f)}".strip() for f in labels) or "the same"
        rows.append(
            {
                "configuration": setting,
                "device": group.device,
                "runs": ", ".join(str(r.id) for r in group.runs),
                "results": "; ".join(f"run {r.id}: {result_words(r)}" for r in group.runs),
                "agree": "yes" if group.agree else "no",  # short: the table fits 1280 px uncut
            }
        )
    return rows


def comparison_words(runs: Sequence[Run]) -> list[str]:
    """Everything the comparison says in words, in order."""
    return [differences(runs), *verdict_words(runs)]
