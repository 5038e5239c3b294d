"""Where a race's model comes from, said torch-free: the zoo, any timm model (`timm:<name>`), a
Hugging Face transformers architecture built from its configuration (`hf:<name>`), or the user's
own Python file (`file:<name>` with RunSpec.model_file).

Each source is one row of SOURCES: how a name says it, the library it needs, its default batch
size, and the module and function that build its workload (core.engine.models.resolve imports it
only when a model of that source is built, so timm and transformers load only for their models).
Everything here is syntax and metadata, so the app's process, spec validation and bundle import
can check a name without importing torch, timm or transformers. Whether a name really exists, its
parameter count and its input come from building it, which only a worker does (a short lookup
job, core.runs.model_catalog, or the race itself).
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import re
from dataclasses import dataclass, field
from typing import Any

from core.engine.models.zoo import MODELS


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
        ModelSource(name="zoo", prefix="", workload="core.engine.models.zoo_workload:zoo_workload"),
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
            workload="core.engine.models.model_file:file_workload",
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
