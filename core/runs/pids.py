"""Whether a process id still names a running process: the one check every watcher of a pid shares
(a worker's, a warm server's job, a replicate, a claim on a kept-events file).

Why one: `os.kill(pid, 0)` alone calls a zombie alive (an exited child nobody has reaped yet), so a
watcher built on it alone waits for a process that has already ended. No torch.
"""

from __future__ import annotations

import os


def pid_running(pid: int) -> bool:
    """Whether process `pid` exists and has not exited (a zombie has). Where /proc cannot say (not
    Linux), whether it exists; one we may not signal exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return True
