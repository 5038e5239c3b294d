"""What went wrong, in words: a race's failures turned into a reason a person understands.

One place decides what a failure means: out of memory (with what to try), a failure of the machine
(a full disk, no file descriptors left: core.engine.machine_faults), a stance that stopped a recompile, a graph break under fullgraph, torch.compile's own errors (a finding about the model,
not a crash, when eager ran the same model fine), a model that cannot be built, a cancel.
"""

from __future__ import annotations

import torch

from core.engine.machine_faults import machine_fault
from core.engine.models.workload import ModelError, is_out_of_memory
from core.engine.spec import RunSpec

# Where torch.compile's own errors come from: Dynamo tracing (graph breaks under fullgraph,
# unsupported code), AOT autograd and functionalization, fake-tensor propagation, Inductor.
_COMPILER_MODULES = ("torch._dynamo", "torch._inductor", "torch._functorch", "torch._subclasses", "torch.fx")


def out_of_memory_errors() -> tuple[type[BaseException], ...]:
    """torch's out-of-memory exception classes: torch.OutOfMemoryError exists only from torch 2.5;
    before it, CUDA raised torch.cuda.OutOfMemoryError."""
    classes = [getattr(torch, "OutOfMemoryError", None), getattr(torch.cuda, "OutOfMemoryError", None)]
    return tuple(c for c in classes if isinstance(c, type))


def explain_failure(exc: BaseException, spec: RunSpec, device: torch.device) -> str:
    """A reason a person understands, with what to try next."""
    text = str(exc)
    first = _what_failed(text) or type(exc).__name__
    if isinstance(exc, KeyboardInterrupt):
        return "cancelled"
    if isinstance(exc, out_of_memory_errors()) or is_out_of_memory(exc):
        return f"out of memory at batch size {spec.batch_size} on {device}: try a smaller batch size or amp-bf16"
    fault = machine_fault(exc)
    if fault:
        return fault
    if "stance is 'fail_on_recompile'" in text:
        guard = next((line.strip()[2:] for line in text.splitlines() if line.strip().startswith("- ")), None)
        why = f" ({guard})" if guard else ""
        return (
            f"stance fail_on_recompile stopped a recompile{why}: the input shapes changed after the first compile; "
            "stance eager_on_recompile would run them eagerly, dynamic=true would compile once for all shapes"
        )
    if spec.fullgraph and "graph break" in text.lower():
        return f"fullgraph=True but the model has a graph break ({first}): turn fullgraph off to allow breaks"
    if type(exc).__module__.startswith(("torch._dynamo", "torch._inductor")):
        hint = "; try backend aot_eager to isolate Inductor" if spec.backend == "inductor" else ""
        return f"torch.compile failed ({type(exc).__name__}: {first}){hint}"
    if isinstance(exc, ModelError):
        return text
    return f"{type(exc).__name__}: {first}"


def _what_failed(text: str) -> str:
    """The first line of torch's message, with the error it wraps where that line only says a backend
    raised one ("backend='aot_eager_decomp_partition' raised: RuntimeError: ..."): what a bug report quotes."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    if lines[0].endswith("raised:") and len(lines) > 1:
        return f"{lines[0]} {lines[1]}"
    return lines[0]


def compile_failure(exc: BaseException, spec: RunSpec, device: torch.device) -> str | None:
    """The reason, if the compiled variant failed because torch.compile could not handle the model
    (eager ran the same model, weights and batches without error): a finding about the model, not
    a crash. Out of memory, a cancel, device errors and a failure of the machine (a full disk while
    Inductor wrote its code) are not compile failures: the race fails, it found nothing."""
    if isinstance(exc, KeyboardInterrupt) or isinstance(exc, out_of_memory_errors()) or is_out_of_memory(exc):
        return None
    if machine_fault(exc):
        return None
    if not type(exc).__module__.startswith(_COMPILER_MODULES):
        return None
    if "stance is 'fail_on_recompile'" in str(exc):  # a stop the run asked for, not the model's failing
        return None
    return explain_failure(exc, spec, device)


def build_failure(exc: BaseException, spec: RunSpec, device: torch.device) -> str:
    """Why the model could not be built (before any timing); out of memory says the model does not fit."""
    if not isinstance(exc, KeyboardInterrupt) and is_out_of_memory(exc):
        return f"{spec.model} does not fit in memory on {device}: building it failed ({first_line(exc)})"
    return explain_failure(exc, spec, device)


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message, or its type's name when it has none."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
