"""RunSpec: the validated description of one race, shared by the CLI, the UI and the worker.

Each field is its option's row (core.engine.spec.option): its name, type, default, choices or
range, label, help and the surfaces it appears on are one declaration, and the table every surface
reads (OPTIONS, the form's and the link's options, the sweep axes, the flags) is derived from the
fields. This module adds what depends on the model or the machine (a model's input sizes, CUDA-only
precisions and modes, combinations that cannot run).

Validation is pure: it takes the spec and a description of what the device can do, and
returns *every* problem at once, each naming the field and what is allowed, so a user fixes
everything in one go and no work starts on a spec that cannot run.
"""

from __future__ import annotations

import dataclasses
import os
import typing
from dataclasses import dataclass, field
from typing import Any

from core import PROJECT_ROOT
from core.engine.intervals import AUTO_FIXED, AUTO_TARGET, MAX_REPLICATES
from core.engine.models.sources import (
    BLOCK_SCOPES,
    COMPILE_SCOPES,
    MODELS,
    REGIONAL_BLOCKS,
    library_problem,
    model_name_problem,
    region_problem,
    source_of,
)
from core.engine.race_memory import host_memory_bytes, memory_problem

# ----------------------------------------------------------------------
# What a race option is: one row per option, and every surface of a race reads its row.
#
# A row holds an option's name, type, default, the values it may take (choices, or a range), what a
# person calls it, its help, and the surfaces it appears on: the command line (every option has a
# flag), the Race page's form, the form's link, the Runs page's comparisons, and sweeps (an axis,
# and the Sweep page's form). The rows are `RunSpec`'s fields (core.engine.spec): each field is
# declared with `option(...)`, which makes its row, so the field and the row are one declaration and
# an editor or a type checker sees every field; `options_of` reads the rows back (the table
# core.engine.spec.OPTIONS). From them come the validation, the CLI's flags (core.cli.races), the
# forms and links (core.view.race_form, core.view.sweep), the sweep axes (core.runs.sweeps.AXES)
# and the comparison words (core.view.compare). Adding an option is one field of RunSpec plus its use
# in the trainer; what depends on the machine (CUDA-only precisions, a model's input sizes) stays
# logic in core.engine.spec. What an option changes (the step's time, the compile, the race's length,
# what is recorded) is a column too: whether two races are "the same race" for a question is derived
# from it (core.engine.spec.same_race).
#
# This module holds the row's shape and the words every surface shares, not the rows: RunSpec's
# module imports it, so it cannot import RunSpec back. Torch-free: the app's process reads it too.

# What a race option changes: every "is it the same race?" question is a set of these, answered from the
# rows' `changes` (core.engine.spec.same_race), never from a list kept beside the table. The device is none of them:
# every question is asked of races on one device (or device type) already.
STEP_TIME = "changes the step's time"
COMPILE = "changes the compile"
LENGTH = "changes how long the race runs"
RECORDED = "changes what is recorded besides the timing"  # profiles, traces, the loss curve

# Ranges other modules need by name (a bundle's step numbers, a library model's input sizes).
MAX_BATCH_SIZE = 65536
MAX_EPOCHS = 1000
MAX_STEPS_PER_EPOCH = 100_000
MAX_INPUT_SIZE = 4096


@dataclass(frozen=True)
class Option:
    """One race option and where it appears. `help` is the CLI flag's help; in it (and in `sweep`)
    {choices} stands for the choices comma-separated, {typed} for them as typed in a list
    (a,b,c) and {default} for the default. Made by `option(...)` as a RunSpec field's metadata; its
    name, type and `optional` come from the field (options_of)."""

    name: str
    type: type  # int, float, str or bool
    default: Any
    label: str  # what a person calls it: the form's widget, a sweep axis ("batch size"), a heading
    help: str | None = None
    choices: tuple | None = None  # the values allowed; None: a range, or any value of the type
    min: float | None = None  # ints: from min to max; floats: strictly between them
    max: float | None = None
    optional: bool = False  # None is allowed too (the model's own, torch's automatic): `T | None` on the field
    # The command line: every option is a flag, --name-with-dashes.
    metavar: str | None = None
    flag_unset: bool = False  # the flag defaults to None, decided when the spec is built (from the model)
    # The Race page's form: (row, column) where its widget sits; None: not on the form.
    form: tuple[int, int] | None = None
    form_choices: tuple | None = None  # what the form and its link offer, when fewer than `choices`
    choice_labels: dict | None = None  # how the form's select box words each choice
    form_help: str | None = None
    sweep_form: bool = False  # the Sweep page's form shows it for the base race (at its Race-form place)
    link: bool = False  # it travels in the Race page's link (a shared configuration)
    compare: str | None = None  # its word in a comparison's labels ("batch 1,024"); None: not compared
    sweep: str | None = None  # the help of its sweep-axis flag (--<flag>s); None: not a sweep axis
    changes: tuple[str, ...] = ()  # what a different value changes: STEP_TIME, COMPILE, LENGTH, RECORDED

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def axis_flag(self) -> str:
        return self.flag + "s"

    @property
    def allowed(self) -> tuple | None:
        """The values validation accepts, where they can be listed (a bool's are True and False)."""
        if self.choices is not None:
            return self.choices
        return (True, False) if self.type is bool else None

    @property
    def offered(self) -> tuple | None:
        """The values the form (and a link) offers."""
        return self.form_choices if self.form_choices is not None else self.choices

    def text(self, template: str | None) -> str | None:
        """A help template with this option's facts filled in."""
        if template is None:
            return None
        names = [cli_word(c) for c in self.choices or ()]
        return template.format(choices=", ".join(names), typed=",".join(names), default=self.default)


def cli_word(value: Any) -> str:
    """How a value is typed on the command line: true, false, auto (None)."""
    if value is None:
        return "auto"
    return str(value).lower() if isinstance(value, bool) else str(value)


def option(default: Any, label: str, help: str | None = None, **columns: Any) -> Any:
    """A RunSpec field that is its option's row too: `name: type = option(default=..., label=..., ...)`.
    The field's name and annotation are the row's name and type (`T | None`: optional); the rest are
    the row's columns (Option)."""
    row = Option("", object, default, label, help, **columns)
    return dataclasses.field(default=default, metadata={"option": row})


def options_of(fields: type) -> dict[str, Option]:
    """name -> row of a dataclass whose fields were made by option(), in the fields' order, each row
    named and typed from its field (the type its annotation names, optional where it allows None)."""
    hints = typing.get_type_hints(fields)
    rows = {}
    for f in dataclasses.fields(fields):
        kinds = typing.get_args(hints[f.name]) or (hints[f.name],)
        types = [k for k in kinds if k is not type(None)]
        if len(types) != 1:
            raise TypeError(f"{f.name}: an option is one type, or one type or None (got {hints[f.name]})")
        rows[f.name] = dataclasses.replace(
            f.metadata["option"], name=f.name, type=types[0], optional=type(None) in kinds
        )
    return rows


CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")  # these compile modes capture CUDA graphs
# Checked in the model's branch of validate: a size is range-checked only for a model that exists.
_CHECKED_WITH_THE_MODEL = ("image_size",)
# What a race's memory floor is made of (core.engine.race_memory): estimated once all of them are valid.
_MEMORY_FIELDS = ("model", "batch_size", "image_size", "precision", "steps_per_epoch", "data", "device")


def data_home() -> str:
    """Where Compile Lab keeps its store and warm caches: $COMPILE_LAB_DATA or ./data."""
    return os.environ.get("COMPILE_LAB_DATA") or os.path.join(PROJECT_ROOT, "data")


@dataclass(frozen=True)
class RunSpec:
    """One race: the same training run eager and compiled. Each field is its option's row (what it
    allows, where it appears: core.engine.spec.Option); the defaults are a quick CPU run. The
    fields' order is the command line's help's."""

    # fmt: off
    model: str = option(
        default="pointwise_mlp", label="Model",
        help="a zoo model (see `python -m core models`), timm:<name> or hf:<name> (default: {default})",
        flag_unset=True, form=(1, 0), sweep_form=True, link=True, compare="",
        form_help="What is trained: a small model from the zoo (quick on a CPU), or a timm or Hugging Face model.", changes=(STEP_TIME, COMPILE),
    )  # a zoo name, timm:<name>, hf:<name> or file:<name>.py (core.engine.models.sources)
    model_file: str | None = option(
        default=None, label="Model file",
        help="your own model: a Python file defining build_model() (and optionally example_batch, loss)",
        metavar="PATH", changes=(STEP_TIME, COMPILE),
    )  # the Python file of a file: model (defines build_model)
    batch_size: int = option(
        default=256, label="Batch size", help="samples per step (default: the model's)",
        min=1, max=MAX_BATCH_SIZE, flag_unset=True, form=(1, 1), sweep_form=True, link=True, compare="batch",
        form_help="Samples per step. Bigger batches give compile more work per step to speed up.",
        sweep="batch sizes, e.g. 64,256,1024,4096 (shown on a log-2 axis)", changes=(STEP_TIME, COMPILE),
    )
    precision: str = option(
        default="fp32", label="Precision", help="one of {choices}",
        choices=("fp32", "tf32", "amp-fp16", "amp-bf16"),
        form=(1, 3), sweep_form=True, link=True, compare="",
        sweep="precisions, e.g. fp32,amp-bf16 (of {choices})",
        form_help="The number format: fp32 everywhere, TF32 matrix multiplies, or mixed precision (amp) with "
        "float16 or bfloat16, where a GPU supports it.", changes=(STEP_TIME, COMPILE),
    )
    mode: str = option(
        default="default", label="Compile mode", help="torch.compile mode: {choices}",
        choices=("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"),
        form=(1, 2), sweep_form=True, link=True, compare="mode", sweep="compile modes (of {choices})",
        form_help="torch.compile's mode: default; reduce-overhead (CUDA graphs: fewer launches per step); "
        "max-autotune (tries many kernels while compiling: a much longer compile).", changes=(STEP_TIME, COMPILE),
    )
    backend: str = option(
        default="inductor", label="Backend", help="torch.compile backend: {choices}",
        choices=("inductor", "aot_eager", "aot_eager_decomp_partition", "eager"), form=(2, 0), sweep_form=True,
        link=True, compare="backend", sweep="backends, the ladder eager,aot_eager,aot_eager_decomp_partition,inductor "
        "(of {choices})",
        form_help="Who turns the captured graph into code: inductor generates fused kernels (the real thing); "
        "eager only captures (Dynamo), aot_eager adds AOT autograd's tracing, aot_eager_decomp_partition adds "
        "Inductor's decompositions and its forward/backward partition, all without code generation: each a rung "
        "of the ladder that tells where a cost or an error comes in.", changes=(STEP_TIME, COMPILE),
    )  # the ladder's rungs in order: core.engine.ladder
    dynamic: bool | None = option(
        default=None, label="Dynamic shapes", help="dynamic shapes: auto (default), true, false",
        choices=(None, True, False), form=(4, 2), link=True, compare="dynamic",
        form_help="What compile does when a new input shape arrives: torch decides (auto), compile for any "
        "shape from the start, or compile again for every new shape.",
        choice_labels={
            None: "auto (torch decides)",
            True: "true (any shape)",
            False: "false (one per shape)",
        }, changes=(STEP_TIME, COMPILE),
    )  # torch.compile's own default: None = decide automatically
    fullgraph: bool = option(
        default=False, label="Full graph", help="fail on any graph break instead of splitting the graph",
        link=True, compare="fullgraph", changes=(STEP_TIME, COMPILE),
    )
    compile_scope: str = option(
        default="whole", label="Compile scope",
        help="what torch.compile compiles: {choices} (regional: each repeated block, in place; nested: the whole "
        "model, each repeated block a torch.compiler.nested_compile_region, traced once and reused)",
        choices=COMPILE_SCOPES, form=(2, 1), sweep_form=True, link=True, sweep="compile scopes: {typed}",
        form_help="Compile the whole model at once; only its repeated block (regional), compiled once and "
        "reused: a shorter compile for deep models; or the whole model with the block marked as a nested compile "
        "region (nested), traced once and stamped out for every block, what runs between the blocks compiled too.",
        changes=(STEP_TIME, COMPILE),
    )  # "regional", "nested": the repeated block (core.engine.models.sources)
    epochs: int = option(
        default=3, label="Epochs",
        min=1, max=MAX_EPOCHS, form=(3, 0), sweep_form=True, link=True, compare="epochs",
        form_help="How many passes each variant makes; the first compiled one pays the compile.", changes=(LENGTH,),
    )
    steps_per_epoch: int = option(
        default=20, label="Steps per epoch",
        min=1, max=MAX_STEPS_PER_EPOCH, form=(3, 1), sweep_form=True, link=True, compare="steps/epoch",
        form_help="Training steps per epoch: more steps give compile more time to win back what it cost.", changes=(LENGTH,),
    )
    eval_steps: int = option(
        default=0, label="Evaluation steps", help="evaluation steps after each epoch (0: none)",
        min=0, max=MAX_STEPS_PER_EPOCH, link=True, changes=(LENGTH,),
    )
    image_size: int | None = option(
        default=None, label="Input size", help="input size: image side, sequence length (default: the model's)",
        min=1, max=MAX_INPUT_SIZE, link=True, compare="size", changes=(STEP_TIME, COMPILE),
    )  # None: the model's default
    data: str = option(
        default="synthetic", label="Data", help="one of {choices}",
        choices=("synthetic", "fakedata", "cifar10"), form=(4, 0), link=True, compare="data",
        form_help="Random tensors made on the device (synthetic), or torchvision's FakeData images through a "
        "DataLoader, for image models.",
        form_choices=("synthetic", "fakedata"),  # cifar10 needs a local folder: CLI only
        changes=(STEP_TIME,),
    )
    data_dir: str | None = option(
        default=None, label="Data folder", help="for cifar10: the folder holding cifar-10-batches-py"
    )
    download: bool = option(
        default=False, label="Download",
        help="cifar10: download it if missing; hf: fetch the model's config.json (never weights); needs network",
    )
    cache: str = option(
        default="cold", label="Inductor cache",
        help="Inductor cache: {choices} (cold: a fresh cache, what a new user pays; precompiled: the step compiled ahead "
        "of time in another process, torch.compile(...).aot_compile, and loaded, what a process starting from that "
        "artifact pays)",
        choices=("cold", "warm", "precompiled"), form=(2, 2), link=True, compare="cache",
        form_help="Cold: a fresh Inductor cache, the full compile a new user pays. Warm: reuse what earlier "
        "races of this device and torch compiled (every cold race leaves its kernels there as it ends), as a second "
        "run of the same model does; the race says what it found. Precompiled (experimental in torch): another "
        "process compiles the step ahead of time and saves it; the race loads it (torch.compiler."
        "load_compiled_function), so its compile cost is what a process starting from that artifact pays.",
        changes=(COMPILE,),
    )  # precompiled: core.engine.variant
    schedule: str = option(
        default="blocks", label="Schedule",
        help="blocks (default: eager and compiled take turns every few steps), sequential (eager, then compiled) "
        "or alternating (turns epoch by epoch); blocks and alternating keep both models in memory",
        choices=("blocks", "sequential", "alternating"), form=(3, 2), link=True,
        form_help="Turns every 5 steps (the default: load and drift fall on both alike, so the interval holds "
        "from run to run); eager first, then compiled; or turns epoch by epoch. Turns keep both models in memory.",
        choice_labels={
            "blocks": "turns every 5 steps",
            "sequential": "eager, then compiled",
            "alternating": "turns, epoch by epoch",
        }, changes=(STEP_TIME,),
    )  # "blocks": turns every BLOCK_STEPS steps (core.engine.intervals), so drift falls on both alike
    target_interval: float | None = option(
        default=None, label="Run until the speedup is known",
        help="stop each variant's timed steps once the steady speedup's interval is within ±FRACTION of it "
        "(e.g. 0.03), looked at on fixed steps from 40 on; epochs x steps per epoch is then the maximum",
        min=0, max=0.5, metavar="FRACTION", form=(5, 2), sweep_form=True, link=True,
        form_choices=(None, 0.02, 0.03, 0.05, 0.1),
        choice_labels={
            None: "no: the steps asked for",
            0.02: "to ±2%", 0.03: "to ±3%", 0.05: "to ±5%", 0.1: "to ±10%",
        },
        form_help="Stop once the steady speedup's 95% interval is within this much of it (checked at fixed "
        "points from 40 steps, the 5% shared among the looks, so the interval still holds); epochs x steps per "
        "epoch is then the maximum. A noisy machine needs more steps, a steady one fewer.", changes=(LENGTH,),
    )  # core.engine.analysis
    replicates: int | None = option(
        default=None, label="Replicate processes",
        help="short processes added after the first, each running both variants again from the warm compile cache "
        "in turns; the interval rests on the spread between the processes (auto: "
        f"{AUTO_FIXED}; with --target-interval, added until it is met, at most {AUTO_TARGET}; 0: the first process alone)",
        min=0, max=MAX_REPLICATES, metavar="N", form=(6, 0), sweep_form=True, link=True,
        form_choices=(None, *range(MAX_REPLICATES + 1)),  # every count, so a link made from the command line shows as it was
        choice_labels={
            None: f"auto ({AUTO_FIXED}, or up to {AUTO_TARGET} with a target)", 0: "none: the first process alone",
            **{n: str(n) for n in range(1, MAX_REPLICATES)},
            MAX_REPLICATES: f"{MAX_REPLICATES} ({MAX_REPLICATES + 1} processes, as pyperf)",
        },
        form_help="After the first process (the cold compile, the first epoch, the break-even), short processes run "
        "both variants again from the warm cache, taking turns: a second process lands a few percent apart however "
        "long either runs, so the interval rests on how far the processes agree. With a target interval, they are "
        "added until it is met or this many ran. Each costs a process start, a warm compile and a few seconds of steps.",
        changes=(LENGTH,),
    )  # core.engine.intervals
    shapes: str = option(
        default="fixed", label="Input shapes",
        help="fixed, or varying: sequence length per batch (gpt), a smaller last batch",
        choices=("fixed", "varying"), form=(4, 1), link=True,
        form_help="Fixed: every batch the same shape. Varying: a smaller last batch (or a new sequence length "
        "per batch for gpt), which makes compile decide what to do with a new shape.",
        choice_labels={"fixed": "fixed", "varying": "varying (new shapes)"}, changes=(STEP_TIME, COMPILE),
    )  # varying: sequence length per batch (gpt), else a smaller last batch per epoch
    stance: str = option(
        default="default", label="On a recompile", help="torch.compiler.set_stance after the first compile: {choices}",
        choices=("default", "fail_on_recompile", "eager_on_recompile"), form=(5, 0), link=True,
        form_help="What happens when a new shape would need another compile (torch.compiler.set_stance): "
        "compile again, stop with an error, or run that step eagerly.",
        choice_labels={
            "default": "recompile (default)",
            "fail_on_recompile": "fail (fail_on_recompile)",
            "eager_on_recompile": "run eager (eager_on_recompile)",
        }, changes=(STEP_TIME, COMPILE),
    )  # torch.compiler.set_stance, after the first compile
    profile_steps: int = option(
        default=3, label="Profiled steps", help="steady steps profiled per variant afterwards (0: none)",
        min=0, max=50, changes=(RECORDED,),
    )  # steady steps profiled per variant after the timed epochs
    compile_trace: bool = option(
        default=False, label="Compile trace",
        help="keep torch's structured compile trace (TORCH_TRACE; tlparse reads it)",
        form=(5, 1),
        form_help="torch's structured compile trace (TORCH_TRACE, what tlparse reads), offered as a zip on the Runs "
        "page. Off by default: a large model's trace can take tens of MB.", changes=(RECORDED,),
    )
    seed: int = option(
        default=0, label="Seed", min=0, max=2**31 - 1, link=True, compare="seed", changes=(RECORDED,))
    device: str = option(
        default="auto", label="Device", help="one of {choices}", choices=("auto", "cuda", "cpu", "mps"))
    lr: float = option(
        default=1e-3, label="Learning rate",
        help="Adam learning rate", min=0, max=10, compare="lr", changes=(RECORDED,))
    # fmt: on

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunSpec:
        """Build from a dict (JSON, a store row); unknown keys are a SpecError, not ignored."""
        names = {f.name for f in dataclasses.fields(cls)}
        if not isinstance(data, dict):
            raise SpecError([Problem("spec", f"must be an object of fields (got {type(data).__name__})")])
        unknown = sorted(set(data) - names)
        if unknown:
            raise SpecError([Problem(k, f"unknown field; allowed: {', '.join(sorted(names))}") for k in unknown])
        return cls(**data)

    @classmethod
    def stored(cls, data: Any) -> RunSpec | None:
        """A stored race's spec (a run's params, a bundle's), None where they are no race's (a
        damaged row, a foreign or older one): for reading what is kept, never for running it."""
        try:
            spec = cls.from_dict(data)
        except (SpecError, TypeError, ValueError):
            return None
        numbers = [o for o in OPTIONS.values() if o.type in (int, float)]  # what step counts are made of
        return spec if all(_option_ok([], o, getattr(spec, o.name)) for o in numbers) else None

    @property
    def input_size(self) -> int:
        """The input size actually used: the given one or the model's default (0: a timm, Hugging
        Face or file model's own default, known once it is built)."""
        if self.image_size is not None:
            return self.image_size
        info = MODELS.get(self.model)
        return info.default_size if info else 0

    @property
    def total_steps(self) -> int:
        """Timed training steps each variant runs: epochs x steps per epoch."""
        return self.epochs * self.steps_per_epoch

    @property
    def recorded_steps(self) -> int:
        """Step events both variants record, training and evaluation: what a race writes to the store."""
        return 2 * self.epochs * (self.steps_per_epoch + self.eval_steps)

    def same_race(self, *effects: str) -> tuple[tuple[str, Any], ...]:
        """The values two races must share to be the same race as far as `effects` go
        (same_race below), the input size as used (a model's default made explicit):
        compare two specs' same_race(...) to ask."""
        values = {**self.to_dict(), "image_size": self.input_size}
        return tuple((name, values[name]) for name in same_race(*effects))


# name -> row, in the fields' order (the command line's help lists them so).
OPTIONS: dict[str, Option] = options_of(RunSpec)


def same_race(*effects: str) -> tuple[str, ...]:
    """The options two races must share to be the same race as far as `effects` go: the run-to-run
    spread's configuration (STEP_TIME), the expected compile time (COMPILE), an estimate scaled by
    length (STEP_TIME, COMPILE), a shared result (all four). RunSpec.same_race gives their values."""
    return tuple(o.name for o in OPTIONS.values() if set(o.changes) & set(effects))


def on_form() -> list[Option]:
    """The Race page form's options, row by row, left to right."""
    return sorted((o for o in OPTIONS.values() if o.form is not None), key=lambda o: o.form)


def in_link() -> tuple[str, ...]:
    """The options a Race page link carries."""
    return tuple(name for name, o in OPTIONS.items() if o.link)


def sweep_axes() -> list[Option]:
    """The options a sweep can vary."""
    return [o for o in OPTIONS.values() if o.sweep is not None]


def spec_flags(spec: Any) -> list[str]:
    """The flags that make `spec_from_args` build this spec again: what a bench or a fleet runs to
    get the same race through the CLI (and so through the app's own worker, with `submit`), and the
    command a race script names as the one that made its race (core.runs.race_script)."""
    argv: list[str] = []
    for row in OPTIONS.values():
        value = getattr(spec, row.name)
        if row.name == "model" and spec.model_file:
            continue  # --model-file names the model
        if row.type is bool and not row.optional:
            argv += [row.flag] if value else []
        elif value is not None and (row.flag_unset or value != row.default):
            argv += [row.flag, cli_word(value)]
    return argv


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a spec: the field and a sentence saying what is allowed."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class SpecError(ValueError):
    """A spec that cannot run; carries every problem found."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("; ".join(str(p) for p in problems))


@dataclass(frozen=True)
class DeviceCaps:
    """What the machine can do, as far as validation needs to know (no torch objects).

    `cuda_bf16` means *native* bfloat16 (compute capability 8.0+): torch.cuda.is_bf16_supported()
    also counts emulated bf16 (a V100 or T4 says yes), and under autocast Inductor then skips the
    whole frame, so a "compiled" run would silently run eager. `triton` is None when unknown (a
    probe recorded before this field existed), so old records never block a run.
    """

    cuda: bool = False
    mps: bool = False
    cuda_name: str = ""
    compute_capability: tuple[int, int] | None = None
    cuda_bf16: bool = False
    cuda_bf16_emulated: bool = False
    triton: bool | None = None
    gpu_count: int = 0
    cpu_count: int = field(default_factory=lambda: os.cpu_count() or 1)
    # Memory, for refusing a race that cannot fit (core.engine.race_memory): the host's RAM (or its
    # cgroup's limit) for a CPU race, the GPU's for a CUDA one (the largest, where there are several;
    # an agent's lane says its own). None: unknown (a probe recorded before these fields), never refused.
    memory_bytes: int | None = None
    cuda_memory_bytes: int | None = None

    @property
    def default_device(self) -> str:
        return "cuda" if self.cuda else ("mps" if self.mps else "cpu")

    @property
    def cuda_lanes(self) -> int:
        """Queue lanes for CUDA jobs: one per GPU (one when the count is unknown)."""
        return max(self.gpu_count, 1) if self.cuda else 0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DeviceCaps:
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        if values.get("compute_capability") is not None:
            values["compute_capability"] = tuple(values["compute_capability"])
        return cls(**values)


def native_bf16(torch_cuda: Any, capability: tuple[int, int]) -> bool:
    """Native bfloat16 on the current GPU: torch's own answer without emulation where this torch
    can say so (`including_emulation=False`, torch 2.4+), else compute capability 8.0 or newer."""
    try:
        return bool(torch_cuda.is_bf16_supported(including_emulation=False))
    except TypeError:  # an older torch without the argument counts emulation: do not trust it
        return capability >= (8, 0)


def triton_usable() -> bool:
    """Can Inductor generate GPU kernels here? (Triton importable and torch agreeing.)"""
    try:
        from torch.utils._triton import has_triton

        return bool(has_triton())
    except Exception:  # noqa: BLE001 - a private helper; fall back to importing Triton itself
        try:
            import triton  # noqa: F401

            return True
        except Exception:  # noqa: BLE001
            return False


def detect_device_caps() -> DeviceCaps:
    """Ask torch what this machine has. Only worker/CLI processes call this (it may init CUDA)."""
    import torch

    if torch.cuda.is_available():
        cc = torch.cuda.get_device_capability()
        capability = (int(cc[0]), int(cc[1]))
        native = native_bf16(torch.cuda, capability)
        try:
            emulated = not native and bool(torch.cuda.is_bf16_supported())
        except Exception:  # noqa: BLE001
            emulated = False
        return DeviceCaps(
            cuda=True,
            cuda_name=torch.cuda.get_device_name(),
            compute_capability=capability,
            cuda_bf16=native,
            cuda_bf16_emulated=emulated,
            triton=triton_usable(),
            gpu_count=torch.cuda.device_count(),
            memory_bytes=host_memory_bytes(),
            cuda_memory_bytes=max(
                int(torch.cuda.get_device_properties(i).total_memory) for i in range(torch.cuda.device_count())
            ),
        )
    mps = getattr(torch.backends, "mps", None)
    return DeviceCaps(mps=bool(mps and mps.is_available()), memory_bytes=host_memory_bytes())


def inductor_problem(caps: DeviceCaps) -> str | None:
    """Why Inductor cannot compile for this machine's GPU, or None. Inductor writes Triton kernels
    for CUDA: it needs Triton installed and compute capability 7.0 or newer."""
    if not caps.cuda:
        return None
    name = caps.cuda_name or "this GPU"
    cc = caps.compute_capability
    if cc is not None and cc < (7, 0):
        return (
            f"Inductor needs compute capability 7.0 or newer to generate Triton kernels ({name} is {cc[0]}.{cc[1]}); "
            "use backend aot_eager"
        )
    if caps.triton is False:
        return "Inductor needs Triton to compile for a GPU and it is not installed here (pip install triton); use backend aot_eager"
    return None


def resolve_device(requested: str, caps: DeviceCaps) -> str:
    """'auto' becomes the best device present; anything else is returned as is."""
    return caps.default_device if requested == "auto" else requested


def _choice(problems: list[Problem], name: str, value: Any, allowed: tuple) -> bool:
    if value in allowed:
        return True
    shown = ", ".join("none" if a is None else str(a) for a in allowed)
    problems.append(Problem(name, f"{value!r} is not allowed; allowed: {shown}"))
    return False


def _int_range(problems: list[Problem], name: str, value: Any, low: int, high: int) -> bool:
    if isinstance(value, bool) or not isinstance(value, int):
        problems.append(Problem(name, f"must be a whole number from {low} to {high} (got {value!r})"))
        return False
    if not low <= value <= high:
        problems.append(Problem(name, f"must be from {low} to {high} (got {value})"))
        return False
    return True


def _option_ok(problems: list[Problem], option: Option, value: Any) -> bool:
    """The option's own rule, from its row: one of its choices, or a number in its range."""
    if option.optional and value is None:
        return True
    if option.allowed is not None:
        return _choice(problems, option.name, value, option.allowed)
    if option.type is int and option.min is not None:
        return _int_range(problems, option.name, value, int(option.min), int(option.max))
    if option.type is float and option.min is not None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not option.min < value < option.max:
            problems.append(
                Problem(option.name, f"must be a number between {option.min} and {option.max} (got {value!r})")
            )
            return False
    return True


def validate(spec: RunSpec, caps: DeviceCaps | None = None) -> list[Problem]:
    """Every problem with `spec` on a machine with `caps` (None: check the spec alone)."""
    p: list[Problem] = []
    model_problem = model_name_problem(spec.model)
    if model_problem:
        p.append(Problem("model", model_problem))
    model_ok = model_problem is None
    p.extend(_model_file_problems(spec, caps))
    ok = {
        name: _option_ok(p, option, getattr(spec, name))
        for name, option in OPTIONS.items()
        if name not in _CHECKED_WITH_THE_MODEL
    }
    if ok["stance"] and spec.stance != "default" and isinstance(spec.eval_steps, int) and spec.eval_steps > 0:
        p.append(
            Problem(
                "stance",
                f"{spec.stance!r} treats every new graph after the first compile as a recompile, and evaluation "
                "compiles a graph of its own: use eval_steps 0 with it",
            )
        )
    scope_ok, device_ok = ok["compile_scope"], ok["device"]
    if ok["cache"] and spec.cache == "precompiled":
        p.extend(_precompiled_problems(spec))

    if spec.mode != "default" and spec.backend != "inductor" and spec.mode in OPTIONS["mode"].choices:
        p.append(
            Problem("mode", f"{spec.mode!r} is an Inductor mode; with backend {spec.backend!r} use mode 'default'")
        )

    if model_ok and source_of(spec.model) != "zoo":
        if scope_ok and spec.compile_scope in BLOCK_SCOPES:  # found only after the eager run, otherwise
            p.append(
                Problem(
                    "compile_scope",
                    f"{spec.compile_scope} compile needs a zoo model whose repeated block is known "
                    f"({', '.join(REGIONAL_BLOCKS)}); for {source_of(spec.model)} models use 'whole'",
                )
            )
        p.extend(_library_model_problems(spec, caps))
    elif model_ok:
        info = MODELS[spec.model]
        if scope_ok and spec.compile_scope in BLOCK_SCOPES and region_problem(spec.model):
            p.append(Problem("compile_scope", region_problem(spec.model)))
        if spec.image_size is not None and _option_ok(p, OPTIONS["image_size"], spec.image_size):
            problem = info.size_problem(spec.image_size)
            if problem:
                p.append(Problem("image_size", problem))
        if spec.data in ("fakedata", "cifar10") and info.input_kind != "image":
            takes = {"vector": "vectors", "tokens": "token sequences"}.get(info.input_kind, info.input_kind)
            p.append(Problem("data", f"{spec.model} takes {takes}, not images: choose synthetic data"))
    if spec.data == "cifar10" and not spec.download:
        if not spec.data_dir:
            p.append(
                Problem("data_dir", "cifar10 needs the directory that holds cifar-10-batches-py (or download=true)")
            )
        elif not os.path.isdir(os.path.join(spec.data_dir, "cifar-10-batches-py")):
            p.append(Problem("data_dir", f"no cifar-10-batches-py folder in {spec.data_dir!r} (or set download=true)"))

    if caps is not None and device_ok:
        p.extend(_device_problems(spec, caps))
    if caps is not None and model_ok and not any(q.field in _MEMORY_FIELDS for q in p):
        memory = memory_problem(spec, resolve_device(spec.device, caps), caps)
        p.extend([Problem("batch_size", memory)] if memory else [])
    return p


def _precompiled_problems(spec: RunSpec) -> list[Problem]:
    """What a step compiled ahead of time cannot be (core.engine.variant): it is the whole model's
    forward, traced once at the race's shape, in training mode, outside autocast, without CUDA graphs."""
    p: list[Problem] = []
    why = "a precompiled step is traced once, ahead of time"
    if spec.compile_scope != "whole":
        p.append(
            Problem(
                "compile_scope",
                f"{why}, of the whole model's forward: use compile scope 'whole' with cache precompiled",
            )
        )
    if isinstance(spec.eval_steps, int) and spec.eval_steps > 0:
        p.append(
            Problem("eval_steps", f"{why}, in training mode (evaluation would need a second one): use eval_steps 0")
        )
    if spec.shapes != "fixed":
        p.append(Problem("shapes", f"{why}, at the race's batch shape: use shapes 'fixed' with cache precompiled"))
    if spec.stance != "default":
        p.append(Problem("stance", f"{why}: nothing recompiles, so there is no stance to take; use stance 'default'"))
    if spec.precision in ("amp-fp16", "amp-bf16"):
        p.append(Problem("precision", f"{why}, outside autocast: use fp32 or tf32 with cache precompiled"))
    if spec.mode in CUDA_GRAPH_MODES:
        p.append(Problem("mode", f"{why}; CUDA graphs are recorded at run time, not saved in it: use mode 'default' or "
                         "'max-autotune-no-cudagraphs'"))  # fmt: skip
    return p


def _model_file_problems(spec: RunSpec, caps: DeviceCaps | None) -> list[Problem]:
    """A file: model names its Python file; no other model takes one. Whether the file exists is a
    fact of this machine, checked only with `caps` (an imported run's file stays on its machine)."""
    path = spec.model_file
    if source_of(spec.model) != "file":
        if path is not None:
            return [Problem("model_file", f"only a file: model takes a model file (model is {spec.model!r})")]
        return []
    if not isinstance(path, str) or not path:
        return [Problem("model_file", "a file: model needs its Python file (--model-file, or an upload in the app)")]
    if caps is not None and not os.path.isfile(path):
        return [Problem("model_file", f"no such file: {path}")]
    return []


def _library_model_problems(spec: RunSpec, caps: DeviceCaps | None) -> list[Problem]:
    """What can be said about a timm, Hugging Face or file model without building it: its input
    size is in range, it takes images where the data source gives images, and (on this machine,
    with `caps`) its library is installed. The rest is checked where it is built."""
    p: list[Problem] = []
    source = source_of(spec.model)
    if spec.image_size is not None:
        _option_ok(p, OPTIONS["image_size"], spec.image_size)
    if spec.data in ("fakedata", "cifar10") and source != "timm":
        p.append(
            Problem("data", f"{spec.data} data is images, for zoo and timm image models only: choose synthetic data")
        )
    if spec.shapes == "varying" and source == "file":
        p.append(Problem("shapes", "varying shapes cut batches whose layout Compile Lab knows: not a model file's own"))
    missing = library_problem(source) if caps is not None else None
    if missing:
        p.append(Problem("model", missing))
    return p


def _device_problems(spec: RunSpec, caps: DeviceCaps) -> list[Problem]:
    """Combinations this machine cannot run, each with the reason."""
    p: list[Problem] = []
    device = resolve_device(spec.device, caps)
    if device == "cuda" and not caps.cuda:
        p.append(Problem("device", "cuda is not available on this machine; allowed: auto, cpu"))
        return p
    if device == "mps" and not caps.mps:
        p.append(Problem("device", "mps is not available on this machine; allowed: auto, cpu"))
        return p
    if device != "cuda":
        if spec.precision == "amp-fp16":
            p.append(
                Problem("precision", f"amp-fp16 needs a CUDA GPU (device is {device}); allowed here: fp32, amp-bf16")
            )
        if spec.precision == "tf32":
            p.append(
                Problem(
                    "precision", f"tf32 is a CUDA tensor-core format (device is {device}); allowed here: fp32, amp-bf16"
                )
            )
        if spec.mode in CUDA_GRAPH_MODES:
            p.append(
                Problem(
                    "mode",
                    f"{spec.mode!r} uses CUDA graphs, which need a CUDA GPU (device is {device}); allowed here: default, max-autotune-no-cudagraphs",
                )
            )
    else:
        cc = caps.compute_capability
        if spec.precision == "amp-bf16" and not caps.cuda_bf16:
            p.append(Problem("precision", _no_native_bf16(caps)))
        if spec.backend == "inductor":
            reason = inductor_problem(caps)
            if reason:
                p.append(Problem("backend", reason))
        if spec.precision == "tf32" and cc is not None and cc < (8, 0):
            p.append(
                Problem(
                    "precision",
                    f"tf32 needs compute capability 8.0 or newer ({caps.cuda_name} is {cc[0]}.{cc[1]}); use fp32 or amp-fp16",
                )
            )
    if device == "mps" and spec.backend == "inductor" and spec.mode != "default":
        p.append(Problem("mode", "on mps only mode 'default' is supported"))
    return p


def _no_native_bf16(caps: DeviceCaps) -> str:
    name = caps.cuda_name or "this GPU"
    cc = caps.compute_capability
    where = f" (compute capability {cc[0]}.{cc[1]}; native bfloat16 needs 8.0+)" if cc else ""
    if caps.cuda_bf16_emulated:
        return (
            f"{name}{where} only emulates bfloat16: Inductor skips such graphs, so the compiled run would run "
            "eagerly and the race would measure nothing; use amp-fp16"
        )
    return f"{name}{where} does not support bfloat16; use amp-fp16"


def check(spec: RunSpec, caps: DeviceCaps | None = None) -> RunSpec:
    """Return the spec if it is valid, else raise SpecError with every problem."""
    problems = validate(spec, caps)
    if problems:
        raise SpecError(problems)
    return spec
