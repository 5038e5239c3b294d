"""Fusion and memory bandwidth: a chain of k pointwise ops, eager against torch.compile.

Eager runs one kernel per op, and each kernel reads the whole tensor from memory and writes a
whole new one, so its time grows with k. Inductor fuses the chain into one kernel that reads the
input once and writes the output once, so its time grows much more slowly, until the arithmetic
itself (not memory traffic) is what costs. Bandwidth is judged against a plain copy measured on
the same device, the fastest a read-once / write-once kernel can hope to be.

Measured so that the figures mean what they say: the tensors are sized past the last-level cache
(core.engine.explain.fusion), so "GB/s" is main memory unless the result says otherwise; each
timed sample is many back-to-back calls where one call is short (a GPU launch would otherwise
dominate a ~10 µs kernel); every point is repeated, eager and compiled samples alternating so
that drift hits both alike, and the spread (min to max) is kept beside the median.

Kernel counts come from torch.profiler. On CPU, Inductor's generated C++ kernels are invisible to
the profiler unless compiled with `torch._inductor.config.cpp.enable_kernel_profile`, which makes
each kernel open a RecordFunction named `graph_<id>_cpp_fused_<ops>_<n>` (one scope per call:
tens of nanoseconds, invisible at this size). Without it torch 2.14.1 shows only the wrapper
events (`Torch-Compiled Region: 0/0`, `## Call CompiledFxGraph <hash> ##`). On CUDA, kernels are
counted from the CUDA activity events for eager and compiled alike.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from core.engine import explain
from core.engine.device_state import Stopwatch
from core.engine.explain.params import AUTO, FUSION_MAX_CALLS_PER_SAMPLE, FUSION_MAX_NUMEL
from core.engine.explain.params import FUSION_DEFAULTS as DEFAULTS
from core.engine.explain.params import fusion_problems as validate

# ----------------------------------------------------------------------
# How big a bandwidth measurement must be to measure main memory, and how many calls one timed
# sample needs. Torch-free, so the sizing rules are unit-tested without a device.
#
# A copy of a 16 MiB tensor on a CPU with a large last-level cache (LLC) runs from cache: the figure
# ("185 GB/s") is cache bandwidth, not memory bandwidth. So the fusion demo sizes its working set
# (input plus output) to several times the LLC (read from sysfs on Linux, or the GPU's L2 size), and
# labels each figure with the level it measures. And one call of a ~10 µs fused GPU kernel is
# dwarfed by its launch, so a timed sample is many back-to-back calls, long enough to time well.

CPU_CACHE_DIR = "/sys/devices/system/cpu/cpu0/cache"
WORKING_SET_MULTIPLE = 3  # the working set is this many times the last-level cache
MIN_AUTO_NUMEL = 4 * 1024 * 1024  # 16 MiB per float32 tensor: never smaller than the old fixed size
MAX_AUTO_NUMEL = FUSION_MAX_NUMEL  # 512 MiB per float32 tensor
MEMORY_SHARE = 8  # the eager chain holds about 3 tensors at once: use at most 1/8 of the memory per tensor
SAMPLE_TARGET_S = 0.02  # one timed sample lasts at least this long (many calls of a fast kernel)
MAX_CALLS_PER_SAMPLE = FUSION_MAX_CALLS_PER_SAMPLE
FLOAT_BYTES = 4

MAIN_MEMORY, CACHE, PARTLY_CACHE, UNKNOWN = "main memory", "cache", "partly cache", "unknown"


def parse_cache_size(text: str) -> int | None:
    """Bytes in a sysfs cache size ('307200K', '2048K', '32M', '1024'); None if it does not parse."""
    match = re.fullmatch(r"\s*(\d+)\s*([KMG]?)\s*", text or "")
    if not match:
        return None
    return int(match.group(1)) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[match.group(2)]


def cpu_last_level_cache(cache_dir: str = CPU_CACHE_DIR) -> dict | None:
    """The highest-level data or unified cache cpu0 uses, from sysfs: {"bytes", "level", "source"};
    None off Linux or when sysfs says nothing usable."""
    try:
        entries = sorted(name for name in os.listdir(cache_dir) if name.startswith("index"))
    except OSError:
        return None
    best: dict | None = None
    for name in entries:
        folder = os.path.join(cache_dir, name)
        try:
            kind = _read(folder, "type")
            level = int(_read(folder, "level"))
            size = parse_cache_size(_read(folder, "size"))
        except (OSError, ValueError):
            continue
        if kind == "Instruction" or not size:
            continue
        if best is None or level > best["level"]:
            best = {"bytes": size, "level": level, "source": f"L{level} of cpu0, from {cache_dir}"}
    return best


def _read(folder: str, name: str) -> str:
    with open(os.path.join(folder, name)) as f:
        return f.read().strip()


def auto_numel(cache_bytes: int | None, memory_bytes: int | None = None) -> int:
    """float32 elements per tensor so that input + output is WORKING_SET_MULTIPLE times the cache,
    within MIN_AUTO_NUMEL..MAX_AUTO_NUMEL and 1/MEMORY_SHARE of the device's memory."""
    if not cache_bytes:
        numel = MIN_AUTO_NUMEL
    else:
        numel = math.ceil(WORKING_SET_MULTIPLE * cache_bytes / (2 * FLOAT_BYTES))
    numel = min(max(numel, MIN_AUTO_NUMEL), MAX_AUTO_NUMEL)
    if memory_bytes:
        numel = min(numel, max(memory_bytes // (MEMORY_SHARE * FLOAT_BYTES), 1))
    return int(numel)


def memory_level(working_set_bytes: int, cache_bytes: int | None) -> str:
    """Which level a streaming measurement of this many bytes measures: main memory when the data
    is at least twice the last-level cache, cache when it fits in it, else partly cache."""
    if not cache_bytes:
        return UNKNOWN
    if working_set_bytes >= 2 * cache_bytes:
        return MAIN_MEMORY
    if working_set_bytes <= cache_bytes:
        return CACHE
    return PARTLY_CACHE


def calls_per_sample(one_call_s: float, target_s: float = SAMPLE_TARGET_S, most: int = MAX_CALLS_PER_SAMPLE) -> int:
    """Back-to-back calls one timed sample needs to last at least target_s (at least one)."""
    if not one_call_s > 0:
        return most
    return int(min(max(math.ceil(target_s / one_call_s), 1), most))


TITLE = "Fusion and memory bandwidth"


# One op per link, cycling; every one reads and writes N floats. Values stay bounded, so no
# infinities creep in however long the chain. "cheap" ops cost about one instruction per element,
# so the fused kernel stays memory-bound at every k: the page's default, because it shows fusion on
# a CPU too. "mixed" includes transcendental ops (sin, sigmoid): once fused, their arithmetic, not
# memory, sets the compiled time at large k (on a CPU; a GPU has arithmetic to spare).
OP_SETS: dict[str, tuple[tuple[str, Callable[[torch.Tensor], torch.Tensor]], ...]] = {
    "cheap": (
        ("x * 1.0001", lambda x: x * 1.0001),
        ("x + 0.5", lambda x: x + 0.5),
        ("relu(x)", torch.relu),
        ("x - 0.25", lambda x: x - 0.25),
        ("abs(x)", torch.abs),
    ),
    "mixed": (
        ("x * 1.0001", lambda x: x * 1.0001),
        ("x + 0.5", lambda x: x + 0.5),
        ("sin(x)", torch.sin),
        ("relu(x)", torch.relu),
        ("sigmoid(x)", torch.sigmoid),
    ),
}
POINTWISE_OPS = OP_SETS["mixed"]

UNITS = {
    "eager_ms": "ms (median)",
    "eager_ms_low": "ms (fastest sample)",
    "eager_ms_high": "ms (slowest sample)",
    "compiled_ms_low": "ms (fastest sample)",
    "compiled_ms_high": "ms (slowest sample)",
    "speedup_low": "x (lowest eager / compiled ratio of a sample pair)",
    "speedup_high": "x (highest eager / compiled ratio of a sample pair)",
    "working_set_bytes": "bytes (input + output)",
    "compiled_ms": "ms (median)",
    "speedup": "x (eager / compiled)",
    "eager_bytes": "bytes",
    "compiled_bytes": "bytes",
    "eager_gbps": "GB/s",
    "compiled_gbps": "GB/s",
    "eager_gflops": "GFLOP/s",
    "compiled_gflops": "GFLOP/s",
    "eager_kernels": "kernels per call",
    "compiled_kernels": "kernels per call",
    "compile_s": "s",
    "eager_page_faults": "minor page faults per call",
    "compiled_page_faults": "minor page faults per call",
    "copy_ms": "ms",
    "copy_gbps": "GB/s",
    "copy_gbps_low": "GB/s (slowest sample)",
    "copy_gbps_high": "GB/s (fastest sample)",
}

_CPP_KERNEL = re.compile(r"cpp_fused|^graph_\d+_")


def pointwise_chain(k: int, op_set: str = "mixed") -> Callable[[torch.Tensor], torch.Tensor]:
    """A function applying k pointwise ops in a row, cycling through OP_SETS[op_set]."""
    cycle = OP_SETS[op_set]
    ops = [cycle[i % len(cycle)][1] for i in range(k)]

    def chain(x: torch.Tensor) -> torch.Tensor:
        for op in ops:
            x = op(x)
        return x

    return chain


def chain_description(k: int, op_set: str = "mixed") -> list[str]:
    """The ops of a k-long chain, in order, as a reader would write them."""
    cycle = OP_SETS[op_set]
    return [cycle[i % len(cycle)][0] for i in range(k)]


def median_seconds(fn: Callable[[], Any], device: str, repeats: int, warmup: int, inner: int = 1) -> float:
    """Median over `repeats` timed samples of `inner` back-to-back calls, per call, after warm-up."""
    for _ in range(warmup):
        fn()
    stopwatch = Stopwatch(device)
    return statistics.median([sample_seconds(fn, stopwatch, inner) for _ in range(repeats)])


def minor_page_faults() -> int | None:
    """This process's minor page faults so far (first touches of fresh memory); None off Unix."""
    try:
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_minflt)
    except (ImportError, OSError, AttributeError):
        return None


def sample_seconds(fn: Callable[[], Any], stopwatch: Stopwatch, inner: int) -> float:
    """One timed sample: `inner` back-to-back calls, in seconds per call."""
    stopwatch.start()
    for _ in range(inner):
        fn()
    return stopwatch.stop() / inner


def spread(samples: list[float]) -> dict[str, float]:
    """Median, lowest and highest of repeated samples: the point and how far repeats scatter."""
    return {"median": statistics.median(samples), "low": min(samples), "high": max(samples)}


def paired_samples(
    eager: Callable[[], Any], compiled: Callable[[], Any], device: str, repeats: int, warmup: int, calls: Any
) -> dict[str, Any]:
    """Eager and compiled timed alternately, `repeats` samples each, after `warmup` calls of each.

    `calls` is the back-to-back calls per sample, or "auto": enough for a sample to last
    working_set.SAMPLE_TARGET_S (judged from one timed call of each variant). Alternating means a
    machine that slows down part way slows both variants, not the one measured last; per-pair
    ratios give the speedup's spread. Page faults (CPU) are counted over the timed samples only.
    """
    stopwatch = Stopwatch(device)
    one_call = {}
    for _ in range(max(warmup, 1 if calls == AUTO else 0)):  # the last warm-up call sizes "auto"
        for name, fn in (("eager", eager), ("compiled", compiled)):
            one_call[name] = sample_seconds(fn, stopwatch, 1)
    inner = {n: calls_per_sample(one_call[n]) if calls == AUTO else calls for n in ("eager", "compiled")}
    samples: dict[str, list[float]] = {"eager": [], "compiled": []}
    faults: dict[str, float | None] = {"eager": 0.0, "compiled": 0.0}
    for _ in range(repeats):
        for name, fn in (("eager", eager), ("compiled", compiled)):
            before = minor_page_faults()
            samples[name].append(sample_seconds(fn, stopwatch, inner[name]))
            after = minor_page_faults()
            if before is None or after is None or faults[name] is None:
                faults[name] = None
            else:
                faults[name] += after - before
    ratios = [e / c for e, c in zip(samples["eager"], samples["compiled"])]
    return {
        "eager": spread(samples["eager"]),
        "compiled": spread(samples["compiled"]),
        "speedup": spread(ratios),
        "samples": samples,
        "calls_per_sample": inner,
        "page_faults_per_call": {
            name: None if faults[name] is None else faults[name] / (repeats * inner[name]) for name in samples
        },
    }


def reset_dynamo() -> None:
    """Forget compiled code, so each variant compiles on its own (and no cache-size limit bites)."""
    with contextlib.suppress(Exception):  # private API: losing it only costs recompile isolation
        import torch._dynamo

        torch._dynamo.reset()


def device_info(device: str) -> dict[str, Any]:
    """What the numbers were measured on."""
    dev = torch.device(device)
    info: dict[str, Any] = {"type": dev.type, "torch": torch.__version__}
    if dev.type == "cuda":
        props = torch.cuda.get_device_properties(dev)
        info.update(
            name=props.name, memory_bytes=int(props.total_memory), compute_capability=[props.major, props.minor]
        )
    else:
        from core.engine.environment import cpu_name

        info.update(name=cpu_name(), threads=torch.get_num_threads())
    return info


def resolve_params(params: dict) -> dict[str, Any]:
    """`params` over DEFAULTS, raising ValueError with every problem if they are invalid."""
    return explain.resolve_params(params, DEFAULTS, validate)


@contextlib.contextmanager
def _cpu_kernel_profiling(enabled: bool):
    """Compile with Inductor's per-kernel profiler scopes on CPU, if this torch has the switch."""
    if not enabled:
        yield True
        return
    try:
        import torch._inductor.config as inductor_config

        patch = inductor_config.patch({"cpp.enable_kernel_profile": True})
    except Exception:  # noqa: BLE001 - private config; without it kernels just go uncounted
        yield False
        return
    with patch:
        yield True


def _profile_events(fn: Callable[[], Any], device: str) -> list:
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if torch.device(device).type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        fn()
        if torch.device(device).type == "cuda":
            torch.cuda.synchronize(device)
    return list(prof.events())


def _is_cuda_kernel(event) -> bool:
    kind = str(getattr(event, "device_type", ""))
    name = getattr(event, "name", "")
    return kind.endswith("CUDA") and not name.startswith(("Memcpy", "Memset"))


def count_kernels(fn: Callable[[], Any], device: str, compiled: bool) -> tuple[int | None, list[str]]:
    """Kernels one call of `fn` runs, per torch.profiler, and their names (None if not countable)."""
    try:
        events = _profile_events(fn, device)
    except Exception:  # noqa: BLE001 - the profiler is optional for this demo
        return None, []
    kind = torch.device(device).type
    if kind == "cuda":
        names = [e.name for e in events if _is_cuda_kernel(e)]
    elif compiled:
        names = [e.name for e in events if _CPP_KERNEL.search(e.name)]
        if not names:
            return None, [e.name for e in events if getattr(e, "cpu_parent", None) is None]
    else:
        names = [e.name for e in events if e.name.startswith("aten::") and getattr(e, "cpu_parent", None) is None]
    return len(names), names


def measure_copy(numel: int, device: str, repeats: int, warmup: int, calls: Any = 1) -> dict[str, Any]:
    """The device's read-once / write-once speed: y.copy_(x) of `numel` floats (median and spread
    over `repeats` samples of `calls` back-to-back copies, or "auto" as in paired_samples)."""
    x = torch.randn(numel, device=device)
    y = torch.empty_like(x)
    stopwatch = Stopwatch(device)
    one_call = None
    for _ in range(max(warmup, 1 if calls == AUTO else 0)):
        one_call = sample_seconds(lambda: y.copy_(x), stopwatch, 1)
    inner = calls_per_sample(one_call) if calls == AUTO else calls
    seconds = spread([sample_seconds(lambda: y.copy_(x), stopwatch, inner) for _ in range(repeats)])
    nbytes = 2 * numel * FLOAT_BYTES
    return {
        "what": "measured copy bandwidth",
        "op": "y.copy_(x)",
        "bytes": nbytes,
        "copy_ms": seconds["median"] * 1e3,
        "copy_gbps": nbytes / seconds["median"] / 1e9,
        "copy_gbps_low": nbytes / seconds["high"] / 1e9,
        "copy_gbps_high": nbytes / seconds["low"] / 1e9,
        "calls_per_sample": inner,
    }


def _row(k: int, numel: int, eager_s: float, compiled_s: float, copy_gbps: float) -> dict[str, Any]:
    eager_bytes = 2 * k * numel * FLOAT_BYTES
    compiled_bytes = 2 * numel * FLOAT_BYTES
    flops = k * numel
    eager_gbps = eager_bytes / eager_s / 1e9
    compiled_gbps = compiled_bytes / compiled_s / 1e9
    return {
        "k": k,
        "eager_ms": eager_s * 1e3,
        "compiled_ms": compiled_s * 1e3,
        "speedup": eager_s / compiled_s,
        "eager_bytes": eager_bytes,
        "compiled_bytes": compiled_bytes,
        "eager_gbps": eager_gbps,
        "compiled_gbps": compiled_gbps,
        "eager_gflops": flops / eager_s / 1e9,
        "compiled_gflops": flops / compiled_s / 1e9,
        "eager_fraction_of_copy": eager_gbps / copy_gbps,
        "compiled_fraction_of_copy": compiled_gbps / copy_gbps,
    }


def last_level_cache(device: str) -> dict[str, Any] | None:
    """The cache a streaming kernel on `device` could be served from: the GPU's L2, or the CPU's
    last-level cache as Linux reports it. None where neither is known."""
    dev = torch.device(device)
    if dev.type == "cuda":
        size = int(getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", 0) or 0)
        return (
            {"bytes": size, "level": 2, "source": "torch.cuda.get_device_properties(...).L2_cache_size"}
            if size
            else None
        )
    if dev.type == "cpu":
        return cpu_last_level_cache()
    return None


def device_memory_bytes(device: str) -> int | None:
    """Memory the tensors can come from: the GPU's, or what the OS has available now."""
    dev = torch.device(device)
    if dev.type == "cuda":
        return int(torch.cuda.get_device_properties(dev).total_memory)
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def resolve_numel(
    numel: Any, cache: dict[str, Any] | None, memory_bytes: int | None, max_working_set: int | None = None
) -> int:
    """The tensor size to measure: as given, or for "auto" several times the last-level cache; then
    no more than `max_working_set` bytes of input plus output allow (the host's limit)."""
    resolved = int(numel) if numel != AUTO else auto_numel((cache or {}).get("bytes"), memory_bytes)
    if max_working_set is not None:
        resolved = min(resolved, max(max_working_set // (2 * FLOAT_BYTES), 1))
    return resolved


KERNEL_COUNT_NUMEL = 65536  # eager runs one kernel per op at any size: count them on a small tensor


def run(params: dict, device: str = "cpu") -> dict:
    """Time eager and compiled chains for every k; JSON-ready rows plus the copy reference."""
    p = resolve_params(params)
    started = time.perf_counter()
    repeats, warmup, calls = p["repeats"], p["warmup"], p["calls_per_sample"]
    kind = torch.device(device).type
    cache = last_level_cache(device)
    memory_bytes = device_memory_bytes(device)
    numel = resolve_numel(p["numel"], cache, memory_bytes, p["max_working_set"])
    capped = numel < resolve_numel(p["numel"], cache, memory_bytes)  # smaller than asked: the host's limit
    working_set_bytes = 2 * numel * FLOAT_BYTES
    level = memory_level(working_set_bytes, (cache or {}).get("bytes"))
    x = torch.randn(numel, device=device)
    small = torch.randn(KERNEL_COUNT_NUMEL, device=device)
    reference = measure_copy(numel, device, repeats, warmup, calls)
    reference["memory_level"] = level
    rows = []
    for k in p["ks"]:
        chain = pointwise_chain(k, p["op_set"])
        eager_kernels, eager_names = count_kernels(lambda chain=chain: chain(small), device, compiled=False)

        reset_dynamo()
        with _cpu_kernel_profiling(kind == "cpu"):
            compiled = torch.compile(chain)
            stopwatch = Stopwatch(device)
            stopwatch.start()
            compiled(x)  # compiles: excluded from the runtime below
            compile_s = stopwatch.stop()
        timed = paired_samples(
            lambda chain=chain: chain(x), lambda compiled=compiled: compiled(x), device, repeats, warmup, calls
        )
        compiled_kernels, compiled_names = count_kernels(lambda compiled=compiled: compiled(x), device, True)

        row = _row(k, numel, timed["eager"]["median"], timed["compiled"]["median"], reference["copy_gbps"])
        row.update(
            eager_ms_low=timed["eager"]["low"] * 1e3,
            eager_ms_high=timed["eager"]["high"] * 1e3,
            compiled_ms_low=timed["compiled"]["low"] * 1e3,
            compiled_ms_high=timed["compiled"]["high"] * 1e3,
            speedup_low=timed["speedup"]["low"],
            speedup_high=timed["speedup"]["high"],
            eager_samples_ms=[t * 1e3 for t in timed["samples"]["eager"]],
            compiled_samples_ms=[t * 1e3 for t in timed["samples"]["compiled"]],
            eager_calls_per_sample=timed["calls_per_sample"]["eager"],
            compiled_calls_per_sample=timed["calls_per_sample"]["compiled"],
            compile_s=compile_s,
            eager_page_faults=timed["page_faults_per_call"]["eager"] if kind == "cpu" else None,
            compiled_page_faults=timed["page_faults_per_call"]["compiled"] if kind == "cpu" else None,
            eager_kernels=eager_kernels,
            compiled_kernels=compiled_kernels,
            eager_kernel_names=list(dict.fromkeys(eager_names)),
            compiled_kernel_names=list(dict.fromkeys(compiled_names)),
        )
        rows.append(row)
        del compiled
    reset_dynamo()
    result = {
        "demo": "fusion",
        "title": TITLE,
        "params": p,
        "numel": numel,
        "working_set_bytes": working_set_bytes,
        "capped_by_host": capped,
        "cache": cache,
        "memory_level": level,
        "device": device_info(device),
        "ops": chain_description(max(p["ks"]), p["op_set"]),
        "reference": reference,
        "rows": rows,
        "kernel_counting": _kernel_counting_note(kind),
        "notes": _notes(numel, kind, cache, level, capped),
        "units": UNITS,
        "elapsed_s": time.perf_counter() - started,
    }
    assert_json_ready(result)
    return result


def _kernel_counting_note(kind: str) -> str:
    if kind == "cuda":
        return "CUDA kernel events from torch.profiler (ProfilerActivity.CUDA), memcpy/memset excluded."
    if kind == "cpu":
        return (
            "eager: top-level aten:: op events (one CPU kernel each); compiled: Inductor's generated C++ "
            "kernels (graph_<id>_cpp_fused_...), visible to the profiler because they were compiled with "
            "torch._inductor.config.cpp.enable_kernel_profile. None means the profiler showed no kernel "
            "events; the names then list what it did show."
        )
    return "eager: top-level aten:: op events; compiled kernels are not countable on this device."


def _notes(numel: int, kind: str, cache: dict[str, Any] | None, level: str, capped: bool = False) -> list[str]:
    working_set_mib = 2 * numel * FLOAT_BYTES / 2**20
    notes = [
        "Bytes are what each variant must move at minimum: eager reads and writes the tensor once per op "
        "(2*k*N*4), the fused kernel reads it once and writes it once (2*N*4).",
        "FLOP/s counts one operation per element per op; sin and sigmoid cost many more instructions, so with "
        "op_set 'mixed' the fused kernel turns compute-bound at large k on a CPU ('cheap' stays memory-bound).",
        "Runtimes are medians of `repeats` samples, eager and compiled alternating, each sample "
        "calls_per_sample back-to-back calls; *_low and *_high are the fastest and slowest samples. The "
        "first compiled call (compile_s) is excluded.",
    ]
    if cache:
        notes.append(
            f"Input plus output is {working_set_mib:,.0f} MiB against a {cache['bytes'] / 2**20:,.0f} MiB "
            f"last-level cache ({cache['source']}): the GB/s figures measure {level}."
        )
    else:
        notes.append(f"Input plus output is {working_set_mib:,.0f} MiB; the cache size is unknown here.")
    if capped:
        notes.append(f"This host limits the demo's input plus output to {working_set_mib:,.0f} MiB (max_working_set).")
    if kind == "cpu":
        notes.append(
            "Every eager op allocates a fresh output. When the allocator gets memory the OS has not mapped yet, "
            "the first write to each 4 KiB page faults (a few ms per 16 MiB): *_page_faults counts these per "
            "call and explains calls far slower than bandwidth alone would allow.",
        )
    return notes


def assert_json_ready(result: dict) -> None:
    """Fail loudly here, not when the store replays the result: only finite plain numbers."""

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"non-finite number in result: {value}")
        elif value is not None and not isinstance(value, str | int | float | bool):
            raise TypeError(f"not JSON-serializable: {type(value).__name__}")

    walk(result)
