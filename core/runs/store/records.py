"""What the store holds, as Python sees it: a run, a sweep, their limits and the errors a person
reads. Shared by both backends (core.runs.store.sqlite, core.runs.store.postgresql).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from core.engine.spec import data_home

MAX_ID = 2**63 - 1  # SQLite's INTEGER PRIMARY KEY, PostgreSQL's BIGINT: a larger number names no run
FINAL_STATES = ("done", "failed", "cancelled")
ACTIVE_STATES = ("starting", "running")
URL_PREFIXES = ("postgresql://", "postgres://")


def id_from_text(text: object) -> int | None:
    """A run's or sweep's id from outside (a link, a route, a replay key): ASCII decimal digits
    naming a possible row, else None. `str.isdigit` alone admits '²' (which int() refuses), and
    Python refuses to read numbers of more than 4,300 digits: both are checked before int()."""
    text = str(text)
    if not (text.isascii() and text.isdigit()) or len(text) > len(str(MAX_ID)):
        return None
    value = int(text)
    return value if 0 < value <= MAX_ID else None


def is_server_url(location: str) -> bool:
    """Whether a store location names a PostgreSQL server (else it is a SQLite file)."""
    return location.startswith(URL_PREFIXES)


def default_store_path() -> str:
    """$COMPILE_LAB_STORE (a file, or a postgresql:// URL), else compile_lab.sqlite3 in the data directory."""
    return os.environ.get("COMPILE_LAB_STORE") or os.path.join(data_home(), "compile_lab.sqlite3")


def store_location(location: str) -> str:
    """A store's location as a Store names it (Store.path): a file's absolute path, a URL as given."""
    return location if is_server_url(location) else os.path.abspath(location)


def store_files_dir(location: str) -> str:
    """Where a store's files (worker logs, traces) live: beside a SQLite file; for a server, in
    this box's data directory (each box keeps the files of the runs it ran)."""
    return data_home() if is_server_url(location) else os.path.dirname(os.path.abspath(location))


SECRET_PARAMETERS = ("password", "sslpassword")


def shown_location(location: str) -> str:
    """A store's location as a message may show it: a URL's password hidden, in either of libpq's
    places for it (postgresql://user:PASSWORD@host/db, or ?password=PASSWORD among its parameters)."""
    location = re.sub(r"(://[^:/@?#]*):[^@/?#]*@", r"\1:***@", location)
    return re.sub(r"([?&])([^=&#]*)=([^&#]*)", _hidden_parameter, location)


def _hidden_parameter(match: re.Match[str]) -> str:
    """One query parameter, its value hidden where its key is a password's: libpq decodes a key's
    percent escapes, so ?%70assword= is ?password= to it and must be to us."""
    mark, key, _ = match.groups()
    if unquote(key).strip().lower() in SECRET_PARAMETERS:
        return f"{mark}{key}=***"
    return match.group(0)


@dataclass
class Run:
    """One stored run (a job of any kind), with its JSON columns decoded."""

    id: int
    kind: str
    params: dict[str, Any]
    owner: str
    device_key: str
    status: str
    phase: str
    progress: float
    created_at: float
    started_at: float | None
    finished_at: float | None
    heartbeat_at: float | None
    pid: int | None
    host: str | None
    time_limit_s: float | None
    cancel_requested: int
    environment: dict[str, Any] | None
    summary: dict[str, Any] | None
    details: dict[str, Any] | None
    error: str | None
    imported: int
    client: str | None = None
    sweep_id: int | None = None
    race_number: int | None = None  # retired: the run id is the one number people see (issue 26)

    @property
    def finished(self) -> bool:
        return self.status in FINAL_STATES


class StoreError(RuntimeError):
    """The store cannot be opened (a folder, not a database, unreadable): a message for a person."""


class DamagedEvents(StoreError):
    """Part of a run's events cannot be read: a page of the store's file is damaged (a disk fault,
    a copy taken mid-write). The message names the run and what can still be read; `readable`
    holds those events, oldest first, so a view can still show them."""

    def __init__(self, path: str, run_id: int, readable: list[dict[str, Any]], cause: Exception):
        self.run_id, self.readable = run_id, readable
        super().__init__(
            f"run {run_id}'s events are damaged in the store ({cause}): the {len(readable):,} recorded before "
            f"the damage can still be read; the rest is lost unless the file is recovered "
            f"(sqlite3 {path} .recover)"
        )


def unreadable_runs_text(run_ids: set[int] | list[int], path: str) -> str:
    """What a page or the CLI says of runs whose rows lie on a damaged page of the store's file."""
    ids = sorted(run_ids)
    which = f"Run {ids[0]}" if len(ids) == 1 else "Runs " + ", ".join(str(i) for i in ids)
    return (
        f"{which} cannot be read: {'its row is' if len(ids) == 1 else 'their rows are'} on a damaged page of "
        f"the store's file (every other run reads as before; sqlite3 {shown_location(path)} .recover)"
    )


@dataclass
class Sweep:
    """One stored sweep: its owner and what it varies (its points are runs with its sweep_id)."""

    id: int
    owner: str
    params: dict[str, Any]
    created_at: float


JSON_COLUMNS = ("params", "environment", "summary", "details")
# What a run row's JSON may hold when read back: a race's environment and details are a few KB, its
# params less (its summary, written by this app alone, grows with its steps and is not bounded here).
# A larger one (an environment of 20 million empty lists, stored by an older import, took 1.6 GB and
# 15 s to read on every page that listed runs) is not parsed: the row reads as damaged there.
MAX_STORED_JSON = {"params": 2**20, "environment": 2**20, "details": 8 * 2**20}
_SURROGATES = re.compile("[\ud800-\udfff]")


def utf8_text(text: str) -> str:
    """`text` as UTF-8 can carry it: a lone surrogate (JSON's "\\ud800" escape, which no encoding of
    text holds) becomes U+FFFD, so a page, a table or a terminal can encode it."""
    return _SURROGATES.sub("\ufffd", text) if not text.isascii() else text


def utf8_json(value: Any) -> Any:
    """Decoded JSON with every key and text made utf8_text."""
    if isinstance(value, str):
        return utf8_text(value)
    if isinstance(value, dict):
        return {utf8_text(k) if isinstance(k, str) else k: utf8_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [utf8_json(v) for v in value]
    return value


def encode(column: str, value: Any) -> Any:
    if column in JSON_COLUMNS and value is not None:
        return json.dumps(value)
    return int(value) if isinstance(value, bool) else value  # PostgreSQL keeps flags as integers too


def sweep_of(row: Any) -> Sweep:
    data = dict(row)
    try:
        data["params"] = json.loads(data["params"])
    except (TypeError, ValueError):
        data["params"] = {"__corrupt__": str(data["params"])[:200]}
    return Sweep(**data)


def run_of(row: Any) -> Run:
    return Run(**decoded(row))


def decoded(row: Any) -> dict[str, Any]:
    """A run row (all its columns, or some) as a dict, its JSON columns decoded (_json_column)."""
    data = dict(row)
    for key in JSON_COLUMNS:
        if data.get(key) is not None:
            data[key] = _json_column(key, data[key])
    return data


def _json_column(key: str, text: Any) -> Any:
    """One JSON column of a run row, decoded; a damaged or oversized one as {"__corrupt__": why}
    (a damaged row must not take the dispatcher or a page down: the worker fails such a job)."""
    if isinstance(text, str) and len(text) > MAX_STORED_JSON.get(key, len(text)):
        return {"__corrupt__": f"{key} too large to read ({len(text):,} characters)"}
    try:
        value = json.loads(text)
    except (TypeError, ValueError, RecursionError):
        return {"__corrupt__": str(text)[:200]}
    # json.dumps writes every non-ASCII character as \\uXXXX: a lone surrogate only behind "\\ud".
    return utf8_json(value) if isinstance(text, str) and "\\ud" in text.lower() else value


# ----------------------------------------------------------------------
# The store's schema, once, for both backends, with its version and each version's migration.
#
# Written in the SQL both SQLite and PostgreSQL read; the few types they spell differently are
# placeholders each backend fills ({id}: the row id, {real}: a double, {bigint}: a 64-bit integer).
# A PostgreSQL store is new at FIRST_SERVER_VERSION, so the migrations to that version and below
# (written for SQLite, which is all there was) never run on it; every later one runs on both.

SCHEMA_VERSION = 6
FIRST_SERVER_VERSION = 6  # the version PostgreSQL stores begin at

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id {id},
    kind TEXT NOT NULL,                 -- race | probe | ... (core.runs.job_kinds.JOB_KINDS)
    params TEXT NOT NULL,               -- JSON: the RunSpec for a race
    owner TEXT NOT NULL,
    device_key TEXT NOT NULL,           -- one running job per lane (host, device key): 'cpu', 'cuda:0', ...
    status TEXT NOT NULL,               -- queued | starting | running | done | failed | cancelled
    phase TEXT NOT NULL DEFAULT '',     -- what a person should read: 'compiled epoch 2/3'
    progress {real} NOT NULL DEFAULT 0, -- 0..1
    created_at {real} NOT NULL,
    started_at {real},
    finished_at {real},
    heartbeat_at {real},
    pid {bigint},
    host TEXT,                          -- the box whose lane runs it (an agent's name in a fleet)
    time_limit_s {real},
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    environment TEXT,                   -- JSON
    summary TEXT,                       -- JSON
    details TEXT,                       -- JSON: compile stats, per-variant memory, ...
    error TEXT,
    imported INTEGER NOT NULL DEFAULT 0,
    client TEXT,                        -- a visitor's address, kept only where host limits count by it
    sweep_id {bigint},                  -- the sweep this race is a point of (sweeps.id), or NULL
    race_number {bigint}                -- retired: races were once numbered apart from run ids; NULL now
);
CREATE INDEX IF NOT EXISTS runs_queue ON runs (status, device_key, id);
CREATE TABLE IF NOT EXISTS events (
    id {id},
    run_id {bigint} NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    kind TEXT NOT NULL,                 -- step | epoch | compile
    variant TEXT NOT NULL,
    phase TEXT NOT NULL,                -- train | eval (epoch rows: train)
    epoch INTEGER NOT NULL,
    step INTEGER NOT NULL,              -- 1-based within variant and phase; 0 for epoch rows
    time_s {real} NOT NULL,             -- step time, or epoch train time
    eval_time_s {real},                 -- epoch rows only
    loss {real},
    samples {bigint},
    recorded_at {real} NOT NULL,
    note TEXT                           -- compile rows: what compiled ("recompile: <guard>")
);
CREATE INDEX IF NOT EXISTS events_by_run ON events (run_id, id);
CREATE TABLE IF NOT EXISTS sweeps (
    id {id},
    owner TEXT NOT NULL,
    params TEXT NOT NULL,               -- JSON: {{"base": RunSpec, "axes": [{{"name", "values"}}, ...]}}
    created_at {real} NOT NULL
);
CREATE TABLE IF NOT EXISTS hosts (
    name TEXT PRIMARY KEY,              -- an agent's name (core.runs.agent): its runs' host
    state TEXT NOT NULL,                -- live | stopped
    pid {bigint},
    machine TEXT,                       -- the box it runs on (its hostname)
    torch TEXT,
    started_at {real} NOT NULL,
    heartbeat_at {real} NOT NULL
);
CREATE TABLE IF NOT EXISTS lanes (
    host TEXT NOT NULL,                 -- hosts.name
    lane TEXT NOT NULL,                 -- cpu | cuda:0 | ...
    device_name TEXT NOT NULL,          -- 'NVIDIA H100 80GB HBM3', or the CPU's name
    memory_bytes {bigint},
    caps TEXT,                          -- JSON: the DeviceCaps the agent found
    PRIMARY KEY (host, lane)
)
"""

RUN_COLUMNS = (
    "id kind params owner device_key status phase progress created_at started_at finished_at heartbeat_at "
    "pid host time_limit_s cancel_requested environment summary details error imported client sweep_id race_number"
).split()
EVENT_COLUMNS = "id run_id kind variant phase epoch step time_s eval_time_s loss samples recorded_at note".split()
_HASH_OWNERS = "UPDATE {} SET owner = 'visitor:' || owner_hash(substr(owner, 9)) WHERE owner LIKE 'visitor:%'"
# Each version's change to a store written by the one before it (additive only, so a store keeps
# every run it holds).
MIGRATIONS = {
    2: ("ALTER TABLE events ADD COLUMN note TEXT",),
    3: ("ALTER TABLE runs ADD COLUMN client TEXT",),  # the address host limits count a visitor by, if asked
    4: ("ALTER TABLE runs ADD COLUMN sweep_id INTEGER",),  # the sweeps table itself: CREATE ... IF NOT EXISTS
    # Race numbers were a race's id less the other jobs' ids before it, so purging old probes and demos
    # renumbered the races after them: each race now keeps the number it had, and new races count on
    # from the last number given (meta's last_race_number), whatever was deleted since.
    5: (
        "ALTER TABLE runs ADD COLUMN race_number INTEGER",
        "UPDATE runs SET race_number = id - (SELECT COUNT(*) FROM runs AS o WHERE o.kind != 'race' AND o.id < runs.id)"
        " WHERE kind = 'race'",
        "INSERT OR REPLACE INTO meta (key, value) SELECT 'last_race_number', "
        "COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'runs'), 0) - (SELECT COUNT(*) FROM runs WHERE kind != 'race')",
    ),
    # Owners were browser tokens, readable by whatever reads this file: now their hashes (identity.owner_of).
    6: tuple(_HASH_OWNERS.format(table) for table in ("runs", "sweeps")),
}
# Indexes on columns a migration adds: created once every store has the column.
AFTER_MIGRATIONS = ("CREATE INDEX IF NOT EXISTS runs_by_sweep ON runs (sweep_id, id)",)


TABLES = frozenset(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", SCHEMA))


def schema_statements(types: dict[str, str]) -> list[str]:
    """The schema's statements, with one backend's spelling of the types."""
    return [s.strip() for s in SCHEMA.format(**types).split(";\n") if s.strip()]
