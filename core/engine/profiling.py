"""Per-step anatomy of a variant: what one steady training step launches and where its time goes.

Run after a variant's timed epochs, never inside them: a few extra steps under torch.profiler,
counted, not assumed. Operators are the ATen calls the program made (what eager dispatches one
by one); kernels are the device's units of work: CUDA kernels on a GPU, and on a CPU every
operator whose own body, not the operators it calls, takes most of its time (a oneDNN
convolution, a matmul, their backward, an elementwise op), plus Inductor's generated C++
kernels. A CPU kernel's time is its self time, so nothing is counted twice; views, allocations
and wrappers that only call other operators (conv2d -> convolution -> mkldnn_convolution) are
dispatch, not work. Host time is the step's wall time on the CPU thread; device time is the time
the kernels themselves ran. What bounds a step is read from these in core.engine.profile_reading.

(The CPU figure once counted only operators with no operator below them, and a convolution calls
aten::empty for its output: every convolution and matmul was left out. Such profiles carry
profile_reading.STALE_CPU_COUNTING and are not read for a bound.)

On a CPU, Inductor's C++ kernels are invisible to the profiler unless they were compiled with
`torch._inductor.config.cpp.enable_kernel_profile` (one RecordFunction per kernel call, tens of
nanoseconds): `kernel_profiling` turns it on for the compiled variant of a race that profiles.
It leaves the steady speedup unchanged (docs/benchmarks.md#profile_overheadpy).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import torch

from core.engine.device_state import device_sync
from core.engine.profile_reading import CPU_COUNTING

STEP_MARK = "compile_lab::profiled_step"
KINETO_QUIET = "6"  # above every Kineto log level, USDT and STAGE included (torch 2.14's Kineto)
TOP_KERNELS = 6
_CPP_KERNEL = re.compile(r"cpp_fused|^graph_\d+_")
_NOT_KERNELS = ("Memcpy", "Memset", "cudaDeviceSynchronize")
_OPERATOR = re.compile(r"^(aten|mkldnn|onednn|quantized|prims)::")
# Operators that allocate, resize or restride a buffer and compute nothing (views are found from their schema).
_ALLOCATIONS = frozenset(
    {"empty", "empty_strided", "empty_like", "new_empty", "new_empty_strided", "resize_", "set_", "as_strided_"}
)


def shows_cpu_kernels(profile_steps: int, device: torch.device) -> bool:
    """Whether a race's compiled variant is compiled with Inductor's per-kernel profiler scopes: on a
    CPU, when the race profiles. Its replicates compile the same way, though they profile nothing:
    the switch is part of Inductor's cache key, and a replicate compiled otherwise missed the first
    process's cache and compiled afresh (16 s of the demo's first replicate, against 2 s warm)."""
    return profile_steps > 0 and device.type == "cpu"


@contextlib.contextmanager
def kernel_profiling(enabled: bool) -> Iterator[bool]:
    """Compile with Inductor's per-kernel profiler scopes on a CPU, where this torch has the
    switch (yields whether the kernels will be visible)."""
    if not enabled:
        yield False
        return
    try:
        import torch._inductor.config as inductor_config

        patch = inductor_config.patch({"cpp.enable_kernel_profile": True})
    except Exception:  # noqa: BLE001 - private config: without it compiled CPU kernels go uncounted
        yield False
        return
    with patch:
        yield True


def profile_steps(
    step: Callable[[torch.Tensor, torch.Tensor], Any],
    batches: Iterator[tuple[torch.Tensor, torch.Tensor]],
    device: torch.device,
    steps: int,
    trace_path: str | None = None,
) -> dict[str, Any]:
    """Profile `steps` training steps; returns per-step counts and times (JSON-ready), and writes a
    Chrome/Perfetto trace to `trace_path` when given."""
    from torch.profiler import ProfilerActivity, profile, record_function

    # Kineto, the profiler's C++ side, writes its own lines to stderr ("USDT: ... profiler_start", and on a
    # machine without a GPU "ERROR: ... gpuGetDeviceCount failed with code 35"): noise in a terminal race,
    # and no error. Read when the profiler first starts; a host's own setting wins.
    os.environ.setdefault("KINETO_LOG_LEVEL", KINETO_QUIET)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    device_sync(device)
    with profile(activities=activities) as prof:
        done = 0
        for x, y in batches:
            with record_function(STEP_MARK):
                step(x, y)
                device_sync(device)
            done += 1
            if done == steps:
                break
    result = summarize_profile(list(prof.events()), device.type, done)
    if trace_path:
        prof.export_chrome_trace(trace_path)
        result["trace"] = trace_path
    return result


def summarize_profile(events: list[Any], device_type: str, steps: int) -> dict[str, Any]:
    """Per-step operators, kernels, host and device time, and the top kernels, from profiler events
    (torch.autograd.profiler FunctionEvent objects, or anything with the same attributes)."""
    steps = max(steps, 1)
    marks = [e for e in events if e.name == STEP_MARK]
    host_us = sum(_elapsed_us(e) for e in marks)
    ops = [e for e in events if _OPERATOR.match(e.name)]
    operators = [e for e in ops if not _parent_is_operator(e)]
    if device_type == "cuda":
        kernels = [e for e in events if _on_cuda(e) and not e.name.startswith(_NOT_KERNELS)]
        kernel_us = {id(e): _elapsed_us(e) for e in kernels}
    else:
        kernels = [e for e in events if _CPP_KERNEL.search(e.name)]
        kernels += [e for e in ops if _does_the_work(e)]
        kernel_us = {id(e): _self_us(e) for e in kernels}
    by_name: dict[str, list[float]] = defaultdict(list)
    for e in kernels:
        by_name[e.name].append(kernel_us[id(e)])
    top = sorted(by_name.items(), key=lambda item: -sum(item[1]))[:TOP_KERNELS]
    # A CUDA graph replayed is one cudaGraphLaunch call on the host (its kernels follow on the device).
    graph_launches = sum(1 for e in events if e.name.startswith(GRAPH_LAUNCH) and not _on_cuda(e))
    return {
        "steps": steps,
        "graph_launches_per_step": graph_launches / steps,
        "operators_per_step": len(operators) / steps,
        "kernels_per_step": len(kernels) / steps,
        "host_s_per_step": host_us / steps / 1e6,
        "device_s_per_step": sum(kernel_us.values()) / steps / 1e6,
        "kernel_counting": "CUDA kernels" if device_type == "cuda" else CPU_COUNTING,
        "top_kernels": [
            {"name": name, "calls_per_step": len(times) / steps, "s_per_step": sum(times) / steps / 1e6}
            for name, times in top
        ],
    }


GRAPH_LAUNCH = "cudaGraphLaunch"  # the CUDA runtime call (cudaGraphLaunch, or _v10000 with a version)


def _elapsed_us(event: Any) -> float:
    time_range = getattr(event, "time_range", None)
    if time_range is not None:
        return float(time_range.end - time_range.start)
    return float(getattr(event, "cpu_time_total", 0.0) or 0.0)


def _children(event: Any) -> list[Any]:
    return list(getattr(event, "cpu_children", None) or [])


def _parent_is_operator(event: Any) -> bool:
    parent = getattr(event, "cpu_parent", None)
    return parent is not None and bool(_OPERATOR.match(parent.name))


def _self_us(event: Any) -> float:
    return float(getattr(event, "self_cpu_time_total", 0.0) or 0.0)


def _total_us(event: Any) -> float:
    total = getattr(event, "cpu_time_total", None)
    if total is not None:
        return float(total)
    return _self_us(event) + sum(_total_us(c) for c in _children(event))


def _does_the_work(event: Any) -> bool:
    """A CPU operator that computes: not a view or an allocation, and its own body takes at least
    half its time (a wrapper's time is in the operators it calls; a convolution's allocations,
    views and scalar conversions below it are small beside its own)."""
    if _bookkeeping(event.name):
        return False
    return _self_us(event) >= 0.5 * _total_us(event)


@functools.lru_cache(maxsize=4096)
def _bookkeeping(name: str) -> bool:
    """An operator that only allocates, or returns a view of its input (its schema says the result
    aliases an input without writing it: t, view, as_strided, expand, detach, to without a copy)."""
    if name.split("::", 1)[-1] in _ALLOCATIONS:
        return True
    try:
        schemas = torch._C._jit_get_schemas_for_operator(name)
    except Exception:  # noqa: BLE001 - an operator torch cannot describe is taken to compute
        return False
    for schema in schemas:
        for returned in schema.returns:
            alias = returned.alias_info
            if alias is not None and not alias.is_write:
                return True
    return False


def _on_cuda(event: Any) -> bool:
    return str(getattr(event, "device_type", "")).endswith("CUDA")
