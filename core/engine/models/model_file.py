"""Your own model: a Python file defining `build_model()`, and optionally
`example_batch(batch_size, device)` and `loss(output, batch)`.

- `build_model()` returns a torch.nn.Module (random weights: the race sets the seed first).
- `example_batch(batch_size, device)` returns one training batch as `(inputs, target)`; the model
  is called as `model(inputs)` (a dict as keyword arguments, a tuple as positional ones). Both
  variants get the same batches: the race seeds torch before each call. Without it: images
  3xSxS (S: the run's input size, default 224) and class labels 0-9.
- `loss(output, batch)` returns a scalar tensor. Without it: cross-entropy between the output's
  logits (the output itself, its `.logits`, or its first item) and the target.

Running the file runs its code: in the app only where the host allows it (allow_custom_models).
Every mistake is reported early and by name (no build_model, it raised, the output does not fit
the loss), before any timed step.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from types import ModuleType

import torch
from torch import nn

from core.engine.models.sources import SOURCES, ModelName
from core.engine.models.workload import ModelError, Workload, logits_of, loss_fn, stage, to_device
from core.engine.models.zoo import NUM_CLASSES
from core.engine.spec import RunSpec

DEFAULT_IMAGE_SIZE = 224


def load_model_file(path: str) -> ModuleType:
    """Import the file as a module of its own; ModelError if it cannot run or lacks build_model."""
    label = os.path.basename(path)
    if not os.path.isfile(path):
        raise ModelError(f"model file {path} does not exist")
    digest = hashlib.sha256(os.path.abspath(path).encode()).hexdigest()[:12]
    module_name = f"compile_lab_model_file_{digest}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ModelError(f"{label} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickling look their module up here
    try:
        with stage(f"{label} failed while loading"):
            spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    if not callable(getattr(module, "build_model", None)):
        raise ModelError(f"{label} defines no build_model(): it must define build_model() returning a torch.nn.Module")
    return module


def file_workload(name: ModelName, spec: RunSpec) -> Workload:
    path = spec.model_file or ""
    label = os.path.basename(path)
    module = load_model_file(path)
    example_batch = getattr(module, "example_batch", None)
    user_loss = getattr(module, "loss", None)
    size = spec.image_size or DEFAULT_IMAGE_SIZE

    def build() -> nn.Module:
        with stage(f"build_model() in {label} raised"):
            model = module.build_model()
        if not isinstance(model, nn.Module):
            raise ModelError(f"build_model() in {label} must return a torch.nn.Module (got {type(model).__name__})")
        return model

    def make_batch(batch_size: int, gen: torch.Generator, device: torch.device):
        if not callable(example_batch):
            x = torch.randn((batch_size, 3, size, size), generator=gen)
            return to_device((x, torch.randint(0, NUM_CLASSES, (batch_size,), generator=gen)), device)
        seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen))
        cuda = [device.index or 0] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=cuda), stage(f"example_batch() in {label} raised"):
            torch.manual_seed(seed)  # the same batches for both variants, whatever RNG the file uses
            batch = example_batch(batch_size, device)
        if not isinstance(batch, (tuple, list)) or len(batch) != 2:
            raise ModelError(
                f"example_batch() in {label} must return (inputs, target); got {type(batch).__name__}"
                + (f" of {len(batch)} items" if isinstance(batch, (tuple, list)) else "")
            )
        return to_device(tuple(batch), device)

    def loss(output, batch) -> torch.Tensor:
        if callable(user_loss):
            return user_loss(output, batch)
        return loss_fn(logits_of(output), batch[1])

    facts = {
        "model": spec.model,
        "source": "file",
        "task": "custom" if callable(user_loss) else "image-classification",
        "input_kind": "custom" if callable(example_batch) else "image",
        "default_size": None if callable(example_batch) else DEFAULT_IMAGE_SIZE,
        "default_batch_size": SOURCES["file"].default_batch_size,
        "input": "example_batch()" if callable(example_batch) else f"images 3x{size}x{size} (no example_batch)",
        "file": label,
    }
    return Workload(
        spec.model,
        "file",
        facts["task"],
        facts["input_kind"],
        None if callable(example_batch) else size,
        build,
        make_batch,
        loss,
        facts,
    )
