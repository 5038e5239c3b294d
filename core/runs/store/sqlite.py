"""The embedded backend: one SQLite file in WAL mode, the default (no set-up, one box).

WAL lets readers proceed while a worker writes; every connection waits (busy_timeout) rather than
failing with "database is locked". One connection per Store handle; a write transaction that must
not interleave with another (dispatch, enqueueing with its room checks) takes the write lock up
front (BEGIN IMMEDIATE), which serialises it across threads and processes.
"""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from core.runs.limits import owner_hash
from core.runs.store.records import StoreError, schema_statements

BUSY_TIMEOUT_MS = 30_000
TYPES = {"id": "INTEGER PRIMARY KEY AUTOINCREMENT", "real": "REAL", "bigint": "INTEGER"}
OperationalError = sqlite3.OperationalError
DatabaseError = sqlite3.DatabaseError
IntegrityError = sqlite3.IntegrityError


def cut_short(path: str) -> tuple[int, int] | None:
    """(pages the file has, pages its header says it has) where a store file is shorter than its
    own header says; None for a sound, new or foreign file."""
    try:
        with open(path, "rb") as fh:
            header = fh.read(100)
        size = os.path.getsize(path)
    except OSError:
        return None
    if len(header) < 100 or not header.startswith(b"SQLite format 3\0") or header[24:28] != header[92:96]:
        return None  # (the header's page count is valid only where its change counters match)
    page = int.from_bytes(header[16:18], "big")
    page = 65536 if page == 1 else page
    want = int.from_bytes(header[28:32], "big")
    have = size // page if page else want
    return (have, want) if have < want else None


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
        self.damage: str | None = None  # why the file is open read-only, as it is (cut_short)
        self._conn = sqlite3.connect(self.path, timeout=busy_ms / 1000, isolation_level=None, check_same_thread=False)
        try:
            self._conn.row_factory = sqlite3.Row
            self._conn.execute(f"PRAGMA busy_timeout = {busy_ms}")
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = NORMAL")  # durable at checkpoints; safe with WAL
            self._conn.execute("PRAGMA foreign_keys = ON")
            self._conn.execute("PRAGMA secure_delete = ON")  # a value changed or deleted (an old owner) leaves no copy
            self._conn.create_function("owner_hash", 1, owner_hash, deterministic=True)  # migration 6
        except sqlite3.DatabaseError as exc:
            # Only a file SQLite refuses is looked at for a cut: a sound one's header may run ahead of
            # its size for a moment while a checkpoint writes it.
            short = None if isinstance(exc, sqlite3.OperationalError) else cut_short(self.path)
            if short is None:
                self._conn.close()
                raise
            self._open_what_can_be_read(*short)
        except BaseException:
            self._conn.close()
            raise

    def _open_what_can_be_read(self, have: int, want: int) -> None:
        """A file cut short (a copy taken mid-write, a disk that filled while it grew): SQLite refuses
        all of it, since its schema names pages past the end. Read-only, with the schema taken as
        written, every page the file still has reads (a run's events past the cut: core.runs.store's
        DamagedEvents); nothing is written to it, which could only lose more."""
        self._conn.close()
        self._conn = sqlite3.connect(
            f"file:{urllib.parse.quote(self.path)}?mode=ro", uri=True, isolation_level=None, check_same_thread=False
        )
        self._conn.row_factory = sqlite3.Row
        self._conn.execute("PRAGMA writable_schema = ON")  # (reads past the check of the schema's pages)
        self._conn.execute("PRAGMA query_only = ON")
        self.damage = (
            f"the store {self.path} is cut short ({have:,} of its {want:,} pages: a copy taken mid-write, or a "
            "disk that filled): what it still holds is shown, read-only; nothing is queued or recorded until it "
            f"is restored from a backup or repaired (sqlite3 {self.path} .recover)"
        )

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
