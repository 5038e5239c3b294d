"""Whether a race can fit in its device's memory, said before it starts. Pure functions, no torch.

A race that cannot fit does not fail fast: a CPU worker grows for minutes toward the kernel's OOM
killer (or swap) while it holds the lane; a GPU one fails once its model, data and first step are on
the device, after its worker's start. So validation
(core.engine.spec.validate, which every door calls: the app's Launch and links, `race`, `submit`,
sweep points, the worker) refuses a race whose memory *floor* is more than the device has:

- the eager variant's weights, gradients and Adam's two moments (16 bytes a parameter, fp32);
- what each training sample keeps for its backward pass, the zoo row's `activation_bytes`
  (measured at the model's default input size: docs/benchmarks.md#the-memory-floor), scaled to
  the input size the race asks for by the lower of the plausible powers, half of it under autocast;
- the batches the data source holds at once (synthetic data: a pool of SYNTHETIC_POOL, made once).

Every term is a lower bound of what the eager step holds at its peak (the backward pass allocates
its gradients beside the saved tensors, the allocator rounds up, the process has its libraries), so
a refused race clearly cannot fit, and a race that passes may still run out of memory (its run then
ends with the out-of-memory reason). Only zoo models are estimated: a library model's or a model
file's activations are not known before it is built. The device's memory: a GPU's from the device
probe (DeviceCaps.cuda_memory_bytes), the CPU's from the host's RAM or its cgroup's limit
(DeviceCaps.memory_bytes, `host_memory_bytes`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from core.engine import words
from core.engine.models.sources import MODELS, ModelInfo, source_of

# `spec` below is a RunSpec and `caps` a DeviceCaps (core.engine.spec, whose validate calls this
# module: it reads their fields and imports neither).

BYTES_PER_PARAMETER = 16  # an fp32 weight, its gradient and Adam's two moments
AMP_SHARE = 0.5  # under autocast a saved tensor is at least 16-bit: at least half of fp32's bytes
# How what a sample keeps grows with the input size, per input kind: an image model's feature maps
# with the pixels, a token model's with the sequence (attention can add a square of it), a vector
# model's input is fixed. Scaled down, a part that grows faster falls faster: the floor squares it.
SIZE_POWER = {"image": 2, "tokens": 1, "vector": 0}
# Distinct synthetic batches core.engine.variant makes once and cycles: enough that nothing is trivially cached.
SYNTHETIC_POOL = 8
FIT_SHARE = 0.5  # a batch said to fit has a floor of at most half the memory: room for what the floor leaves out
CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


def host_memory_bytes() -> int | None:
    """This box's memory as a process here sees it: the physical RAM, or the cgroup's limit where a
    container is given less (cgroup v2, else v1); None where neither can be read."""
    try:
        total: int | None = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = None
    for path in CGROUP_LIMITS:
        try:
            with open(path) as fh:
                text = fh.read().strip()
        except OSError:
            continue
        if text.isdigit() and (total is None or int(text) < total):
            total = int(text)
        break
    return total


def _input_bytes_per_sample(info: ModelInfo, size: int) -> int:
    """One sample of the zoo's random input (core.engine.models.workload.random_batch) and its label."""
    if info.input_kind == "image":
        return 3 * size * size * 4 + 8
    if info.input_kind == "tokens":
        return 2 * size * 8  # the inputs and the targets, int64
    return size * 4 + 8


def _size_scale(info: ModelInfo, size: int) -> float:
    ratio = size / info.default_size
    power = SIZE_POWER[info.input_kind]
    return ratio ** (power if ratio >= 1 else 2 * power)


def race_memory_bytes(spec: Any, batch_size: int | None = None) -> int | None:
    """The least memory the race's eager variant holds at its peak (at `batch_size`, else the spec's);
    None where it is not known (a model that is not the zoo's, or a row without its figure)."""
    info = MODELS.get(spec.model) if isinstance(spec.model, str) and source_of(spec.model) == "zoo" else None
    if info is None or info.activation_bytes is None:
        return None
    batch = spec.batch_size if batch_size is None else batch_size
    size = spec.input_size or info.default_size
    kept = info.activation_bytes * _size_scale(info, size) * (AMP_SHARE if spec.precision.startswith("amp") else 1)
    pool = min(max(spec.steps_per_epoch, 1), SYNTHETIC_POOL) if spec.data == "synthetic" else 1
    data = pool * batch * _input_bytes_per_sample(info, size)
    return int(info.params * BYTES_PER_PARAMETER + batch * kept + data)


@dataclass(frozen=True)
class DeviceMemory:
    """How much memory the race's device has, and what a person calls that device."""

    total_bytes: int
    name: str


def device_memory(device: str, caps: Any) -> DeviceMemory | None:
    """The memory of `device` ("cpu", "cuda", as resolved for the race): the GPU's from the probe,
    the CPU's the host's RAM; None where it is not known (an older probe, an Apple GPU sharing the
    host's memory)."""
    if device == "cuda" and caps.cuda_memory_bytes:
        return DeviceMemory(caps.cuda_memory_bytes, caps.cuda_name or "this GPU")
    if device == "cpu" and caps.memory_bytes:
        return DeviceMemory(caps.memory_bytes, "this CPU")
    return None


def fitting_batch(spec: Any, total_bytes: int) -> int | None:
    """The largest power-of-two batch whose floor is at most FIT_SHARE of `total_bytes` (None: not
    even a batch of one)."""
    batch, fits = 1, None
    while batch < spec.batch_size:
        need = race_memory_bytes(spec, batch)
        if need is None or need > FIT_SHARE * total_bytes:
            break
        fits, batch = batch, batch * 2
    return fits


def memory_problem(spec: Any, device: str, caps: Any) -> str | None:
    """Why `spec` cannot fit in the memory of `device` (resolved for it), with the estimate and a
    batch that would fit; None where it may (or where either figure is unknown). The batch size's
    problem: validate names that field."""
    if isinstance(spec.batch_size, bool) or not isinstance(spec.batch_size, int) or spec.batch_size < 1:
        return None
    need = race_memory_bytes(spec)
    memory = device_memory(device, caps)
    if need is None or memory is None or need <= memory.total_bytes:
        return None
    smaller = fitting_batch(spec, memory.total_bytes)
    advice = (
        f"batch {words.number(smaller)} would fit"
        if smaller is not None
        else "a smaller input size or a smaller model would"
    )
    return (
        f"needs at least {words.bytes_(need)} of memory at batch {words.number(spec.batch_size)} "
        f"({spec.model}'s weights, Adam's state and what each sample keeps for backward); "
        f"{memory.name} has {words.bytes_(memory.total_bytes)}; {advice}"
    )
