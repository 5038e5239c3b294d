"""Per-step anatomy of a variant: what one steady training step launches and where its time goes.

Run after a variant's timed epochs, never inside them: a few extra steps under torch.profiler,
counted, not assumed. Operators are the ATen calls the program made (what eager dispatches one
by one); kernels are the device's units of work: CUDA kernels on a GPU, and on a CPU the leaf
ATen kernels plus Inductor's generated C++ kernels. Host time is the step's wall time on the
CPU thread; device time is the time the kernels themselves ran. A step whose host time exceeds
its device time is overhead-bound: Python and dispatch, not arithmetic, set its pace.

On a CPU, Inductor's C++ kernels are invisible to the profiler unless they were compiled with
`torch._inductor.config.cpp.enable_kernel_profile` (one RecordFunction per kernel call, tens of
nanoseconds): `kernel_profiling` turns it on for the compiled variant of a race that profiles.
bench/profile_overhead.py measures that it leaves the steady speedup unchanged.
"""

from __future__ import annotations

import contextlib
import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import torch

from core.engine.timing import device_sync

STEP_MARK = "compile_lab::profiled_step"
TOP_KERNELS = 6
_CPP_KERNEL = re.compile(r"cpp_fused|^graph_\d+_")
_NOT_KERNELS = ("Memcpy", "Memset", "cudaDeviceSynchronize")


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
    aten = [e for e in events if e.name.startswith("aten::")]
    operators = [e for e in aten if not _parent_is_aten(e)]
    if device_type == "cuda":
        kernels = [e for e in events if _on_cuda(e) and not e.name.startswith(_NOT_KERNELS)]
        kernel_us = {id(e): _elapsed_us(e) for e in kernels}
    else:
        kernels = [e for e in events if _CPP_KERNEL.search(e.name)]
        kernels += [e for e in aten if not any(c.name.startswith("aten::") for c in _children(e))]
        kernel_us = {id(e): float(getattr(e, "self_cpu_time_total", 0.0) or 0.0) for e in kernels}
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
        "kernel_counting": "CUDA kernels" if device_type == "cuda" else "leaf ATen kernels + Inductor C++ kernels",
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


def _parent_is_aten(event: Any) -> bool:
    parent = getattr(event, "cpu_parent", None)
    return parent is not None and parent.name.startswith("aten::")


def _on_cuda(event: Any) -> bool:
    return str(getattr(event, "device_type", "")).endswith("CUDA")


def profile_reading(eager: dict[str, Any] | None, compiled: dict[str, Any] | None) -> str | None:
    """One sentence comparing the two anatomies: kernels launched, and what bounds each step."""
    if not eager or not compiled:
        return None
    sentence = (
        f"Per step, eager launches {eager['kernels_per_step']:.0f} kernels ({eager['operators_per_step']:.0f} "
        f"operators), compiled {compiled['kernels_per_step']:.0f} ({compiled['operators_per_step']:.0f} operators)."
    )
    for name, part in (("eager", eager), ("compiled", compiled)):
        host, device = part["host_s_per_step"], part["device_s_per_step"]
        if host > 0 and device < 0.5 * host:
            sentence += (
                f" {name.capitalize()}'s kernels run for only {device / host:.0%} of its step: the rest is Python, "
                "dispatch and launch overhead, so it is overhead-bound."
            )
    return sentence
