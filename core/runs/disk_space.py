"""A full disk, recognised wherever the store is written: the worker keeps what it measured in
memory and waits (a while) for space to return; the CLI says "disk full" in one line. No torch."""

from __future__ import annotations

import errno
import sqlite3

# How long a worker waits for space at the end of a run before it gives up on the events it holds.
# Under the queue's HEARTBEAT_STALE_S (60 s), so the app does not take a waiting worker for hung.
DISK_FULL_WAIT_S = 45.0
DISK_FULL_RETRY_EVERY_S = 0.5


def is_disk_full(exc: BaseException) -> bool:
    """Whether a write failed because the disk (or the user's quota) is full."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return isinstance(exc, sqlite3.OperationalError) and "full" in str(exc).lower()


def disk_full_message(store_path: str) -> str:
    return f"disk full: the store {store_path} cannot be written; free some space on its drive and try again"
