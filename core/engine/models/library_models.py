"""Models from outside the zoo as race workloads, always with random weights: timm (`timm:<name>`),
Hugging Face transformers architectures built from their configuration (`hf:<name>`), and a user's
own Python file (`file:<name>`: `build_model()`, optionally `example_batch` and `loss`).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import sys
from types import ModuleType
from typing import Any

import torch
from torch import nn

from core.engine.models.sources import (
    DEFAULT_SEQUENCE_LENGTH,
    KNOWN_HF_CONFIGS,
    MIN_IMAGE_SIZE,
    NUM_CLASSES,
    SOURCES,
    ModelName,
    library_problem,
)
from core.engine.models.workload import ModelError, Workload, logits_of, loss_fn, stage, to_device
from core.engine.spec import MAX_INPUT_SIZE, RunSpec

# ----------------------------------------------------------------------
# timm and Hugging Face transformers models as race workloads, always with random weights.
#
# - `timm:<name>`: timm.create_model(name, pretrained=False); the input size comes from the model's
#   pretrained configuration (its default input size), the task is image classification.
# - `hf:<name>`: a transformers architecture built from its configuration (never its weights):
#   a checkpoint Compile Lab knows (sources.KNOWN_HF_CONFIGS), a model type with the library's
#   defaults ("llama"), or a configuration already on this machine (or fetched, config.json only,
#   when the run asks to download). The task comes from the configuration: causal LM, masked LM,
#   sequence-to-sequence, or image classification; the vocabulary and maximum length too.
#
# Both libraries are optional (requirements-models.txt) and imported only here, inside a worker
# (core.engine.models.workload imports this module only for a timm: or hf: model).

MASKED_FRACTION = 0.15  # BERT's share of predicted tokens
# Models whose position ids start after the padding index, so two positions are never used.
_POSITIONS_AFTER_PADDING = ("roberta", "xlm-roberta", "camembert", "roberta-prelayernorm", "xmod", "data2vec-text")


def _require(source: str):
    problem = library_problem(source)
    if problem:
        raise ModelError(problem)


# --- timm ---------------------------------------------------------------------------------------


def timm_workload(name: ModelName, spec: RunSpec) -> Workload:
    _require("timm")
    import timm

    if not timm.is_model(name.name):
        raise ModelError(
            f"timm {timm.__version__} has no model {name.name!r}: search its names with "
            f"`python -m core models --search {name.name.split('.')[0][:12]}`"
        )
    cfg = timm.get_pretrained_cfg(name.name)
    input_size = tuple(getattr(cfg, "input_size", None) or (3, 224, 224))
    default = int(input_size[-1])
    fixed = bool(getattr(cfg, "fixed_input_size", False))
    min_size = int((getattr(cfg, "min_input_size", None) or (3, MIN_IMAGE_SIZE, MIN_IMAGE_SIZE))[-1])
    size = spec.image_size or default
    kwargs: dict[str, Any] = dict(name.overrides)
    if fixed and size != default:
        kwargs["img_size"] = size  # ViT-like models fix their size at construction; most take img_size

    def build():
        with stage(f"timm could not build {name.name} (image size {size}, settings {kwargs or 'none'})"):
            return timm.create_model(name.name, pretrained=False, **kwargs)

    def make_batch(batch_size: int, gen: torch.Generator, device: torch.device):
        x = torch.randn((batch_size, 3, size, size), generator=gen)
        return to_device((x, torch.randint(0, NUM_CLASSES, (batch_size,), generator=gen)), device)

    facts = {
        "model": spec.model,
        "source": "timm",
        "task": "image-classification",
        "input_kind": "image",
        "default_size": default,
        "min_size": min_size,
        "max_size": MAX_INPUT_SIZE,
        "fixed_size": fixed,
        "default_batch_size": SOURCES["timm"].default_batch_size,
        "input": f"images 3x{size}x{size}" + (" (the model's default)" if size == default else ""),
        "library": f"timm {timm.__version__}",
    }
    return Workload(
        spec.model,
        "timm",
        "image-classification",
        "image",
        size,
        build,
        make_batch,
        lambda output, batch: loss_fn(logits_of(output), batch[1]),
        facts,
    )


def timm_model_names() -> list[str]:
    """Every architecture this timm can build (pretrained tags select a configuration too)."""
    _require("timm")
    import timm

    return list(timm.list_models())


# --- Hugging Face transformers --------------------------------------------------------------------


@contextlib.contextmanager
def hub_offline(offline: bool = True):
    """No request to the Hugging Face Hub while this runs (`offline`): `local_files_only` alone keeps
    transformers from downloading a file, but huggingface_hub still builds its request headers, and
    they can ask the Hub for a list of agents. HF_HUB_OFFLINE stops every request; it is read when
    huggingface_hub is imported (so the variable is set for a later import) and at each request."""
    if not offline:
        yield
        return
    import huggingface_hub.constants as hub

    saved = os.environ.get("HF_HUB_OFFLINE"), hub.HF_HUB_OFFLINE
    os.environ["HF_HUB_OFFLINE"] = "1"
    hub.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        if saved[0] is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = saved[0]
        hub.HF_HUB_OFFLINE = saved[1]


def hf_config(name: ModelName, download: bool = False):
    """The configuration for `hf:<name>` with its settings applied. Never fetches weights; fetches
    a config.json only when `download` is true (and HF_HUB_OFFLINE is not set): otherwise nothing
    here reaches the network (hub_offline)."""
    _require("hf")
    from transformers import AutoConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    overrides = dict(name.overrides)
    if name.name in KNOWN_HF_CONFIGS or name.name in CONFIG_MAPPING_NAMES:
        model_type, known = KNOWN_HF_CONFIGS.get(name.name, (name.name, {}))
        _check_settings(name, AutoConfig.for_model(model_type), overrides)
        with stage(f"hf:{name.name}: the configuration does not take these settings"):
            return AutoConfig.for_model(model_type, **{**known, **overrides})
    try:
        with hub_offline(not download):
            config = AutoConfig.from_pretrained(name.name, local_files_only=not download)
    except (OSError, ValueError) as exc:
        known = ", ".join(list(KNOWN_HF_CONFIGS)[:6])
        where = (
            f"the configuration of hf:{name.name} could not be fetched either"
            if download
            else f"hf:{name.name} is unknown here: no model type or checkpoint Compile Lab knows has that name, and "
            "its configuration is not on this machine (nothing was fetched: a race with --download fetches its "
            "config.json)"
        )
        raise ModelError(
            f"{where}: use a checkpoint Compile Lab knows ({known}, ...), "
            f"a model type with its default sizes (hf:llama, hf:bert, hf:t5, ...), or settings like "
            f"hf:gpt2:n_layer=2 ({type(exc).__name__})"
        ) from None
    if overrides:
        _check_settings(name, config, overrides)
        with hub_offline():
            config = AutoConfig.from_pretrained(name.name, local_files_only=True, **overrides)
    return config


def _check_settings(name: ModelName, config: Any, overrides: dict[str, Any]) -> None:
    """A misspelt setting would be kept silently by transformers and change nothing: refuse it."""
    known = set(config.to_dict()) | set(getattr(config, "attribute_map", {}) or {})
    unknown = [k for k in overrides if k not in known]
    if unknown:
        raise ModelError(
            f"hf:{name.name} has no setting {unknown[0]!r}; its settings include: "
            + ", ".join(sorted(k for k in config.to_dict() if not k.startswith("_"))[:40])
        )


def hf_task(config: Any) -> str:
    """What a configuration's model is trained for: its declared architecture when it has one,
    else the first head transformers has for its model type."""
    from transformers.models.auto import modeling_auto as auto

    model_type = config.model_type
    encoder_decoder = bool(getattr(config, "is_encoder_decoder", False))
    seq2seq = model_type in auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES
    for arch in getattr(config, "architectures", None) or []:
        if arch.endswith("ForMaskedLM"):
            return "masked-lm"
        if arch.endswith(("ForCausalLM", "LMHeadModel")) and not encoder_decoder:
            return "causal-lm"
        if arch.endswith("ForConditionalGeneration") and encoder_decoder and seq2seq:
            return "seq2seq"
        if arch.endswith("ForImageClassification"):
            return "image-classification"
    if encoder_decoder and seq2seq:
        return "seq2seq"
    if model_type in auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        return "masked-lm"  # encoders (BERT, RoBERTa) were pretrained this way, though some also have a causal head
    if model_type in auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return "causal-lm"
    if model_type in auto.MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES:
        return "image-classification"
    raise ModelError(
        f"{model_type} models have no head Compile Lab trains: it races causal LM, masked LM, "
        "sequence-to-sequence and image classification models"
    )


def _max_positions(config: Any) -> int | None:
    for key in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        value = getattr(config, key, None)
        if isinstance(value, int) and value > 0:
            if config.model_type in _POSITIONS_AFTER_PADDING:
                value -= (getattr(config, "pad_token_id", None) or 0) + 1
            return value
    return None  # relative positions (T5): no limit of its own


HF_DEFAULT_IMAGE_SIZE = 224  # ImageNet's: what a configuration without an image_size (ResNet, ConvNeXt) was trained at


def _image_size(config: Any) -> int:
    """The image side a vision configuration was made for: its image_size (an int, or a (height,
    width) pair), else ImageNet's 224 (convolutional configurations have no size of their own)."""
    value = getattr(config, "image_size", None)
    if isinstance(value, (list, tuple)) and value:
        value = value[0]
    if isinstance(value, int) and value > 0:
        return value
    if value is None:
        return HF_DEFAULT_IMAGE_SIZE
    raise ModelError(f"hf:{config.model_type}'s image_size {value!r} is not a size in pixels")


def hf_workload(name: ModelName, spec: RunSpec) -> Workload:
    config = hf_config(name, download=spec.download)
    task = hf_task(config)
    if hasattr(config, "use_cache"):
        config.use_cache = False  # training: no key/value cache in the outputs
    import transformers

    auto_class = {
        "causal-lm": transformers.AutoModelForCausalLM,
        "masked-lm": transformers.AutoModelForMaskedLM,
        "seq2seq": transformers.AutoModelForSeq2SeqLM,
        "image-classification": transformers.AutoModelForImageClassification,
    }[task]
    facts: dict[str, Any] = {
        "model": spec.model,
        "source": "hf",
        "task": task,
        "model_type": config.model_type,
        "default_batch_size": SOURCES["hf"].default_batch_size,
        "library": f"transformers {transformers.__version__}",
    }
    if task == "image-classification":
        default = _image_size(config)
        size = spec.image_size or default
        if hasattr(config, "image_size"):  # ViTs size their position embeddings from it; conv nets take any size
            config.image_size = size
        classes = min(int(getattr(config, "num_labels", 2) or 2), NUM_CLASSES)
        facts.update(
            input_kind="image",
            default_size=default,
            min_size=int(getattr(config, "patch_size", 1) or 1),
            max_size=MAX_INPUT_SIZE,
            input=f"images 3x{size}x{size}",
        )

        def make_batch(batch_size: int, gen: torch.Generator, device: torch.device):
            x = torch.randn((batch_size, 3, size, size), generator=gen)
            y = torch.randint(0, classes, (batch_size,), generator=gen)
            return to_device(({"pixel_values": x}, y), device)

    else:
        vocab = int(config.vocab_size)
        limit = _max_positions(config)
        default = min(limit or DEFAULT_SEQUENCE_LENGTH, DEFAULT_SEQUENCE_LENGTH)
        size = spec.image_size or default
        if limit is not None and size > limit:
            raise ModelError(f"{spec.model} takes at most {limit} tokens (its maximum positions); got {size}")
        start = getattr(config, "decoder_start_token_id", None)
        start = int(start if start is not None else (getattr(config, "pad_token_id", None) or 0))
        facts.update(
            input_kind="tokens",
            default_size=default,
            min_size=2,
            max_size=limit or MAX_INPUT_SIZE,
            vocab_size=vocab,
            input=f"{size} tokens from a vocabulary of {vocab:,}",
        )

        def make_batch(batch_size: int, gen: torch.Generator, device: torch.device):
            return to_device(_token_batch(task, batch_size, size, vocab, start, gen), device)

    def build():
        with stage(f"transformers could not build {spec.model} ({config.model_type}, {task})"):
            return auto_class.from_config(config)

    return Workload(
        spec.model,
        "hf",
        task,
        facts["input_kind"],
        size,
        build,
        make_batch,
        lambda output, batch: loss_fn(logits_of(output), batch[1]),
        facts,
    )


def _token_batch(task: str, batch_size: int, size: int, vocab: int, start: int, gen: torch.Generator):
    """Random tokens shaped for the task: next-token targets (causal), 15% of positions to predict
    (masked, -100 elsewhere), or a source and a target sequence (seq2seq, teacher forcing)."""
    if task == "causal-lm":
        tokens = torch.randint(0, vocab, (batch_size, size + 1), generator=gen)
        return {"input_ids": tokens[:, :-1].contiguous()}, tokens[:, 1:].contiguous()
    if task == "masked-lm":
        ids = torch.randint(0, vocab, (batch_size, size), generator=gen)
        chosen = torch.rand((batch_size, size), generator=gen) < MASKED_FRACTION
        chosen[:, 0] = True  # every row predicts at least one token
        return {"input_ids": ids}, torch.where(chosen, ids, torch.full_like(ids, -100))
    source = torch.randint(0, vocab, (batch_size, size), generator=gen)
    target = torch.randint(0, vocab, (batch_size, size), generator=gen)
    decoder_in = torch.cat([torch.full((batch_size, 1), start, dtype=target.dtype), target[:, :-1]], dim=1)
    return {"input_ids": source, "decoder_input_ids": decoder_in}, target


# ----------------------------------------------------------------------
# Your own model: a Python file defining `build_model()`, and optionally
# `example_batch(batch_size, device)` and `loss(output, batch)`.
#
# - `build_model()` returns a torch.nn.Module (random weights: the race sets the seed first).
# - `example_batch(batch_size, device)` returns one training batch as `(inputs, target)`; the model
#   is called as `model(inputs)` (a dict as keyword arguments, a tuple as positional ones). Both
#   variants get the same batches: the race seeds torch before each call. Without it: images
#   3xSxS (S: the run's input size, default 224) and class labels 0-9.
# - `loss(output, batch)` returns a scalar tensor. Without it: cross-entropy between the output's
#   logits (the output itself, its `.logits`, or its first item) and the target.
#
# Running the file runs its code: in the app only where the host allows it (allow_custom_models).
# Every mistake is reported early and by name (no build_model, it raised, the output does not fit
# the loss), before any timed step.

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
