"""The store: the single source of truth for runs and their events, on one of two backends with
one schema (core.runs.store.records) and one set of queries. SQLite (core.runs.store.sqlite) is the
default: one file, no set-up. PostgreSQL (core.runs.store.postgresql) when the location is a
postgresql:// URL (COMPILE_LAB_STORE or --store): one store for a fleet of boxes, each running an
agent (core.runs.agent).

Workers write, everyone else reads. The schema has a version, so a later release can migrate it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from core.runs.disk_space import disk_full_message, is_disk_full
from core.runs.store.records import (
    ACTIVE_STATES,
    AFTER_MIGRATIONS,
    EVENT_COLUMNS,
    FINAL_STATES,
    FIRST_SERVER_VERSION,
    MAX_ID,
    MIGRATIONS,
    RUN_COLUMNS,
    SCHEMA_VERSION,
    DamagedEvents,
    Run,
    StoreError,
    Sweep,
    decoded,
    default_store_path,
    encode,
    id_from_text,
    is_server_url,
    run_of,
    shown_location,
    store_files_dir,
    store_location,
    sweep_of,
)

# ----------------------------------------------------------------------
# The store's reads for a page that pages through the runs (core.view.compare): every run's
# three small columns, some runs' settings, some runs whole. A part of Store (core.runs.store), apart
# so that each file stays one reading; the same SQL on both backends.

ID_CHUNK = 500  # ids per `IN (...)` list: well under either backend's limit on a query's parameters


class RunPages:
    """Store's paged reads (mixed into Store: they use its _all, is_damage and _readable_rows)."""

    unreadable_runs: set[int]

    def run_index(self) -> list[tuple[int, str, str]]:
        """Every run's (id, kind, status), newest first: three small columns, all a page that
        pages through the runs needs of each (core.view.compare). Around a damaged page of
        the table, as list_runs: its rows left out and kept in unreadable_runs."""
        sql = "SELECT id, kind, status FROM runs"
        try:
            return [(r[0], r[1], r[2]) for r in self._all(sql + " ORDER BY id DESC")]
        except Exception as exc:
            if not self.is_damage(exc):
                raise
        return [(r[0], r[1], r[2]) for r in self._readable_rows("id, kind, status", [], [])]

    def run_settings(self, ids: Iterable[int]) -> dict[int, tuple[dict[str, Any], dict[str, Any] | None, str]]:
        """(params, environment, device_key) of these runs, by id: what they ran, on what, and
        nothing they measured (no summary, no details). A row on a damaged page is left out."""
        found = {}
        for row in self._rows_by_id("id, params, environment, device_key", ids):
            data = decoded(row)
            found[data["id"]] = (data["params"], data["environment"], data["device_key"])
        return found

    def runs_by_id(self, ids: Iterable[int]) -> list[Run]:
        """These runs, in the order of `ids`; one gone (or on a damaged page) is left out."""
        by_id = {run.id: run for run in map(run_of, self._rows_by_id("*", ids))}
        return [by_id[i] for i in ids if i in by_id]

    def _rows_by_id(self, columns: str, ids: Iterable[int], chunk: int = ID_CHUNK) -> list[Any]:
        ids = list(dict.fromkeys(int(i) for i in ids))
        rows: list[Any] = []
        for start in range(0, len(ids), chunk):
            part = ids[start : start + chunk]
            sql = f"SELECT {columns} FROM runs WHERE id IN ({', '.join('?' for _ in part)})"
            try:
                rows += self._all(sql, part)
            except Exception as exc:
                if not self.is_damage(exc):
                    raise
                for run_id in part:  # one at a time: only the damaged page's rows are lost
                    try:
                        rows += self._all(f"SELECT {columns} FROM runs WHERE id = ?", (run_id,))
                    except Exception as one:
                        if not self.is_damage(one):
                            raise
                        self.unreadable_runs.add(run_id)
        return rows


__all__ = [
    "ACTIVE_STATES", "EVENT_CHUNK", "FINAL_STATES", "MAX_ID", "SCHEMA_VERSION", "DamagedEvents", "Run", "Store",
    "StoreError", "Sweep", "default_store_path", "id_from_text", "is_server_url", "store_files_dir", "store_location",
]  # fmt: skip

EVENT_CHUNK = 5_000  # events read per query: a damaged page loses only what lies after it


class Store(RunPages):
    """A handle on one store: a SQLite file or a PostgreSQL URL. Cheap to create; each
    thread/process opens its own (on PostgreSQL they share the process's connection pool)."""

    def __init__(self, path: str | None = None, wait_s: float | None = None):
        """`wait_s`: how long a server store's calls wait for a connection, and a file's writes for
        the lock another program holds, before they fail (30 s by default): a worker holding
        measured events must notice a lost server or a locked file soon."""
        location = path or default_store_path()
        self.server = is_server_url(location)
        self._db: Any = None
        try:
            if self.server:
                from core.runs.store.postgresql import PostgresBackend

                self._db = PostgresBackend(location, wait_s)
            else:
                from core.runs.store.sqlite import SqliteBackend

                self._db = SqliteBackend(location, wait_s)
            self.path = self._db.path
            if self.damage is None:  # (a file cut short is read as it is: nothing is written to it)
                self._migrate()
        except StoreError:
            self._close_quietly()
            raise
        except Exception as exc:
            self._close_quietly()
            raise self._opening_error(location, exc) from None
        self.files_dir = store_files_dir(self.path)
        # Runs whose row this handle found on a damaged page of the store's file (SQLite's "database
        # disk image is malformed"): left out of lists and read as missing, so every other run reads.
        self.unreadable_runs: set[int] = set()

    def _opening_error(self, location: str, exc: Exception) -> Exception:
        """A person's message for a store that cannot be opened; anything else as it was."""
        import sqlite3

        shown = shown_location(location)
        if isinstance(exc, (OSError, sqlite3.OperationalError)):  # permissions, a missing drive, a locked file
            return StoreError(disk_full_message(shown) if is_disk_full(exc) else f"cannot use the store {shown}: {exc}")
        if isinstance(exc, sqlite3.DatabaseError):  # "file is not a database"
            return StoreError(f"{shown} is not a Compile Lab store ({exc})")
        if self.server:
            import psycopg

            if isinstance(exc, (psycopg.Error, OSError)):
                return StoreError(f"cannot use the store {shown}: {str(exc).strip() or type(exc).__name__}")
        return exc

    def _close_quietly(self) -> None:
        if self._db is not None:
            self._db.close()

    def close(self) -> None:
        self._db.close()

    @property
    def damage(self) -> str | None:
        """Why this store is open read-only (a file cut short: what it holds reads, nothing is written);
        None for a sound one."""
        return getattr(self._db, "damage", None)

    @property
    def backend(self) -> str:
        """'sqlite' or 'postgresql'."""
        return self._db.kind

    @contextmanager
    def transaction(self, immediate: bool = False) -> Iterator[Any]:
        """One atomic unit. `immediate` takes the write lock up front (SQLite's BEGIN IMMEDIATE,
        one advisory lock on PostgreSQL): used where counts are checked before a write."""
        with self._db.transaction(immediate) as conn:
            yield conn

    def dispatch_transaction(self) -> Any:
        """The transaction dispatch fills lanes in (core.runs.queue.dispatch): with lock_lane and
        lock_queued, two dispatchers at once never start one job twice or two jobs on a lane."""
        return self._db.dispatch_transaction()

    def lock_lane(self, conn: Any, host: str, lane: str) -> bool:
        return self._db.lock_lane(conn, host, lane)

    def lock_queued(self, conn: Any, run_id: int) -> bool:
        return self._db.lock_queued(conn, run_id)

    def reconnect(self) -> None:
        """After the store's server was lost: OperationalError while it is still away, else this
        process talks to it afresh (a no-op for a file)."""
        self._db.reconnect()

    def up_since(self) -> float:
        """Since when the store has been reachable (a server's start, or when this process reached it
        again; 0 for a file): a heartbeat older than this says nothing of its writer, who could not
        have written meanwhile (core.runs.fleet, core.runs.queue.reconcile)."""
        return self._db.up_since()

    def _one(self, sql: str, params: Any = (), conn: Any = None) -> Any:
        if conn is not None:
            return conn.execute(sql, params).fetchone()
        with self._db.connection() as c:
            return c.execute(sql, params).fetchone()

    def _all(self, sql: str, params: Any = (), conn: Any = None) -> list[Any]:
        if conn is not None:
            return conn.execute(sql, params).fetchall()
        with self._db.connection() as c:
            return c.execute(sql, params).fetchall()

    def _write(self, sql: str, params: Any = (), conn: Any = None) -> int:
        """Run one write; how many rows it changed."""
        if conn is not None:
            return conn.execute(sql, params).rowcount
        with self._db.connection() as c:
            return c.execute(sql, params).rowcount

    def _migrate(self) -> None:
        self._db.create_tables()  # idempotent: every statement is IF NOT EXISTS
        with self.transaction(immediate=True) as c:
            row = c.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if row is None:  # a new store: SCHEMA made it current
                c.execute("INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            version = SCHEMA_VERSION if row is None else int(row["value"])
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"store {shown_location(self.path)} has schema version {version}, newer than this Compile Lab "
                    f"({SCHEMA_VERSION}): upgrade Compile Lab or use another store"
                )
            for target in range(version + 1, SCHEMA_VERSION + 1):
                if self.server and target <= FIRST_SERVER_VERSION:
                    continue  # SQLite's history: a server store never had those versions
                for statement in MIGRATIONS.get(target, ()):
                    c.execute(statement)
            if version < SCHEMA_VERSION:
                c.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
            if version < SCHEMA_VERSION or row is None:  # (an index build locks its table: not on every open)
                for statement in AFTER_MIGRATIONS:
                    c.execute(statement)

    # -- settings the host changes at run time ------------------------------------------------

    def queue_paused(self) -> bool:
        """Whether the host paused the queue (jobs wait; nothing new starts)."""
        row = self._one("SELECT value FROM meta WHERE key = 'queue_paused'")
        return row is not None and row[0] == "1"

    def set_queue_paused(self, paused: bool) -> None:
        self._write(
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
    def _insert_run(conn: Any, values: dict[str, Any]) -> int:
        """Insert one run row inside the caller's transaction (its id is the one number people see)."""
        values = {k: encode(k, v) for k, v in values.items() if k != "race_number"}
        cols = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        row = conn.execute(
            f"INSERT INTO runs ({cols}) VALUES ({marks}) RETURNING id", tuple(values.values())
        ).fetchone()
        return int(row[0])

    def update_run(self, run_id: int, conn: Any = None, **fields: Any) -> None:
        if not fields:
            return
        unknown = set(fields) - set(RUN_COLUMNS)
        if unknown:
            raise ValueError(f"unknown run columns: {sorted(unknown)}")
        sets = ", ".join(f"{k} = ?" for k in fields)
        values = tuple(encode(k, v) for k, v in fields.items())
        self._write(f"UPDATE runs SET {sets} WHERE id = ?", (*values, run_id), conn)

    def finish_run(self, run_id: int, status: str, conn: Any = None, **fields: Any) -> bool:
        """Move a run to a final state unless it already is in one. True if this call did it."""
        sets = {"status": status, "finished_at": time.time(), **fields}
        clause = ", ".join(f"{k} = ?" for k in sets)
        changed = self._write(
            f"UPDATE runs SET {clause} WHERE id = ? AND status NOT IN ('done', 'failed', 'cancelled')",
            (*(encode(k, v) for k, v in sets.items()), run_id),
            conn,
        )
        return changed == 1

    def claim_run(self, run_id: int, pid: int, host: str) -> bool:
        """A worker takes a dispatched job; False if it was cancelled or reconciled meanwhile."""
        changed = self._write(
            "UPDATE runs SET status = 'running', pid = ?, host = ?, heartbeat_at = ? WHERE id = ? AND status = 'starting'",
            (pid, host, time.time(), run_id),
        )
        return changed == 1

    @contextmanager
    def run_held(self, run_id: int) -> Iterator[tuple[Any, Run | None]]:
        """A transaction that holds a run's row for writing (SQLite: the write lock; PostgreSQL: the
        row, FOR UPDATE), with the row as it is once held (None if gone). Who ends a run for what its
        row says (reconcile) decides on a row no one can change before the decision is written: a
        worker that waited for the same lock (a backup, a sqlite3 shell) has written first."""
        with self._db.transaction(immediate=not self.server) as c:
            row = c.execute("SELECT * FROM runs WHERE id = ?" + (" FOR UPDATE" if self.server else ""), (run_id,))
            found = row.fetchone()
            yield c, run_of(found) if found else None

    def get_run(self, run_id: int, conn: Any = None) -> Run | None:
        """The run, None if there is none (or its row is on a damaged page: then in unreadable_runs)."""
        try:
            row = self._one("SELECT * FROM runs WHERE id = ?", (run_id,), conn)
        except Exception as exc:
            if not self.is_damage(exc):
                raise
            self.unreadable_runs.add(run_id)
            return None
        return run_of(row) if row else None

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
        try:
            return [run_of(r) for r in self._all(sql, (*args, limit))]
        except Exception as exc:
            if not self.is_damage(exc):
                raise
        return self._readable_runs(where, args, limit)

    def _readable_runs(self, where: list[str], args: list[Any], limit: int) -> list[Run]:
        """list_runs where a page of the runs table is damaged (_readable_rows)."""
        found: list[Run] = []
        for row in self._readable_rows("*", where, args):
            found.append(run_of(row))
            if len(found) >= limit:
                break
        return found

    def _readable_rows(self, columns: str, where: list[str], args: list[Any]) -> Iterator[Any]:
        """Where a page of the runs table is damaged: the ids from the table's index, then each
        row alone (its `columns`, if it meets `where`); a row on the damaged page is left out and
        kept in unreadable_runs."""
        for run_id in self._run_ids():
            try:
                row = self._one(f"SELECT {columns} FROM runs WHERE {' AND '.join(['id = ?', *where])}", (run_id, *args))
            except Exception as exc:
                if not self.is_damage(exc):
                    raise
                self.unreadable_runs.add(run_id)
                continue
            if row is not None:
                yield row

    # -- sweeps -------------------------------------------------------------------------------

    @staticmethod
    def insert_sweep(conn: Any, owner: str, params: dict[str, Any]) -> int:
        """A new sweep row, inside the caller's transaction (its points are inserted in the same one)."""
        row = conn.execute(
            "INSERT INTO sweeps (owner, params, created_at) VALUES (?, ?, ?) RETURNING id",
            (owner, json.dumps(params), time.time()),
        ).fetchone()
        return int(row[0])

    def get_sweep(self, sweep_id: int) -> Sweep | None:
        row = self._one("SELECT * FROM sweeps WHERE id = ?", (sweep_id,))
        return sweep_of(row) if row else None

    def list_sweeps(self, owner: str | None = None, limit: int = 100) -> list[Sweep]:
        """Newest first."""
        sql = "SELECT * FROM sweeps" + (" WHERE owner = ?" if owner else "") + " ORDER BY id DESC LIMIT ?"
        return [sweep_of(r) for r in self._all(sql, ((owner,) if owner else ()) + (limit,))]

    def sweep_runs(self, sweep_id: int) -> list[Run]:
        """A sweep's points, in the order they were queued."""
        rows = self._all("SELECT * FROM runs WHERE sweep_id = ? ORDER BY id", (sweep_id,))
        return [run_of(r) for r in rows]

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

    def append_events(
        self,
        run_id: int,
        rows: list[dict[str, Any]],
        run_fields: dict[str, Any] | None = None,
        finish: tuple[str, dict[str, Any]] | None = None,
    ) -> None:
        """Write a batch of events (and optionally update the run row) in one transaction; with
        `finish` (status, fields), end the run in it too unless it has ended (events kept by a
        worker that lost its store, delivered later: core.runs.outage)."""
        if not rows and not run_fields and not finish:
            return
        now = time.time()
        with self.transaction() as c:
            self._db.lock_events(c, run_id)
            self._insert_events(c, run_id, rows, now)
            if run_fields:
                self.update_run(run_id, conn=c, **run_fields)
            if finish:
                self.finish_run(run_id, finish[0], conn=c, **finish[1])

    @staticmethod
    def _insert_events(conn: Any, run_id: int, rows: list[dict[str, Any]], now: float) -> None:
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
                rows = self._all(
                    "SELECT * FROM events WHERE run_id = ? AND id > ? ORDER BY id LIMIT ?", (run_id, last, want)
                )
            except Exception as exc:
                if not self.is_damage(exc):  # locked past the busy timeout, an I/O error, a server gone: not damage
                    raise
                raise DamagedEvents(self.path, run_id, events, exc) from None
            events.extend(dict(r) for r in rows)
            if len(rows) < want or (limit and len(events) >= limit):
                return events
            last = rows[-1]["id"]

    def import_run(self, run_fields: dict[str, Any], events: list[dict[str, Any]], check: Any = None) -> int:
        """Insert a finished run and its events atomically (both or nothing). `check(conn)` runs first
        in the same transaction, under the write lock (a count that must hold when the row lands)."""
        with self.transaction(immediate=True) as c:
            if check is not None:
                check(c)
            run_id = self._insert_run(c, run_fields)
            self._db.lock_events(c, run_id)
            self._insert_events(c, run_id, events, time.time())
        return run_id

    # -- the queue's reads and writes (core.runs.queue) -----------------------------------------

    @staticmethod
    def waiting_of_asker(conn: Any, kind: str, owner: str, address: str | None) -> int:
        """Jobs of `kind` waiting for `owner` (or, with `address`, anyone at that client address)."""
        return int(
            _one(
                "SELECT COUNT(*) FROM runs WHERE kind = ? AND status = 'queued' "
                "AND (owner = ? OR (CAST(? AS TEXT) IS NOT NULL AND client = ?))",
                (kind, owner, address, address),
                conn,
            )[0]
        )

    @staticmethod
    def waiting_jobs(conn: Any, uncounted_kinds: Sequence[str]) -> int:
        """Jobs waiting in the queue, leaving out these kinds."""
        marks = ", ".join("?" * len(uncounted_kinds))
        sql = f"SELECT COUNT(*) FROM runs WHERE status = 'queued' AND kind NOT IN ({marks})"
        return int(_one(sql, tuple(uncounted_kinds), conn)[0])

    @staticmethod
    def unfinished_of_asker(conn: Any, owner: str, address: str | None, uncounted_kinds: Sequence[str]) -> int:
        """Jobs of `owner` (or, with `address`, of anyone at it) queued, starting or running, leaving
        out these kinds."""
        marks = ", ".join("?" * len(uncounted_kinds))
        sql = (
            "SELECT COUNT(*) FROM runs WHERE (owner = ? OR (CAST(? AS TEXT) IS NOT NULL AND client = ?)) "
            f"AND status IN ('queued', 'starting', 'running') AND kind NOT IN ({marks})"
        )
        return int(_one(sql, (owner, address, address, *uncounted_kinds), conn)[0])

    @staticmethod
    def start_queued(conn: Any, run_id: int, host: str, device_key: str, now: float) -> bool:
        """Mark a queued job starting on `host`'s lane `device_key`; False if it was no longer queued."""
        sql = (
            "UPDATE runs SET status = 'starting', phase = 'starting', started_at = ?, heartbeat_at = ?, host = ?, "
            "device_key = ? WHERE id = ? AND status = 'queued'"
        )
        return _write(sql, (now, now, host, device_key, run_id), conn) == 1

    def launched(self, run_id: int, pid: int) -> None:
        """The pid a job's worker was started with, unless the worker already recorded its own."""
        with self.transaction() as c:
            self._write("UPDATE runs SET pid = ? WHERE id = ? AND pid IS NULL", (pid, run_id), c)

    @staticmethod
    def busy_lanes(conn: Any, host: str) -> set[str]:
        """The lanes of `host` (or of no host) with a job starting or running."""
        sql = "SELECT DISTINCT device_key FROM runs WHERE status IN ('starting', 'running') AND (host = ? OR host IS NULL)"
        return {row[0] for row in _all(sql, (host,), conn)}

    @staticmethod
    def queue_context(conn: Any) -> list[Any]:
        """Every job that can have been ahead of a waiting one (unfinished when the oldest waiting job
        was queued, or since), by id; [] when nothing waits. Imported runs never count."""
        oldest = _one("SELECT MIN(created_at) FROM runs WHERE status = 'queued'", (), conn)[0]
        if oldest is None:
            return []
        sql = (
            "SELECT id, kind, device_key, owner, client, status, created_at, finished_at, host FROM runs "
            "WHERE (status IN ('queued', 'starting', 'running') OR finished_at > ?) AND COALESCE(imported, 0) = 0 "
            "ORDER BY id"
        )
        return _all(sql, (oldest,), conn)

    @staticmethod
    def ended_workers(conn: Any, host: str, since: float) -> list[tuple[str, int]]:
        """(lane, pid) of `host`'s jobs that ended since `since` with a worker pid recorded."""
        sql = (
            "SELECT device_key, pid FROM runs WHERE status IN ('done', 'failed', 'cancelled') AND host = ? "
            "AND pid IS NOT NULL AND finished_at >= ?"
        )
        return [(row[0], int(row[1])) for row in _all(sql, (host, since), conn)]

    def move_queued(self, run_id: int, host: str, device_key: str) -> bool:
        """Give a queued job to another host's lane; False if it was no longer queued."""
        sql = "UPDATE runs SET host = ?, device_key = ? WHERE id = ? AND status = 'queued'"
        return self._write(sql, (host, device_key, run_id)) == 1

    # -- the fleet's hosts and lanes (core.runs.fleet) -----------------------------------------

    @staticmethod
    def host_row(conn: Any, name: str) -> Any:
        """The registered host of this name (its state, pid, machine and heartbeat), or None."""
        return _one("SELECT state, pid, machine, heartbeat_at FROM hosts WHERE name = ?", (name,), conn)

    @staticmethod
    def replace_host(
        conn: Any, name: str, pid: int, machine: str, torch: str, now: float, lanes: list[dict[str, Any]]
    ) -> None:
        """Register `name` afresh, live since `now`, with these lanes (whatever it held before goes)."""
        _write("DELETE FROM hosts WHERE name = ?", (name,), conn)
        _write("DELETE FROM lanes WHERE host = ?", (name,), conn)
        _write(
            "INSERT INTO hosts (name, state, pid, machine, torch, started_at, heartbeat_at) VALUES (?, 'live', ?, ?, ?, ?, ?)",
            (name, pid, machine, torch, now, now),
            conn,
        )
        for lane in lanes:
            _write(
                "INSERT INTO lanes (host, lane, device_name, memory_bytes, caps) VALUES (?, ?, ?, ?, ?)",
                (name, lane["lane"], lane["device_name"], lane.get("memory_bytes"), json.dumps(lane.get("caps") or {})),
                conn,
            )

    def host_heartbeat(self, name: str, pid: int, now: float) -> bool:
        """A live host's heartbeat; False when its row is gone or another agent of the name holds it."""
        with self.transaction() as c:
            sql = "UPDATE hosts SET heartbeat_at = ? WHERE name = ? AND pid = ? AND state = 'live'"
            return self._write(sql, (now, name, pid), c) == 1

    def host_stopped(self, name: str, pid: int) -> None:
        with self.transaction() as c:
            self._write("UPDATE hosts SET state = 'stopped' WHERE name = ? AND pid = ?", (name, pid), c)

    def hosts_and_lanes(self) -> tuple[list[Any], list[Any]]:
        """Every host row by name and every lane row by host and lane, read together."""
        with self.transaction() as c:
            return (
                self._all("SELECT * FROM hosts ORDER BY name", (), c),
                self._all("SELECT * FROM lanes ORDER BY host, lane", (), c),
            )

    # -- housekeeping (core.runs.admin, core.runs.disk_budget) and imports (core.runs.bundle) ---

    def run_ids(self) -> set[int]:
        """Every stored run's id."""
        return {int(row[0]) for row in self._all("SELECT id FROM runs")}

    def finished_oldest_first(self) -> list[int]:
        """The ids of ended runs, the longest ended first."""
        marks = ", ".join("?" for _ in FINAL_STATES)
        sql = f"SELECT id FROM runs WHERE status IN ({marks}) ORDER BY COALESCE(finished_at, created_at), id"
        return [int(row[0]) for row in self._all(sql, FINAL_STATES)]

    @staticmethod
    def ended_before(conn: Any, cutoff: float, keep: int) -> list[int]:
        """The ids of runs that ended before `cutoff`, but never run `keep`."""
        marks = ", ".join("?" for _ in FINAL_STATES)
        sql = f"SELECT id FROM runs WHERE status IN ({marks}) AND COALESCE(finished_at, created_at) < ? AND id != ?"
        return [int(row[0]) for row in _all(sql, (*FINAL_STATES, cutoff, keep), conn)]

    @staticmethod
    def delete_runs(conn: Any, ids: Sequence[int]) -> None:
        """These runs and their events, in ID_CHUNK-sized lists."""
        for start in range(0, len(ids), ID_CHUNK):
            chunk = list(ids[start : start + ID_CHUNK])
            holes = ", ".join("?" for _ in chunk)
            _write(f"DELETE FROM events WHERE run_id IN ({holes})", chunk, conn)
            _write(f"DELETE FROM runs WHERE id IN ({holes})", chunk, conn)

    @staticmethod
    def imported_with_mark(conn: Any, owner: str, mark: str) -> int | None:
        """The first run `owner` imported whose details hold `mark` (a bundle's fingerprint), if any."""
        sql = "SELECT id FROM runs WHERE imported = 1 AND owner = ? AND details LIKE ? ORDER BY id"
        rows = _all(sql, (owner, f"%{mark}%"), conn)
        return int(rows[0][0]) if rows else None

    @staticmethod
    def imports_kept(conn: Any, owner: str, address: str | None) -> int:
        """Imported runs kept by `owner` (and, with `address`, by anyone at it)."""
        where, args = ("owner = ?", (owner,)) if address is None else ("(owner = ? OR client = ?)", (owner, address))
        return int(_one(f"SELECT COUNT(*) FROM runs WHERE imported = 1 AND {where}", args, conn)[0])

    def schema_version(self) -> int:
        return int(self._one("SELECT value FROM meta WHERE key = 'schema_version'")[0])

    def _run_ids(self) -> list[int]:
        """Every run's id, newest first, read around a damaged page of the runs table (only SQLite's
        file has one): from the queue's index, else every id the table has given out."""
        try:
            ids = [row[0] for row in self._all("SELECT id FROM runs INDEXED BY runs_queue")]
        except Exception as exc:
            if not self.is_damage(exc):
                raise
            row = self._one("SELECT seq FROM sqlite_sequence WHERE name = 'runs'")
            ids = list(range(1, int(row[0]) + 1)) if row else []
        return sorted(ids, reverse=True)

    def is_damage(self, exc: Exception) -> bool:
        """SQLITE_CORRUPT ("database disk image is malformed"): a damaged page of the file. A
        server's errors never mean that here."""
        import sqlite3

        return (
            not self.server and isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError)
        )


def _one(sql: str, params: Any, conn: Any) -> Any:
    return conn.execute(sql, params).fetchone()


def _all(sql: str, params: Any, conn: Any) -> list[Any]:
    return conn.execute(sql, params).fetchall()


def _write(sql: str, params: Any, conn: Any) -> int:
    return conn.execute(sql, params).rowcount
