"""Whether a process id still names a running process: the one check every watcher of a pid shares
(a worker's, a warm server's job, a replicate, a claim on a kept-events file).

Why one: `os.kill(pid, 0)` alone calls a zombie alive (an exited child nobody has reaped yet), so a
watcher built on it alone waits for a process that has already ended. No torch.
"""

from __future__ import annotations

import os
import select


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


def readable(watched: list, timeout: float | None = None) -> list:
    """Which of `watched` (files, sockets or descriptors) can be read within `timeout` seconds (None:
    until one can). poll, not select: select refuses a descriptor numbered 1024 or more, which a
    long-lived process (an app serving many viewers, a suite) reaches."""
    poller = select.poll()
    by_fd = {}
    for item in watched:
        fd = item if isinstance(item, int) else item.fileno()
        by_fd[fd] = item
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    events = poller.poll(None if timeout is None else max(timeout, 0.0) * 1000)
    return [by_fd[fd] for fd, _ in events if fd in by_fd]
