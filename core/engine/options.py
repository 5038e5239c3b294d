"""What a race option is: one row per option, and every surface of a race reads its row.

A row holds an option's name, type, default, the values it may take (choices, or a range), what a
person calls it, its help, and the surfaces it appears on: the command line (every option has a
flag), the Race page's form, the form's link, the Runs page's comparisons, and sweeps (an axis,
and the Sweep page's form). The rows are `RunSpec`'s fields (core.engine.spec): each field is
declared with `option(...)`, which makes its row, so the field and the row are one declaration and
an editor or a type checker sees every field; `options_of` reads the rows back (the table
core.engine.spec.OPTIONS). From them come the validation, the CLI's flags (core.cli.race_flags), the
forms and links (core.view.race_form, core.view.sweep_form), the sweep axes (core.runs.sweeps.AXES)
and the comparison words (core.view.compare). Adding an option is one field of RunSpec plus its use
in the trainer; what depends on the machine (CUDA-only precisions, a model's input sizes) stays
logic in core.engine.spec. What an option changes (the step's time, the compile, the race's length,
what is recorded) is a column too: whether two races are "the same race" for a question is derived
from it (core.engine.spec.same_race).

This module holds the row's shape and the words every surface shares, not the rows: RunSpec's
module imports it, so it cannot import RunSpec back. Torch-free: the app's process reads it too.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any

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
