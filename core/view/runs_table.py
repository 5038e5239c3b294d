"""The Runs page's table, one page at a time: a view costs what one page of runs costs, however many
the store holds.

Every view reads three small columns of every run (id, kind, status: Store.run_index), and the full
rows of one page only (Store.runs_by_id). The filters (FILTERS) choose among all the races: each
race's model and device come from its settings (params, environment; never its summary, which holds
every step time), read once per process for a finished race and kept in RunSettings, so a second
view, from any session, parses none of them again. A race still going is read afresh each view.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.runs.store import FINAL_STATES, Run, Store
from core.view import compare
from core.view.compare import numbering_note, row_device, row_model

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
            rows.append(compare.table_row(run))
        except Exception as exc:  # noqa: BLE001 - whatever one stored row holds: named, the others shown
            unreadable.append((run.id, exc))
            continue
        runs.append(run)
    note = numbering_note(list(races), {run_id: kind for run_id, kind, _ in index})
    return RunsPage(runs, rows, unreadable, len(matching), page, pages, options, applied, note, size)
