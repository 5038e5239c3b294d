"""Every model a race can name, said torch-free: where it comes from (the zoo, timm, a Hugging Face
architecture, the user's own file: one row of SOURCES each), the zoo's own rows (builder, input,
defaults, repeated block, rough CPU figures), and compile scope (the whole model, or each of its
repeated blocks: regional compilation). Pure metadata, so validation and the app list and check
models without building one.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import re
from dataclasses import dataclass, field
from typing import Any

# ----------------------------------------------------------------------
# The zoo: every built-in model a race can train, one keyword row each.
#
# A row is all the app knows about a model without building it: its builder, its input and
# defaults, its repeated block (regional compile, core.engine.models.sources), rough CPU figures
# for the duration estimate (core.engine.race_estimates) and whether the caches demo offers it. Pure
# metadata (no torch import), so validation and the app can list models, sizes and parameter counts
# without loading PyTorch; the builders live in core.engine.models.workload, which reads these rows
# (never the other way round). Models get random weights: nothing is downloaded.
#
# Adding a model is one row here plus its builder in networks.

NUM_CLASSES = 10  # CIFAR-10-sized heads everywhere: the tutorial's setup
VOCAB_SIZE = 512  # token models predict the next token from this vocabulary
FEATURES = 512  # the MLP takes this many input features
POINTWISE_WIDTH = 256  # narrow and wide-batched: elementwise work outweighs the matmuls


@dataclass(frozen=True)
class ModelInfo:
    """What the rest of the app needs to know about a zoo model without building it."""

    name: str
    input_kind: str  # "image" (3xSxS), "tokens" (sequence of S ids), "vector" (S features)
    default_size: int
    min_size: int
    size_multiple: int
    default_batch_size: int
    params: int  # at the default input size; tests check it against the built model
    description: str
    builder: str  # a callable in core.engine.models.workload taking the input size
    # Regional compile: the class name of the block the model repeats, and what a person calls it.
    block: str | None = None
    block_name: str | None = None
    # How many different blocks its repeated blocks come in (parameter and buffer shapes, settings
    # such as a drop-path rate): 1 where one compiled block serves them all, what regional compile
    # saves on; more where each kind compiles its own graph (tests check it against the built model).
    block_kinds: int | None = None
    # Rough steady step (s) at the default batch and size, and cold compile (s), on a 2-core x86
    # CPU: measured for the small models; None where no figure was measured. "About how long" only.
    cpu_step_s: float | None = None
    cpu_compile_s: float | None = None
    # What one training sample keeps for its backward pass at the default size, in fp32 bytes: every
    # tensor autograd saves in a forward and loss, counted at two batch sizes (docs/benchmarks.md).
    # The memory guard's floor (core.engine.race_memory); None: not known, never refused.
    activation_bytes: int | None = None
    caches_demo: bool = False  # quick enough to compile for the caches demo (explain.caches)

    @property
    def size_meaning(self) -> str:
        return {
            "image": "image side in pixels",
            "tokens": "sequence length in tokens",
            "vector": "number of input features",
        }[self.input_kind]

    def size_problem(self, size: int) -> str | None:
        """Why this model cannot take `size` as its input size, or None if it can."""
        if self.input_kind == "vector" and size != self.default_size:
            return f"{self.name} takes exactly {self.default_size} input features (got {size})"
        if size < self.min_size:
            return f"{self.name} needs an input size of at least {self.min_size} ({self.size_meaning}; got {size})"
        if size % self.size_multiple:
            return (
                f"{self.name} needs an input size that is a multiple of {self.size_multiple} "
                f"({self.size_meaning}; got {size})"
            )
        return None


# Minimum image sizes: 32 px is the smallest input for which every stride-2 stage of these
# networks still has a feature map to halve (CIFAR-10's native size); smaller inputs collapse
# to 1x1 early and, for BatchNorm models, fail at small batch sizes.
MODELS: dict[str, ModelInfo] = {
    info.name: info
    for info in [
        ModelInfo(
            name="mlp",
            input_kind="vector",
            default_size=FEATURES,
            min_size=FEATURES,
            size_multiple=1,
            default_batch_size=256,
            params=1_585_162,
            description="3-layer ReLU MLP",
            builder="mlp",
            cpu_step_s=0.05,
            cpu_compile_s=20,
            caches_demo=True,
            activation_bytes=10 * 1024,
        ),
        ModelInfo(
            name="small_cnn",
            input_kind="image",
            default_size=32,
            min_size=8,
            size_multiple=4,
            default_batch_size=128,
            params=60_554,
            description="2 conv blocks + linear head",
            builder="SmallCNN",
            cpu_step_s=0.15,
            cpu_compile_s=20,
            caches_demo=True,
            activation_bytes=540 * 1024,
        ),
        ModelInfo(
            name="pointwise_mlp",
            input_kind="vector",
            default_size=POINTWISE_WIDTH,
            min_size=POINTWISE_WIDTH,
            size_multiple=1,
            default_batch_size=4096,
            params=136_714,
            description="residual MLP, LayerNorm + GELU*sigmoid + tanh: pointwise ops Inductor fuses",
            builder="PointwiseMLP",
            block="PointwiseBlock",
            block_name="pointwise block",
            block_kinds=1,
            cpu_step_s=0.045,
            cpu_compile_s=10,
            caches_demo=True,
            activation_bytes=24 * 1024,
        ),
        ModelInfo(
            name="resnet18",
            input_kind="image",
            default_size=32,
            min_size=32,
            size_multiple=1,
            default_batch_size=64,
            params=11_181_642,
            description="torchvision ResNet-18",
            builder="resnet18",
            block="BasicBlock",
            block_name="residual block",
            block_kinds=7,
            cpu_step_s=0.25,
            cpu_compile_s=35,
            caches_demo=True,
            activation_bytes=444 * 1024,
        ),
        ModelInfo(
            name="resnet50",
            input_kind="image",
            default_size=224,
            min_size=32,
            size_multiple=1,
            default_batch_size=128,
            params=23_528_522,
            description="torchvision ResNet-50, the tutorial's model",
            builder="resnet50",
            block="Bottleneck",
            block_name="residual (bottleneck) block",
            block_kinds=8,
            activation_bytes=83_896 * 1024,
        ),
        ModelInfo(
            name="mobilenet_v3_small",
            input_kind="image",
            default_size=224,
            min_size=32,
            size_multiple=1,
            default_batch_size=128,
            params=1_528_106,
            description="torchvision, depthwise convs",
            builder="mobilenet_v3_small",
            block="InvertedResidual",
            block_name="inverted-residual block",
            block_kinds=9,
            activation_bytes=15_790 * 1024,
        ),
        ModelInfo(
            name="convnext_tiny",
            input_kind="image",
            default_size=224,
            min_size=32,
            size_multiple=1,
            default_batch_size=64,
            params=27_827_818,
            description="torchvision ConvNeXt-T",
            builder="convnext_tiny",
            block="CNBlock",
            block_name="ConvNeXt block",
            block_kinds=18,
            activation_bytes=106_597 * 1024,
        ),
        ModelInfo(
            name="vit_b_16",
            input_kind="image",
            default_size=224,
            min_size=32,
            size_multiple=16,
            default_batch_size=64,
            params=85_806_346,
            description="torchvision ViT-B/16 (size: multiple of the 16 px patch)",
            builder="vit_b_16",
            block="EncoderBlock",
            block_name="transformer encoder block",
            block_kinds=1,
            activation_bytes=115_391 * 1024,
        ),
        ModelInfo(
            name="gpt",
            input_kind="tokens",
            default_size=128,
            min_size=8,
            size_multiple=1,
            default_batch_size=32,
            params=544_256,
            description="2-layer causal transformer, scaled_dot_product_attention",
            builder="TinyGPT",
            block="GPTBlock",
            block_name="transformer block",
            block_kinds=1,
            cpu_step_s=0.1,
            cpu_compile_s=28,
            caches_demo=True,
            activation_bytes=2_443 * 1024,
        ),
    ]
}


def get_model_info(name: str) -> ModelInfo:
    """Look up a model; raises KeyError naming the allowed models."""
    try:
        return MODELS[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; allowed: {', '.join(MODELS)}") from None


# ----------------------------------------------------------------------
# Where a race's model comes from, said torch-free: the zoo, any timm model (`timm:<name>`), a
# Hugging Face transformers architecture built from its configuration (`hf:<name>`), or the user's
# own Python file (`file:<name>` with RunSpec.model_file).
#
# Each source is one row of SOURCES: how a name says it, the library it needs, its default batch
# size, and the module and function that build its workload (core.engine.models.workload imports it
# only when a model of that source is built, so timm and transformers load only for their models).
# Everything here is syntax and metadata, so the app's process, spec validation and bundle import
# can check a name without importing torch, timm or transformers. Whether a name really exists, its
# parameter count and its input come from building it, which only a worker does (a short lookup
# job, core.runs.model_catalog, or the race itself).


@dataclass(frozen=True)
class ModelSource:
    """One place models come from."""

    name: str
    prefix: str  # how a model name says it comes from here ("" for the zoo: a bare name)
    workload: str  # "module:function" building a race's Workload from (ModelName, RunSpec)
    library: str | None = None  # the Python package it needs (optional: requirements-models.txt)
    # The batch size when the user gives none: small enough for a laptop and a big library model.
    # A zoo model has its own (its zoo row).
    default_batch_size: int = 32


SOURCES: dict[str, ModelSource] = {
    source.name: source
    for source in [
        ModelSource(name="zoo", prefix="", workload="core.engine.models.workload:zoo_workload"),
        ModelSource(
            name="timm",
            prefix="timm:",
            workload="core.engine.models.library_models:timm_workload",
            library="timm",
            default_batch_size=32,
        ),
        ModelSource(
            name="hf",
            prefix="hf:",
            workload="core.engine.models.library_models:hf_workload",
            library="transformers",
            default_batch_size=8,
        ),
        ModelSource(
            name="file",
            prefix="file:",
            workload="core.engine.models.library_models:file_workload",
            default_batch_size=32,
        ),
    ]
}
INSTALL_HINT = "pip install -r requirements-models.txt"
TASKS = {
    "image-classification": "image classification",
    "causal-lm": "causal language model (next-token prediction)",
    "masked-lm": "masked language model (15% of tokens predicted)",
    "seq2seq": "sequence-to-sequence language model",
    "custom": "your own loss",
}
DEFAULT_SEQUENCE_LENGTH = 128  # hf: capped by the configuration's maximum positions
MIN_IMAGE_SIZE = 32  # as for the zoo's image models: every stride-2 stage still has a map to halve
MAX_OVERRIDES = 20
MAX_NAME = 120

_TIMM_NAME = re.compile(r"[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)?")
# A hub id ("gpt2", "google-bert/bert-base-uncased") or a model type ("llama"); never a path.
_HF_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9][A-Za-z0-9_.-]*)?")
_FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\.py")
_KEY = re.compile(r"[a-z_][a-z0-9_]*")
_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE]-?\d+)?")

# Hub checkpoints whose configuration Compile Lab knows without the network: the model type and
# what differs from that type's library defaults (the defaults of gpt2, bert, t5, opt, vit and
# distilbert *are* gpt2, bert-base-uncased, t5-small, opt-125m, vit-base and distilbert-base).
KNOWN_HF_CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    "gpt2": ("gpt2", {}),
    "distilgpt2": ("gpt2", {"n_layer": 6}),
    "gpt2-medium": ("gpt2", {"n_layer": 24, "n_embd": 1024, "n_head": 16}),
    "gpt2-large": ("gpt2", {"n_layer": 36, "n_embd": 1280, "n_head": 20}),
    "bert-base-uncased": ("bert", {}),
    "bert-base-cased": ("bert", {"vocab_size": 28996}),
    "bert-large-uncased": (
        "bert",
        {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16, "intermediate_size": 4096},
    ),
    "distilbert-base-uncased": ("distilbert", {}),
    "roberta-base": ("roberta", {"max_position_embeddings": 514, "type_vocab_size": 1, "layer_norm_eps": 1e-5}),
    "t5-small": ("t5", {}),
    "t5-base": ("t5", {"d_model": 768, "d_ff": 3072, "num_layers": 12, "num_decoder_layers": 12, "num_heads": 12}),
    "facebook/bart-base": (
        "bart",
        {
            "d_model": 768,
            "encoder_layers": 6,
            "decoder_layers": 6,
            "encoder_attention_heads": 12,
            "decoder_attention_heads": 12,
            "encoder_ffn_dim": 3072,
            "decoder_ffn_dim": 3072,
        },
    ),
    "facebook/opt-125m": ("opt", {}),
    "google/vit-base-patch16-224": ("vit", {"num_labels": 1000}),
    "HuggingFaceTB/SmolLM-135M": (
        "llama",
        {
            "hidden_size": 576,
            "intermediate_size": 1536,
            "num_hidden_layers": 30,
            "num_attention_heads": 9,
            "num_key_value_heads": 3,
            "vocab_size": 49152,
            "max_position_embeddings": 2048,
            "tie_word_embeddings": True,
        },
    ),
}
# The same checkpoints under their newer organisation names on the Hub.
for _alias, _name in {
    "openai-community/gpt2": "gpt2",
    "distilbert/distilgpt2": "distilgpt2",
    "openai-community/gpt2-medium": "gpt2-medium",
    "openai-community/gpt2-large": "gpt2-large",
    "google-bert/bert-base-uncased": "bert-base-uncased",
    "google-bert/bert-base-cased": "bert-base-cased",
    "google-bert/bert-large-uncased": "bert-large-uncased",
    "distilbert/distilbert-base-uncased": "distilbert-base-uncased",
    "FacebookAI/roberta-base": "roberta-base",
    "google-t5/t5-small": "t5-small",
    "google-t5/t5-base": "t5-base",
}.items():
    KNOWN_HF_CONFIGS[_alias] = KNOWN_HF_CONFIGS[_name]


@dataclass(frozen=True)
class ModelName:
    """A parsed model name: its source, the name within it, and settings to override."""

    source: str
    name: str
    overrides: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        if self.source == "zoo":
            return self.name
        settings = ",".join(f"{k}={_format_value(v)}" for k, v in self.overrides.items())
        return f"{SOURCES[self.source].prefix}{self.name}" + (f":{settings}" if settings else "")


def source_of(model: str) -> str:
    """'zoo', 'timm', 'hf' or 'file' by the name's prefix (a bare name is the zoo's)."""
    for source in SOURCES.values():
        if source.prefix and isinstance(model, str) and model.startswith(source.prefix):
            return source.name
    return "zoo"


def parse_model_name(model: Any) -> ModelName:
    """Parse `model`; raises ValueError with a sentence saying what is allowed."""
    if not isinstance(model, str) or not model:
        raise ValueError(f"must be a model name (got {model!r})")
    if len(model) > MAX_NAME + 200:
        raise ValueError(f"is too long ({len(model)} characters)")
    source = source_of(model)
    if source == "zoo":
        if model not in MODELS:
            raise ValueError(
                f"{model!r} is not allowed; allowed: {', '.join(MODELS)}, timm:<name>, hf:<name> or a model file"
            )
        return ModelName("zoo", model)
    body = model[len(SOURCES[source].prefix) :]
    name, _, settings = body.partition(":")
    if source == "file":
        if settings or not _FILE_NAME.fullmatch(name) or len(name) > MAX_NAME:
            raise ValueError(f"{model!r} is not a model file name (file:<name>.py)")
        return ModelName("file", name)
    pattern, example = (_TIMM_NAME, "timm:convnext_small") if source == "timm" else (_HF_NAME, "hf:gpt2")
    if not pattern.fullmatch(name) or len(name) > MAX_NAME or ".." in name:
        raise ValueError(f"{model!r} is not a {source} model name (like {example})")
    return ModelName(source, name, _parse_overrides(settings, model))


def _parse_overrides(text: str, model: str) -> dict[str, Any]:
    """`n_layer=2,n_embd=64`: configuration (hf) or create_model (timm) settings, numbers and booleans only."""
    out: dict[str, Any] = {}
    if not text:
        return out
    for item in text.split(","):
        key, eq, raw = item.partition("=")
        key, raw = key.strip(), raw.strip()
        if not eq or not _KEY.fullmatch(key):
            raise ValueError(f"{model!r}: settings after the name are key=value pairs separated by commas")
        if raw.lower() in ("true", "false"):
            out[key] = raw.lower() == "true"
        elif _NUMBER.fullmatch(raw):
            out[key] = float(raw) if any(c in raw for c in ".eE") else int(raw)
        else:
            raise ValueError(f"{model!r}: setting {key} must be a number, true or false (got {raw!r})")
    if len(out) > MAX_OVERRIDES:
        raise ValueError(f"{model!r}: at most {MAX_OVERRIDES} settings")
    return out


def _format_value(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def model_name_problem(model: Any) -> str | None:
    """Why `model` is not a model name Compile Lab can take, or None. Syntax only: whether a timm
    model or a Hugging Face configuration exists is known once a worker builds it."""
    try:
        parse_model_name(model)
    except ValueError as exc:
        return str(exc)
    return None


def library_version(source: str) -> str | None:
    """The installed version of the library a source needs (None: not installed). Torch-free:
    reads the package metadata, never imports the library."""
    package = SOURCES[source].library if source in SOURCES else None
    if package is None or importlib.util.find_spec(package) is None:
        return None
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def library_problem(source: str) -> str | None:
    """Why this machine cannot build models of `source` (its library is missing), or None."""
    package = SOURCES[source].library if source in SOURCES else None
    if package is None or library_version(source) is not None:
        return None
    return f"{source}: models need the {package} package, which is not installed here ({INSTALL_HINT})"


def default_batch_size(model: str) -> int:
    info = MODELS.get(model)
    return info.default_batch_size if info else SOURCES[source_of(model)].default_batch_size


def default_file_model_name(path: str) -> str:
    """`file:<name>.py` for a model file path: its base name, made safe to show anywhere."""
    base = re.split(r"[\\/]", path)[-1]
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", base[:-3] if base.endswith(".py") else base).lstrip(".-") or "model"
    return f"file:{stem[: MAX_NAME - 3]}.py"


def model_file_source_problem(source: str) -> str | None:
    """What is wrong with a model file's text before anything runs it: not Python, or no
    top-level `build_model`. (Torch-free: the app checks an upload with this; the worker then
    runs the file and checks the rest.)"""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return f"the file is not valid Python (line {exc.lineno}: {exc.msg})"
    except ValueError as exc:  # null bytes
        return f"the file is not valid Python ({exc})"
    defined = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Assign):
            defined.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined.update((a.asname or a.name).split(".")[0] for a in node.names)
    if "build_model" not in defined:
        return "the file defines no build_model(): it must define build_model() returning a torch.nn.Module"
    return None


def describe_facts(facts: dict[str, Any]) -> str:
    """'11.69 M parameters; images 3x224x224; image classification' from a lookup's facts."""
    parts = []
    if isinstance(facts.get("params"), int):
        parts.append(f"{facts['params'] / 1e6:,.2f} M parameters")
    if facts.get("input"):
        parts.append(str(facts["input"]))
    task = TASKS.get(str(facts.get("task")), "")
    if task:
        parts.append(task)
    return "; ".join(parts)


# ----------------------------------------------------------------------
# Compile scope: the whole model, or each of its repeated blocks ("regional compilation").
#
# PyTorch's regional compilation recipe compiles the block that a model repeats (a transformer
# layer, a residual block) in place, instead of the whole model. Dynamo treats a block's parameters
# as inputs, so blocks of the same shape and settings share one compiled graph: the compile is paid
# once per distinct block, not once per layer (blocks that differ, such as convnext_tiny's, each
# compile on their own: `allow_a_graph_per_block`), while the steady step stays close to whole-model compile
# (Hugging Face accelerate's benchmark: Llama-3.2-1B 10.7 s -> 1.95 s at similar speed). What runs
# between the blocks (embeddings, stem, head) stays eager.
#
# The nested scope compiles the whole model but marks each repeated block as a nested compile region
# (torch.compiler.nested_compile_region, where torch has it): Dynamo traces the block once and reuses what it
# compiled for every block that matches, inside one graph of the whole model, so what runs between the
# blocks is compiled too.
#
# Which block a model repeats is a column of its zoo row (core.engine.models.sources); this module is
# torch-free, so validation and the app can say which models have blocks; only `repeated_blocks`,
# `compile_regions` and `mark_nested_regions` touch a built model (and import torch).

COMPILE_SCOPES = ("whole", "regional", "nested")
# The scopes that need the model's repeated block: compiled on its own (regional), or marked as a nested compile
# region inside the whole model's compile (nested: torch.compiler.nested_compile_region, traced once and reused).
BLOCK_SCOPES = ("regional", "nested")

# model -> (the class of its repeated block, what a person calls it), from the zoo's rows. Found by
# class name, so this module imports neither torch nor torchvision.
REGIONAL_BLOCKS: dict[str, tuple[str, str]] = {
    m.name: (m.block, m.block_name or m.block) for m in MODELS.values() if m.block is not None
}


def region_problem(model: str) -> str | None:
    """Why `model` cannot be compiled regionally (it repeats no block), or None if it can."""
    if model in REGIONAL_BLOCKS:
        return None
    able = ", ".join(REGIONAL_BLOCKS)
    return f"{model} repeats no block to compile on its own; use 'whole' (regional works for: {able})"


def region_description(model: str) -> str:
    """'each transformer block': what regional compile compiles for this model ('' if nothing)."""
    block = REGIONAL_BLOCKS.get(model)
    return f"each {block[1]}" if block else ""


def blocks_share_shapes(model: str) -> bool:
    """Whether one compiled block serves every repeated block of `model` (the zoo's `block_kinds`
    is 1): only then does regional compile pay its compile once instead of once per kind."""
    info = MODELS.get(model)
    return info is not None and info.block is not None and info.block_kinds == 1


def block_kind(block: Any) -> tuple:
    """What Dynamo tells one block from another by: its submodules' types and plain settings, its
    parameters' and buffers' shapes. Blocks of one kind share a compiled graph."""
    parts: list[Any] = []
    for name, module in block.named_modules():
        settings = sorted(
            (k, v)
            for k, v in vars(module).items()
            if not k.startswith("_") and k != "training" and isinstance(v, int | float | str | bool | tuple)
        )
        parts.append((name, type(module).__name__, tuple(settings)))
    parts += [(n, tuple(t.shape)) for n, t in block.named_parameters()]
    parts += [(n, tuple(t.shape)) for n, t in block.named_buffers()]
    return tuple(parts)


def repeated_blocks(model: Any, name: str) -> list[Any]:
    """The blocks of a built model that regional compile compiles, outermost first (a block
    inside another block is not a region of its own)."""
    if name not in REGIONAL_BLOCKS:
        raise ValueError(region_problem(name))
    cls = REGIONAL_BLOCKS[name][0]
    blocks: list[Any] = []
    inside: set[int] = set()
    for module in model.modules():  # parents come before their children
        if id(module) in inside:
            continue
        if type(module).__name__ == cls:
            blocks.append(module)
            inside.update(id(m) for m in module.modules())
    if len(blocks) < 2:
        raise ValueError(f"{name}: found {len(blocks)} {cls} block(s), expected a repeated block")
    return blocks


def compile_regions(model: Any, name: str, **compile_kwargs: Any) -> int:
    """Compile each repeated block in place (`nn.Module.compile`, torch.compile's options);
    returns how many blocks now run compiled. The model object itself stays the same."""
    blocks = repeated_blocks(model, name)
    allow_a_graph_per_block(len(blocks))
    for block in blocks:
        block.compile(**compile_kwargs)
    return len(blocks)


def mark_nested_regions(model: Any, name: str) -> int:
    """Mark each repeated block's forward as a nested compile region (torch.compiler.nested_compile_region,
    on this instance only), so that compiling the whole model traces the block once and stamps out the
    same code for every block that matches it; returns how many blocks were marked. Outside a compile
    the mark does nothing: the eager variant is unchanged."""
    import types

    import torch

    blocks = repeated_blocks(model, name)
    for block in blocks:  # a bound method takes no mark: wrap the class's function and bind it to this block
        block.forward = types.MethodType(torch.compiler.nested_compile_region(type(block).forward), block)
    return len(blocks)


def allow_a_graph_per_block(blocks: int) -> int:
    """Raise Dynamo's recompile limit (for this process: a worker runs one race) so that every
    block may compile a graph of its own, in training and in evaluation; returns the limit now set.

    All blocks share one `forward` code object, and Dynamo keeps at most `recompile_limit` (8)
    compiled entries per code object: past it, the frame silently runs eager. Blocks that differ
    in what Dynamo guards on each need an entry: convnext_tiny's 18 blocks each have their own
    drop-path rate, mobilenet_v3_small's 11 blocks their own channel sizes. Without this, 10 of
    convnext_tiny's blocks would run eager while the race called them compiled."""
    import torch._dynamo.config as config

    # torch 2.7 renamed cache_size_limit to recompile_limit (the old name stays as an alias).
    setting = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"
    wanted = 2 * (blocks + 1)  # the training flag is guarded on too: evaluation compiles its own
    if getattr(config, setting) < wanted:
        setattr(config, setting, wanted)
    return getattr(config, setting)
