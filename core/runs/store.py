"""The embedded store: SQLite in WAL mode, the single source of truth for runs and their events.

Workers write, everyone else reads. WAL lets readers proceed while a worker writes; every
connection waits (busy_timeout) rather than failing with "database is locked". The schema lives
here, once, with its version, so a later release can migrate it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from core.engine.spec import data_home
from core.runs.disk_space import disk_full_message, is_disk_full
from core.runs.identity import owner_hash

SCHEMA_VERSION = 6
MAX_ID = 2**63 - 1  # SQLite's INTEGER PRIMARY KEY: a larger number names no run
BUSY_TIMEOUT_MS = 30_000
EVENT_CHUNK = 5_000  # events read per query: a damaged page loses only what lies after it
FINAL_STATES = ("done", "failed", "cancelled")
ACTIVE_STATES = ("starting", "running")


def id_from_text(text: object) -> int | None:
    """A run's or sweep's id from outside (a link, a route, a replay key): ASCII decimal digits
    naming a possible row, else None. `str.isdigit` alone admits '²' (which int() refuses), and
    Python refuses to read numbers of more than 4,300 digits: both are checked before int()."""
    text = str(text)
    if not (text.isascii() and text.isdigit()) or len(text) > len(str(MAX_ID)):
        return None
    value = int(text)
    return value if 0 < value <= MAX_ID else None


SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,                 -- race | probe | ... (core.runs.job_kinds.JOB_KINDS)
    params TEXT NOT NULL,               -- JSON: the RunSpec for a race
    owner TEXT NOT NULL,
    device_key TEXT NOT NULL,           -- one running job per device key: 'cpu', 'cuda:0', ...
    status TEXT NOT NULL,               -- queued | starting | running | done | failed | cancelled
    phase TEXT NOT NULL DEFAULT '',     -- what a person should read: 'compiled epoch 2/3'
    progress REAL NOT NULL DEFAULT 0,   -- 0..1
    created_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL,
    heartbeat_at REAL,
    pid INTEGER,
    host TEXT,
    time_limit_s REAL,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    environment TEXT,                   -- JSON
    summary TEXT,                       -- JSON
    details TEXT,                       -- JSON: compile stats, per-variant memory, ...
    error TEXT,
    imported INTEGER NOT NULL DEFAULT 0,
    client TEXT,                        -- a visitor's address, kept only where host limits count by it
    sweep_id INTEGER,                   -- the sweep this race is a point of (sweeps.id), or NULL
    race_number INTEGER                 -- retired: races were once numbered apart from run ids; NULL now
);
CREATE INDEX IF NOT EXISTS runs_queue ON runs (status, device_key, id);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    kind TEXT NOT NULL,                 -- step | epoch | compile
    variant TEXT NOT NULL,
    phase TEXT NOT NULL,                -- train | eval (epoch rows: train)
    epoch INTEGER NOT NULL,
    step INTEGER NOT NULL,              -- 1-based within variant and phase; 0 for epoch rows
    time_s REAL NOT NULL,               -- step time, or epoch train time
    eval_time_s REAL,                   -- epoch rows only
    loss REAL,
    samples INTEGER,
    recorded_at REAL NOT NULL,
    note TEXT                           -- compile rows: what compiled ("recompile: <guard>")
);
CREATE INDEX IF NOT EXISTS events_by_run ON events (run_id, id);
CREATE TABLE IF NOT EXISTS sweeps (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    owner TEXT NOT NULL,
    params TEXT NOT NULL,               -- JSON: {"base": RunSpec, "axes": [{"name", "values"}, ...]}
    created_at REAL NOT NULL
);
"""


RUN_COLUMNS = (
    "id kind params owner device_key status phase progress created_at started_at finished_at heartbeat_at "
    "pid host time_limit_s cancel_requested environment summary details error imported client sweep_id race_number"
).split()
JSON_COLUMNS = ("params", "environment", "summary", "details")
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


def default_store_path() -> str:
    """$COMPILE_LAB_STORE, else compile_lab.sqlite3 in the data directory."""
    return os.environ.get("COMPILE_LAB_STORE") or os.path.join(data_home(), "compile_lab.sqlite3")


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


@dataclass
class Sweep:
    """One stored sweep: its owner and what it varies (its points are runs with its sweep_id)."""

    id: int
    owner: str
    params: dict[str, Any]
    created_at: float


class Store:
    """A handle on one store file. Cheap to create; each thread/process opens its own."""

    def __init__(self, path: str | None = None):
        self.path = os.path.abspath(path or default_store_path())
        if os.path.isdir(self.path):
            raise StoreError(f"store {self.path} is a folder: name a file (it is created if missing)")
        self._conn: sqlite3.Connection | None = None
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            self._conn = self._connect()
            self._migrate()
        except StoreError:
            self._close_quietly()
            raise
        except (OSError, sqlite3.OperationalError) as exc:  # permissions, a missing drive, a locked file
            self._close_quietly()
            raise StoreError(
                disk_full_message(self.path) if is_disk_full(exc) else f"cannot use the store {self.path}: {exc}"
            ) from None
        except sqlite3.DatabaseError as exc:  # "file is not a database"
            self._close_quietly()
            raise StoreError(f"{self.path} is not a Compile Lab store ({exc})") from None

    def _close_quietly(self) -> None:
        if self._conn is not None:
            self._conn.close()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False)
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")  # durable at checkpoints; safe with WAL
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA secure_delete = ON")  # a value changed or deleted (an old owner) leaves no copy
        conn.create_function("owner_hash", 1, owner_hash, deterministic=True)  # migration 6
        return conn

    def close(self) -> None:
        self._conn.close()

    @contextmanager
    def transaction(self, immediate: bool = False) -> Iterator[sqlite3.Connection]:
        """One atomic unit. `immediate` takes the write lock up front: used by dispatch so that
        two processes ticking at once cannot both start the same job."""
        self._conn.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def _migrate(self) -> None:
        tables = {r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if tables and "meta" not in tables:  # another program's database: leave it alone
            raise StoreError(f"{self.path} is a SQLite database but not a Compile Lab store")
        self._conn.executescript(SCHEMA)  # idempotent: every statement is IF NOT EXISTS
        with self.transaction(immediate=True) as c:
            row = c.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if row is None:  # a new store: SCHEMA made it current
                c.execute("INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            version = SCHEMA_VERSION if row is None else int(row["value"])
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"store {self.path} has schema version {version}, newer than this Compile Lab "
                    f"({SCHEMA_VERSION}): upgrade Compile Lab or use another store"
                )
            for target in range(version + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS.get(target, ()):
                    c.execute(statement)
            if version < SCHEMA_VERSION:
                c.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
            for statement in AFTER_MIGRATIONS:
                c.execute(statement)

    # -- settings the host changes at run time ------------------------------------------------

    def queue_paused(self) -> bool:
        """Whether the host paused the queue (jobs wait; nothing new starts)."""
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'queue_paused'").fetchone()
        return row is not None and row[0] == "1"

    def set_queue_paused(self, paused: bool) -> None:
        self._conn.execute(
            "INSERT INTO meta (key, value) VALUES ('queue_paused', ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            ("1" if paused else "0",),
        )

    # -- runs ---------------------------------------------------------------------------------

    def create_run(self, kind: str, params: dict[str, Any], owner: str, device_key: str, **fields: Any) -> int:
        values = {
            "kind": kind,
            "params": params,
            "owner": owner,
            "device_key": device_key,
            "status": fields.pop("status", "queued"),
            "created_at": fields.pop("created_at", time.time()),
            **fields,
        }
        with self.transaction(immediate=True) as c:
            return self._insert_run(c, values)

    @staticmethod
    def _insert_run(conn: sqlite3.Connection, values: dict[str, Any]) -> int:
        """Insert one run row inside the caller's transaction."""
        values = {k: _encode(k, v) for k, v in values.items() if k != "race_number"}
        cols = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        cur = conn.execute(f"INSERT INTO runs ({cols}) VALUES ({marks})", tuple(values.values()))
        return int(cur.lastrowid)

    def update_run(self, run_id: int, conn: sqlite3.Connection | None = None, **fields: Any) -> None:
        if not fields:
            return
        unknown = set(fields) - set(RUN_COLUMNS)
        if unknown:
            raise ValueError(f"unknown run columns: {sorted(unknown)}")
        sets = ", ".join(f"{k} = ?" for k in fields)
        values = tuple(_encode(k, v) for k, v in fields.items())
        (conn or self._conn).execute(f"UPDATE runs SET {sets} WHERE id = ?", (*values, run_id))

    def finish_run(self, run_id: int, status: str, conn: sqlite3.Connection | None = None, **fields: Any) -> bool:
        """Move a run to a final state unless it already is in one. True if this call did it."""
        sets = {"status": status, "finished_at": time.time(), **fields}
        clause = ", ".join(f"{k} = ?" for k in sets)
        cur = (conn or self._conn).execute(
            f"UPDATE runs SET {clause} WHERE id = ? AND status NOT IN ('done', 'failed', 'cancelled')",
            (*(_encode(k, v) for k, v in sets.items()), run_id),
        )
        return cur.rowcount == 1

    def claim_run(self, run_id: int, pid: int, host: str) -> bool:
        """A worker takes a dispatched job; False if it was cancelled or reconciled meanwhile."""
        cur = self._conn.execute(
            "UPDATE runs SET status = 'running', pid = ?, host = ?, heartbeat_at = ? WHERE id = ? AND status = 'starting'",
            (pid, host, time.time(), run_id),
        )
        return cur.rowcount == 1

    def get_run(self, run_id: int, conn: sqlite3.Connection | None = None) -> Run | None:
        row = (conn or self._conn).execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        return _run(row) if row else None

    def list_runs(
        self, kind: str | None = None, status: Iterable[str] | None = None, owner: str | None = None, limit: int = 1000
    ) -> list[Run]:
        where, args = [], []
        if kind:
            where.append("kind = ?")
            args.append(kind)
        if status is not None:
            status = list(status)
            where.append(f"status IN ({', '.join('?' for _ in status)})")
            args.extend(status)
        if owner:
            where.append("owner = ?")
            args.append(owner)
        sql = "SELECT * FROM runs" + (f" WHERE {' AND '.join(where)}" if where else "") + " ORDER BY id DESC LIMIT ?"
        return [_run(r) for r in self._conn.execute(sql, (*args, limit)).fetchall()]

    # -- sweeps -------------------------------------------------------------------------------

    @staticmethod
    def insert_sweep(conn: sqlite3.Connection, owner: str, params: dict[str, Any]) -> int:
        """A new sweep row, inside the caller's transaction (its points are inserted in the same one)."""
        cur = conn.execute(
            "INSERT INTO sweeps (owner, params, created_at) VALUES (?, ?, ?)", (owner, json.dumps(params), time.time())
        )
        return int(cur.lastrowid)

    def get_sweep(self, sweep_id: int) -> Sweep | None:
        row = self._conn.execute("SELECT * FROM sweeps WHERE id = ?", (sweep_id,)).fetchone()
        return _sweep(row) if row else None

    def list_sweeps(self, owner: str | None = None, limit: int = 100) -> list[Sweep]:
        """Newest first."""
        sql = "SELECT * FROM sweeps" + (" WHERE owner = ?" if owner else "") + " ORDER BY id DESC LIMIT ?"
        return [_sweep(r) for r in self._conn.execute(sql, ((owner,) if owner else ()) + (limit,)).fetchall()]

    def sweep_runs(self, sweep_id: int) -> list[Run]:
        """A sweep's points, in the order they were queued."""
        rows = self._conn.execute("SELECT * FROM runs WHERE sweep_id = ? ORDER BY id", (sweep_id,)).fetchall()
        return [_run(r) for r in rows]

    def delete_sweep(self, sweep_id: int) -> None:
        """The sweep, its points and their events, in one transaction."""
        with self.transaction() as c:
            c.execute("DELETE FROM events WHERE run_id IN (SELECT id FROM runs WHERE sweep_id = ?)", (sweep_id,))
            c.execute("DELETE FROM runs WHERE sweep_id = ?", (sweep_id,))
            c.execute("DELETE FROM sweeps WHERE id = ?", (sweep_id,))

    def delete_run(self, run_id: int) -> None:
        with self.transaction() as c:
            c.execute("DELETE FROM events WHERE run_id = ?", (run_id,))
            c.execute("DELETE FROM runs WHERE id = ?", (run_id,))

    # -- events -------------------------------------------------------------------------------

    def append_events(self, run_id: int, rows: list[dict[str, Any]], run_fields: dict[str, Any] | None = None) -> None:
        """Write a batch of events (and optionally update the run row) in one transaction."""
        if not rows and not run_fields:
            return
        now = time.time()
        with self.transaction() as c:
            self._insert_events(c, run_id, rows, now)
            if run_fields:
                self.update_run(run_id, conn=c, **run_fields)

    @staticmethod
    def _insert_events(conn: sqlite3.Connection, run_id: int, rows: list[dict[str, Any]], now: float) -> None:
        cols = EVENT_COLUMNS[2:]  # everything but id and run_id
        conn.executemany(
            f"INSERT INTO events (run_id, {', '.join(cols)}) VALUES (?, {', '.join('?' for _ in cols)})",
            [(run_id, *(r.get(k, now if k == "recorded_at" else None) for k in cols)) for r in rows],
        )

    def events_after(self, run_id: int, after_id: int = 0, limit: int | None = None) -> list[dict[str, Any]]:
        """Events of a run with id > after_id, oldest first: what a live view has not seen yet.

        Read in chunks, so a damaged page of the file costs only the events after it: DamagedEvents
        then carries those before it."""
        events: list[dict[str, Any]] = []
        last = after_id
        while True:
            want = EVENT_CHUNK if not limit else min(EVENT_CHUNK, limit - len(events))
            try:
                rows = self._conn.execute(
                    "SELECT * FROM events WHERE run_id = ? AND id > ? ORDER BY id LIMIT ?", (run_id, last, want)
                ).fetchall()
            except sqlite3.OperationalError:  # locked past the busy timeout, an I/O error: not damage
                raise
            except sqlite3.DatabaseError as exc:  # SQLITE_CORRUPT: "database disk image is malformed"
                raise DamagedEvents(self.path, run_id, events, exc) from None
            events.extend(dict(r) for r in rows)
            if len(rows) < want or (limit and len(events) >= limit):
                return events
            last = rows[-1]["id"]

    def imported_count(self, owner: str) -> int:
        """How many imported runs `owner` keeps (the host's per-visitor import limit counts them)."""
        row = self._conn.execute("SELECT COUNT(*) FROM runs WHERE imported = 1 AND owner = ?", (owner,)).fetchone()
        return int(row[0])

    def import_run(self, run_fields: dict[str, Any], events: list[dict[str, Any]]) -> int:
        """Insert a finished run and its events atomically (both or nothing)."""
        with self.transaction(immediate=True) as c:
            run_id = self._insert_run(c, run_fields)
            self._insert_events(c, run_id, events, time.time())
        return run_id

    def schema_version(self) -> int:
        return int(self._conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0])


def _encode(column: str, value: Any) -> Any:
    return json.dumps(value) if column in JSON_COLUMNS and value is not None else value


def _sweep(row: sqlite3.Row) -> Sweep:
    data = dict(row)
    try:
        data["params"] = json.loads(data["params"])
    except (TypeError, ValueError):
        data["params"] = {"__corrupt__": str(data["params"])[:200]}
    return Sweep(**data)


def _run(row: sqlite3.Row) -> Run:
    data = dict(row)
    for key in JSON_COLUMNS:
        if data.get(key) is not None:
            try:
                data[key] = json.loads(data[key])
            except (TypeError, ValueError):
                # A damaged row must not take the dispatcher down: the worker fails this job.
                data[key] = {"__corrupt__": str(data[key])[:200]}
    return Run(**data)
