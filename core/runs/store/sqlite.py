"""The embedded backend: one SQLite file in WAL mode, the default (no set-up, one box).

WAL lets readers proceed while a worker writes; every connection waits (busy_timeout) rather than
failing with "database is locked". One connection per Store handle; a write transaction that must
not interleave with another (dispatch, enqueueing with its room checks) takes the write lock up
front (BEGIN IMMEDIATE), which serialises it across threads and processes.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from core.runs.identity import owner_hash
from core.runs.store.records import StoreError
from core.runs.store.schema import schema_statements

BUSY_TIMEOUT_MS = 30_000
TYPES = {"id": "INTEGER PRIMARY KEY AUTOINCREMENT", "real": "REAL", "bigint": "INTEGER"}
OperationalError = sqlite3.OperationalError
DatabaseError = sqlite3.DatabaseError
IntegrityError = sqlite3.IntegrityError


class SqliteBackend:
    """A handle on one store file."""

    kind = "sqlite"

    def __init__(self, path: str, wait_s: float | None = None):
        """`wait_s`: how long a write waits for the lock another connection holds before it fails
        with "database is locked" (BUSY_TIMEOUT_MS by default)."""
        self.path = os.path.abspath(path)
        busy_ms = BUSY_TIMEOUT_MS if wait_s is None else max(int(wait_s * 1000), 1)
        if os.path.isdir(self.path):
            raise StoreError(f"store {self.path} is a folder: name a file (it is created if missing)")
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        self._conn = sqlite3.connect(self.path, timeout=busy_ms / 1000, isolation_level=None, check_same_thread=False)
        try:
            self._conn.row_factory = sqlite3.Row
            self._conn.execute(f"PRAGMA busy_timeout = {busy_ms}")
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = NORMAL")  # durable at checkpoints; safe with WAL
            self._conn.execute("PRAGMA foreign_keys = ON")
            self._conn.execute("PRAGMA secure_delete = ON")  # a value changed or deleted (an old owner) leaves no copy
            self._conn.create_function("owner_hash", 1, owner_hash, deterministic=True)  # migration 6
        except BaseException:
            self._conn.close()
            raise

    @contextmanager
    def connection(self) -> Iterator[Any]:
        yield self._conn

    @contextmanager
    def transaction(self, immediate: bool = False) -> Iterator[Any]:
        self._conn.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    @contextmanager
    def dispatch_transaction(self) -> Iterator[Any]:
        """Dispatch holds the write lock: two ticks at once cannot start the same job or two on a lane."""
        with self.transaction(immediate=True) as conn:
            yield conn

    @staticmethod
    def lock_lane(conn: Any, host: str, lane: str) -> bool:  # noqa: ARG004 - the write lock covers every lane
        return True

    @staticmethod
    def lock_queued(conn: Any, run_id: int) -> bool:  # noqa: ARG004 - the write lock covers every row
        return True

    @staticmethod
    def lock_events(conn: Any, run_id: int) -> None:  # noqa: ARG004 - one writer at a time already
        return None

    @staticmethod
    def reconnect() -> None:
        """A file needs no reconnecting (a server does: core.runs.store.postgresql)."""

    @staticmethod
    def up_since() -> float:
        """A file is always there: heartbeats are judged by their age alone."""
        return 0.0

    def create_tables(self) -> set[str]:
        """The tables there were before, then the schema made (idempotent: IF NOT EXISTS)."""
        tables = {r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if tables and "meta" not in tables:  # another program's database: leave it alone
            raise StoreError(f"{self.path} is a SQLite database but not a Compile Lab store")
        self._conn.executescript(";\n".join(schema_statements(TYPES)))
        return tables

    def close(self) -> None:
        self._conn.close()
