"""Which source builds a spec's model: `workload_for` reads the model name's source row
(core.engine.models.sources.SOURCES) and imports that source's module only then, so timm and
transformers load only for their own models; `describe_model` is what a lookup shows before launch.
"""

from __future__ import annotations

import importlib
from typing import Any

import torch

from core.engine import words
from core.engine.models.sources import SOURCES, describe_facts, parse_model_name
from core.engine.models.workload import Workload, describe_inputs, parameter_count, stage
from core.engine.spec import RunSpec


def workload_for(spec: RunSpec) -> Workload:
    """The workload a spec describes. Raises ModelError when its model cannot be built as asked."""
    name = parse_model_name(spec.model)
    module, function = SOURCES[name.source].workload.split(":")
    return getattr(importlib.import_module(module), function)(name, spec)


def describe_model(spec: RunSpec) -> dict[str, Any]:
    """What the app shows before launch (parameters, input, task), from building the model:
    on the meta device for library models; for a model file, for real on the CPU, with one
    forward pass and loss on a batch of 2 so its mistakes show before a race is queued."""
    workload = workload_for(spec)
    facts = dict(workload.facts)
    if workload.source == "file":
        model = workload.build()
        facts["params"] = sum(p.numel() for p in model.parameters())
        batch = workload.make_batch(2, torch.Generator().manual_seed(0), torch.device("cpu"))
        facts["input"] = f"batch of 2: {describe_inputs(batch[0])}"
        workload.checked_step_loss(model, batch)
    else:
        with stage(f"building {spec.model}"):
            facts["params"] = parameter_count(workload)
    facts["summary"] = describe_facts(facts)
    return facts


def model_size_problem(spec: RunSpec, max_parameters: int) -> str | None:
    """Why the spec's model is larger than a host allows (max_parameters), counted on the meta device
    before anything is allocated; None within it. A model that cannot be built on the meta device
    cannot be counted first, and is refused."""
    workload = workload_for(spec)
    try:
        with torch.device("meta"):
            model = workload.build()
        count = sum(p.numel() for p in model.parameters())
    except Exception:  # noqa: BLE001 - some models compute at init: not counted without building them
        return (
            f"model: {spec.model} cannot be counted before it is built, and this host allows at most "
            f"{words.count(max_parameters, 'parameter')}"
        )
    if count > max_parameters:
        return (
            f"model: {spec.model} has {words.count(count, 'parameter')}; this host allows at most "
            f"{words.number(max_parameters)}"
        )
    return None
