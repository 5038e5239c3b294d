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
# A variable whose name holds one of these holds a secret: a worker never inherits one, whatever its
# prefix (core.runs.processes), and none may sit where a worker could read it (exposed_secrets).
SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "KEY")


def secret_name(name: str) -> bool:
    """Whether a variable's name says it holds a secret (NVIDIA_API_KEY, HF_TOKEN, ...)."""
    return any(word in name.upper() for word in SECRET_WORDS)


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


def exposed_secrets(pid: int | None = None) -> dict[int, list[str]]:
    """Secrets a worker could read from the environment of a process above `pid` (this one by
    default): {ancestor pid: names of its variables that name a secret (processes.secret_name)}.
    Sealing covers the server itself; a shell or tini that started it with COMPILE_LAB_ADMIN_TOKEN
    or HF_TOKEN exported is readable by any process of the same user, a model file's code too.
    Only ancestors this process may read are looked at (Linux's /proc; elsewhere nothing is found)."""
    import os

    found: dict[int, list[str]] = {}
    current = os.getpid() if pid is None else pid
    for _ in range(64):  # up to init, however deep
        parent = _parent_of(current)
        if parent is None or parent <= 0:
            break
        try:
            with open(f"/proc/{parent}/environ", "rb") as fh:
                names = [entry.split(b"=", 1)[0].decode(errors="replace") for entry in fh.read().split(b"\0") if entry]
        except OSError:  # sealed, another user's, gone: not readable by a worker either
            names = []
        secrets = sorted(name for name in names if secret_name(name))
        if secrets:
            found[parent] = secrets
        current = parent
    return found


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return int(fh.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None
