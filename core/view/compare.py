"""The Runs page for people: its table one page at a time, each race by its run id, comparisons
named by what differs between the runs and worded (configuration, device, door, load, whether their
verdicts agree), a race's verdict as lists and labels say it, and what qualifies a plan. No chart
library: the terminal reads it on a box without altair (the overlays are core.view.race_charts's).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.engine import words
from core.engine.spec import OPTIONS
from core.engine.summary import BUSY, FASTER, SLOWER, Summary
from core.engine.warm_cache import WARM, cache_state
from core.engine.words import plan_from_summary
from core.runs.device_history import configuration
from core.runs.store import FINAL_STATES, Run, Store

# ----------------------------------------------------------------------
# A finished race's verdict as the lists and labels say it (the comparison, the sweep, the Runs
# table, its CSV and `python -m core runs`): none where compiled code did not run or there is no
# speedup, else the summary's own, which Summary.from_dict reads through headline.interval_verdict
# (the one rule: a stored verdict its interval does not bear out reads as the interval says). Every
# other figure these surfaces show comes from Summary.headline. Torch-free.


def verdict(summary: Summary | Mapping[str, Any] | None) -> str | None:
    """The verdict its headline interval gives (Summary.from_dict reads every stored verdict through
    headline.interval_verdict); None where compiled code did not run or there is no speedup."""
    s = Summary.of(summary)
    if s.steady_state_speedup is None or not s.compiled:
        return None
    return s.verdict


def verdict_words(summary: Summary | Mapping[str, Any] | None, short: bool = False) -> str:
    """'faster', 'no clear difference', 'slower', 'no verdict: the machine was busy'; '-' for none."""
    return words.verdict(verdict(summary), short=short)


# ----------------------------------------------------------------------
# The Runs page's table and comparison, for people: each race by its run id, the one number a
# person sees for it everywhere (links `?run=14`, bundle files, the sweep table, the sidebar), results
# first under plain column names, and runs in a comparison named by what differs between them
# ("run 4: batch 1,024" beside "run 5: batch 4,096"),
# since a label that repeats what they share hides the one setting that matters.

# Settings a person compares runs by, in the options table's order, with the word for each.
SETTING_WORDS = {name: o.compare for name, o in OPTIONS.items() if o.compare is not None}

# The table's columns: (key, heading), results first.
TABLE_COLUMNS = (
    ("id", "Run"),
    ("status", "Status"),
    ("speedup", "Steady speedup"),
    ("overhead_s", "First-epoch overhead (s)"),
    ("compile", "Compile time"),
    ("break_even", "Break-even"),
    ("model", OPTIONS["model"].label),
    ("compile_scope", OPTIONS["compile_scope"].label),
    ("cache", OPTIONS["cache"].label),
    ("batch_size", OPTIONS["batch_size"].label),
    ("precision", OPTIONS["precision"].label),
    ("mode", OPTIONS["mode"].label),
    ("backend", OPTIONS["backend"].label),
    ("steps", "Steps"),
    ("device", "Device"),
    ("created", "Created"),
    ("imported", "Imported"),
)


# The CSV's columns past the table's: the numbers its words stand for (a number column holds a
# number: seconds, a step), so a spreadsheet can sort and sum them.
CSV_ONLY = ("compile_s", "break_even_step", "verdict")


def run_name(run_id: int) -> str:
    """'run 14': the store's id, the number in `?run=14` and `compile_lab_run_14.json` too. Races are
    not numbered apart from demos and probes: two numbers for one run was the confusion."""
    return f"run {run_id}"


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def differing_settings(params: Sequence[Mapping[str, Any]]) -> list[str]:
    """The settings (SETTING_WORDS keys) whose values are not the same in every run."""
    return [k for k in SETTING_WORDS if len({repr((p or {}).get(k)) for p in params}) > 1]


def comparison_labels(runs: Sequence[Run]) -> dict[int, str]:
    """Each run's label in a comparison: its run id and the settings that differ between the
    runs compared, else (identical settings) the device or when it ran. Epochs and steps per epoch
    read as one setting ("3 x 80 steps"): legends on a phone have little room."""
    # the cache each compiled from, as it recorded it (asked warm, found empty: compiled cold)
    params = [{**(r.params or {}), "cache": recorded_cache(r) or (r.params or {}).get("cache")} for r in runs]
    fields = differing_settings(params)
    if {"epochs", "steps_per_epoch"} & set(fields):
        fields = [f for f in fields if f not in ("epochs", "steps_per_epoch")]
        params = [{**p, "steps": f"{p.get('epochs')} x {p.get('steps_per_epoch')}"} for p in params]
        fields.append("steps")
    devices = [str((r.environment or {}).get("device_name") or r.device_key) for r in runs]
    labels = {}
    for run, p, device in zip(runs, params, devices):
        parts = [
            f"{p['steps']} steps" if f == "steps" else f"{SETTING_WORDS[f]} {_fmt(p.get(f))}".strip() for f in fields
        ]
        if len(set(devices)) > 1:
            parts.append(device)
        if not parts:
            parts.append(time.strftime("%b %d %H:%M", time.localtime(run.created_at)))
        labels[run.id] = f"{run_name(run.id)}: {', '.join(parts)}"
    return labels


def recorded_cache(run: Run) -> str | None:
    """The cache a race compiled from, as it recorded it: 'cold', 'warm', 'warm but empty,
    so compiled cold' (core.engine.warm_cache.cache_state); None where it recorded nothing."""
    return cache_state(run.environment, run.params, (run.details or {}).get("compile"))[1]


def row_model(params: Mapping[str, Any] | None) -> str:
    """A race's model as the table shows it (and its Model filter chooses by)."""
    return str((params or {}).get("model", "?"))


def row_device(environment: Mapping[str, Any] | None, device_key: str) -> str:
    """What a race ran on as the table shows it (and its Device filter chooses by): the device's
    name where the worker recorded it, else its type, else the lane it was queued for."""
    env = environment or {}
    return str(env.get("device_name") or env.get("device_type") or device_key)


def listed_figures(run: Run) -> dict[str, Any]:
    """What every list of races says about one (the Runs table, its CSV, `python -m core runs`),
    read once, from the headline (core.view.compare): the steady speedup, the verdict, the
    compile in words ('9.5 s', 'too small to measure here (under 12 ms)') and in seconds, the
    break-even state in the words every surface uses ('step 1,035', '≈ step 2,974', 'never', 'none')
    and the step it was reached at, the compile scope and the cache it compiled from, as recorded."""
    p = run.params or {}
    finished = bool(run.summary)
    s = Summary.of(run.summary)
    return {
        "speedup": s.steady_state_speedup,
        "verdict": verdict_words(s, short=True) if finished else None,
        # In words (core.engine.words): a blank would read as not measured where compiled's first
        # steps were not measurably slower.
        "compile": words.compile_cost(s) if finished and s.compiled else None,  # a failed compile has no figure
        "compile_s": s.compile_time_s if s.compiled else None,
        "break_even": words.break_even(s, short=True) if finished else None,
        "break_even_step": s.break_even_step,
        "compile_scope": str(p.get("compile_scope", "whole")),
        "cache": recorded_cache(run) or str(p.get("cache", OPTIONS["cache"].default)),
    }


def table_row(run: Run) -> dict[str, Any]:
    """One race as the Runs table shows it (keys of TABLE_COLUMNS, in order), then the CSV's own
    columns (CSV_ONLY)."""
    p, s, env = run.params or {}, run.summary or {}, run.environment or {}
    epochs, per_epoch = p.get("epochs"), p.get("steps_per_epoch")
    row = {
        **listed_figures(run),
        "id": run.id,
        "status": run.status,
        "overhead_s": s.get("first_epoch_overhead_s"),
        "model": row_model(p),
        "batch_size": p.get("batch_size"),
        "precision": str(p.get("precision", "?")),
        "mode": str(p.get("mode", "?")),
        "backend": str(p.get("backend", "?")),
        "steps": f"{epochs} x {per_epoch}" if epochs and per_epoch else None,
        "device": row_device(env, run.device_key),
        "created": time.strftime("%Y-%m-%d %H:%M", time.localtime(run.created_at)),
        "imported": bool(run.imported),
    }
    return {key: row[key] for key in (*(k for k, _ in TABLE_COLUMNS), *CSV_ONLY)}


def csv_frame(rows: Sequence[Mapping[str, Any]]) -> Any:
    """The rows as the CSV download holds them: every column of the table, then the numbers behind
    its words (CSV_ONLY), each number column holding numbers only."""
    import pandas as pd

    return pd.DataFrame(list(rows), columns=[*(k for k, _ in TABLE_COLUMNS), *CSV_ONLY])


# Always on the page: the results, which model, where and when. The other settings are shown only
# where the runs listed differ in them (the CSV keeps every column): a column that repeats one
# value says nothing, and the table then fits the page instead of running off its right edge.
ALWAYS_SHOWN = ("id", "status", "speedup", "overhead_s", "compile", "break_even", "model", "compile_scope", "cache")
ALWAYS_SHOWN_LAST = ("device", "created")


def shown_columns(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The TABLE_COLUMNS keys the Runs page shows for these rows (table_row's)."""
    varying = [
        key
        for key, _ in TABLE_COLUMNS
        if key not in ALWAYS_SHOWN + ALWAYS_SHOWN_LAST and len({repr(r.get(key)) for r in rows}) > 1
    ]
    if any(r.get("imported") for r in rows) and "imported" not in varying:
        varying.append("imported")
    return [*ALWAYS_SHOWN, *varying, *ALWAYS_SHOWN_LAST]


def column_headings() -> dict[str, str]:
    return dict(TABLE_COLUMNS)


JOB_WORDS = {"probe": "the device probe", "demo": "Under the hood demos", "lookup": "model lookups"}


def numbering_note(races: Sequence[int], kinds: Mapping[int, str]) -> str | None:
    """Why race numbers skip: every job here takes the next number (the device probe, the Under the
    hood demos, model lookups), and a deleted run's number is not given again. None without gaps.
    `races`: the ids of every race in the store; `kinds`: every run's kind by id (any kind)."""
    if not races:
        return None
    ids, last = set(races), max(races)
    skipped = last - len(ids)  # the numbers below the newest race that are not races (counted, not listed)
    if not skipped:
        return None
    gaps: list[int] = []
    number = 1
    while len(gaps) < min(8, skipped):  # the first few to name
        if number not in ids:
            gaps.append(number)
        number += 1
    jobs = sorted(i for i, kind in kinds.items() if i < last and kind != "race")
    took = [JOB_WORDS.get(kinds[i], f"{kinds[i]} jobs") for i in jobs]
    deleted = skipped - len(jobs)
    parts = list(dict.fromkeys(took))
    if deleted:
        parts.append("deleted runs" if deleted > 1 else "a deleted run")
    shown = ", ".join(str(i) for i in gaps) + (f" and {skipped - 8} more" if skipped > 8 else "")
    return (
        f"Run numbers skip {shown}: every job here takes the next number, and those went to "
        f"{' and '.join(parts) or 'other jobs'}. A run's number is the one in its link and its bundle."
    )


# ----------------------------------------------------------------------
# Comparisons in words: what differs between the runs compared on the Runs page (configuration,
# device, door, load) and whether their verdicts agree. Runs of one configuration on one device are
# one race measured more than once (core.runs.device_history.configuration says what "the same" means),
# so they are shown as one configuration with each result, never as two truths: where they read
# differently the words say so, and that together they do not settle it. The cache each run compiled
# from is what it recorded (a run asked to be warm that found the cache empty compiled cold), and a
# cold run beside a warm one is two configurations of the cache, their compiles said side by side.
# Each run's verdict is read from its own headline interval (`headline_verdict`). Plain text.

# A 1-minute load past this share of the cores at a race's start: other work was running.
BUSY_SHARE = 0.5


def headline_verdict(run: Run) -> str | None:
    """A run's verdict as its headline interval says it (core.view.compare.verdict), the one
    reading every line of a comparison uses; a run that did not finish keeps what it stored."""
    s = Summary.of(run.summary)
    if run.status != "done":
        return s.verdict
    return verdict(s) or s.verdict


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
    for setting in fields:
        name = SETTING_WORDS[setting] or setting.replace("_", " ")
        parts.append(f"{name} ({_values(runs, lambda r, f=setting: _setting(r, f))})")
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


def _setting(run: Run, setting: str) -> str:
    value = (run.params or {}).get(setting)
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


def verdict_lines(runs: Sequence[Run]) -> list[str]:
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
    return [differences(runs), *verdict_lines(runs)]


# ----------------------------------------------------------------------
# The Runs page's table, one page at a time: a view costs what one page of runs costs, however many
# the store holds.
#
# Every view reads three small columns of every run (id, kind, status: Store.run_index), and the full
# rows of one page only (Store.runs_by_id). The filters (FILTERS) choose among all the races: each
# race's model and device come from its settings (params, environment; never its summary, which holds
# every step time), read once per process for a finished race and kept in RunSettings, so a second
# view, from any session, parses none of them again. A race still going is read afresh each view.

PAGE_SIZE = 50  # runs a page of the table shows
# The table's filters: (key, label). Each key is a column of table_row, and of RunSettings' entries.
FILTERS = (("status", "Status"), ("model", "Model"), ("device", "Device"))


@dataclass(frozen=True)
class RunsPage:
    """One page of the Runs table: its races (full rows, newest first) and their table rows."""

    runs: list[Run]
    rows: list[dict[str, Any]]
    unreadable: list[tuple[int, Exception]]  # races listed whose row this app cannot read, and why
    total: int  # races that pass the filters, over every page
    page: int  # 1-based, clamped to the pages there are
    pages: int
    options: dict[str, list[str]]  # each filter's values, over every race of the store
    wanted: dict[str, list[str]]  # the filters applied: those asked for that some race still has
    numbering: str | None = None  # why the run numbers skip (compare.numbering_note)
    size: int = PAGE_SIZE

    @property
    def first(self) -> int:
        """The 1-based position of the page's first race among those that pass the filters."""
        return (self.page - 1) * self.size + 1 if self.total else 0

    def line(self) -> str:
        """What the line under the table says of the page: which races it shows, of how many."""
        filtered = " (those the filters keep)" if any(self.wanted.values()) else ""
        if not self.total:
            return "No race has all of these." if filtered else "No race can be shown."
        if not self.runs:
            return f"None of the {self.total:,} races here can be shown on this page{filtered}."
        last = self.first + len(self.runs) + len(self.unreadable) - 1
        return (
            f"Runs {self.first:,}-{last:,} of {self.total:,}, newest first{filtered}. Pick a row to open its "
            "run; a run's link (`?run=N`) opens any run on the Race page."
        )

    def to_dict(self) -> dict[str, Any]:
        return {"total": self.total, "page": self.page, "pages": self.pages, "ids": [r.id for r in self.runs]}


@dataclass
class RunSettings:
    """Each race's model and device, as the table shows them, for one store: read once per
    process for a finished race whose environment is stored (what it ran on does not change
    then), each view for any other. Shared by every session of the process."""

    entries: dict[int, tuple[str, str]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def of(self, store: Store, races: Mapping[int, str]) -> dict[int, tuple[str, str]]:
        """(model, device) of every race in `races` (id -> status): the settings not kept yet read
        from the store in one go; entries of races gone (deleted) are dropped."""
        with self.lock:
            kept = self.entries
            missing = [i for i, status in races.items() if i not in kept or status not in FINAL_STATES]
            found = store.run_settings(missing) if missing else {}
            fresh = {i: (row_model(p), row_device(env, key)) for i, (p, env, key) in found.items()}
            for run_id, (_, env, _) in found.items():
                # One whose environment is not stored yet is read again: a worker taken for lost (its
                # run ended by reconcile) may still store it, with what it measured (core.runs.worker).
                if races[run_id] in FINAL_STATES and env is not None:
                    kept[run_id] = fresh[run_id]
            for gone in [i for i in kept if i not in races]:
                del kept[gone]
            return {i: fresh.get(i) or kept.get(i) or ("?", "?") for i in races}


_SETTINGS: dict[str, RunSettings] = {}
_SETTINGS_LOCK = threading.Lock()


def settings_of(store: Store) -> RunSettings:
    """This process's RunSettings for `store` (one per store location)."""
    with _SETTINGS_LOCK:
        return _SETTINGS.setdefault(store.path, RunSettings())


def runs_page(
    store: Store, wanted: Mapping[str, Sequence[str]] | None = None, page: int = 1, size: int = PAGE_SIZE
) -> RunsPage:
    """Page `page` of the races that pass `wanted` (a FILTERS key -> the values kept; an empty or
    missing one keeps all), newest first."""
    index = store.run_index()
    races = {run_id: status for run_id, kind, status in index if kind == "race"}
    settings = settings_of(store).of(store, races)
    columns = {i: {"status": status, "model": settings[i][0], "device": settings[i][1]} for i, status in races.items()}
    options = {key: sorted({c[key] for c in columns.values()}) for key, _ in FILTERS}
    asked = wanted or {}
    applied = {key: [v for v in asked.get(key) or () if v in options[key]] for key, _ in FILTERS}
    keep = {key: set(values) for key, values in applied.items() if values}
    matching = [i for i in races if all(columns[i][key] in values for key, values in keep.items())]
    pages = max(1, math.ceil(len(matching) / size))
    page = min(max(1, int(page)), pages)
    ids = matching[(page - 1) * size : page * size]
    runs, rows, unreadable = [], [], []
    for run in store.runs_by_id(ids):
        try:
            rows.append(table_row(run))
        except Exception as exc:  # noqa: BLE001 - whatever one stored row holds: named, the others shown
            unreadable.append((run.id, exc))
            continue
        runs.append(run)
    note = numbering_note(list(races), {run_id: kind for run_id, kind, _ in index})
    return RunsPage(runs, rows, unreadable, len(matching), page, pages, options, applied, note, size)


# ----------------------------------------------------------------------
# What qualifies a plan (Plan your training): a plan extrapolates one race's step times over the
# user's run, and on a busy or noisy machine another race of the same configuration extrapolates to
# a very different total (the walk-through saw 87 min, 3.0 h and 52 min for one configuration's 50,000
# eager steps). So the plan names the totals the other races of its configuration on this device
# predict for the same steps, or, where there are none, says that it rests on one race.


def plan_caveat(run: Run, others: Sequence[Run], steps: int) -> str | None:
    """The caveat beside `run`'s plan over `steps` steps, from `others` (done races here, any)."""
    plan = plan_from_summary(run.summary or {}, steps)
    if plan is None:
        return None
    mine = configuration(run.params or {})
    same = [
        r
        for r in others
        if r.id != run.id and r.status == "done" and device_of(r) == device_of(run) and not r.imported
        and configuration(r.params or {}) == mine
    ]  # fmt: skip
    plans = [(r.id, p) for r in same if (p := plan_from_summary(r.summary or {}, steps)) is not None]
    if not plans:
        return (
            "This plan rests on this one race: another race of the same configuration here can land elsewhere, as "
            "its eager step time does from race to race. Race it again to see how far."
        )
    totals = [plan.eager_total_s] + [p.eager_total_s for _, p in plans]
    low, high = min(totals), max(totals)
    ids = ", ".join(str(i) for i, _ in plans[:5])
    wider = low < plan.eager_ci[0] or high > plan.eager_ci[1]
    spread = (
        ", more than this plan's own interval allows: read its totals as one race's among several"
        if wider
        else ", within this plan's own interval"
    )
    return (
        f"Races of this configuration here (run{'s' if len(plans) > 1 else ''} {ids} and this one) predict "
        f"{words.duration(low)} to {words.duration(high)} of eager training for the same {words.count(steps, 'step')}"
        f"{spread}."
    )
