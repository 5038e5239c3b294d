"""Starting a job's process warm: forked from a server that has already imported torch and the
engine, instead of a fresh `python -m ...` that imports them again; one warm server per lane; and
whether a process id still names a running process (the one check every watcher of a pid shares).
No torch here (the server is core.runs.warm_server).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import IO, Any

from core import PROJECT_ROOT

# ----------------------------------------------------------------------
# Whether a process id still names a running process: the one check every watcher of a pid shares
# (a worker's, a warm server's job, a replicate, a claim on a kept-events file).
#
# Why one: `os.kill(pid, 0)` alone calls a zombie alive (an exited child nobody has reaped yet), so a
# watcher built on it alone waits for a process that has already ended. No torch.


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


# ----------------------------------------------------------------------
# Warm starts: a job's process forked from a server that has already imported torch and the engine,
# instead of a fresh `python -m ...` that imports them again. No torch here (the server is
# core.runs.warm_server).
#
# Why: importing torch, Dynamo and Inductor takes 4-6 s of a small CPU's time in every fresh process,
# and every race, sweep point, demo, device probe and replicate paid it before its first step. A warm
# server imports them once, runs no op and touches no device, and forks a clean child per job: no
# compile, no CUDA context, no OpenMP pool, no thread but its own before the fork (the server checks
# a child of its own before it serves; a test compares a warm child with a fresh process).
#
# One server per worker environment: its name is a digest of that environment (less LAZY_VARIABLES),
# of this Python and of the code's files, so a job only ever reaches a server started with exactly its
# settings (malloc thresholds, which glibc reads at process start; thread variables, which torch reads
# at import) and its code; any other job starts cold, as before. Servers start only for a lane with
# nothing running (core.runs.queue.tick, a fleet's agent), so their imports never overlap a
# measurement; they leave after COMPILE_LAB_WARM_IDLE_S unused, as soon as the code changes, or when
# the app whose ticks started them has exited (`owned_by_this_app`; a fleet agent's, likewise). With
# no server ready (none yet, one still importing, one that died), a job starts cold: nothing waits.
#
# The API for other process starters (a race's replicates, core.runs.processes): `start` (a
# handle, or None: start it cold), `start_fresh` (warm if it can, else cold, its output captured) and
# `run_fresh` (the same, run to its end). Linux only; elsewhere all is cold. As a race starts a replicate:
#
#     proc = warm_start.start_fresh(
#         "core.runs.processes:warm_main",   # forked from the warm server of `env` when one is ready
#         "core.runs.processes", [], env,    # else `python -m core.runs.processes`, cold
#         stdin_text=json.dumps(job), cpus=cores,    # the child starts on the race's cores
#     )
#     out, err = proc.communicate(timeout)

SETTING = "COMPILE_LAB_WARM_START"  # "on" (the default) or "off": every process starts cold
APP_PID_VARIABLE = "COMPILE_LAB_APP_PID"  # the app process whose servers these are (they leave with it)
IDLE_SETTING = "COMPILE_LAB_WARM_IDLE_S"  # how long an unused server stays (seconds)
DEFAULT_IDLE_S = 900.0
SERVER_MODULE = "core.runs.warm_server"
CODE_ROOT = os.path.join(PROJECT_ROOT, "core")
# Read by torch each time it looks up a cache (torch/_inductor/runtime/cache_dir_utils.py), never at
# import: a job may name its own, and the child sets them before anything compiles.
LAZY_VARIABLES = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
JOB_NAME = "compile-lab-job"  # a warm child's name (/proc/<pid>/comm, `ps -e`), at most 15 bytes
SERVER_NAME = "compile-lab-srv"
REPLY_WAIT_S = 5.0  # a server that does not answer a fork this quickly is not used: the job starts cold
_HEADER = struct.Struct("!I")

# In a warm child: what the server says about how this process started (core.runs.warm_server sets it).
STARTED: dict[str, Any] | None = None


class SettingError(ValueError):
    """COMPILE_LAB_WARM_START or COMPILE_LAB_WARM_IDLE_S cannot be read; the message says what they take."""


def supported() -> bool:
    """Fork servers need Linux (fork with torch, abstract sockets, per-process CPU affinity)."""
    return sys.platform.startswith("linux") and hasattr(socket, "send_fds")


def enabled(environ: dict[str, str] | None = None) -> bool:
    """Whether processes start warm here (COMPILE_LAB_WARM_START, "on" unless "off")."""
    value = (os.environ if environ is None else environ).get(SETTING, "on").strip().lower()
    if value not in ("on", "off", ""):
        raise SettingError(f'{SETTING}={value!r}: expected "on" or "off"')
    return value != "off" and supported()


def idle_s(environ: dict[str, str] | None = None) -> float:
    """How long an unused server stays (COMPILE_LAB_WARM_IDLE_S; default 900 s)."""
    text = (os.environ if environ is None else environ).get(IDLE_SETTING, "").strip()
    if not text:
        return DEFAULT_IDLE_S
    try:
        value = float(text)
    except ValueError:
        raise SettingError(f"{IDLE_SETTING}={text!r}: expected a number of seconds") from None
    if not value > 0:
        raise SettingError(f"{IDLE_SETTING}={text!r}: expected a number of seconds above 0")
    return value


def server_environment() -> dict[str, str]:
    """The environment that names this process's own warm server: in a warm child, the one its job
    was forked with (the server's, less what torch's import set since, which a fresh process's import
    sets again), with this process's LAZY_VARIABLES; elsewhere this process's environment."""
    if not STARTED or not isinstance(STARTED.get("env"), dict):
        return dict(os.environ)
    env = {k: v for k, v in STARTED["env"].items() if k not in LAZY_VARIABLES}
    env.update({k: os.environ[k] for k in LAZY_VARIABLES if k in os.environ})
    return env


def how_started() -> str:
    """'warm' in a process forked from a warm server, else 'cold' (kept with a race's environment)."""
    return "warm" if STARTED else "cold"


_FINGERPRINTS: dict[str, tuple[float, str]] = {}  # root -> (when, digest), for this process
FINGERPRINT_KEPT_S = 1.0  # a page's tick may ask every second: the files are read at most this often


def code_fingerprint(root: str = CODE_ROOT) -> str:
    """A digest of the code a server would run (every .py under `root`: name, size, modification
    time): a server started before an edit never serves a job after it."""
    kept = _FINGERPRINTS.get(root)
    if kept is not None and time.monotonic() - kept[0] < FINGERPRINT_KEPT_S:
        return kept[1]
    digest = _fingerprint(root)
    _FINGERPRINTS[root] = (time.monotonic(), digest)
    return digest


def _fingerprint(root: str) -> str:
    entries = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                try:
                    info = os.stat(path)
                except OSError:
                    continue
                entries.append(f"{os.path.relpath(path, root)}:{info.st_size}:{info.st_mtime_ns}")
    return hashlib.blake2b("\n".join(entries).encode(), digest_size=12).hexdigest()


def server_key(env: dict[str, str], code: str | None = None) -> str:
    """The name of the one server that may fork a job with this environment (LAZY_VARIABLES aside):
    this Python, this code, exactly these settings."""
    settings = sorted((k, v) for k, v in env.items() if k not in LAZY_VARIABLES)
    raw = json.dumps([sys.executable, code or code_fingerprint(), settings])
    return hashlib.blake2b(raw.encode(), digest_size=16).hexdigest()


def address(key: str) -> bytes:
    """The server's socket: in Linux's abstract namespace (no file to leave behind), named per user;
    the server also refuses a peer of another user (core.runs.warm_server)."""
    return f"\0compile-lab-warm-{os.getuid()}-{key}".encode()


def peer_uid(sock: socket.socket) -> int:
    """The user id of the process at the other end of a Unix socket (SO_PEERCRED: pid, uid, gid)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


def send_message(sock: socket.socket, message: dict[str, Any], fds: list[int] | None = None) -> None:
    data = json.dumps(message).encode()
    payload = _HEADER.pack(len(data)) + data
    if fds:
        sent = socket.send_fds(sock, [payload], fds)
        sock.sendall(payload[sent:])
    else:
        sock.sendall(payload)


def receive_message(sock: socket.socket, max_fds: int = 0) -> tuple[dict[str, Any] | None, list[int]]:
    """One length-prefixed JSON message (and the descriptors sent with it); None at end of stream."""
    fds: list[int] = []
    if max_fds:
        data, fds, _, _ = socket.recv_fds(sock, 65536, max_fds)
    else:
        data = sock.recv(65536)
    if not data:
        return None, fds
    while len(data) < _HEADER.size or len(data) < _HEADER.size + _HEADER.unpack_from(data)[0]:
        more = sock.recv(65536)
        if not more:
            return None, fds
        data += more
    (size,) = _HEADER.unpack_from(data)
    return json.loads(data[_HEADER.size : _HEADER.size + size]), fds


@dataclass
class WarmProcess:
    """A process forked by a warm server: its pid, and (while its connection is kept) its exit status."""

    pid: int
    _conn: socket.socket | None
    returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int | None:
        """Its exit status once it has ended (None: not within `timeout`, or the server died before
        it could say; then the process is gone, or still running past the timeout)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None and self._conn is not None:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            ready = readable([self._conn], left)
            if not ready:
                return None
            message, _ = receive_message(self._conn)
            if message is None or "exit" in message:
                self.returncode = None if message is None else int(message["exit"])
                self._conn.close()
                self._conn = None
        while self.returncode is None and pid_running(self.pid):  # the server is gone: watch the pid
            if deadline is not None and time.monotonic() >= deadline:
                return None
            time.sleep(0.05)
        return self.returncode

    def poll(self) -> int | None:
        """Its exit status if it has ended, else None (as Popen.poll)."""
        return self.wait(0)

    def close(self) -> None:
        """Stop listening for its exit (it runs on)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def owned_by_this_app() -> None:
    """The warm servers started for this process's jobs (and for its workers' tickers, which inherit
    the variable) leave when this process exits: called by the app (`streamlit run`), whose server
    process is the one every page runs in. A CLI's servers leave when unused (COMPILE_LAB_WARM_IDLE_S)."""
    os.environ[APP_PID_VARIABLE] = str(os.getpid())


def owner_gone(env: dict[str, str]) -> str | None:
    """Why a server of `env` has no one left to serve (the app or fleet agent that started it exited)."""
    for variable, who in ((APP_PID_VARIABLE, "app"), ("COMPILE_LAB_AGENT_PID", "agent")):
        pid = env.get(variable, "")
        if pid.isdigit() and not pid_running(int(pid)):
            return f"the {who} that started it is gone"
    return None


def start(
    entry: str,
    argv: list[str],
    env: dict[str, str],
    *,
    stdin: IO | int | None = None,
    stdout: IO | int | None = None,
    stderr: IO | int | None = None,
    cwd: str = PROJECT_ROOT,
    cpus: list[int] | None = None,
    keep: bool = False,
) -> WarmProcess | None:
    """Fork `entry` ("package.module:function", called with `argv`, its return value the exit
    status) from the warm server of `env`, in a session of its own, with `env` as its environment,
    these files (default: /dev/null) as its stdin, stdout and stderr, `cwd`, and `cpus` as its CPU
    affinity (default: the server's, this host's cores). `keep`: keep the connection, so the handle's
    wait() gets its exit status. None when no server for `env` is ready: start the process cold."""
    if not enabled(env):
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(REPLY_WAIT_S)
        sock.connect(address(server_key(env)))
        if peer_uid(sock) != os.getuid():  # another user holds the name: never hand it a job
            sock.close()
            return None
        with open(os.devnull, "r+b") as null:
            fds = [_fileno(f, null) for f in (stdin, stdout, stderr)]
            request = {"entry": entry, "argv": list(argv), "env": dict(env), "cwd": cwd, "cpus": cpus, "keep": keep}
            send_message(sock, request, fds)
        reply, _ = receive_message(sock)
    except (OSError, ValueError):  # none ready (not started, still importing, gone), or no answer in time
        sock.close()
        return None
    if not reply or "pid" not in reply:
        sock.close()
        if reply and reply.get("refused"):  # said where the job's own output goes (a worker's log)
            line = f"the warm server refused this job ({reply['refused']}): starting it cold\n"
            if stderr is None or isinstance(stderr, int):
                sys.stderr.write(line)
            else:
                stderr.write(line.encode() if "b" in getattr(stderr, "mode", "b") else line)
                stderr.flush()
        return None
    sock.settimeout(None)
    if not keep:
        sock.close()
    return WarmProcess(int(reply["pid"]), sock if keep else None)


def _fileno(f: IO | int | None, null: IO) -> int:
    if f is None:
        return null.fileno()
    return f if isinstance(f, int) else f.fileno()


class FreshProcess:
    """A fresh process start_fresh started, warm (forked by a warm server, its output in files) or
    cold (a Popen): one handle for either, as Popen's communicate, kill and returncode."""

    def __init__(self, proc: subprocess.Popen | WarmProcess, args: list[str], files: tuple[IO, ...] = ()):
        self.proc = proc
        self.args = args
        self.files = files  # a warm one's stdout and stderr

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def warm(self) -> bool:
        return isinstance(self.proc, WarmProcess)

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Its stdout and stderr once it has ended; subprocess.TimeoutExpired past `timeout` (it runs
        on: kill() ends it)."""
        if not self.warm:
            return self.proc.communicate(timeout=timeout)
        code = self.proc.wait(timeout)
        if code is None and pid_running(self.pid):
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        texts = []
        for f in self.files:
            f.seek(0)
            texts.append(f.read().decode(errors="replace"))
        self.close()
        return texts[0], texts[1]

    def kill(self) -> None:
        """End it and what it started (a warm one leads its own session: its compile workers too)."""
        if self.warm:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
            self.proc.wait(5.0)
        else:
            self.proc.kill()
            self.proc.communicate()
        self.close()

    def close(self) -> None:
        """Stop listening for it (it runs on) and drop its output files."""
        if self.warm:
            self.proc.close()
        for f in self.files:
            f.close()
        self.files = ()


def start_fresh(
    entry: str,
    module: str,
    argv: list[str],
    env: dict[str, str],
    *,
    stdin_text: str | None = None,
    cwd: str = PROJECT_ROOT,
    cpus: list[int] | None = None,
) -> FreshProcess:
    """Start a fresh process, its output captured: forked from the warm server of `env` when one is
    ready (`entry`, as for `start`, on `cpus`), else `python -m module *argv`, which inherits this
    process's cores and group. `stdin_text`: what it reads on its stdin (nothing by default)."""
    stdin = None
    if stdin_text is not None:
        stdin = tempfile.TemporaryFile()
        stdin.write(stdin_text.encode())
        stdin.flush()
        stdin.seek(0)
    files = (tempfile.TemporaryFile(), tempfile.TemporaryFile())
    try:
        proc = start(entry, argv, env, stdin=stdin, stdout=files[0], stderr=files[1], cwd=cwd, cpus=cpus, keep=True)
    except SettingError:
        proc = None  # said where the setting is read for jobs (the queue's tick); here: start cold
    finally:
        if stdin is not None:
            stdin.close()  # a warm child holds its own descriptor of it
    if proc is not None:
        return FreshProcess(proc, [entry, *argv], files)
    for f in files:
        f.close()
    command = [sys.executable, "-m", module, *argv]
    cold = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL if stdin_text is None else subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if stdin_text is not None:
        assert cold.stdin is not None
        cold.stdin.write(stdin_text)
        cold.stdin.close()
        cold.stdin = None  # sent: what is left is to read its output (communicate)
    return FreshProcess(cold, command)


def run_fresh(
    entry: str, module: str, argv: list[str], env: dict[str, str], timeout: float, cwd: str = PROJECT_ROOT
) -> subprocess.CompletedProcess:
    """Run a fresh process to its end and return its output, as subprocess.run(capture_output=True,
    text=True) does: warm where it can be, else cold (start_fresh). Past `timeout`, or on any
    exception while it runs (a cancel), it is ended with what it started; subprocess.TimeoutExpired
    past `timeout`."""
    proc = start_fresh(entry, module, argv, env, cwd=cwd)
    try:
        stdout, stderr = proc.communicate(timeout)
    except BaseException:
        proc.kill()
        raise
    code = proc.returncode
    return subprocess.CompletedProcess(proc.args, -1 if code is None else code, stdout, stderr)


def server_state(env: dict[str, str]) -> str | None:
    """'ready' (it forks jobs), 'starting' (it holds its name, still importing) or None (no server)."""
    name = address(server_key(env))
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(name)
            return "ready"
        except OSError:
            pass
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(name)  # free: no server holds the name
            return None
        except OSError:
            return "starting"


def ensure_server(
    env: dict[str, str], log_dir: str, cpus: list[int] | None = None, lane: str | None = None
) -> int | None:
    """Start the warm server for `env` unless one runs or is starting (detached, in its own session,
    so it outlives whoever asked); its pid, or None when none was started. `cpus`: the cores it (and so
    what it forks) may run on, set before it imports torch (torch's default thread count is read then).
    `lane`: the lane it serves, on its command line (core.runs.warm_start keeps one server a lane)."""
    if not enabled(env) or owner_gone(env) or server_state(env) is not None:
        return None
    key = server_key(env)
    os.makedirs(log_dir, exist_ok=True)
    command = [sys.executable, "-m", SERVER_MODULE, "--key", key, "--idle-s", str(idle_s(env))]
    if cpus:
        command += ["--cpus", ",".join(str(c) for c in cpus)]
    if lane is not None:
        command += ["--lane", lane, "--owner", owner_of(env) or "-"]
    with open(os.path.join(log_dir, f"warm-server-{key[:12]}.log"), "ab") as log:
        proc = subprocess.Popen(
            command,
            cwd=PROJECT_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return proc.pid


def owner_of(env: dict[str, str]) -> str:
    """The pid of the app or fleet agent whose server one for `env` is ("": a terminal's, no one's)."""
    return env.get(APP_PID_VARIABLE) or env.get("COMPILE_LAB_AGENT_PID") or ""


def stop_server(env: dict[str, str], wait_s: float = 5.0) -> bool:
    """Ask the server for `env` to leave now (its children run on); whether one was there."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.settimeout(wait_s)
            sock.connect(address(server_key(env)))
            send_message(sock, {"stop": True})
            receive_message(sock)
        except OSError:
            return False
    deadline = time.monotonic() + wait_s
    while server_state(env) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    return True


# ----------------------------------------------------------------------
# One warm server per lane: a lane's servers are found by their command line (`--lane`), and a
# server started for a lane asks the lane's others to leave. No torch.
#
# Why: a server is named by its whole environment (core.runs.warm_start), so every terminal with a
# differing LC_* or TZ that ticked the queue started one more server (torch imported), kept for its
# idle time.
# A lane is the lane (cpu, cuda:N) of this checkout with one data folder; one that belongs to a live
# app or agent (COMPILE_LAB_APP_PID, COMPILE_LAB_AGENT_PID) is kept for it, and a terminal's (no
# owner) is then not started beside it: its jobs start cold.


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
