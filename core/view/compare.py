"""The Runs page's table and comparison, for people: each race by its run id, the one number a
person sees for it everywhere (links `?run=14`, bundle files, the sweep table, the sidebar), results
first under plain column names, and runs in a comparison named by what differs between them
("run 4: batch 1,024" beside "run 5: batch 4,096"),
since a label that repeats what they share hides the one setting that matters.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from core.engine import words
from core.engine.spec import OPTIONS
from core.engine.summary import Summary
from core.engine.warm_cache import cache_state
from core.runs.store import Run
from core.view import race_figures

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
    read once, from the headline (core.view.race_figures): the steady speedup, the verdict, the
    compile in words ('9.5 s', 'too small to measure here (under 12 ms)') and in seconds, the
    break-even state in the words every surface uses ('step 1,035', '≈ step 2,974', 'never', 'none')
    and the step it was reached at, the compile scope and the cache it compiled from, as recorded."""
    p = run.params or {}
    finished = bool(run.summary)
    s = Summary.of(run.summary)
    return {
        "speedup": s.steady_state_speedup,
        "verdict": race_figures.verdict_words(s, short=True) if finished else None,
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
