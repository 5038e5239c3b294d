"""The data folder's disk budget: a host's cap on what Compile Lab keeps on its disk (host limit
`disk_budget`), and what is freed to keep within it.

Every race leaves files beside the store (its profiler traces, its compile trace, its worker's log),
and cold races fill the shared warm Inductor cache; none of it is needed to read a finished race, whose
numbers are in the store. So past the budget the oldest finished runs' files go first, then the warm
Inductor cache (the next cold races fill it again). Never freed: the store itself (its numbers), a
queued or running run's files, the cold caches of compiles running now, uploaded model files (a queued
race needs its file) and the events a worker kept while its store was away (measurements on their
way). Files whose run the store no longer holds are swept whatever the budget. What is freed is logged
and noted in the data folder for the Admin page. No torch.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from core.engine import words
from core.engine.spec import data_home
from core.engine.warm_cache import WARM_FOLDER
from core.runs.fleet import HOST
from core.runs.limits import load_host_limits
from core.runs.run_files import Freed, remove_run_files, remove_tree, runs_with_files, sweep_orphans, tree_size
from core.runs.store import ACTIVE_STATES, Store, is_server_url, store_files_dir

NOTE_FILE = "disk-budget.json"  # what was freed last, for the Admin page
WARM_CACHE = "the warm Inductor cache"
NO_RUN = "files of runs the store no longer holds"
PURGE = "purge"
STORE_SUFFIXES = ("", "-wal", "-shm", "-journal")  # a SQLite store's own files
_LOGGER = logging.getLogger("compile_lab")


@dataclass(frozen=True)
class DiskUse:
    """What the data folder holds now, in bytes, and the budget it is held to (None: no budget)."""

    total: int
    store: int
    run_files: int
    warm_cache: int
    budget: int | None

    @property
    def over(self) -> bool:
        return self.budget is not None and self.total > self.budget


def data_folders(store_path: str) -> list[str]:
    """The folders Compile Lab writes for this store: its files' folder and the data folder (one when
    the store sits in the data folder, as by default)."""
    folders: list[str] = []
    for folder in sorted({os.path.abspath(store_files_dir(store_path)), os.path.abspath(data_home())}, key=len):
        if not any(folder == f or folder.startswith(f + os.sep) for f in folders):
            folders.append(folder)
    return folders


def warm_cache_root() -> str:
    return os.path.join(data_home(), WARM_FOLDER)


def disk_use(store_path: str, budget: int | None) -> DiskUse:
    """The data folder's bytes now: in all, the store's own, the runs' files, the warm Inductor cache."""
    total = sum(tree_size(folder)[1] for folder in data_folders(store_path))
    store = 0
    if not is_server_url(store_path):
        store = sum(tree_size(os.path.abspath(store_path) + suffix)[1] for suffix in STORE_SUFFIXES)
    base = store_files_dir(store_path)
    run_files = tree_size(os.path.join(base, "traces"))[1] + sum(
        tree_size(os.path.join(base, "logs", f"run-{i}{end}"))[1]
        for i in runs_with_files(store_path)
        for end in (".log", ".alive")
    )
    return DiskUse(total, store, run_files, tree_size(warm_cache_root())[1], budget)


def _active_here(store: Store) -> bool:
    """Whether a job of this box is starting or running (a warm race reads the warm cache, and a cold
    one copies its cache into it as it ends)."""
    return any(run.host in (None, HOST) for run in store.list_runs(status=ACTIVE_STATES, limit=100_000))


def keep_within_budget(store: Store, budget: int | None) -> Freed:
    """Sweep files whose run is gone; past the budget, free the oldest finished runs' files, then the
    warm Inductor cache when no job of this box runs. Returns what was freed (logged and noted)."""
    freed = sweep_orphans(store.path, store.run_ids)
    used = disk_use(store.path, budget).total if budget is not None else 0  # (no walk without a budget)
    if budget is not None and used > budget:
        with_files = runs_with_files(store.path)
        for run_id in store.finished_oldest_first():
            if used <= budget:
                break
            if run_id in with_files:
                gone = remove_run_files(store.path, [run_id])
                freed, used = freed + gone, used - gone.bytes
        if used > budget and os.path.isdir(warm_cache_root()) and not _active_here(store):
            files, size = remove_tree(warm_cache_root())
            freed += Freed(files, size, (), (WARM_CACHE,))
    if freed.files:
        say_freed(store.path, freed, NO_RUN if budget is None else f"the disk budget, {words.bytes_(budget)}")
    return freed


def freed_words(freed: Freed) -> str:
    """'freed 12 files (3.1 MiB): runs 4, 7; the warm Inductor cache' (one voice for the log and the page)."""
    whose = []
    if freed.runs:
        shown = ", ".join(str(i) for i in freed.runs[:12]) + (", ..." if len(freed.runs) > 12 else "")
        whose.append(f"{'run' if len(freed.runs) == 1 else 'runs'} {shown}")
    whose += list(freed.others)
    return f"freed {words.count(freed.files, 'file')} ({words.bytes_(freed.bytes)})" + (
        f": {'; '.join(whose)}" if whose else ""
    )


def say_freed(store_path: str, freed: Freed, why: str) -> None:
    """Log what was freed, and note it in the data folder for the Admin page."""
    _LOGGER.warning("data folder: %s (%s)", freed_words(freed), why)
    note = {"at": time.time(), "why": why, "freed": freed.to_dict()}
    folder = data_folders(store_path)[0]
    try:
        os.makedirs(folder, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=".tmp-", dir=folder)
        with os.fdopen(handle, "w") as fh:
            json.dump(note, fh)
        os.replace(temporary, os.path.join(folder, NOTE_FILE))
    except OSError:
        pass  # a full disk: the log has said it


def last_freed(store_path: str) -> tuple[float, str, Freed] | None:
    """When files were last freed, why, and what (None: never, or the note is unreadable)."""
    try:
        with open(os.path.join(data_folders(store_path)[0], NOTE_FILE)) as fh:
            note: Any = json.load(fh)
        return float(note["at"]), str(note["why"]), Freed.from_dict(note["freed"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def after_job(store: Store) -> Freed | None:
    """The budget kept as a job ends (its end already recorded): never raises, a failure is logged."""
    try:
        return keep_within_budget(store, load_host_limits().disk_budget)
    except Exception as exc:  # noqa: BLE001 - a measured run is never failed by its files' upkeep
        _LOGGER.warning("data folder: not checked against the disk budget: %s", str(exc).strip()[:300])
        return None
