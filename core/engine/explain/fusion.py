"""Fusion and memory bandwidth: a chain of k pointwise ops, eager against torch.compile.

Eager runs one kernel per op, and each kernel reads the whole tensor from memory and writes a
whole new one, so its time grows with k. Inductor fuses the chain into one kernel that reads the
input once and writes the output once, so its time stays nearly flat until the arithmetic itself
(not memory traffic) is what costs. Bandwidth is judged against a plain copy measured on the
same device, the fastest a read-once / write-once kernel can hope to be.

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
import re
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from core.engine import explain
from core.engine.explain.params import FUSION_DEFAULTS as DEFAULTS
from core.engine.explain.params import fusion_problems as validate
from core.engine.timing import Stopwatch

TITLE = "Fusion and memory bandwidth"
FLOAT_BYTES = 4  # float32


# One op per link, cycling; every one reads and writes N floats. Values stay bounded, so no
# infinities creep in however long the chain. "mixed" includes transcendental ops (sin, sigmoid):
# once fused, their arithmetic, not memory, sets the compiled time at large k. "cheap" ops cost
# about one instruction per element, so the fused kernel stays memory-bound at every k.
OP_SETS: dict[str, tuple[tuple[str, Callable[[torch.Tensor], torch.Tensor]], ...]] = {
    "mixed": (
        ("x * 1.0001", lambda x: x * 1.0001),
        ("x + 0.5", lambda x: x + 0.5),
        ("sin(x)", torch.sin),
        ("relu(x)", torch.relu),
        ("sigmoid(x)", torch.sigmoid),
    ),
    "cheap": (
        ("x * 1.0001", lambda x: x * 1.0001),
        ("x + 0.5", lambda x: x + 0.5),
        ("relu(x)", torch.relu),
        ("x - 0.25", lambda x: x - 0.25),
        ("abs(x)", torch.abs),
    ),
}
POINTWISE_OPS = OP_SETS["mixed"]

UNITS = {
    "eager_ms": "ms",
    "compiled_ms": "ms",
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
    samples = []
    for _ in range(repeats):
        stopwatch.start()
        for _ in range(inner):
            fn()
        samples.append(stopwatch.stop() / inner)
    return statistics.median(samples)


def minor_page_faults() -> int | None:
    """This process's minor page faults so far (first touches of fresh memory); None off Unix."""
    try:
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_minflt)
    except (ImportError, OSError, AttributeError):
        return None


def timed_call(fn: Callable[[], Any], device: str, repeats: int, warmup: int) -> tuple[float, float | None]:
    """Median seconds per call, and the page faults per timed call (None where not countable)."""
    for _ in range(warmup):
        fn()
    before = minor_page_faults()
    seconds = median_seconds(fn, device, repeats, warmup=0)
    after = minor_page_faults()
    faults = None if before is None or after is None else (after - before) / repeats
    return seconds, faults


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


def measure_copy(numel: int, device: str, repeats: int, warmup: int) -> dict[str, Any]:
    """The device's read-once / write-once speed: y.copy_(x) of `numel` floats."""
    x = torch.randn(numel, device=device)
    y = torch.empty_like(x)
    seconds = median_seconds(lambda: y.copy_(x), device, repeats, warmup)
    nbytes = 2 * numel * FLOAT_BYTES
    return {
        "what": "measured copy bandwidth",
        "op": "y.copy_(x)",
        "bytes": nbytes,
        "copy_ms": seconds * 1e3,
        "copy_gbps": nbytes / seconds / 1e9,
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


def run(params: dict, device: str = "cpu") -> dict:
    """Time eager and compiled chains for every k; JSON-ready rows plus the copy reference."""
    p = resolve_params(params)
    started = time.perf_counter()
    numel, repeats, warmup = p["numel"], p["repeats"], p["warmup"]
    kind = torch.device(device).type
    x = torch.randn(numel, device=device)
    reference = measure_copy(numel, device, repeats, warmup)
    rows = []
    for k in p["ks"]:
        chain = pointwise_chain(k, p["op_set"])
        eager_s, eager_faults = timed_call(lambda chain=chain: chain(x), device, repeats, warmup)
        eager_kernels, eager_names = count_kernels(lambda chain=chain: chain(x), device, compiled=False)

        reset_dynamo()
        with _cpu_kernel_profiling(kind == "cpu"):
            compiled = torch.compile(chain)
            stopwatch = Stopwatch(device)
            stopwatch.start()
            compiled(x)  # compiles: excluded from the runtime below
            compile_s = stopwatch.stop()
        compiled_s, compiled_faults = timed_call(lambda compiled=compiled: compiled(x), device, repeats, warmup)
        compiled_kernels, compiled_names = count_kernels(lambda compiled=compiled: compiled(x), device, True)

        row = _row(k, numel, eager_s, compiled_s, reference["copy_gbps"])
        row.update(
            compile_s=compile_s,
            eager_page_faults=eager_faults if kind == "cpu" else None,
            compiled_page_faults=compiled_faults if kind == "cpu" else None,
            eager_kernels=eager_kernels,
            compiled_kernels=compiled_kernels,
            eager_kernel_names=list(dict.fromkeys(eager_names)),
            compiled_kernel_names=list(dict.fromkeys(compiled_names)),
        )
        rows.append(row)
    reset_dynamo()
    result = {
        "demo": "fusion",
        "title": TITLE,
        "params": p,
        "device": device_info(device),
        "ops": chain_description(max(p["ks"]), p["op_set"]),
        "reference": reference,
        "rows": rows,
        "kernel_counting": _kernel_counting_note(kind),
        "notes": _notes(numel, kind),
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


def _notes(numel: int, kind: str) -> list[str]:
    working_set_mib = 2 * numel * FLOAT_BYTES / 2**20
    notes = [
        "Bytes are what each variant must move at minimum: eager reads and writes the tensor once per op "
        "(2*k*N*4), the fused kernel reads it once and writes it once (2*N*4).",
        "FLOP/s counts one operation per element per op; sin and sigmoid cost many more instructions, so with "
        "op_set 'mixed' the fused kernel turns compute-bound at large k ('cheap' stays memory-bound).",
        "Runtimes are medians after warm-up; the first compiled call (compile_s) is excluded from them.",
    ]
    if kind == "cpu":
        notes.append(
            f"Input plus output is {working_set_mib:.3g} MiB: on a CPU with a large last-level cache, part of "
            "the traffic is served from cache, so GB/s can exceed main-memory bandwidth.",
        )
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
