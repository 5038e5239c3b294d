"""What a race sets on the device and reads back from it, and how it times what runs there, so one
run never leaks into the next and a step's time is the time until its results exist.

The precision flags and autocast in force, the Inductor and Triton cache directories (cold or warm),
peak memory and its reset, the random streams the alternating schedule keeps per variant, releasing a
variant's model once it has run; device-correct timers (CUDA and MPS work is asynchronous: every
timer waits for the device before it reads the clock); and Inductor's one-time CPU feature probe,
paid before timing instead of inside a compile.
"""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import time

import torch

from core.engine import warm_cache
from core.engine.events import VariantResult
from core.engine.failures import first_line
from core.engine.spec import RunSpec, data_home
from core.engine.warm_cache import make_cold_cache

# ----------------------------------------------------------------------
# Device-correct timers.
#
# CUDA (and MPS) work is asynchronous: reading a host clock after launching kernels measures the
# launch, not the work. Every timer here waits for the device before it reads the clock, so a
# step's time is the time until its results exist, as a user's training loop experiences it.


def device_sync(device: torch.device | str) -> None:
    """Block until all queued work on `device` has finished (no-op on CPU)."""
    kind = torch.device(device).type
    if kind == "cuda":
        torch.cuda.synchronize(device)
    elif kind == "mps":
        torch.mps.synchronize()


class Stopwatch:
    """Times one region of device work: start(), run the work, stop() -> seconds.

    On CUDA the elapsed time comes from CUDA events on the current stream (the device's own
    clock), read after synchronizing on the end event; elsewhere from perf_counter after a sync.
    Includes host-side overhead between the two marks (kernel launches, Python, compilation),
    which is exactly the cost torch.compile tries to remove.
    """

    def __init__(self, device: torch.device | str):
        self.device = torch.device(device)
        self._cuda = self.device.type == "cuda"
        self._t0 = 0.0
        if self._cuda:
            self._start = torch.cuda.Event(enable_timing=True)
            self._end = torch.cuda.Event(enable_timing=True)

    def start(self) -> None:
        device_sync(self.device)  # nothing earlier may leak into this region
        if self._cuda:
            self._start.record()
        self._t0 = time.perf_counter()

    def stop(self) -> float:
        if self._cuda:
            self._end.record()
            self._end.synchronize()
            return self._start.elapsed_time(self._end) / 1000.0
        device_sync(self.device)
        return time.perf_counter() - self._t0


# ----------------------------------------------------------------------
# What a race sets on the device and reads back from it, so one run never leaks into the next.
#
# The precision flags and autocast in force, the Inductor and Triton cache directories (cold or
# warm), peak memory and its reset, the random streams the alternating schedule keeps per variant,
# and releasing a variant's model once it has run.

CACHE_VARIABLES = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


def cache_environment(path: str) -> dict[str, str]:
    """The variables that put both compile caches inside `path`: Inductor's, and Triton's (its
    GPU kernels), which otherwise a host's TRITON_CACHE_DIR or a warm ~/.triton would serve (Triton
    reads TRITON_CACHE_DIR first: torch/_inductor/runtime/cache_dir_utils.py)."""
    return dict(zip(CACHE_VARIABLES, (path, os.path.join(path, "triton")), strict=True))


def cache_record(path: str, cold: bool) -> str:
    """Where a race's compile caches were, as its conditions record them (no machine path): read back
    from the variables Inductor and Triton look up, so a cache a host's setting moved elsewhere says so."""
    if any(os.environ.get(k) != v for k, v in cache_environment(path).items()):
        return "the host's: " + ", ".join(f"{k}={os.environ.get(k)}" for k in CACHE_VARIABLES)
    return "cold: a fresh folder of its own" if cold else "warm: the data dir's shared one"


# The new per-backend float32 API (torch 2.9+), parents before children: a child left at "none"
# reads its parent's value, so putting them back in this order gives back what each read before.
# Inductor's conv templates read `cudnn.fp32_precision` (torch/_inductor/kernel/conv.py), its
# matmuls `cuda.matmul`; the legacy `cudnn.allow_tf32 = True` leaves the first at "none".
FP32_PRECISION_SETTINGS = ("cudnn", "cuda.matmul", "cudnn.conv")


def _backend(dotted: str):
    root = torch.backends
    for part in dotted.split("."):
        root = getattr(root, part)
    return root


def has_fp32_precision_api() -> bool:
    """Whether this torch has the per-backend `fp32_precision` settings (torch 2.9+)."""
    try:
        return all(isinstance(_backend(name).fp32_precision, str) for name in FP32_PRECISION_SETTINGS)
    except (AttributeError, RuntimeError):
        return False


@contextlib.contextmanager
def precision_settings(spec: RunSpec):
    """TF32 on only when asked; restored afterwards so one run never leaks into the next.

    Where torch has the new per-backend API it is set too (it is what Inductor reads), and the
    legacy flags are set to agree with it: torch's legacy `get_float32_matmul_precision()` raises
    when the two disagree, and Inductor's max-autotune calls it (codecache.py, select_algorithm.py).
    Nothing here raises when a model file set the new API: a legacy flag that torch refuses to
    read is left as it is, and the new settings are put back exactly.
    """
    tf32 = spec.precision == "tf32"
    new_api = has_fp32_precision_api()
    saved = [(name, _backend(name).fp32_precision) for name in FP32_PRECISION_SETTINGS] if new_api else []
    saved_legacy = (_legacy(torch.get_float32_matmul_precision), _legacy(lambda: torch.backends.cudnn.allow_tf32))
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    torch.backends.cudnn.allow_tf32 = tf32
    for name, _ in saved:
        _backend(name).fp32_precision = "tf32" if tf32 else "ieee"
    try:
        yield
    finally:
        if saved_legacy[0] is not None:
            torch.set_float32_matmul_precision(saved_legacy[0])
        if saved_legacy[1] is not None:
            torch.backends.cudnn.allow_tf32 = saved_legacy[1]
        for name, value in saved:
            _backend(name).fp32_precision = value


def _legacy(read):
    """A legacy precision flag, or None where torch refuses to read it (the new API disagrees)."""
    try:
        return read()
    except RuntimeError:
        return None


def autocast_context(spec: RunSpec, device: torch.device):
    """torch.autocast for the spec's amp precision; no autocast otherwise."""
    if spec.precision == "amp-fp16":
        return torch.autocast(device.type, dtype=torch.float16)
    if spec.precision == "amp-bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


@contextlib.contextmanager
def inductor_cache(spec: RunSpec, device: torch.device, notes: dict | None = None, filled_by: dict | None = None):
    """Cold: a fresh, private Inductor cache (what a new user pays). Warm: a persistent one.
    Precompiled: a fresh one too, where the ahead-of-time artifact is put (core.engine.variant).

    Triton keeps its own cache of compiled GPU kernels (TRITON_CACHE_DIR, default ~/.triton); a
    host that sets it, or a warm ~/.triton, would make a "cold" run partly warm. So both caches
    point inside the run's directory. Both variables are read when a cache is looked up, so
    setting them before this process compiles anything is enough.

    `notes` is filled with what the race should record (core.engine.warm_cache): what a warm race
    found before compiling, and whether a cold race's cache was kept for later warm races, which
    it is when it ends (`filled_by` names the race in the warm folder's list).
    """
    notes = {} if notes is None else notes
    saved = {name: os.environ.get(name) for name in CACHE_VARIABLES}
    warm = warm_cache.warm_cache_dir(device.type, torch.__version__)
    if spec.cache == "warm":
        path = warm
        os.makedirs(path, exist_ok=True)
        notes["warm_cache"] = warm_cache.found(path)
    else:
        path = make_cold_cache()  # under the data dir; a killed worker's is swept by the next one
    os.environ.update(cache_environment(path))
    try:
        yield path
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        entry = {**(filled_by or {}), "model": spec.model, "batch_size": spec.batch_size, "cache": spec.cache}
        if spec.cache == "cold":
            notes["kept_for_warm"] = warm_cache.keep_for_warm(path, warm, entry)
            shutil.rmtree(path, ignore_errors=True)
        elif spec.cache == "precompiled":  # its artifact and what loading it wrote: nothing a warm race reuses
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                warm_cache.note_filled(path, entry)


def reset_peak_memory(device: torch.device) -> int | None:
    """Start counting peak memory afresh (the CUDA allocator's peak, or the process's peak RSS).

    CUDA: returns what the caching allocator holds now. The cache is not emptied between the
    variants, and reset_peak_memory_stats starts the reserved peak at what is reserved now, so the
    compiled variant's reserved peak includes eager's leftover cache; what a variant *added*
    (reserved_growth, below) is measured from this figure."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return int(torch.cuda.memory_reserved(device))
    with contextlib.suppress(OSError):  # Linux: writing 5 resets the process's peak RSS
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    return None


def reserved_growth(peak_reserved: int | None, reserved_at_start: int | None) -> int | None:
    """What a variant added to the CUDA cache: its reserved peak minus what was reserved when its
    count started (a CUDA-graph pool shows here). None off CUDA or when either is unknown."""
    if peak_reserved is None or reserved_at_start is None:
        return None
    return max(0, peak_reserved - reserved_at_start)


def peak_reserved_memory(device: torch.device) -> int | None:
    """CUDA: the most the caching allocator held since reset_peak_memory. CUDA graphs keep their
    memory pool reserved, not allocated, so reduce-overhead's cost shows here and not in the peak."""
    return int(torch.cuda.max_memory_reserved(device)) if device.type == "cuda" else None


def peak_memory(device: torch.device) -> tuple[int | None, str]:
    """Peak memory since reset_peak_memory and what it measures."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device)), "CUDA allocator peak"
    if device.type == "mps":
        return int(torch.mps.driver_allocated_memory()), "MPS driver allocation (current)"
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024, "process peak RSS (CPU)"
    except OSError:
        pass
    return None, "unavailable"


def random_state(device: torch.device) -> tuple:
    """The CPU's (and the CUDA device's) random stream, to give a variant back its own later."""
    return (torch.get_rng_state(), torch.cuda.get_rng_state(device) if device.type == "cuda" else None)


def set_random_state(device: torch.device, state: tuple) -> None:
    """Restore a stream saved by random_state."""
    torch.set_rng_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state(state[1], device)


def release_variant(result: VariantResult, device: torch.device) -> str | None:
    """Record the variant's memory peaks and let its model go. Returns the reason if this fails.

    The CUDA cache is deliberately not emptied between the variants: the compiled run would then
    pay the allocator's growth again (which the warm-up step removed for both) inside its compile
    time. After a sticky CUDA error (an illegal access, a device-side assert) every CUDA call here
    raises again; that second error must neither replace the first nor lose what was measured.
    """
    try:
        result.peak_memory_bytes, result.memory_kind = peak_memory(device)
        result.peak_reserved_bytes = peak_reserved_memory(device)
        result.reserved_growth_bytes = reserved_growth(result.peak_reserved_bytes, result.reserved_at_start_bytes)
    except Exception:  # noqa: BLE001 - a device in an error state: the figures stay unknown
        result.memory_kind = "unavailable (the device reported an error)"
    gc.collect()
    try:
        device_sync(device)
    except Exception as exc:  # noqa: BLE001 - reported by the caller unless an earlier error explains it
        return f"the device failed after the {result.name} run: {type(exc).__name__}: {first_line(exc)}"
    return None


def release_device_cache(device: torch.device) -> None:
    """Give back what a GPU's caching allocator holds once this process has finished its timed work
    (a replicate process on the same GPU then has it)."""
    if device.type == "cuda":
        torch.cuda.empty_cache()


# ----------------------------------------------------------------------
# Inductor's one-time CPU feature probe, paid before timing instead of inside a compile.
#
# The first Inductor compile for a CPU in a fresh cache directory first finds out which vector
# instruction sets (AVX2, AVX-512, AMX, ...) the CPU supports, by building and loading a small test
# program for each (`cpu_vec_isa.valid_vec_isa_list`): on a small CPU, about half of a small model's
# cold compile (docs/benchmarks.md#what-to-expect-on-a-small-cpu). A machine pays it once (torch keeps the answer in its cache directory), not once per model, so a
# cold race that counted it would overstate what compiling *this model* costs by half. Races and the
# cold/warm cache demo run the probe untimed, before the compile, in a directory kept between races
# (as torch's default cache directory keeps it), and report how long it took.

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
