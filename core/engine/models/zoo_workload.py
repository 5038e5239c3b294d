"""A zoo model as a race's workload: its network (core.engine.models.networks) and random batches
of the input its row names (images, tokens or feature vectors)."""

from __future__ import annotations

import torch

from core.engine.models.networks import build_model
from core.engine.models.sources import ModelName
from core.engine.models.workload import Batch, Workload, loss_fn, to_device
from core.engine.models.zoo import NUM_CLASSES, VOCAB_SIZE, get_model_info
from core.engine.spec import RunSpec


def random_batch(kind: str, batch_size: int, size: int, gen: torch.Generator) -> Batch:
    """One random batch for a zoo model taking `kind` input ("image", "tokens", "vector")."""
    if kind == "tokens":
        tokens = torch.randint(0, VOCAB_SIZE, (batch_size, size + 1), generator=gen)
        return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    shape = (batch_size, 3, size, size) if kind == "image" else (batch_size, size)
    return torch.randn(shape, generator=gen), torch.randint(0, NUM_CLASSES, (batch_size,), generator=gen)


def zoo_workload(name: ModelName, spec: RunSpec) -> Workload:
    info = get_model_info(name.name)
    size = spec.input_size
    return Workload(
        model=spec.model,
        source="zoo",
        task="causal-lm" if info.input_kind == "tokens" else "image-classification",
        input_kind=info.input_kind,
        size=size,
        build=lambda: build_model(spec.model, size),
        make_batch=lambda bs, gen, device: to_device(random_batch(info.input_kind, bs, size, gen), device),
        loss=lambda output, batch: loss_fn(output, batch[1]),
        facts={"params": info.params, "default_size": info.default_size, "description": info.description},
    )
