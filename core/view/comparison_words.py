"""Comparisons in words: what differs between the runs compared on the Runs page (configuration,
device, door, load) and whether their verdicts agree. Runs of one configuration on one device are
one race measured more than once (core.runs.run_to_run.configuration says what "the same" means),
so they are shown as one configuration with each result, never as two truths: where they read
differently the words say so, and that together they do not settle it. The cache each run compiled
from is what it recorded (a run asked to be warm that found the cache empty compiled cold), and a
cold run beside a warm one is two configurations of the cache, their compiles said side by side.
Each run's verdict is read from its own headline interval (`headline_verdict`). Plain text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.engine import words
from core.engine.summary import BUSY, FASTER, SLOWER, Summary
from core.engine.warm_cache import WARM, cache_state
from core.runs.run_to_run import configuration
from core.runs.store import Run
from core.view import race_figures
from core.view.compare import SETTING_WORDS, differing_settings, run_name

# A 1-minute load past this share of the cores at a race's start: other work was running.
BUSY_SHARE = 0.5


def headline_verdict(run: Run) -> str | None:
    """A run's verdict as its headline interval says it (core.view.race_figures.verdict), the one
    reading every line of a comparison uses; a run that did not finish keeps what it stored."""
    s = Summary.of(run.summary)
    if run.status != "done":
        return s.verdict
    return race_figures.verdict(s) or s.verdict


def run_cache(run: Run) -> tuple[str | None, str | None]:
    """(how it compiled, its label) from what the run recorded (core.engine.warm_cache.cache_state)."""
    return cache_state(run.environment, run.params, (run.details or {}).get("compile"))


@dataclass(frozen=True)
class Configuration:
    """Runs of one configuration on one device and one cache state: one race, measured len(runs) times."""

    runs: tuple[Run, ...]
    device: str
    cache: str | None = None  # the cache label its runs compiled from (run_cache), None where unrecorded

    @property
    def verdicts(self) -> list[str | None]:
        return [headline_verdict(r) for r in self.runs]

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
    verdict = headline_verdict(run)
    if verdict == BUSY:
        return f"no verdict, the machine was busy ({words.speedup(s.steady_state_speedup)}, {ranged})"
    if verdict == FASTER:
        return f"{words.speedup(s.steady_state_speedup)} faster ({ranged})"
    if verdict == SLOWER:
        return f"slower ({words.speedup(s.steady_state_speedup)}, {ranged})"
    return f"no clear difference ({words.speedup(s.steady_state_speedup)}, {ranged})"


def configurations(runs: Sequence[Run]) -> list[Configuration]:
    """The runs grouped by configuration, device and the cache they compiled from, in the order
    first seen (a cold run and a warm one are two configurations of the cache)."""
    groups: dict[tuple, list[Run]] = {}
    for run in runs:
        key = (configuration(run.params or {}) or ("run", run.id), device_of(run), run_cache(run)[1])
        groups.setdefault(key, []).append(run)
    return [Configuration(tuple(group), key[1], key[2]) for key, group in groups.items()]


def _names(runs: Sequence[Run]) -> str:
    ids = [str(r.id) for r in runs]
    return ("runs " + ", ".join(ids[:-1]) + " and " + ids[-1]) if len(ids) > 1 else run_name(runs[0].id)


def _values(runs: Sequence[Run], value) -> str:
    return " vs ".join(f"{value(r)} (run {r.id})" for r in runs)


def differences(runs: Sequence[Run]) -> str:
    """What differs between the runs: settings, device, door and load at the start."""
    parts = []
    fields = [f for f in differing_settings([r.params or {} for r in runs]) if f != "cache"]
    if len({run_cache(r)[1] for r in runs}) > 1:  # what each compiled from, not what it asked for
        parts.append(f"cache ({_values(runs, lambda r: run_cache(r)[1] or 'not recorded')})")
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


def compile_words(runs: Sequence[Run]) -> str | None:
    """Where the runs compiled from different caches: their compiles side by side, and what the warm
    cache saved ('Compile: 35 s in run 6 (cache cold) vs 2.44 s in run 7 (cache warm): the warm cache
    saved 32.6 s, 14x less.'). None where every run compiled from the same cache."""
    states = {r.id: run_cache(r) for r in runs}
    if len({label for _, label in states.values()}) < 2:
        return None
    shown = " vs ".join(
        f"{words.compile_cost(Summary.of(r.summary))} in run {r.id} (cache {states[r.id][1] or 'not recorded'})"
        for r in runs
    )
    times = {r.id: Summary.of(r.summary).compile_time_s for r in runs}
    cold = [t for i, t in times.items() if t and states[i][0] != WARM]
    warm = [t for i, t in times.items() if t and states[i][0] == WARM]
    saved = ""
    if cold and warm and min(cold) > max(warm):
        saved = (
            f": the warm cache saved {words.seconds(min(cold) - max(warm))}, "
            f"{words.ratio(min(cold) / max(warm), 0)} less"
        )
    elif cold and warm:
        saved = ": the warm cache saved nothing measurable here"
    return f"Compile: {shown}{saved}."


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
    compiles = compile_words(runs)
    if compiles:
        out.append(compiles)
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
    caches = len({run_cache(r)[1] for r in runs}) > 1
    rows = []
    for group in configurations(runs):
        first = group.runs[0]
        parts = [f"{SETTING_WORDS[f] or f} {_setting(first, f)}".strip() for f in labels if f != "cache"]
        if caches or "cache" in labels:  # the cache it compiled from, as the run recorded it
            parts.append(f"{SETTING_WORDS['cache'] or 'cache'} {group.cache or 'not recorded'}")
        rows.append(
            {
                "configuration": ", ".join(parts) or "the same",
                "device": group.device,
                "runs": ", ".join(str(r.id) for r in group.runs),
                "results": "; ".join(f"run {r.id}: {result_words(r)}" for r in group.runs),
                "compile": "; ".join(f"run {r.id}: {words.compile_cost(Summary.of(r.summary))}" for r in group.runs),
                "agree": "yes" if group.agree else "no",  # short: the table fits 1280 px uncut
            }
        )
    return rows


def comparison_words(runs: Sequence[Run]) -> list[str]:
    """Everything the comparison says in words, in order."""
    return [differences(runs), *verdict_words(runs)]
