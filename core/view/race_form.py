"""What the Race page's form needs, as pure functions: defaults for the device, which options the
device can run (and why not), a rough duration, and the configuration as URL query parameters.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from core.engine.model_sources import model_name_problem, source_of
from core.engine.spec import (
    BACKENDS,
    CACHES,
    DATA_SOURCES,
    MODES,
    PRECISIONS,
    DeviceCaps,
    RunSpec,
    resolve_device,
    validate,
)
from core.engine.zoo import MODELS
from core.runs.limits import HostLimits

# The fields the form shows, in the order a person decides them.
FORM_FIELDS = ("model", "batch_size", "precision", "mode", "backend", "epochs", "steps_per_epoch", "data", "cache")
CHOICES: dict[str, tuple] = {
    "model": tuple(MODELS),
    "precision": PRECISIONS,
    "mode": MODES,
    "backend": BACKENDS,
    "data": tuple(d for d in DATA_SOURCES if d != "cifar10"),  # cifar10 needs a local folder: CLI only
    "cache": CACHES,
}
# The break-even demo for a CPU: measured on 2 cores, pointwise_mlp pays off around step 800-1,050.
CPU_BREAK_EVEN_PRESET = {"model": "pointwise_mlp", "batch_size": 4096, "epochs": 3, "steps_per_epoch": 500}


def default_spec(caps: DeviceCaps | None) -> RunSpec:
    """A sensible first race: small and quick on a CPU, the tutorial's setup on a modern GPU."""
    if caps is not None and caps.cuda:
        modern = caps.compute_capability is not None and caps.compute_capability >= (8, 0) and caps.cuda_bf16
        return RunSpec(
            model="resnet50",
            batch_size=128,
            precision="amp-bf16" if modern else "amp-fp16",
            epochs=3,
            steps_per_epoch=50,
            device="cuda",
        )
    return RunSpec(model="pointwise_mlp", batch_size=4096, epochs=3, steps_per_epoch=100, device="cpu")


def unavailable_options(
    spec: RunSpec, field: str, caps: DeviceCaps | None, limits: HostLimits | None = None
) -> dict[Any, str]:
    """Options of `field` this device cannot run with the rest of `spec` (or this host does not
    allow), each with the reason."""
    out: dict[Any, str] = {}
    for option in CHOICES.get(field, ()):
        candidate = dataclasses.replace(spec, **{field: option})
        problems = validate(candidate, caps) + (limits.problems(candidate) if limits is not None else [])
        problems = [p for p in problems if p.field == field]
        if problems:
            out[option] = problems[0].message
    return out


# Rough steady step times at each model's default batch and size (seconds): measured on a 2-core
# x86 CPU for the small models, order-of-magnitude guesses elsewhere. Only for "about how long".
_CPU_STEP_S = {"mlp": 0.05, "small_cnn": 0.15, "pointwise_mlp": 0.045, "gpt": 0.1, "resnet18": 0.25}
_CPU_COMPILE_S = {"mlp": 20, "small_cnn": 20, "pointwise_mlp": 10, "gpt": 28, "resnet18": 35}
_GPU_STEP_S = 0.05
_GPU_COMPILE_S = 60
AUTOTUNE_MODES = ("max-autotune", "max-autotune-no-cudagraphs")
AUTOTUNE_COMPILE_FACTOR = 10  # autotuning benchmarks candidate kernels: compiles of several times, often more


def estimate_seconds(spec: RunSpec, caps: DeviceCaps | None) -> tuple[float, float]:
    """A rough (low, high) wall time for the whole race: both variants plus the compile."""
    info = MODELS.get(spec.model)
    if info is None:
        return (0.0, 0.0)
    scale = spec.batch_size / info.default_batch_size
    if info.input_kind == "image":
        scale *= (spec.input_size / info.default_size) ** 2
    on_gpu = caps is not None and resolve_device(spec.device, caps) == "cuda"
    step = _GPU_STEP_S * scale if on_gpu else _CPU_STEP_S.get(spec.model, 2.0) * scale
    compile_s = _GPU_COMPILE_S if on_gpu else _CPU_COMPILE_S.get(spec.model, 60)
    if spec.backend != "inductor":
        compile_s = compile_s / 5
    elif spec.mode in AUTOTUNE_MODES:
        compile_s *= AUTOTUNE_COMPILE_FACTOR
    total = 2 * spec.epochs * (spec.steps_per_epoch + spec.eval_steps) * step + compile_s + 5  # +5: worker start
    return (total * 0.5, total * 2.0)


def duration_note(spec: RunSpec) -> str | None:
    """What the estimate cannot know, said beside it: autotuning's cost depends on the model."""
    if spec.backend == "inductor" and spec.mode in AUTOTUNE_MODES:
        return (
            f"{spec.mode} benchmarks many kernel variants for every matrix multiply and convolution while it "
            "compiles: the compile alone can take many minutes (the estimate assumes ten times the default mode's)."
        )
    return None


def describe_duration(low: float, high: float) -> str:
    if high <= 0:  # a timm, Hugging Face or file model: no measured step time to scale from
        return "unknown for this model"

    def fmt(s: float) -> str:
        return f"{s:.0f} s" if s < 90 else f"{s / 60:.0f} min"

    return f"roughly {fmt(low)} to {fmt(high)}"


_QUERY_FIELDS = (*FORM_FIELDS, "eval_steps", "image_size", "seed", "dynamic", "fullgraph")


def spec_to_query(spec: RunSpec) -> dict[str, str]:
    """The configuration as URL query parameters (never the visitor's identity)."""
    out = {}
    for name in _QUERY_FIELDS:
        value = getattr(spec, name)
        if value is None or (name == "model" and source_of(value) == "file"):  # an upload cannot travel in a link
            continue
        out[name] = str(value).lower() if isinstance(value, bool) else str(value)
    return out


def spec_from_query(query: dict[str, str], base: RunSpec) -> tuple[RunSpec, list[str]]:
    """Apply query parameters over `base`; values that do not parse are skipped with a note."""
    values: dict[str, Any] = {}
    notes: list[str] = []
    types = {f.name: f.type for f in dataclasses.fields(RunSpec)}
    for name in _QUERY_FIELDS:
        if name not in query:
            continue
        raw = str(query[name])
        try:
            if name == "dynamic":
                values[name] = {"true": True, "false": False, "none": None}[raw.lower()]
            elif name == "fullgraph":
                values[name] = {"true": True, "false": False}[raw.lower()]
            elif "int" in str(types[name]):
                values[name] = int(raw)
            elif name == "model" and (model_name_problem(raw) or source_of(raw) == "file"):
                raise ValueError(raw)  # a zoo, timm or Hugging Face name; a file cannot come from a link
            elif name in CHOICES and name != "model" and raw not in CHOICES[name]:
                raise ValueError(raw)
            else:
                values[name] = raw
        except (KeyError, ValueError):
            notes.append(f"ignored {name}={raw!r} from the link")
    return dataclasses.replace(base, **values), notes


def form_spec(state: Any) -> RunSpec:
    """The spec the form currently describes: `form_<field>` entries of a mapping (the page's
    session state) over the RunSpec defaults."""
    values = {}
    for f in dataclasses.fields(RunSpec):
        key = f"form_{f.name}"
        if key in state:
            values[f.name] = state[key]
    for name in ("batch_size", "epochs", "steps_per_epoch", "eval_steps", "seed"):
        if isinstance(values.get(name), float) and values[name].is_integer():
            values[name] = int(values[name])
    return RunSpec(**values)
