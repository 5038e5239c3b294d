"""Cold-cache folders: a fresh Inductor cache for each cold compile, under the data dir, named by the
process that uses it, and swept once that process has gone. No torch.

A worker past its time limit is SIGKILLed with its whole group, so it never removes its own folder;
the next one to make a cold cache removes the folders of processes no longer running. Kept under
the data dir (not the system temp folder) so the host sees them, on the volume it sized for them.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from core.engine.spec import data_home

COLD_CACHE_FOLDER = "cold-caches"


def cold_cache_root() -> str:
    return os.path.join(data_home(), COLD_CACHE_FOLDER)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: not ours to judge
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return True  # no /proc (macOS): kill(0) said it runs


def sweep_stale_cold_caches(root: str | None = None) -> list[str]:
    """Remove the cold-cache folders of processes no longer running; returns what it removed."""
    root = root or cold_cache_root()
    try:
        names = os.listdir(root)
    except OSError:
        return []
    removed = []
    for name in names:
        pid_text = name.split("-", 2)[1] if name.startswith("pid-") and name.count("-") >= 2 else ""
        if not pid_text.isdecimal() or not pid_text.isascii() or _running(int(pid_text)):
            continue
        shutil.rmtree(os.path.join(root, name), ignore_errors=True)
        removed.append(name)
    return removed


def make_cold_cache(purpose: str = "race") -> str:
    """A fresh, empty folder for one cold compile (the caller removes it when done), after sweeping
    the folders that killed processes left."""
    root = cold_cache_root()
    os.makedirs(root, exist_ok=True)
    sweep_stale_cold_caches(root)
    return tempfile.mkdtemp(prefix=f"pid-{os.getpid()}-{purpose}-", dir=root)
