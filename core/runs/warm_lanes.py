"""One warm server per lane: a lane's servers are found by their command line (`--lane`), and a
server started for a lane asks the lane's others to leave. No torch.

Why: a server is named by its whole environment (core.runs.warm_start), so every terminal with a
differing LC_* or TZ that ticked the queue started one more server (torch imported), kept for its
idle time.
A lane is the lane (cpu, cuda:N) of this checkout with one data folder; one that belongs to a live
app or agent (COMPILE_LAB_APP_PID, COMPILE_LAB_AGENT_PID) is kept for it, and a terminal's (no
owner) is then not started beside it: its jobs start cold.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal

from core.runs.pids import pid_running
from core.runs.warm_start import CODE_ROOT, SERVER_MODULE, SERVER_NAME


def lane_name(lane: str, data_dir: str) -> str:
    """What names a lane among warm servers: the lane (cpu, cuda:N) of this code's checkout with this
    data folder (another checkout or data folder has lanes of its own)."""
    raw = json.dumps([CODE_ROOT, os.path.realpath(data_dir), lane])
    return f"{lane}-{hashlib.blake2b(raw.encode(), digest_size=6).hexdigest()}"


def lane_servers(lane: str) -> list[tuple[int, str, str]]:
    """This user's warm servers of `lane` as (pid, key, owner pid or "-"), from their command lines."""
    return [(pid, key, owner) for pid, key, owner, of_lane in _servers() if of_lane == lane]


def key_servers(key: str) -> list[int]:
    """The pids of this user's warm servers named `key` (core.runs.warm_start.server_key)."""
    return [pid for pid, of_key, _, _ in _servers() if of_key == key]


def _servers() -> list[tuple[int, str, str, str | None]]:
    """This user's warm servers as (pid, key, owner pid or "-", lane or None), from their command lines."""
    found = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid != os.getuid():
                continue
            with open(f"/proc/{entry}/comm", "rb") as fh:
                if fh.read().strip() != SERVER_NAME.encode():  # (its forked jobs are compile-lab-job)
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                args = fh.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        options = dict(zip(args, args[1:]))
        if SERVER_MODULE in args:
            found.append((int(entry), options.get("--key", ""), options.get("--owner", "-"), options.get("--lane")))
    return found


def make_room(lane: str, key: str, owner: str) -> bool:
    """Ask the other servers of `lane` to leave (SIGTERM: a server takes no more jobs and leaves; its
    children run on), but one of another live app or agent; False when such a one holds the lane and
    this server would be a terminal's (no owner): then none is started."""
    for pid, other_key, other_owner in lane_servers(lane):
        if other_key == key:
            continue
        if other_owner.isdigit() and other_owner != owner and pid_running(int(other_owner)):
            if not owner:
                return False
            continue  # another app on this data folder: each keeps its own (it leaves with that app)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    return True
