"""Inductor's one-time CPU feature probe, paid before timing instead of inside a compile.

The first Inductor compile for a CPU in a fresh cache directory first finds out which vector
instruction sets (AVX2, AVX-512, AMX, ...) the CPU supports, by building and loading a small test
program for each (`cpu_vec_isa.valid_vec_isa_list`): on a small CPU, about half of a small model's
cold compile (docs/benchmarks.md#what-to-expect-on-a-small-cpu). A machine pays it once (torch keeps the answer in its cache directory), not once per model, so a
cold race that counted it would overstate what compiling *this model* costs by half. Races and the
cold/warm cache demo run the probe untimed, before the compile, in a directory kept between races
(as torch's default cache directory keeps it), and report how long it took.
"""

from __future__ import annotations

import os
import time

import torch

from core.engine.spec import data_home

CACHE_VARIABLE = "TORCHINDUCTOR_CACHE_DIR"  # read by Inductor each time it looks up its cache


def probe_dir() -> str:
    """Where the probe's test programs are kept between races: a machine builds them once, as torch's
    own default cache directory would, whatever cache (cold or warm) the race itself compiles into."""
    return os.path.join(data_home(), "inductor-cache", f"cpu-probe-torch{torch.__version__}")


def probe_cpu_vector_isa(device: torch.device, backend: str) -> float | None:
    """Run Inductor's CPU vector-ISA probe now (cached for the rest of the process); its seconds.

    The test programs are built in probe_dir(), so only a machine's first race builds them (seconds
    on a small CPU); later ones load them (a fraction of a second). None where nothing would probe (another
    device or backend, a torch without the probe) or the probe failed (then the compile fails too,
    and says why).
    """
    if device.type != "cpu" or backend != "inductor":
        return None
    try:
        from torch._inductor import cpu_vec_isa
    except ImportError:  # pragma: no cover - every supported torch has it; the race goes on without
        return None
    saved = os.environ.get(CACHE_VARIABLE)
    os.makedirs(probe_dir(), exist_ok=True)
    os.environ[CACHE_VARIABLE] = probe_dir()
    start = time.perf_counter()
    try:
        cpu_vec_isa.pick_vec_isa()
    except Exception:  # noqa: BLE001 - no C++ compiler, say: the compile itself reports it, with its reason
        return None
    finally:
        if saved is None:
            os.environ.pop(CACHE_VARIABLE, None)
        else:
            os.environ[CACHE_VARIABLE] = saved
    return time.perf_counter() - start
