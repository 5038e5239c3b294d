"""The process conditions every race runs under, whichever door it came in by (the terminal's
`race`, `submit`, the app's Launch, a sweep point, the doctor, the benchmarks, each replicate
process): malloc thresholds and threads, the cores a CPU race's worker has to itself and those the
app's own work keeps to, and a server's secrets sealed out of reach of the code its workers run.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

# ----------------------------------------------------------------------
# Which cores a CPU race's worker has to itself, how many torch threads it runs, and which cores
# the app's own CPU work (the pages watching the race) keeps to.
#
# Why: on a small machine the page watching a race shares the CPU it is timed on. Left to the
# scheduler, the server's refreshes and the race's threads land on the same core now and then, and
# torch's threads wait for the one that was preempted. Where the machine has two cores or more, a
# CPU race's worker is pinned to all of them but the first (as many torch threads as it has cores),
# and the app's refreshes and feed builds, already at a lower priority while a race is measured
# (core.view.run_screen.shared_board.yield_to_measurements), keep to the first. The browser is the
# visitor's: on the same machine the scheduler gives it the core the worker leaves free. On one core
# nothing can be set aside; the page says so (core.view.run_screen.shared_board.watching_note).
#
# Host settings (docs/hosting.md): COMPILE_LAB_WORKER_CPUS ("auto", the default; "off": no pinning;
# or a list such as "1-3" or "2,3": the worker's cores) and COMPILE_LAB_WORKER_THREADS (torch threads;
# "0": torch's default), which wins over the count of cores. Linux only: elsewhere nothing is pinned.

CPUS_SETTING = "COMPILE_LAB_WORKER_CPUS"
THREADS_SETTING = "COMPILE_LAB_WORKER_THREADS"


class CoreSettingError(ValueError):
    """COMPILE_LAB_WORKER_CPUS cannot be read; the message names the setting and what it takes."""


@dataclass(frozen=True)
class CoreShare:
    """worker: the cores a CPU race's worker is pinned to (None: not pinned); threads: its torch
    threads (None: torch's default); app: the cores the app's deprioritised threads keep to (None:
    anywhere)."""

    worker: tuple[int, ...] | None
    threads: int | None
    app: tuple[int, ...] | None


def parse_cpus(text: str) -> tuple[int, ...]:
    """'1-3' or '2,3' or '1,4-5' -> the cores named, sorted."""
    cores: set[int] = set()
    try:
        for part in text.split(","):
            part = part.strip()
            if not part:
                continue
            low, _, high = part.partition("-")
            first, last = int(low), int(high) if high else int(low)
            if first < 0 or last < first:
                raise ValueError(part)
            cores.update(range(first, last + 1))
    except ValueError:
        raise CoreSettingError(
            f'{CPUS_SETTING}={text!r}: expected "auto", "off" or a list of cores such as "1-3" or "2,3"'
        ) from None
    if not cores:
        raise CoreSettingError(f'{CPUS_SETTING}={text!r}: names no core; "off" turns pinning off')
    return tuple(sorted(cores))


def core_share(allowed: Iterable[int], cpus: str | None = None, threads: str | None = None) -> CoreShare:
    """How a CPU race and the app share `allowed` (the cores this process may run on), by the host's
    settings `cpus` (COMPILE_LAB_WORKER_CPUS) and `threads` (COMPILE_LAB_WORKER_THREADS)."""
    cores = tuple(sorted(set(allowed)))
    setting = (cpus or "").strip().lower()
    if setting == "off":
        worker, app = None, None
        default_threads = len(cores) - 1 if len(cores) >= 2 else None  # still leave the app a core's worth
    elif setting in ("", "auto"):
        worker, app = (cores[1:], cores[:1]) if len(cores) >= 2 else (None, None)
        default_threads = len(worker) if worker else None
    else:
        named = parse_cpus(setting)
        worker = tuple(c for c in named if c in cores)
        if not worker:
            raise CoreSettingError(f"{CPUS_SETTING}={cpus!r}: none of these cores is available here ({cores})")
        app = tuple(c for c in cores if c not in worker) or None
        default_threads = len(worker)
    if threads is not None and threads.strip() != "":
        try:
            count = int(threads)
        except ValueError:
            raise CoreSettingError(f"{THREADS_SETTING}={threads!r}: expected a whole number of threads") from None
        return CoreShare(worker, count if count > 0 else None, app)
    return CoreShare(worker, default_threads, app)


def allowed_cores() -> tuple[int, ...]:
    """The cores this process may run on (all of the machine's where affinity is not known)."""
    if hasattr(os, "sched_getaffinity"):
        return tuple(sorted(os.sched_getaffinity(0)))
    return tuple(range(os.cpu_count() or 1))


def this_host(environ: dict[str, str] | None = None) -> CoreShare:
    """The share on this machine by its environment's settings."""
    env = os.environ if environ is None else environ
    return core_share(allowed_cores(), env.get(CPUS_SETTING), env.get(THREADS_SETTING))


_UNPINNED: tuple[int, ...] | None = None  # this worker's cores before pin_worker, for what it starts


def pin_worker(share: CoreShare) -> bool:
    """Pin this process (a CPU race's worker) to its cores; False where it is not pinned."""
    global _UNPINNED
    if share.worker is None or not hasattr(os, "sched_setaffinity"):
        return False
    try:
        before = allowed_cores()
        os.sched_setaffinity(0, share.worker)
        _UNPINNED = before
        return True
    except OSError:
        return False


def unpinned_cores() -> list[int] | None:
    """The cores this worker had before pin_worker (None: it is not pinned), for what it starts."""
    return list(_UNPINNED) if _UNPINNED is not None else None


def unpin_child(pid: int) -> None:
    """Give a process this (pinned) worker just started the cores the worker had before it was
    pinned; right after starting it, before it has read them. Else the ticker a finishing worker
    starts, and the next worker that ticker starts, would see only the race's cores and share them
    out again: a core fewer for each race in turn."""
    if _UNPINNED is not None:
        try:
            os.sched_setaffinity(pid, _UNPINNED)
        except OSError:
            pass


def keep_thread_to_app_cores(share: CoreShare) -> bool:
    """Keep the calling thread (not the process's main thread) off the worker's cores, for as long
    as it lives (Linux: affinity is per thread). False where nothing was set."""
    tid = threading.get_native_id()
    if share.app is None or not sys.platform.startswith("linux") or tid == os.getpid():
        return False
    try:
        os.sched_setaffinity(tid, share.app)
        return True
    except OSError:
        return False


# ----------------------------------------------------------------------
# The process conditions every race runs under, whichever door it came in by: the terminal's `race`,
# `submit`, the app's Launch, a sweep point, the doctor, the benchmarks, and each replicate process.
#
# What shapes a step's time besides the model: glibc's malloc thresholds (read when a process starts:
# a moving mmap threshold moved the same race 20%, core.runs.processes says how), the cores the race
# runs on and its torch threads (core.runs.race_conditions: on a machine of two cores or more, every
# core but the first, so the page watching it has one), and the compile caches (each race's own cold
# folder: core.engine.device_state). One function sets them in a race's process (`apply`), the same
# one records them with the run (`Conditions`, kept in its environment and its summary), and a door
# that cannot match (a host's own MALLOC_* or thread settings) is recorded as differing, so the
# reading can name it. No torch at import.

# glibc's malloc moves its mmap threshold as a process frees large blocks, so whether a step's
# tensors come from reused heap memory or from fresh pages (faulted in and zeroed every step) depends
# on what the process happened to allocate before, and a small CPU demo's eager step can move by a
# fifth between epochs and races with it (docs/benchmarks.md#steady_mallocpy). Fixed thresholds make every race process reuse its memory
# the same way. A host's own MALLOC_* settings win; COMPILE_LAB_WORKER_MALLOC=glibc leaves glibc's.
STEADY_MALLOC = {"MALLOC_MMAP_THRESHOLD_": str(32 * 1024 * 1024), "MALLOC_TRIM_THRESHOLD_": str(1024**3)}
MALLOC_SETTING = "COMPILE_LAB_WORKER_MALLOC"
# Thread pools' own settings a host may have set: they decide threads where torch.set_num_threads
# does not reach (OpenMP's other pools, MKL's), so a race under them differs from a standard one.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
# Compile-cache switches a host may have set: they decide whether a replicate's compile is warm
# (torch/compiler/config.py, torch/_inductor/config.py), so a race under them differs from a standard
# one. The cache folders themselves are each race's own whatever the host set (device_state).
CACHE_VARIABLES = (
    "TORCHINDUCTOR_FORCE_DISABLE_CACHES",
    "TORCH_COMPILE_FORCE_DISABLE_CACHES",
    "TORCHINDUCTOR_FX_GRAPH_CACHE",
    "TORCHINDUCTOR_AUTOGRAD_CACHE",
)
# A replicate compiles from what its first process's cold compile left (core.engine.trainer); a
# first process records its own caches (core.engine.device_state.cache_record).
REPLICATE_CACHES = "warm: its first process's folder"
RACE_PROCESS = "COMPILE_LAB_RACE_PROCESS"  # set in a terminal race started again with these conditions


def malloc_settings(environ: dict[str, str]) -> dict[str, str]:
    """The MALLOC_* variables a race process started from `environ` gets: the host's own where it
    sets the thresholds, glibc's defaults where it opted out, else STEADY_MALLOC."""
    own = {k: v for k, v in environ.items() if k.startswith("MALLOC_")}
    if environ.get(MALLOC_SETTING, "steady") == "glibc" or any(k in own for k in STEADY_MALLOC):
        return own
    return {**own, **STEADY_MALLOC}


def race_process_environment(environ: dict[str, str]) -> dict[str, str]:
    """`environ` with the malloc settings a race process starts with (malloc_settings)."""
    return {**environ, **malloc_settings(environ)}


def restart_as_race_process() -> None:
    """A terminal's `python -m core race` starts itself again with a race process's malloc settings
    (glibc reads them only when a process starts), unless it has them. Only where this process is
    `python -m core` itself: a program calling the CLI in-process (a test) runs on, and its race
    records the differing malloc (Conditions.differs)."""
    if os.environ.get(RACE_PROCESS) or list(getattr(sys, "orig_argv", [])[1:3]) != ["-m", "core"]:
        return
    wanted = race_process_environment(dict(os.environ))
    if all(os.environ.get(k) == v for k, v in wanted.items()):
        return
    wanted[RACE_PROCESS] = "1"
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], wanted)


@dataclass(frozen=True)
class Conditions:
    """What a race's process ran under: the machine's cores, the cores it had (None: not pinned), its
    torch threads, its MALLOC_* settings, what differs from a standard race on this machine, and
    where its compile caches were (the race records that once it has made them)."""

    machine_cores: int
    cores: tuple[int, ...] | None
    threads: int | None
    malloc: dict[str, str] = field(default_factory=dict)
    differs: tuple[str, ...] = ()
    device: str = "cpu"  # the race's device type: a GPU race's host thread is not pinned
    caches: str = ""  # where its compile caches were (core.engine.device_state.cache_record), once it has them

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["cores"] = list(self.cores) if self.cores is not None else None
        data["differs"] = list(self.differs)
        return data

    @classmethod
    def from_dict(cls, data: Any) -> Conditions | None:
        if not isinstance(data, dict):
            return None
        try:
            cores = data.get("cores")
            return cls(
                int(data["machine_cores"]),
                tuple(int(c) for c in cores) if isinstance(cores, list) else None,
                int(data["threads"]) if data.get("threads") is not None else None,
                {str(k): str(v) for k, v in (data.get("malloc") or {}).items()},
                tuple(str(d) for d in data.get("differs") or ()),
                str(data.get("device") or "cpu"),
                str(data.get("caches") or ""),
            )
        except (KeyError, TypeError, ValueError):
            return None


def differences(environ: dict[str, str]) -> list[str]:
    """What a race process started from `environ` has that a standard race here has not: glibc's
    moving malloc thresholds, a host's own malloc, thread or compile-cache settings, its own cores or
    threads."""
    out = []
    own_malloc = {k: v for k, v in environ.items() if k.startswith("MALLOC_") and STEADY_MALLOC.get(k) != v}
    if environ.get(MALLOC_SETTING) == "glibc":
        out.append(f"glibc's moving malloc thresholds ({MALLOC_SETTING}=glibc)")
    elif not all(environ.get(k) == v for k, v in STEADY_MALLOC.items()) and not own_malloc:
        out.append("glibc's moving malloc thresholds (this process was not started as a race process)")
    out += [f"{k}={v}" for k, v in sorted(own_malloc.items())]
    out += [f"{k}={environ[k]}" for k in THREAD_VARIABLES + CACHE_VARIABLES if environ.get(k)]
    for setting in (CPUS_SETTING, THREADS_SETTING):
        if environ.get(setting, "").strip().lower() not in ("", "auto"):
            out.append(f"{setting}={environ[setting]}")
    return out


def apply(device_type: str, environ: dict[str, str] | None = None) -> Conditions:
    """Set this race process's cores and torch threads (a CPU race: core.runs.race_conditions) and
    return what it runs under. Raises worker_cores.CoreSettingError for a host setting it cannot read."""
    import torch

    env = dict(os.environ if environ is None else environ)
    pinned = None
    if device_type == "cpu":  # a GPU race's host thread stays unpinned, with torch's threads
        share = this_host() if environ is None else this_host(env)
        pinned = tuple(share.worker) if pin_worker(share) else None
        if share.threads:
            torch.set_num_threads(share.threads)
    malloc = {k: v for k, v in env.items() if k.startswith("MALLOC_")}
    threads = torch.get_num_threads()
    return Conditions(os.cpu_count() or 1, pinned, threads, malloc, tuple(differences(env)), device_type)


def apply_given(conditions: Conditions) -> Conditions:
    """A replicate process takes its race's first process's cores and threads as they were."""
    import torch

    if conditions.cores is not None and hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, conditions.cores)
        except OSError:
            pass
    if conditions.threads:
        torch.set_num_threads(conditions.threads)
    malloc = {k: v for k, v in os.environ.items() if k.startswith("MALLOC_")}
    cores = tuple(sorted(os.sched_getaffinity(0))) if conditions.cores is not None else None
    threads = torch.get_num_threads()
    return Conditions(
        os.cpu_count() or 1, cores, threads, malloc, conditions.differs, conditions.device, REPLICATE_CACHES
    )


def keep_in_environment(environment: dict[str, Any], conditions: Conditions) -> None:
    """What a race ran under, in its environment record: `conditions` (with the caches the race
    recorded), and the fields runs stored
    before there were conditions (`worker_cpus`: the cores it had to itself; `malloc`)."""
    recorded = environment.get("conditions")
    caches = recorded.get("caches") if isinstance(recorded, dict) else None  # the race's own record
    environment["conditions"] = {**conditions.to_dict(), **({"caches": caches} if caches else {})}
    if conditions.cores is not None:
        environment["worker_cpus"] = list(conditions.cores)
    environment["malloc"] = dict(conditions.malloc) or None


# ----------------------------------------------------------------------
# Keep a server's secrets out of reach of the code its workers run.
#
# A worker gets an allowlisted environment (core.runs.processes), but on Linux any process of the
# same user may read another's /proc/<pid>/environ and memory: a model file's build_model() could
# read the app server's COMPILE_LAB_ADMIN_TOKEN from its parent. A process that is not "dumpable"
# (prctl PR_SET_DUMPABLE 0) has its /proc files owned by root, so a same-user worker is refused.
# Workers are started with exec, which makes them dumpable again: this seals the server only.
# It is no sandbox (the store's file, the data dir and the user's files stay readable): a host
# that allows model files from strangers runs workers under another user (docs/hosting.md).

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
