"""What a race trains, built: a Workload (a model, the batches it eats and the loss it minimises),
the zoo's networks and their random batches, and `workload_for`, which picks the source that builds a
spec's model (importing timm or transformers only for their own models).

The trainer asks a Workload to build the model, make a batch and compute a step's loss, so one training
loop serves every source (the zoo, timm, Hugging Face transformers, a user's module file) and both
variants see identical weights and batches. Only processes that train import this module: the zoo's
rows (core.engine.models.sources) describe the models without torch.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from core.engine import words
from core.engine.models.sources import (
    NUM_CLASSES,
    SOURCES,
    VOCAB_SIZE,
    ModelName,
    describe_facts,
    get_model_info,
    parse_model_name,
)
from core.engine.spec import RunSpec

# ----------------------------------------------------------------------
# The floor every model source builds on: a Workload (what a race trains: a model, the batches
# it eats and the loss it minimises), ModelError, the loss, and the helpers a batch needs.
#
# The trainer asks a Workload to build the model, make a batch and compute a step's loss, so one
# training loop serves all sources (the zoo, timm, Hugging Face transformers, a user's module file)
# and both variants still see identical weights and batches. Building and checking a model that is
# not the zoo's can fail in ways a person must understand ("timm has no model 'x'", "build_model()
# raised ..."): those failures are ModelError, whose text becomes the run's error as is.
#
# This module imports no source: each source's module imports it (core.engine.models.workload picks
# the source). Torch code: only workers and the CLI's own races import it.

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


# ----------------------------------------------------------------------
# The zoo's networks themselves (torch code), and `build_model`. Only processes that train import
# this module; the rows in core.engine.models.sources describe the models without importing torch, so the
# app's server stays light, and each row names its builder here. The dependency runs one way: this
# module reads the rows, the rows never import it.


class SmallCNN(nn.Module):
    """Two conv blocks and a linear head: the classic 'first CNN'."""

    def __init__(self, size: int):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.BatchNorm2d(64),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.head = nn.Linear(64 * (size // 4) ** 2, NUM_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


class PointwiseBlock(nn.Module):
    """Two residual gated-activation layers (GELU x sigmoid, tanh) after LayerNorms, only one
    with a matmul: many elementwise ops per matmul, the memory traffic operator fusion removes."""

    def __init__(self, width: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.norm2 = nn.LayerNorm(width)
        self.linear = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        x = x + torch.tanh(F.gelu(h) * torch.sigmoid(1.5 * h)) * 0.5
        h = self.linear(self.norm2(x))
        return x + torch.tanh(F.gelu(h) * torch.sigmoid(h)) * 0.5


class PointwiseMLP(nn.Module):
    """Residual MLP of pointwise-heavy blocks: the zoo's model that compile speeds up on CPU."""

    def __init__(self, width: int, depth: int = 2):
        super().__init__()
        self.blocks = nn.Sequential(*[PointwiseBlock(width) for _ in range(depth)])
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, NUM_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.blocks(x)))


class CausalSelfAttention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class GPTBlock(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    """A small GPT-style causal language model (nanoGPT's shape) using fused SDPA attention."""

    def __init__(self, max_len: int, dim: int = 128, heads: int = 4, layers: int = 2):
        super().__init__()
        self.tok = nn.Embedding(VOCAB_SIZE, dim)
        self.pos = nn.Embedding(max_len, dim)
        self.blocks = nn.Sequential(*[GPTBlock(dim, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, VOCAB_SIZE, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.blocks(self.tok(idx) + self.pos(pos))
        return self.head(self.ln(x))


def _torchvision(name: str, sized: bool = False) -> Callable[[int], nn.Module]:
    """A builder of torchvision's `name` with a 10-class head; `sized`: the model fixes its image
    size at construction (ViT's position embeddings)."""

    def build(size: int) -> nn.Module:
        import torchvision.models as tvm

        extra = {"image_size": size} if sized else {}
        return getattr(tvm, name)(weights=None, num_classes=NUM_CLASSES, **extra)

    return build


def mlp(size: int) -> nn.Module:
    return nn.Sequential(
        nn.Linear(size, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, NUM_CLASSES)
    )


resnet18 = _torchvision("resnet18")
resnet50 = _torchvision("resnet50")
mobilenet_v3_small = _torchvision("mobilenet_v3_small")
convnext_tiny = _torchvision("convnext_tiny")
vit_b_16 = _torchvision("vit_b_16", sized=True)


def build_model(name: str, size: int | None = None) -> nn.Module:
    """Build a randomly initialised model for the given input size (default: the model's)."""
    info = get_model_info(name)
    builder = globals()[info.builder]  # the row names its builder in this module
    return builder(size if size is not None else info.default_size)


def zoo_parameter_count(name: str, size: int | None = None) -> int:
    """Parameters of a model built on the meta device (no memory, no init cost)."""
    with torch.device("meta"):
        model = build_model(name, size)
    return sum(p.numel() for p in model.parameters())


# ----------------------------------------------------------------------
# A zoo model as a race's workload: its network (core.engine.models.workload) and random batches
# of the input its row names (images, tokens or feature vectors).


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


# ----------------------------------------------------------------------
# Which source builds a spec's model: `workload_for` reads the model name's source row
# (core.engine.models.sources.SOURCES) and imports that source's module only then, so timm and
# transformers load only for their own models; `describe_model` is what a lookup shows before launch.


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
