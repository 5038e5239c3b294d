"""The floor every model source builds on: a Workload (what a race trains: a model, the batches
it eats and the loss it minimises), ModelError, the loss, and the helpers a batch needs.

The trainer asks a Workload to build the model, make a batch and compute a step's loss, so one
training loop serves all sources (the zoo, timm, Hugging Face transformers, a user's module file)
and both variants still see identical weights and batches. Building and checking a model that is
not the zoo's can fail in ways a person must understand ("timm has no model 'x'", "build_model()
raised ..."): those failures are ModelError, whose text becomes the run's error as is.

This module imports no source: each source's module imports it (core.engine.models.resolve picks
the source). Torch code: only workers and the CLI's own races import it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

Batch = tuple[Any, Any]  # (inputs, target): inputs a tensor, a tuple of tensors or a dict of keyword tensors


class ModelError(Exception):
    """A model that cannot be raced as asked; the message is for a person, with what to try."""


def loss_fn(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Cross-entropy on class logits (batch, classes) or token logits (batch, time, vocab); targets
    of -100 are ignored (masked language models predict only some tokens)."""
    if logits.dim() == 3:
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), target.reshape(-1))
    return F.cross_entropy(logits.float(), target)


def logits_of(output: Any) -> torch.Tensor:
    """The logits in a model's output: the tensor itself, `.logits` (transformers), or the first item."""
    if isinstance(output, torch.Tensor):
        return output
    if hasattr(output, "logits"):
        return output.logits
    if isinstance(output, dict) and "logits" in output:
        return output["logits"]
    if isinstance(output, (tuple, list)) and output:
        return logits_of(output[0])
    raise TypeError(f"cannot find logits in a model output of type {type(output).__name__}")


def call_model(model: Any, inputs: Any) -> Any:
    """model(inputs); a dict is passed as keyword arguments, a tuple or list as positional ones."""
    if isinstance(inputs, dict):
        return model(**inputs)
    if isinstance(inputs, (tuple, list)):
        return model(*inputs)
    return model(inputs)


def to_device(value: Any, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {k: to_device(v, device) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(to_device(v, device) for v in value)
    return value


def batch_samples(inputs: Any) -> int:
    """How many samples a batch's inputs hold: the first dimension of its first tensor."""
    for value in tensors_in(inputs):
        return int(value.shape[0]) if value.dim() else 1
    return 0


def tensors_in(value: Any) -> Iterator[torch.Tensor]:
    """Every tensor in a batch part: a tensor, or the tensors in a dict, tuple or list, in order."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from tensors_in(v)
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from tensors_in(v)


def describe_inputs(inputs: Any) -> str:
    """'float32 2x3x224x224' or 'input_ids: int64 2x128' for a batch's inputs."""

    def one(t: torch.Tensor) -> str:
        return f"{str(t.dtype).replace('torch.', '')} {'x'.join(map(str, t.shape)) or 'scalar'}"

    if isinstance(inputs, torch.Tensor):
        return one(inputs)
    if isinstance(inputs, dict):
        return ", ".join(f"{k}: {one(v)}" for k, v in inputs.items() if isinstance(v, torch.Tensor))
    return ", ".join(one(t) for t in tensors_in(inputs))


def is_out_of_memory(exc: BaseException) -> bool:
    """torch's out-of-memory errors, Python's MemoryError, and the CPU allocator's refusal."""
    classes = tuple(
        c
        for c in (getattr(torch, "OutOfMemoryError", None), getattr(torch.cuda, "OutOfMemoryError", None), MemoryError)
        if isinstance(c, type)
    )
    text = str(exc).lower()
    return isinstance(exc, classes) or any(
        s in text for s in ("out of memory", "can't allocate memory", "not enough memory")
    )


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@contextlib.contextmanager
def stage(what: str):
    """Turn a failure inside into ModelError('<what>: <Type>: <first line>'). Out of memory and
    Ctrl-C pass through: the trainer says those in its own words."""
    try:
        yield
    except ModelError:
        raise
    except Exception as exc:  # noqa: BLE001 - re-raised with a reason a person understands
        if is_out_of_memory(exc):
            raise
        raise ModelError(f"{what}: {type(exc).__name__}: {first_line(exc)}") from exc


@dataclass
class Workload:
    """One model of any source, ready to race. `make_batch(batch_size, generator, device)` returns
    (inputs, target) on the device, the same for the same generator state; `loss(output, batch)`
    returns a scalar tensor."""

    model: str
    source: str
    task: str
    input_kind: str  # "image" (3xSxS), "tokens", "vector", or "custom" (a model file's own batch)
    size: int | None  # image side or sequence length actually used; None for a custom batch
    build: Callable[[], nn.Module]
    make_batch: Callable[[int, torch.Generator, torch.device], Batch]
    loss: Callable[[Any, Batch], torch.Tensor]
    facts: dict[str, Any] = field(default_factory=dict)  # what a lookup shows before launch

    def step_loss(self, runner: Any, batch: Batch) -> torch.Tensor:
        return self.loss(call_model(runner, batch[0]), batch)

    def checked_step_loss(self, runner: Any, batch: Batch) -> torch.Tensor:
        """step_loss, with each part's failure said in words (the untimed first step)."""
        with stage(f"{self.model} failed on its input ({describe_inputs(batch[0])})"):
            output = call_model(runner, batch[0])
        with stage(f"the output of {self.model} does not fit the loss"):
            loss = self.loss(output, batch)
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            shape = "x".join(map(str, loss.shape)) if isinstance(loss, torch.Tensor) else type(loss).__name__
            raise ModelError(f"the loss of {self.model} must be a single number (a scalar tensor), got {shape}")
        return loss


def parameter_count(workload: Workload, on_meta: bool = True) -> int:
    """Parameters of the built model; on the meta device where the model allows it (no memory)."""
    if on_meta:
        try:
            with torch.device("meta"):
                model = workload.build()
            return sum(p.numel() for p in model.parameters())
        except Exception:  # noqa: BLE001 - some models compute at init; build for real instead
            pass
    return sum(p.numel() for p in workload.build().parameters())
