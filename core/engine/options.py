"""The race options: one row per option, and every surface of a race reads its row.

A row holds an option's name, type, default, the values it may take (choices, or a range), what a
person calls it, its help, and the surfaces it appears on: the command line (every option has a
flag), the Race page's form, the form's link, the Runs page's comparisons, and sweeps (an axis,
and the Sweep page's form). `RunSpec` (core.engine.spec) is built from these rows, so are its
validation, the CLI's flags (core.cli.race_flags), the forms and links (core.view.race_form,
core.view.sweep_form), the sweep axes (core.runs.sweeps.AXES) and the comparison words
(core.view.compare). Adding an option is one row here plus its use in the trainer; what depends on
the machine (CUDA-only precisions, a model's input sizes) stays logic in core.engine.spec. What an
option changes (the step's time, the compile, the race's length, what is recorded) is a column too:
whether two races are "the same race" for a question is derived from it (same_race).

Torch-free: the app's process reads this table too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.engine.models.regions import COMPILE_SCOPES
from core.engine.replicates import AUTO_FIXED, AUTO_TARGET, MAX_REPLICATES

# What a race option changes: every "is it the same race?" question is a set of these, answered from the
# rows' `changes` (same_race below), never from a list kept beside the table. The device is none of them:
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
    (a,b,c) and {default} for the default."""

    name: str
    type: type  # int, float, str or bool
    default: Any
    label: str  # what a person calls it: the form's widget, a sweep axis ("batch size"), a heading
    help: str | None = None
    choices: tuple | None = None  # the values allowed; None: a range, or any value of the type
    min: float | None = None  # ints: from min to max; floats: strictly between them
    max: float | None = None
    optional: bool = False  # None is allowed too (the model's own, torch's automatic)
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


_ROWS = (
    Option(
        "model", str, "pointwise_mlp", "Model",
        "a zoo model (see `python -m core models`), timm:<name> or hf:<name> (default: {default})",
        flag_unset=True, form=(1, 0), sweep_form=True, link=True, compare="",
        form_help="What is trained: a small model from the zoo (quick on a CPU), or a timm or Hugging Face model.", changes=(STEP_TIME, COMPILE),
    ),  # a zoo name, timm:<name>, hf:<name> or file:<name>.py (core.engine.models.sources)
    Option(
        "model_file", str, None, "Model file",
        "your own model: a Python file defining build_model() (and optionally example_batch, loss)",
        optional=True, metavar="PATH", changes=(STEP_TIME, COMPILE),
    ),  # the Python file of a file: model (defines build_model)
    Option(
        "batch_size", int, 256, "Batch size", "samples per step (default: the model's)",
        min=1, max=MAX_BATCH_SIZE, flag_unset=True, form=(1, 1), sweep_form=True, link=True, compare="batch",
        form_help="Samples per step. Bigger batches give compile more work per step to speed up.",
        sweep="batch sizes, e.g. 64,256,1024,4096 (shown on a log-2 axis)", changes=(STEP_TIME, COMPILE),
    ),
    Option(
        "precision", str, "fp32", "Precision", "one of {choices}",
        choices=("fp32", "tf32", "amp-fp16", "amp-bf16"),
        form=(1, 3), sweep_form=True, link=True, compare="",
        sweep="precisions, e.g. fp32,amp-bf16 (of {choices})",
        form_help="The number format: fp32 everywhere, TF32 matrix multiplies, or mixed precision (amp) with "
        "float16 or bfloat16, where a GPU supports it.", changes=(STEP_TIME, COMPILE),
    ),
    Option(
        "mode", str, "default", "Compile mode", "torch.compile mode: {choices}",
        choices=("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"),
        form=(1, 2), sweep_form=True, link=True, compare="mode", sweep="compile modes (of {choices})",
        form_help="torch.compile's mode: default; reduce-overhead (CUDA graphs: fewer launches per step); "
        "max-autotune (tries many kernels while compiling: a much longer compile).", changes=(STEP_TIME, COMPILE),
    ),
    Option(
        "backend", str, "inductor", "Backend", "torch.compile backend: {choices}",
        choices=("inductor", "aot_eager", "aot_eager_decomp_partition", "eager"), form=(2, 0), sweep_form=True,
        link=True, compare="backend", sweep="backends, the ladder eager,aot_eager,aot_eager_decomp_partition,inductor "
        "(of {choices})",
        form_help="Who turns the captured graph into code: inductor generates fused kernels (the real thing); "
        "eager only captures (Dynamo), aot_eager adds AOT autograd's tracing, aot_eager_decomp_partition adds "
        "Inductor's decompositions and its forward/backward partition, all without code generation: each a rung "
        "of the ladder that tells where a cost or an error comes in.", changes=(STEP_TIME, COMPILE),
    ),  # the ladder's rungs in order: core.engine.ladder
    Option(
        "dynamic", bool, None, "Dynamic shapes", "dynamic shapes: auto (default), true, false",
        choices=(None, True, False), optional=True, form=(4, 2), link=True, compare="dynamic",
        form_help="What compile does when a new input shape arrives: torch decides (auto), compile for any "
        "shape from the start, or compile again for every new shape.",
        choice_labels={
            None: "auto (torch decides)",
            True: "true (any shape)",
            False: "false (one per shape)",
        }, changes=(STEP_TIME, COMPILE),
    ),  # torch.compile's own default: None = decide automatically
    Option(
        "fullgraph", bool, False, "Full graph", "fail on any graph break instead of splitting the graph",
        link=True, compare="fullgraph", changes=(STEP_TIME, COMPILE),
    ),
    Option(
        "compile_scope", str, "whole", "Compile scope",
        "what torch.compile compiles: {choices} (regional: each repeated block, in place; nested: the whole "
        "model, each repeated block a torch.compiler.nested_compile_region, traced once and reused)",
        choices=COMPILE_SCOPES, form=(2, 1), sweep_form=True, link=True, sweep="compile scopes: {typed}",
        form_help="Compile the whole model at once; only its repeated block (regional), compiled once and "
        "reused: a shorter compile for deep models; or the whole model with the block marked as a nested compile "
        "region (nested), traced once and stamped out for every block, what runs between the blocks compiled too.",
        changes=(STEP_TIME, COMPILE),
    ),  # "regional", "nested": the repeated block (core.engine.models.regions)
    Option(
        "epochs", int, 3, "Epochs",
        min=1, max=MAX_EPOCHS, form=(3, 0), sweep_form=True, link=True, compare="epochs",
        form_help="How many passes each variant makes; the first compiled one pays the compile.", changes=(LENGTH,),
    ),
    Option(
        "steps_per_epoch", int, 20, "Steps per epoch",
        min=1, max=MAX_STEPS_PER_EPOCH, form=(3, 1), sweep_form=True, link=True, compare="steps/epoch",
        form_help="Training steps per epoch: more steps give compile more time to win back what it cost.", changes=(LENGTH,),
    ),
    Option(
        "eval_steps", int, 0, "Evaluation steps", "evaluation steps after each epoch (0: none)",
        min=0, max=MAX_STEPS_PER_EPOCH, link=True, changes=(LENGTH,),
    ),
    Option(
        "image_size", int, None, "Input size", "input size: image side, sequence length (default: the model's)",
        min=1, max=MAX_INPUT_SIZE, optional=True, link=True, compare="size", changes=(STEP_TIME, COMPILE),
    ),  # None: the model's default
    Option(
        "data", str, "synthetic", "Data", "one of {choices}",
        choices=("synthetic", "fakedata", "cifar10"), form=(4, 0), link=True, compare="data",
        form_help="Random tensors made on the device (synthetic), or torchvision's FakeData images through a "
        "DataLoader, for image models.",
        form_choices=("synthetic", "fakedata"),  # cifar10 needs a local folder: CLI only
        changes=(STEP_TIME,),
    ),
    Option(
        "data_dir", str, None, "Data folder", "for cifar10: the folder holding cifar-10-batches-py", optional=True
    ),
    Option(
        "download", bool, False, "Download",
        "cifar10: download it if missing; hf: fetch the model's config.json (never weights); needs network",
    ),
    Option(
        "cache", str, "cold", "Inductor cache",
        "Inductor cache: {choices} (cold: a fresh cache, what a new user pays; precompiled: the step compiled ahead "
        "of time in another process, torch.compile(...).aot_compile, and loaded, what a process starting from that "
        "artifact pays)",
        choices=("cold", "warm", "precompiled"), form=(2, 2), link=True, compare="cache",
        form_help="Cold: a fresh Inductor cache, the full compile a new user pays. Warm: reuse what earlier "
        "races of this device and torch compiled (every cold race leaves its kernels there as it ends), as a second "
        "run of the same model does; the race says what it found. Precompiled (experimental in torch): another "
        "process compiles the step ahead of time and saves it; the race loads it (torch.compiler."
        "load_compiled_function), so its compile cost is what a process starting from that artifact pays.",
        changes=(COMPILE,),
    ),  # precompiled: core.engine.precompiled
    Option(
        "schedule", str, "blocks", "Schedule",
        "blocks (default: eager and compiled take turns every few steps), sequential (eager, then compiled) "
        "or alternating (turns epoch by epoch); blocks and alternating keep both models in memory",
        choices=("blocks", "sequential", "alternating"), form=(3, 2), link=True,
        form_help="Turns every 5 steps (the default: load and drift fall on both alike, so the interval holds "
        "from run to run); eager first, then compiled; or turns epoch by epoch. Turns keep both models in memory.",
        choice_labels={
            "blocks": "turns every 5 steps",
            "sequential": "eager, then compiled",
            "alternating": "turns, epoch by epoch",
        }, changes=(STEP_TIME,),
    ),  # "blocks": turns every BLOCK_STEPS steps (core.engine.intervals), so drift falls on both alike
    Option(
        "target_interval", float, None, "Run until the speedup is known",
        "stop each variant's timed steps once the steady speedup's interval is within ±FRACTION of it "
        "(e.g. 0.03), looked at on fixed steps from 40 on; epochs x steps per epoch is then the maximum",
        min=0, max=0.5, optional=True, metavar="FRACTION", form=(5, 2), sweep_form=True, link=True,
        form_choices=(None, 0.02, 0.03, 0.05, 0.1),
        choice_labels={
            None: "no: the steps asked for",
            0.02: "to ±2%", 0.03: "to ±3%", 0.05: "to ±5%", 0.1: "to ±10%",
        },
        form_help="Stop once the steady speedup's 95% interval is within this much of it (checked at fixed "
        "points from 40 steps, the 5% shared among the looks, so the interval still holds); epochs x steps per "
        "epoch is then the maximum. A noisy machine needs more steps, a steady one fewer.", changes=(LENGTH,),
    ),  # core.engine.stopping
    Option(
        "replicates", int, None, "Replicate processes",
        "short processes added after the first, each running both variants again from the warm compile cache "
        "in turns; the interval rests on the spread between the processes (auto: "
        f"{AUTO_FIXED}; with --target-interval, added until it is met, at most {AUTO_TARGET}; 0: the first process alone)",
        min=0, max=MAX_REPLICATES, optional=True, metavar="N", form=(6, 0), sweep_form=True, link=True,
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
    ),  # core.engine.replicates
    Option(
        "shapes", str, "fixed", "Input shapes",
        "fixed, or varying: sequence length per batch (gpt), a smaller last batch",
        choices=("fixed", "varying"), form=(4, 1), link=True,
        form_help="Fixed: every batch the same shape. Varying: a smaller last batch (or a new sequence length "
        "per batch for gpt), which makes compile decide what to do with a new shape.",
        choice_labels={"fixed": "fixed", "varying": "varying (new shapes)"}, changes=(STEP_TIME, COMPILE),
    ),  # varying: sequence length per batch (gpt), else a smaller last batch per epoch
    Option(
        "stance", str, "default", "On a recompile",
        "torch.compiler.set_stance after the first compile: {choices}",
        choices=("default", "fail_on_recompile", "eager_on_recompile"), form=(5, 0), link=True,
        form_help="What happens when a new shape would need another compile (torch.compiler.set_stance): "
        "compile again, stop with an error, or run that step eagerly.",
        choice_labels={
            "default": "recompile (default)",
            "fail_on_recompile": "fail (fail_on_recompile)",
            "eager_on_recompile": "run eager (eager_on_recompile)",
        }, changes=(STEP_TIME, COMPILE),
    ),  # torch.compiler.set_stance, after the first compile
    Option(
        "profile_steps", int, 3, "Profiled steps", "steady steps profiled per variant afterwards (0: none)",
        min=0, max=50, changes=(RECORDED,),
    ),  # steady steps profiled per variant after the timed epochs
    Option(
        "compile_trace", bool, False, "Compile trace",
        "keep torch's structured compile trace (TORCH_TRACE; tlparse reads it)",
        form=(5, 1),
        form_help="torch's structured compile trace (TORCH_TRACE, what tlparse reads), offered as a zip on the Runs "
        "page. Off by default: a large model's trace can take tens of MB.", changes=(RECORDED,),
    ),
    Option("seed", int, 0, "Seed", min=0, max=2**31 - 1, link=True, compare="seed", changes=(RECORDED,)),
    Option("device", str, "auto", "Device", "one of {choices}", choices=("auto", "cuda", "cpu", "mps")),
    Option("lr", float, 1e-3, "Learning rate", "Adam learning rate", min=0, max=10, compare="lr", changes=(RECORDED,)),
)  # fmt: skip

# name -> row, in the order the command line's help lists them (RunSpec's fields follow it too).
OPTIONS: dict[str, Option] = {row.name: row for row in _ROWS}


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
    for option in OPTIONS.values():
        value = getattr(spec, option.name)
        if option.name == "model" and spec.model_file:
            continue  # --model-file names the model
        if option.type is bool and not option.optional:
            argv += [option.flag] if value else []
        elif value is not None and (option.flag_unset or value != option.default):
            argv += [option.flag, cli_word(value)]
    return argv
