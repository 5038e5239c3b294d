"""A full disk (or a store server gone for a moment, or a store another program holds locked),
recognised wherever the store is written: the worker keeps what it measured in memory and waits (a
while) for space, the server or the lock; the CLI says "disk full" in one line. No torch."""

from __future__ import annotations

import errno
import sqlite3
import sys

# How long a worker waits for space at the end of a run before it gives up on the events it holds.
# Under the queue's HEARTBEAT_STALE_S (60 s), so the app does not take a waiting worker for hung.
DISK_FULL_WAIT_S = 45.0
DISK_FULL_RETRY_EVERY_S = 0.5


DISK_FULL_SQLSTATE = "53100"  # PostgreSQL's disk_full


def is_disk_full(exc: BaseException) -> bool:
    """Whether a write failed because the disk (or the user's quota) is full: this box's (a file,
    SQLite) or the store's server's."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    if getattr(exc, "sqlstate", None) == DISK_FULL_SQLSTATE:
        return True
    return isinstance(exc, sqlite3.OperationalError) and "full" in str(exc).lower()


def is_store_lost(exc: BaseException) -> bool:
    """Whether a write failed because the store's server cannot be reached now (PostgreSQL down,
    restarting, the network gone): like a full disk, worth keeping the events and waiting for."""
    psycopg = sys.modules.get("psycopg")
    pool = sys.modules.get("psycopg_pool")
    return bool(
        (psycopg is not None and isinstance(exc, psycopg.OperationalError))
        or (pool is not None and isinstance(exc, pool.PoolTimeout))
    )


LOCK_NOT_AVAILABLE_SQLSTATE = "55P03"  # PostgreSQL's lock_not_available (a lock_timeout passed)


def is_store_locked(exc: BaseException) -> bool:
    """Whether a write failed because another program held the store's write lock past the wait (a
    backup, a sqlite3 shell with a transaction open): the writer is alive and only waits its turn."""
    if getattr(exc, "sqlstate", None) == LOCK_NOT_AVAILABLE_SQLSTATE:
        return True
    return isinstance(exc, sqlite3.OperationalError) and any(w in str(exc).lower() for w in ("locked", "busy"))


def store_unavailable(exc: BaseException) -> bool:
    """Whether a read failed because the store is away or locked for now (a reader answers 'try
    again', a 503, never 'damaged')."""
    return is_store_lost(exc) or is_store_locked(exc)


def worth_waiting(exc: BaseException) -> bool:
    """A full disk, a lost server or a locked store: the worker keeps what it measured and retries
    for a while."""
    return is_disk_full(exc) or is_store_lost(exc) or is_store_locked(exc)


def disk_full_message(store_path: str) -> str:
    """The one line for a store that cannot be written for want of space (a URL's password hidden)."""
    from core.runs.store.records import shown_location  # (the store imports this module)

    return f"disk full: the store {shown_location(store_path)} cannot be written; free some space on its drive and try again"
