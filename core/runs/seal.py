"""Keep a server's secrets out of reach of the code its workers run.

A worker gets an allowlisted environment (core.runs.processes), but on Linux any process of the
same user may read another's /proc/<pid>/environ and memory: a model file's build_model() could
read the app server's COMPILE_LAB_ADMIN_TOKEN from its parent. A process that is not "dumpable"
(prctl PR_SET_DUMPABLE 0) has its /proc files owned by root, so a same-user worker is refused.
Workers are started with exec, which makes them dumpable again: this seals the server only.
It is no sandbox (the store's file, the data dir and the user's files stay readable): a host
that allows model files from strangers runs workers under another user (docs/hosting.md).
"""

from __future__ import annotations

import ctypes
import sys

PR_SET_DUMPABLE, PR_GET_DUMPABLE = 4, 3


def seal_from_workers() -> bool:
    """Make this process's /proc files unreadable by other processes of its user (Linux only);
    returns whether it is sealed. Idempotent and cheap: a page may call it on every run."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        return libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):  # no prctl here (a libc without it): nothing to seal with
        return False
