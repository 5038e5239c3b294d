"""`python -m core.runs.warm_server --key KEY`: a warm server (core.runs.warm_start says why and when).

It holds its name first (a second server for the same settings leaves at once), imports torch,
Dynamo, Inductor and the engine (PRELOAD) and nothing else: no op runs, no device is touched, no
thread is started. Before it serves it forks one child that checks it is as clean as a fresh process
(`problems`: no CUDA context, not a bad fork, no compile counters or caches, one thread); a server
that fails that check refuses every job (they start cold) until it leaves.

Each job is one fork: the child starts a session of its own (so it outlives the server, the app and
the terminal, as a cold worker does), takes the job's stdin/stdout/stderr (sent over the socket),
working directory, environment and CPU affinity, names itself compile-lab-job, and calls the job's
entry point; its exit status goes back to the asker when asked for. The server leaves when unused for
its idle time, when the code's files change (it stops taking jobs at once), or on SIGTERM.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import ctypes
import importlib
import json
import os
import signal
import socket
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from core.runs import warm_start
from core.runs.warm_start import readable

# What a job would import anyway, in the order a worker does: the imports are most of a cold start.
# Not torch.utils.cpp_extension (the CPU probe's): on a CUDA build it asks whether CUDA is available
# when imported, and where NVML cannot answer that initialises CUDA (the check child caught it here).
PRELOAD = (
    "torch",
    "torch._dynamo",
    "torch._inductor.compile_fx",
    "torch._inductor.cpu_vec_isa",
    "torch._inductor.codecache",
    "core.runs.worker",
    "core.runs.job_kinds",
    "core.engine.trainer",
    "core.engine.environment",
    "core.engine.models.workload",
    "core.engine.models.workload",
    "core.engine.explain.compile_once",
)  # Not torch.utils.cpp_extension (the CPU probe's, 0.1 s of a child's start): imported here, the
# check child found CUDA initialised, so the server refused every job.
# Caches torch fills on the first compile of a process; each must still be empty in a child.
FIRST_COMPILE_CACHES = (
    "torch._inductor.codecache:CacheBase.get_local_cache_path",
    "torch._inductor.cpu_vec_isa:valid_vec_isa_list",
)
CODE_CHECK_EVERY_S = 2.0
ENTRY_PACKAGES = ("core.", "bench.")  # what a server runs: this project's code, nothing else
PR_SET_NAME = 15


def say(text: str) -> None:
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} warm server {os.getpid()}: {text}", flush=True)


def set_name(name: str) -> None:
    """This process's name as `ps -e` and /proc/<pid>/comm show it (Linux; at most 15 bytes)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0)


def preload() -> list[str]:
    """Import PRELOAD; the modules that could not be imported (a torch without one: the job imports
    what it needs itself). torch.cuda.is_available() asks NVML meanwhile, which does not initialise
    CUDA (a child could not use it after the fork); the check child confirms nothing did."""
    saved = os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK")
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    missing = []
    try:
        for name in PRELOAD:
            try:
                importlib.import_module(name)
            except ImportError:
                missing.append(name)
    finally:
        if saved is None:
            os.environ.pop("PYTORCH_NVML_BASED_CUDA_CHECK", None)
        else:
            os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = saved
    return missing


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks")
    ] + [("keepcost", ctypes.c_size_t)]


def malloc_maps(size: int) -> bool | None:
    """Whether glibc serves a block of `size` bytes with its own mmap (above its mmap threshold)
    rather than from the heap; None where this libc cannot say."""
    try:
        libc = ctypes.CDLL(None)
        info = libc.mallinfo2
    except (OSError, AttributeError):
        return None
    info.restype = _Mallinfo2
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    before = info().hblks
    block = libc.malloc(ctypes.c_size_t(size))
    after = info().hblks
    libc.free(block)
    return after > before


def _cache_size(path: str) -> int | None:
    module, _, attribute = path.partition(":")
    try:
        target: Any = importlib.import_module(module)
        for part in attribute.split("."):
            target = getattr(target, part)
        return int(target.cache_info().currsize)
    except (ImportError, AttributeError):
        return None


def process_state() -> dict[str, Any]:
    """What the measurements rely on in a fresh process, as this process has it now: threads, CUDA,
    torch's compile counters and first-compile caches, the cache folder, malloc, cores and threads."""
    tasks = len(os.listdir("/proc/self/task"))  # first: nothing below may start one before it is counted
    import torch
    import torch._dynamo.utils as dynamo_utils

    return {
        "tasks": tasks,
        "python_threads": threading.active_count(),
        "own_session": os.getsid(0) == os.getpid(),
        "cuda_initialized": bool(torch.cuda.is_initialized()),
        "bad_fork": bool(torch.cuda._is_in_bad_fork()),
        "dynamo_counters": {name: dict(counts) for name, counts in dynamo_utils.counters.items() if counts},
        "compile_times": len(getattr(dynamo_utils, "compilation_time_metrics", {})),
        "first_compile_caches": {path: _cache_size(path) for path in FIRST_COMPILE_CACHES},
        "inductor_cache_dir": os.environ.get("TORCHINDUCTOR_CACHE_DIR"),
        "torch_threads": torch.get_num_threads(),
        "cpus": sorted(os.sched_getaffinity(0)),
        "nice": os.getpriority(os.PRIO_PROCESS, 0),
        "malloc": {k: v for k, v in os.environ.items() if k.startswith("MALLOC_")},
        "malloc_maps_8mib": malloc_maps(8 * 1024 * 1024),
        "started": warm_start.how_started(),
    }


def problems(state: dict[str, Any]) -> list[str]:
    """What makes a process not as clean as a fresh one (empty: clean)."""
    found = []
    if state["cuda_initialized"] or state["bad_fork"]:
        found.append("CUDA was initialised before the fork")
    if state["dynamo_counters"] or state["compile_times"]:
        found.append("something was compiled before the fork")
    if any(state["first_compile_caches"].values()):
        found.append("torch's first-compile caches are filled")
    if state["python_threads"] != 1 or state["tasks"] != 1:
        found.append(f"{state['tasks']} threads right after the fork (a fork copies only one)")
    return found


def report_state(argv: list[str]) -> int:
    """An entry point: this process's state as one JSON line (the tests compare warm and cold)."""
    print(json.dumps(process_state()))
    return 0


def self_check() -> str | None:
    """Fork one child that checks it is clean; the reason it is not, or None."""
    read, write = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the check child: report, then leave at once (no cleanup of the server's state)
        try:
            os.close(read)
            with os.fdopen(write, "w") as out:
                out.write("; ".join(problems(process_state())))
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as answer:
        text = answer.read()
    os.waitpid(pid, 0)
    return text or None


@dataclass
class Job:
    """A forked child's job, and the server's descriptors it must close."""

    request: dict[str, Any]
    fds: list[int]
    close: list[int] = field(default_factory=list)


class Server:
    """The accept loop: one fork per job, exit statuses back to whoever waits for them."""

    def __init__(
        self, listener: socket.socket, key: str, idle_s: float, problem: str | None, code_root: str, code: str
    ):
        self.listener: socket.socket | None = listener
        self.key, self.idle_s, self.problem, self.code_root = key, idle_s, problem, code_root
        self.code = code  # as the server started: a change while it imported retires it at the first check
        self.waiting: dict[int, socket.socket] = {}  # child pid -> the asker waiting for its exit
        self.last_used = time.monotonic()
        self.checked_code = time.monotonic()
        self.started_at = time.time()
        self.leaving: str | None = None
        self.terminated = False
        self.tasks_ready = len(os.listdir("/proc/self/task"))
        self.pid = os.getpid()
        self.fds: list[int] = []

    def serve(self) -> Job | None:
        """Serve until it is time to leave (None), or return the job in a just-forked child."""
        wake_read, wake_write = os.pipe()
        os.set_blocking(wake_read, False)
        os.set_blocking(wake_write, False)
        signal.set_wakeup_fd(wake_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "terminated", True))  # acted on in the loop
        self.fds = [wake_read, wake_write]
        while True:
            self.reap()
            if self.terminated:
                self.leave("asked to stop (SIGTERM)")
            self.check_leaving()
            if self.leaving and not self.waiting:
                say(f"leaving: {self.leaving}")
                return None
            watched = [wake_read, *self.waiting.values()] + ([self.listener] if self.listener else [])
            ready = readable(watched, 1.0)
            if wake_read in ready:
                with contextlib.suppress(OSError):
                    os.read(wake_read, 4096)
            for pid, conn in list(self.waiting.items()):
                if conn in ready:  # the asker hung up: its child runs on, unwatched
                    conn.close()
                    del self.waiting[pid]
            if self.listener is not None and self.listener in ready:
                job = self.accept()
                if job is not None:
                    return job

    def leave(self, why: str) -> None:
        """Take no more jobs; leave once every asker waiting for an exit has it."""
        if self.leaving is None:
            self.leaving = why
        if self.listener is not None:
            self.listener.close()  # the name is free for a new server at once
            self.listener = None

    def check_leaving(self) -> None:
        now = time.monotonic()
        if now - self.last_used > self.idle_s:
            self.leave(f"unused for {self.idle_s:.0f} s")
        if now - self.checked_code >= CODE_CHECK_EVERY_S:
            self.checked_code = now
            if warm_start.code_fingerprint(self.code_root) != self.code:
                self.leave("the code changed")
            gone = warm_start.owner_gone(dict(os.environ))
            if gone:
                self.leave(gone)  # an agent's jobs would stop themselves at once; an app's has no ticks left

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.waiting.pop(pid, None)
            if conn is not None:
                with contextlib.suppress(OSError):
                    warm_start.send_message(conn, {"exit": os.waitstatus_to_exitcode(status)})
                conn.close()

    def refusal(self, request: dict[str, Any], fds: list[int]) -> str | None:
        """Why this server must not fork this job (None: it may)."""
        if self.problem:
            return f"this server is not clean: {self.problem}"
        if len(fds) != 3:
            return "a job needs its stdin, stdout and stderr"
        if warm_start.server_key(request.get("env") or {}, self.code) != self.key:
            return "the job's settings are not this server's"
        entry = str(request.get("entry", ""))
        if not entry.startswith(ENTRY_PACKAGES) or ":" not in entry:
            return "an entry point is this project's <module>:<function> (core. or bench.)"
        if threading.active_count() != 1 or len(os.listdir("/proc/self/task")) > self.tasks_ready:
            return "a thread started in the server"
        return None

    def accept(self) -> Job | None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return None
        fds: list[int] = []
        try:
            conn.settimeout(2.0)
            if warm_start.peer_uid(conn) != os.getuid():
                conn.close()
                return None
            request, fds = warm_start.receive_message(conn, max_fds=3)
            if request is None:  # a probe of whether the server is ready
                conn.close()
                return None
            if request.get("stop"):
                warm_start.send_message(conn, {"stopping": True})
                conn.close()
                self.leave("asked to stop")
                return None
            why = self.refusal(request, fds)
            if why:
                warm_start.send_message(conn, {"refused": why})
                conn.close()
                return None
            sys.stdout.flush()
            sys.stderr.flush()
            set_name(warm_start.JOB_NAME)  # the child has its name from its first instant (processes.pid_alive)
            pid = os.fork()
            if pid != 0:
                set_name(warm_start.SERVER_NAME)
            if pid == 0:
                others = [c.fileno() for c in self.waiting.values()] + self.fds
                return Job(request, fds, close=[self.listener.fileno(), conn.fileno(), *others])
            self.last_used = time.monotonic()
            warm_start.send_message(conn, {"pid": pid})
            say(f"forked {pid}: {request['entry']} {' '.join(request.get('argv') or [])[:120]}")
            if request.get("keep"):
                conn.settimeout(None)
                self.waiting[pid] = conn
            else:
                conn.close()
        except (OSError, ValueError) as exc:
            say(f"a request failed: {exc}")
            conn.close()
        finally:
            if os.getpid() == self.pid:  # the server: the job's descriptors are its child's now
                for fd in fds:
                    with contextlib.suppress(OSError):
                        os.close(fd)
        return None


def run_child(job: Job, server_started_at: float) -> int:
    """In the forked child: become the job's process, then run its entry point; its exit status."""
    for fd in job.close:
        with contextlib.suppress(OSError):
            os.close(fd)
    os.setsid()
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for target, fd in enumerate(job.fds):
        os.dup2(fd, target)
    for fd in set(job.fds):
        if fd > 2:
            os.close(fd)
    request = job.request
    os.chdir(request.get("cwd") or warm_start.PROJECT_ROOT)
    # The job's environment is the server's as it started (the key says so) but for LAZY_VARIABLES;
    # what the imports set since stays, as it would in a cold process after the same imports.
    for name in warm_start.LAZY_VARIABLES:
        if name in request["env"]:
            os.environ[name] = request["env"][name]
        else:
            os.environ.pop(name, None)
    if request.get("cpus"):
        os.sched_setaffinity(0, request["cpus"])
    warm_start.STARTED = {
        "server_pid": os.getppid(),
        "server_started_at": server_started_at,
        "forked_at": time.time(),
        "env": dict(request["env"]),  # what its own jobs (a race's replicates) name this server by
    }
    module, _, function = request["entry"].partition(":")
    argv = list(request.get("argv") or [])
    sys.argv = [module, *argv]
    try:
        code = getattr(importlib.import_module(module), function)(argv)
    except SystemExit as exc:
        code = exc.code
    return code if isinstance(code, int) else (0 if code is None else 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.runs.warm_server", description=__doc__.splitlines()[0])
    parser.add_argument("--key", required=True, help="the settings' digest it serves (core.runs.warm_start)")
    parser.add_argument("--idle-s", type=float, default=warm_start.DEFAULT_IDLE_S)
    parser.add_argument("--cpus", default="", help="the cores it runs on, set before torch is imported")
    parser.add_argument("--code-root", default=warm_start.CODE_ROOT, help="the code whose change retires it")
    parser.add_argument("--lane", default="", help="the lane it serves: a newer server of it asks this one to leave")
    parser.add_argument("--owner", default="-", help="the pid of the app or agent it belongs to (-: none)")
    args = parser.parse_args(argv)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(warm_start.address(args.key))  # first: a second server for these settings leaves here
    except OSError:
        return 0
    set_name(warm_start.SERVER_NAME)
    if args.cpus:
        os.sched_setaffinity(0, [int(c) for c in args.cpus.split(",")])
    began = time.perf_counter()
    code = warm_start.code_fingerprint(args.code_root)
    if warm_start.server_key(dict(os.environ), code) != args.key:
        say("leaving: its settings or code are not those it was started for")
        return 0
    missing = preload()
    problem = self_check()
    say(
        f"ready in {time.perf_counter() - began:.1f} s"
        + (f" (not imported: {', '.join(missing)})" if missing else "")
        + (f"; NOT CLEAN, refusing every job: {problem}" if problem else "")
    )
    listener.listen(16)
    server = Server(listener, args.key, args.idle_s, problem, args.code_root, code)
    job = server.serve()
    if job is None:
        exit_quickly(0)  # a server's exit needs no module teardown either (it took seconds)
    try:
        code = run_child(job, server.started_at)
    except BaseException:  # noqa: BLE001 - as an uncaught exception ends a cold process: its traceback, status 1
        traceback.print_exc()
        code = 1
    exit_quickly(code)
    return code  # not reached


def exit_quickly(code: int) -> None:
    """End the child as Python ends a process (its other non-daemon threads joined, the atexit
    handlers run, the output flushed) but without tearing down every module one by one: with torch
    imported that teardown takes seconds, in a cold process too, and a worker holds its lane until
    it is gone (docs/benchmarks.md#launch_latencypy)."""
    # As the interpreter's own exit does: threading's exit hooks first (concurrent.futures tells its
    # pools' workers to stop there: Inductor's compile pool, whose threads wait on their queue
    # forever otherwise), then the other non-daemon threads joined.
    threading._shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
