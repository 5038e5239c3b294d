"""The process conditions every race runs under, whichever door it came in by: the terminal's `race`,
`submit`, the app's Launch, a sweep point, the doctor, the benchmarks, and each replicate process.

What shapes a step's time besides the model: glibc's malloc thresholds (read when a process starts:
a moving mmap threshold moved the same race 20%, core.runs.processes says how), the cores the race
runs on and its torch threads (core.runs.worker_cores: on a machine of two cores or more, every
core but the first, so the page watching it has one), and the compile caches (each race's own cold
folder: core.engine.device_state). One function sets them in a race's process (`apply`), the same
one records them with the run (`Conditions`, kept in its environment and its summary), and a door
that cannot match (a host's own MALLOC_* or thread settings) is recorded as differing, so the
reading can name it. No torch at import.
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

from core.runs import worker_cores

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
# A replicate compiles from what its first process's cold compile left (core.engine.replicate); a
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
    for setting in (worker_cores.CPUS_SETTING, worker_cores.THREADS_SETTING):
        if environ.get(setting, "").strip().lower() not in ("", "auto"):
            out.append(f"{setting}={environ[setting]}")
    return out


def apply(device_type: str, environ: dict[str, str] | None = None) -> Conditions:
    """Set this race process's cores and torch threads (a CPU race: core.runs.worker_cores) and
    return what it runs under. Raises worker_cores.CoreSettingError for a host setting it cannot read."""
    import torch

    env = dict(os.environ if environ is None else environ)
    pinned = None
    if device_type == "cpu":  # a GPU race's host thread stays unpinned, with torch's threads
        share = worker_cores.this_host() if environ is None else worker_cores.this_host(env)
        pinned = tuple(share.worker) if worker_cores.pin_worker(share) else None
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
