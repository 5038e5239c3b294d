"""A race as one script: a stored race written as one Python file that needs only torch (and
torchvision or timm where its model comes from there), builds the same model with the same seed,
batch, precision, mode, backend, scope, dynamic and stance, races eager against compiled on the
race's schedule, and prints the compile time, the steady speedup and the versions in the project's
words. Anyone can rerun it with no Compile Lab on the path (`python -I race.py`), the way PyTorch's
maintainers ask a torch.compile report to come: one self-contained reproducer.

How the file is made, so that nothing a bundle holds can become code in it:
- every setting is checked against the options table (RunSpec validation, and its exact type)
  before it is written, and is written only as `NAME = repr(value)`; a run whose settings do not
  validate is refused (ScriptError), never written with a value left out;
- the code around the settings is this module's (`RACE`) and the project's own, read from its
  files' text (the zoo's network, its batches and loss, the words for seconds and speedups, the
  warm-up rule): one definition, so the script measures as the app does;
- the header's free text (the machine's name, the platform) is a comment, with every character
  that could end a line or hide one replaced.

Torch-free: the app's process writes scripts for its download buttons.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import io
import math
import os
import re
import shlex
import zipfile
from typing import Any

from core import PROJECT_ROOT
from core.engine import words
from core.engine.intervals import BLOCK_STEPS
from core.engine.models.sources import MODELS, NUM_CLASSES, REGIONAL_BLOCKS, VOCAB_SIZE, parse_model_name, source_of
from core.engine.race_memory import SYNTHETIC_POOL
from core.engine.reading import reading
from core.engine.spec import CUDA_GRAPH_MODES, OPTIONS, RunSpec, SpecError, spec_flags, validate
from core.engine.summary import FASTER, NO_CLEAR_DIFFERENCE, SLOWER, Summary
from core.runs import run_files

MAX_LINES = 200  # a zoo model's script, whole (tests hold every zoo model to it)
DEVICE_TYPES = ("cpu", "cuda", "mps")
MAX_THREADS = 4096
_MALLOC_NAME = re.compile(r"MALLOC_[A-Z_]{1,40}")  # glibc's tunables as environment variables
_WHOLE = re.compile(r"[0-9]{1,20}")
VERDICTS = (FASTER, SLOWER, NO_CLEAR_DIFFERENCE)  # the script's VERDICTS[0], [1], [2]
HEADER_TEXT = 400  # characters of a header line kept (a machine's name is free text)


class ScriptError(ValueError):
    """The run cannot be written as a script; the message says why (a setting that does not validate)."""


# -- what is checked before anything is written --------------------------------------------------


def checked_spec(params: Any, scriptable: bool = True) -> RunSpec:
    """The run's settings as a RunSpec, every value validated against the options table and of its
    exact type (True is not 1 here, nor 1.0 an int); ScriptError naming each field that is not, and
    with `scriptable`, for a model whose source is not written as a script yet."""
    try:
        spec = RunSpec.from_dict(params)
        # A cifar10 race's folder is its machine's (a stored run keeps none): the script makes synthetic batches.
        local = dataclasses.replace(spec, data_dir=None, download=True) if spec.data == "cifar10" else spec
        problems = [str(p) for p in validate(local)]
    except (SpecError, TypeError) as exc:
        raise ScriptError(f"its settings are not a race's: {exc}") from None
    for name, option in OPTIONS.items():
        value = getattr(spec, name)
        if not (value is None and option.optional) and type(value) is not option.type:
            if not (option.type is float and type(value) is int):
                problems.append(f"{name}: must be a {option.type.__name__} (got {type(value).__name__})")
    if problems:
        raise ScriptError("its settings do not validate: " + "; ".join(problems))
    source = source_of(spec.model)
    if scriptable and source in ("hf", "file"):
        raise ScriptError(
            f"{source} models are not written as scripts yet (zoo and timm models are): "
            "export its bundle, or race a zoo model"
        )
    return spec


def script_problem(run: Any, scriptable: bool = True) -> str | None:
    """Why a stored run cannot be written as a script (with `scriptable` False: nor reported), or None."""
    if getattr(run, "kind", None) != "race":
        return "only a race can be written as a script"
    try:
        checked_spec(run.params, scriptable)
    except ScriptError as exc:
        return str(exc)
    return None


def _number(value: Any, low: float, high: float) -> float | int | None:
    """A recorded number fit to embed: a real int or float within [low, high], else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return value if low <= value <= high else None


def header_text(value: Any) -> str:
    """Free text (a bundle's machine name) as it may stand in a comment: one line, printable
    characters only, cut short."""
    text = "".join(c if c.isprintable() else " " for c in str(value if value is not None else "?"))
    return text[:HEADER_TEXT]


# -- the project's own code, read from its files ---------------------------------------------------


@functools.cache
def _definitions(relative: str) -> tuple[dict[str, ast.AST], tuple[str, ...]]:
    path = os.path.join(PROJECT_ROOT, relative)
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    tree = ast.parse(text)
    found = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            found[node.name] = node
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found[node.targets[0].id] = node
    return found, tuple(text.splitlines())


def _annotation_names(node: ast.AST) -> set[str]:
    """The names a definition uses in its annotations only: the script defers annotations (its
    `from __future__ import annotations`), so a type alias they name is not code it needs."""
    notes = [a.annotation for a in ast.walk(node) if isinstance(a, ast.arg) and a.annotation is not None]
    notes += [f.returns for f in ast.walk(node) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) and f.returns]
    in_notes = {n.id for note in notes for n in ast.walk(note) if isinstance(n, ast.Name)}
    elsewhere = [n for n in ast.walk(node) if n not in {x for note in notes for x in ast.walk(note)}]
    return in_notes - {n.id for n in elsewhere if isinstance(n, ast.Name)}


def project_code(relative: str, *names: str) -> str:
    """The definitions `names` in the project's file `relative`, with those of the same file they
    use, in the file's order, docstrings left out (the script stays short)."""
    found, lines = _definitions(relative)
    wanted: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in wanted:
            continue
        wanted.add(name)
        used = {n.id for n in ast.walk(found[name]) if isinstance(n, ast.Name)} - _annotation_names(found[name])
        todo.extend(sorted(used & set(found) - wanted - {name}))
    chunks = []
    for node in sorted((found[n] for n in wanted), key=lambda n: n.lineno):
        skip: set[int] = set()
        for inner in ast.walk(node):
            body = getattr(inner, "body", None)
            if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
                if isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                    skip.update(range(body[0].lineno, body[0].end_lineno + 1))
                    if len(body) > 1 and body[1].lineno > body[0].end_lineno + 1:
                        skip.add(body[0].end_lineno + 1)  # the blank line after it
        start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        kept = (lines[i - 1] for i in range(start, node.end_lineno + 1) if i not in skip)
        chunks.append("\n".join(line for line in kept if line.strip()))  # compact: no blank lines inside
    return (
        "\n".join(chunk if "\n" not in chunk else "\n" + chunk + "\n" for chunk in chunks)
        .replace("\n\n\n", "\n\n")
        .strip("\n")
    )


def _torchvision_builder(builder: str) -> tuple[str, bool] | None:
    """(torchvision's model name, whether it takes the image size) where the zoo's builder is one."""
    found, _ = _definitions("core/engine/models/workload.py")
    node = found.get(builder)
    if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Call):
        return None
    call = node.value
    if getattr(call.func, "id", None) != "_torchvision":
        return None
    sized = any(k.arg == "sized" and getattr(k.value, "value", False) for k in call.keywords)
    return call.args[0].value, sized


def model_code(spec: RunSpec) -> tuple[list[str], str, str, str | None]:
    """(the imports it needs, the model's code ending in build_model(), its input kind, the class
    name of its repeated block for regional compile)."""
    name = parse_model_name(spec.model)
    if name.source == "timm":  # as core.engine.models.library_models builds it: its configuration's input size
        code = (
            f"TIMM_NAME, TIMM_SETTINGS = {name.name!r}, {dict(name.overrides)!r}  # numbers and booleans only\n"
            "CONFIG = timm.get_pretrained_cfg(TIMM_NAME)\n"
            "DEFAULT_SIZE = int((getattr(CONFIG, 'input_size', None) or (3, 224, 224))[-1])\n"
            "SIZE = SIZE or DEFAULT_SIZE\n"
            "FIXED = getattr(CONFIG, 'fixed_input_size', False) and SIZE != DEFAULT_SIZE  # ViT-like: size at build\n\n"
            "def build_model() -> nn.Module:\n"
            "    return timm.create_model(TIMM_NAME, pretrained=False, **TIMM_SETTINGS, **({'img_size': SIZE} if FIXED else {}))"
        )
        return ["import timm"], code, "image", None
    info = MODELS[spec.model]
    block = REGIONAL_BLOCKS.get(spec.model, (None,))[0]
    vision = _torchvision_builder(info.builder)
    if vision is not None:
        extra = ", image_size=SIZE" if vision[1] else ""
        code = (
            "def build_model() -> nn.Module:\n"
            f"    return torchvision.models.{vision[0]}(weights=None, num_classes=NUM_CLASSES{extra})"
        )
        return ["import torchvision"], code, info.input_kind, block
    code = project_code("core/engine/models/workload.py", info.builder)
    code += f"\n\ndef build_model() -> nn.Module:\n    return {info.builder}(SIZE)"
    return [], code, info.input_kind, block


# -- the script -----------------------------------------------------------------------------------


def _settings(spec: RunSpec, environment: dict[str, Any], kind: str, block: str | None) -> list[list[tuple[str, Any]]]:
    """Every value the script embeds, each already validated, in lines of related ones: (name, value)
    pairs, each written as its repr."""
    device = spec.device if spec.device != "auto" else environment.get("device_type")
    if device not in DEVICE_TYPES:
        device = "cpu"
    threads = _number(environment.get("torch_threads"), 1, MAX_THREADS) if device == "cpu" else None
    cores, malloc = process_conditions(environment) if device == "cpu" else (None, {})
    return [
        [("MODEL", spec.model), ("INPUT_KIND", kind), ("SIZE", spec.input_size or spec.image_size)],
        [("BATCH_SIZE", spec.batch_size), ("SEED", spec.seed), ("LR", float(spec.lr)), ("PRECISION", spec.precision)],
        [("BACKEND", spec.backend), ("MODE", spec.mode), ("DYNAMIC", spec.dynamic), ("FULLGRAPH", spec.fullgraph)],
        [("COMPILE_SCOPE", spec.compile_scope), ("REPEATED_BLOCK", block if spec.compile_scope == "regional" else None),
         ("STANCE", spec.stance), ("SHAPES", spec.shapes), ("CACHE", spec.cache)],
        [("SCHEDULE", spec.schedule), ("EPOCHS", spec.epochs), ("STEPS_PER_EPOCH", spec.steps_per_epoch),
         ("BLOCK_STEPS", BLOCK_STEPS), ("POOL", SYNTHETIC_POOL)],
        [("DEVICE", device), ("THREADS", int(threads) if threads is not None else None), ("CORES", cores),
         ("CUDA_GRAPHS", cuda_graphs(spec)), ("NUM_CLASSES", NUM_CLASSES), ("VOCAB_SIZE", VOCAB_SIZE)],
        [("MALLOC", malloc), ("VERDICTS", VERDICTS)],
    ]  # fmt: skip


def process_conditions(environment: dict[str, Any]) -> tuple[tuple[int, ...] | None, dict[str, str]]:
    """The cores a CPU race ran on and its glibc malloc thresholds (core.runs.race_conditions), as
    its environment recorded them, where they are what a race records: core numbers, and MALLOC_*
    names with whole numbers (anything else is left out, never written)."""
    recorded = environment.get("conditions")
    recorded = recorded if isinstance(recorded, dict) else {}
    cores = recorded.get("cores")
    ok = isinstance(cores, list) and 0 < len(cores) <= MAX_THREADS
    ok = ok and all(_number(c, 0, MAX_THREADS) is not None and type(c) is int for c in cores)
    malloc = recorded.get("malloc")
    malloc = {
        k: v
        for k, v in (malloc.items() if isinstance(malloc, dict) else ())
        if isinstance(k, str) and isinstance(v, str) and _MALLOC_NAME.fullmatch(k) and _WHOLE.fullmatch(v)
    }
    return (tuple(sorted(set(cores))) if ok else None), malloc


def cuda_graphs(spec: RunSpec) -> bool:
    return spec.backend == "inductor" and spec.mode in CUDA_GRAPH_MODES


def race_code(spec: RunSpec, settings: dict[str, Any]) -> str:
    """RACE with only the lines this race needs: each `{condition}` line kept where it holds."""
    amp = spec.precision in ("amp-fp16", "amp-bf16")
    held = {
        "amp": amp,
        "noamp": not amp,
        "fp16": spec.precision == "amp-fp16",
        "nofp16": spec.precision != "amp-fp16",
        "regional": settings["REPEATED_BLOCK"] is not None,
        "whole": settings["REPEATED_BLOCK"] is None,
        "graphs": cuda_graphs(spec),
        "varying": spec.shapes == "varying",
        "stance": spec.stance != "default",
        "sequential": spec.schedule == "sequential",
        "turns": spec.schedule != "sequential",
        "cold": spec.cache == "cold",
        "threads": settings["THREADS"] is not None,
        "probe": settings["DEVICE"] == "cpu" and spec.backend == "inductor",
        "kernels": settings["DEVICE"] == "cpu" and spec.backend == "inductor" and spec.profile_steps > 0,
        "device": settings["DEVICE"] != "cpu",
        "malloc": bool(settings["MALLOC"]),
        "cores": settings["CORES"] is not None,  # a CPU's work is done when its call returns: nothing to wait for
    }
    kept = []
    for line in RACE.splitlines():
        condition, brace, rest = line[1:].partition("}") if line.startswith("{") else ("", "", line)
        if not brace or held[condition]:
            kept.append(rest)
    return "\n".join(kept)


def _assignment(pairs: list[tuple[str, Any]]) -> str:
    """`A, B = 1, 'x'`: names and the reprs of their (validated) values."""
    return ", ".join(name for name, _ in pairs) + " = " + ", ".join(repr(value) for _, value in pairs)


def race_command(spec: RunSpec) -> str:
    """The terminal command that races this spec in Compile Lab (a model file by its name alone)."""
    return "python -m core race " + " ".join(shlex.quote(a) for a in spec_flags(spec))


def header_lines(
    spec: RunSpec, environment: dict[str, Any], summary: dict[str, Any], label: str, written_by: str
) -> list[str]:
    """The comment the script starts with: the race's result, its machine, the command that made
    it and what the script does differently (all free text made inert: header_text)."""
    s = Summary.of(summary)
    low, high = s.speedup_ci95 or (None, None)
    result = f"steady speedup {words.speedup(s.steady_state_speedup)}"
    if low is not None and high is not None:
        result += f" ({words.interval(s)})"
    result += f", {s.verdict or 'no verdict'}; compile {words.compile_cost(s)}"
    processes = s.processes_counted or 1
    env = environment
    machine = f"{env.get('device_type', '?')}: {env.get('device_name', '?')} ({env.get('cpu_count', '?')} CPU cores)"
    versions = f"torch {env.get('torch', '?')}, Python {env.get('python', '?')}, {env.get('platform', '?')}"
    differs = [
        "one process and its own block interval (the race's rests on "
        f"{words.count(processes, 'process', 'processes')} and this machine's run-to-run spread)"
    ]
    if spec.data != "synthetic":
        differs.append(f"synthetic batches (the race read {spec.data} through a DataLoader)")
    if spec.target_interval:
        differs.append("every step asked for (the race stopped once its interval was known)")
    if spec.eval_steps:
        differs.append("no evaluation steps (the race ran them after each epoch)")
    lines = [
        f"Compile Lab: {label} as one script, eager against torch.compile as the app raced them. Needs only torch "
        "(and torchvision or timm for their models).",
        f"The race: {result}.",
        f"Its machine: {machine}; {versions}.",
        f"Made by: {race_command(spec)} (and written as this script by: {written_by})",
        "Differs from the race in: " + "; ".join(differs) + ".",
    ]
    return ["# " + header_text(line) for line in lines]


def script_text(
    params: Any,
    environment: Any = None,
    summary: Any = None,
    label: str = "a race",
    written_by: str = "Compile Lab",
) -> str:
    """The race as one Python script (see the module's docstring); ScriptError where its settings
    do not validate or its model's source cannot be written yet."""
    spec = checked_spec(params)
    environment = environment if isinstance(environment, dict) else {}
    summary = summary if isinstance(summary, dict) else {}
    imports, model, kind, block = model_code(spec)
    lines = _settings(spec, environment, kind, block)
    settings = "\n".join(_assignment(line) for line in lines)
    pieces = [
        "\n".join(header_lines(spec, environment, summary, label, written_by)),
        PREAMBLE + "\n".join(imports),
        "# The race's settings, each checked by Compile Lab against its options table.\n" + settings,
        "# The model, as Compile Lab builds it.\n" + model,
        "# Batches, loss, words and warm-up steps: Compile Lab's own code.\n" + _shared_code(spec),
        race_code(spec, dict(pair for line in lines for pair in line)),
    ]
    return "\n\n".join(p.strip("\n") for p in pieces) + "\n"


def _shared_code(spec: RunSpec) -> str:
    parts = [
        project_code("core/engine/models/workload.py", "random_batch"),
        project_code("core/engine/models/workload.py", "loss_fn"),
        project_code("core/engine/words.py", "seconds", "SPEEDUP_FORMAT"),
        project_code("core/engine/summary.py", "default_warmup"),
    ]
    if spec.shapes == "varying":
        parts.append(project_code("core/engine/variant.py", "vary_shapes"))
        parts.append(project_code("core/engine/models/workload.py", "tensors_in"))
    return "\n\n".join(parts)


def script_for_run(run: Any, written_by: str | None = None) -> str:
    """The script of a stored race (a store's Run); ScriptError where it cannot be written."""
    if getattr(run, "kind", None) != "race":
        raise ScriptError("only a race can be written as a script")
    params = dict(run.params) if isinstance(run.params, dict) else run.params
    if isinstance(params, dict):  # no path of this server: a model file by its name, no data folder
        params["data_dir"] = None
        if isinstance(params.get("model_file"), str):
            params["model_file"] = os.path.basename(params["model_file"])
    return script_text(
        params,
        run.environment,
        run.summary,
        label=f"race {run.id}",
        written_by=written_by or f"python -m core export {run.id} --script FILE",
    )


PREAMBLE = """from __future__ import annotations

import gc, math, os, platform, statistics, sys, tempfile, time  # noqa: E401

import torch
from torch import nn
from torch.nn import functional as F
"""

# The race's code; a line led by {condition} is kept only where the race needs it (race_code).
RACE = """# The race, as Compile Lab runs it: both variants from the same weights and batches, taking turns.
DEVICE = torch.device(DEVICE)
{device}sync = getattr(torch, DEVICE.type).synchronize  # device work is asynchronous: wait before reading a clock
{amp}AMP = {"amp-fp16": torch.float16, "amp-bf16": torch.bfloat16}[PRECISION]

def compile_model(model: nn.Module) -> nn.Module:
    kwargs = {"backend": BACKEND, "dynamic": DYNAMIC, "fullgraph": FULLGRAPH, **({"mode": MODE} if BACKEND == "inductor" else {})}
{whole}    return torch.compile(model, **kwargs)
{regional}    blocks = [m for m in model.modules() if type(m).__name__ == REPEATED_BLOCK]  # each repeated block, in place
{regional}    config = torch._dynamo.config  # every block may need a graph of its own (training and evaluation)
{regional}    limit = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"
{regional}    setattr(config, limit, max(getattr(config, limit), 2 * (len(blocks) + 1)))
{regional}    for block in blocks:
{regional}        block.compile(**kwargs)
{regional}    return model

class Variant:  # one side of the race: the shared weights, compiled or not, its optimizer, batches, times
    def __init__(self, name: str, init_state: dict, steps: int = STEPS_PER_EPOCH):
        torch.manual_seed(SEED)
        self.name, self.model, self.steps = name, build_model().to(DEVICE).train(), steps
        self.model.load_state_dict(init_state)
        self.runner = compile_model(self.model) if name == "compiled" else self.model
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=LR)
{fp16}        self.scaler = torch.amp.GradScaler(DEVICE.type)
        gen = torch.Generator().manual_seed(SEED)  # the same batches for both variants
        self.pool = [[t.to(DEVICE) for t in random_batch(INPUT_KIND, BATCH_SIZE, SIZE, gen)] for _ in range(min(POOL, steps))]
        self.rng, self.epoch, self.times = torch.get_rng_state(), None, []

    def step(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
{graphs}        if self.name == "compiled":  # CUDA-graph trees: a new iteration begins
{graphs}            torch.compiler.cudagraph_mark_step_begin()
        self.optimizer.zero_grad(set_to_none=True)
{amp}        with torch.autocast(DEVICE.type, dtype=AMP):
{amp}            loss = loss_fn(self.runner(x), y)
{noamp}        loss = loss_fn(self.runner(x), y)
{fp16}        self.scaler.scale(loss).backward()
{fp16}        self.scaler.step(self.optimizer)
{fp16}        self.scaler.update()
{nofp16}        loss.backward()
{nofp16}        self.optimizer.step()
        return loss

    def run(self, epoch: int, count: int) -> None:  # `count` more timed train steps, each batch included
        torch.set_rng_state(self.rng)
        if epoch != self.epoch:
            self.epoch, self.batches = epoch, (self.pool[i % len(self.pool)] for i in range(self.steps))
{varying}            self.batches = vary_shapes(self.batches, INPUT_KIND, SIZE, self.steps)
        for _ in range(count):
{device}            sync()
            start = time.perf_counter()
            loss = self.step(*next(self.batches))
{device}            sync()
            self.times.append(time.perf_counter() - start)
            loss.item()
{stance}            if self.name == "compiled" and len(self.times) == 1:  # the first compile is wanted, later ones meet it
{stance}                torch.compiler.set_stance(STANCE)
        self.rng = torch.get_rng_state()

def turns() -> list[tuple[str, int, int]]:  # (variant, epoch, steps) in the order the schedule runs them
{sequential}    return [(name, epoch, STEPS_PER_EPOCH) for name in ("eager", "compiled") for epoch in range(EPOCHS)]
{turns}    size = BLOCK_STEPS if SCHEDULE == "blocks" else STEPS_PER_EPOCH  # turns of a block, or of an epoch
{turns}    return [(name, epoch, min(size, STEPS_PER_EPOCH - first)) for epoch in range(EPOCHS) for first in range(0, STEPS_PER_EPOCH, size) for name in ("eager", "compiled")]

def t975(df: float, z: float = 1.959963984540054) -> float:  # Student's t 97.5%: exact for df 1, 2, else A&S 26.7.5
    if df < 2.5:
        return 12.7062047362 if df < 1.5 else 4.3026527297
    g = ((z**3 + z) / 4, (5 * z**5 + 16 * z**3 + 3 * z) / 96, (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384,
         (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160)
    return z + sum(term / df ** (k + 1) for k, term in enumerate(g))

{turns}def interval(eager: list, compiled: list, point: float) -> tuple | None:  # 95%, over pairs of blocks of steps
{sequential}def interval(eager: list, compiled: list, point: float) -> tuple | None:  # 95%, Welch's t over blocks of steps
    size = max(1, min(BLOCK_STEPS, min(len(eager), len(compiled)) // 4))
    e, c = ([math.log(max(statistics.median(t[i : i + size]), 1e-12)) for i in range(0, len(t) - size + 1, size)] for t in (eager, compiled))
    if min(len(e), len(c)) < 2:
        return None
{turns}    d = [a - b for a, b in zip(e, c)]
{turns}    half = t975(len(d) - 1) * statistics.stdev(d) / math.sqrt(len(d))
{sequential}    ve, vc = statistics.variance(e) / len(e), statistics.variance(c) / len(c)
{sequential}    df = (ve + vc) ** 2 / (ve**2 / (len(e) - 1) + vc**2 / (len(c) - 1)) if ve + vc else 1
{sequential}    half = t975(df) * math.sqrt(ve + vc)
    return point * math.exp(-half), point * math.exp(half)

def main() -> None:
{cold}    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache = tempfile.mkdtemp(prefix="race-inductor-")  # cold: a fresh cache
{cold}    os.environ["TRITON_CACHE_DIR"] = os.path.join(cache, "triton")  # set before anything compiles
{threads}    torch.set_num_threads(THREADS)
{device}    torch.set_float32_matmul_precision("high" if PRECISION == "tf32" else "highest")  # TF32 only where asked
{device}    torch.backends.cudnn.allow_tf32 = PRECISION == "tf32"
    torch.manual_seed(SEED)
    init_state = build_model().state_dict()
{probe}    torch._inductor.cpu_vec_isa.pick_vec_isa()  # Inductor's one-time CPU probe, untimed: no model's compile
{kernels}    torch._inductor.config.cpp.enable_kernel_profile = True  # as the race compiled: per-kernel profiler scopes
    gc.freeze()
    Variant("warm-up", init_state, steps=1).run(0, 1)  # one untimed step pays the process's one-time costs
    gc.collect()
    variants = {name: Variant(name, init_state) for name in ("eager", "compiled")}
    for name, epoch, steps in turns():
        variants[name].run(epoch, steps)
    eager, compiled = variants["eager"].times, variants["compiled"].times
    w = default_warmup(min(len(eager), len(compiled)), 3 if CUDA_GRAPHS else 1)
    e, c = eager[w:] or eager[-1:], compiled[w:] or compiled[-1:]
    point, cost = statistics.median(e) / statistics.median(c), sum(compiled[:w]) - sum(eager[:w])
    spread = [statistics.quantiles(t, n=10, method="inclusive")[8] - statistics.median(t) for t in (e, c) if len(t) > 1]
    noise = w * max([0.001, *spread])  # a compile within the steps' own scatter cannot be told from it
    clear = cost > noise and sum(compiled[:w]) - w * statistics.median(c) > noise
    print(f"{MODEL}, batch {BATCH_SIZE}, {PRECISION}, backend {BACKEND}, mode {MODE}, {SCHEDULE} schedule")
    shown = seconds(cost) if clear else f"too small to measure here (under {seconds(noise)})"
    print(f"compile time: {shown} (compiled's first {w} step{'s' * (w > 1)} less eager's)")
    ci = interval(e, c, point)
    verdict = VERDICTS[2] if ci is None or ci[0] <= 1 <= ci[1] else VERDICTS[0] if ci[0] > 1 else VERDICTS[1]
    where = f"95% interval {ci[0]:.2f}-{SPEEDUP_FORMAT % ci[1]}, " if ci else ""  # as words.speedup_range
    print(f"steady speedup: {SPEEDUP_FORMAT % point} ({where}{len(e)} steady steps each): {verdict}")
    print(f"steady step: eager {seconds(statistics.median(e))}, compiled {seconds(statistics.median(c))}")
    name = torch.cuda.get_device_name() if DEVICE.type == "cuda" else platform.processor() or platform.machine()
    print(f"versions: torch {torch.__version__}, Python {platform.python_version()}, {platform.platform()}")
    print(f"device: {DEVICE.type}: {name} ({os.cpu_count()} CPU cores, {torch.get_num_threads()} torch threads)")

if __name__ == "__main__":  # the race's process conditions: its malloc thresholds (read as a process starts), cores
{malloc}    if any(os.environ.get(k) != v for k, v in MALLOC.items()):
{malloc}        os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], {**os.environ, **MALLOC})
{cores}    os.sched_setaffinity(0, CORES) if set(CORES) <= os.sched_getaffinity(0) else None
    main()
"""


# ----------------------------------------------------------------------
# A report that is ready to file: a finished race as a torch.compile issue, laid out as PyTorch's
# own template asks (🐛 Describe the bug, Error logs, Minified repro, Versions), in one zip:
#
# - `report.md`, the body: what the race found in the project's words (core.engine.reading),
#   the command that made it, the backend ladder to run as a sweep (eager, aot_eager, ... inductor: the
#   rungs this version offers), its errors and compile findings, the script, the versions and machine;
# - `race_<id>.py`, the race as one script (core.runs.race_script), to attach or paste;
# - `torch_trace/`, the race's TORCH_TRACE where it was traced (what tlparse reads), when asked for.
#
# A zip rather than one markdown file: the body is pasted into the issue, while the trace (often tens
# of MB of text) and the script go as attachments, and one download keeps them together. Nothing in a
# bundle runs: its free text stands in fenced blocks no backtick run in it can close. Torch-free.

LADDER = ("eager", "aot_eager", "aot_eager_decomp_partition", "inductor")  # PyTorch's guide's order
MAX_LOG = 4000  # characters of an error kept in the report


def ladder_rungs() -> tuple[str, ...]:
    """The rungs of PyTorch's backend ladder this version can race (its backend option's choices)."""
    return tuple(b for b in LADDER if b in (OPTIONS["backend"].choices or ()))


def ladder_command(spec: Any) -> str:
    """The sweep that races the ladder from the race's settings: every rung as a point, mode default
    (only Inductor takes a mode)."""
    flags = spec_flags(spec)
    kept: list[str] = []
    skip = {"--backend", "--mode"}
    i = 0
    while i < len(flags):
        if flags[i] in skip:
            i += 2
            continue
        kept.append(flags[i])
        i += 1
    axis = OPTIONS["backend"].axis_flag
    return "python -m core sweep " + " ".join([*kept, axis, ",".join(ladder_rungs())])


def fenced(text: str, language: str = "") -> str:
    """`text` in a fenced block that nothing inside it can close (a longer fence than any run of
    backticks it holds)."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text.rstrip()}\n{fence}"


def _line(value: Any) -> str:
    return header_text(value)


def report_markdown(run: Any, script: str | None, script_problem: str | None, trace: str) -> str:
    """The issue's body for a stored race (see the module's docstring); `trace` says where its
    TORCH_TRACE is (in the zip, not kept, or not offered)."""
    spec = checked_spec(run.params, scriptable=False)
    s = Summary.of(run.summary)
    env = run.environment if isinstance(run.environment, dict) else {}
    backend = f"backend={spec.backend!r}" + (f", mode={spec.mode!r}" if spec.backend == "inductor" else "")
    low, high = s.speedup_ci95 or (None, None)
    result = f"steady speedup {words.speedup(s.steady_state_speedup)}"
    if low is not None and high is not None:
        result += f" ({words.interval(s)})"
    errors = [
        text for text in (run.error, s.compile_failed, s.compile_skipped) if isinstance(text, str) and text.strip()
    ]
    findings = [
        f"graphs: {s.graphs}" if s.graphs is not None else "",
        f"graph breaks: {s.graph_breaks}" if s.graph_breaks is not None else "",
        f"recompiles: {s.recompiles}" if s.recompiles is not None else "",
    ]
    versions = [
        f"torch: {_line(env.get('torch'))}",
        f"CUDA: {_line(env.get('cuda'))}, cuDNN: {_line(env.get('cudnn'))}, Triton: {_line(env.get('triton'))}",
        f"Python: {_line(env.get('python'))}",
        f"OS: {_line(env.get('platform'))}",
        f"device: {_line(env.get('device_type'))}: {_line(env.get('device_name'))}",
        f"CPU: {_line(env.get('cpu_name'))}, {_line(env.get('cpu_count'))} cores, "
        f"{_line(env.get('torch_threads'))} torch threads",
        f"precision: {_line(env.get('precision'))}, Inductor cache: {_line(env.get('inductor_cache'))}",
    ]
    repro = (
        f"The race as one script (needs only torch; attached as race_{run.id}.py):\n\n" + fenced(script, "python")
        if script is not None
        else f"No script: {script_problem}. The race's command: `{race_command(spec)}`"
    )
    parts = [
        f"<!-- Title: torch.compile ({backend}) on {spec.model}: {result}; compile {words.compile_cost(s)} -->",
        "### 🐛 Describe the bug",
        f"Training {spec.model} (batch {spec.batch_size}, {spec.precision}) with `torch.compile({backend}, "
        f"dynamic={spec.dynamic!r}, fullgraph={spec.fullgraph!r})` against eager, from the same weights on the same "
        f"batches, taking turns ({spec.schedule} schedule): {result}; compile {words.compile_cost(s)}.",
        fenced(_line(reading(s)) if run.summary else "no result: the race recorded no summary"),
        f"Measured by Compile Lab's race {run.id}: `{race_command(spec)}`",
        "Where the cost or the change comes in: the backend ladder "
        + " → ".join(f"`{b}`" for b in ladder_rungs())
        + ", run as a sweep of the same race:",
        fenced(ladder_command(spec), "sh"),
        "### Error logs",
        fenced("\n\n".join(e[:MAX_LOG] for e in errors)) if errors else "None: the race finished without an error.",
        "Compile findings: " + (", ".join(f for f in findings if f) or "none recorded") + ".",
        f"TORCH_TRACE: {trace}",
        "### Minified repro",
        repro,
        "### Versions",
        "As the race recorded them (`python -m torch.utils.collect_env` gives the full list on the machine):",
        fenced("\n".join(versions)),
    ]
    return "\n\n".join(parts) + "\n"


def report_zip(store_path: str, run: Any, with_trace: bool = True) -> bytes:
    """The report of a stored race as zip bytes: report.md, the script where it can be written, and
    with `with_trace` the race's TORCH_TRACE files. ScriptError where its settings do not validate."""
    try:
        script, problem = script_for_run(run), None
    except ScriptError as exc:
        checked_spec(run.params, scriptable=False)  # settings that do not validate: no report
        script, problem = None, str(exc)
    folder = run_files.compile_trace_dir(store_path, run.id)
    traced = run_files.compile_trace_size(store_path, run.id)
    if traced and with_trace:
        trace = "in torch_trace/ beside this file (read it with tlparse: `tlparse torch_trace/<file>.log`)."
    elif traced:
        trace = "kept, and offered to whoever ran the race (it names the folders of the box it ran on)."
    else:
        trace = "not kept: race again with `--compile-trace` (the form's Compile trace) to have one."
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("report.md", report_markdown(run, script, problem, trace))
        if script is not None:
            archive.writestr(f"race_{run.id}.py", script)
        if traced and with_trace:
            for root, _, names in os.walk(folder):
                for name in sorted(names):
                    path = os.path.join(root, name)
                    archive.write(path, os.path.join("torch_trace", os.path.relpath(path, folder)))
    return buffer.getvalue()
