"""The race flags, one per row of the options table (RunSpec's fields, core.engine.spec), and the RunSpec they
describe. Choices are checked by RunSpec validation, not argparse, so the CLI, the UI and the
worker give the same messages."""

from __future__ import annotations

import argparse
import os
import shlex
from collections.abc import Callable
from typing import Any

from core.engine.options import Option, cli_word
from core.engine.spec import OPTIONS, Problem, RunSpec, SpecError, spec_flags


def tri_state(option: Option) -> Callable[[str], Any]:
    """The type of an on/off flag that can also be left to torch: auto, true or false."""
    words = {cli_word(value): value for value in option.choices}

    def parse(value: str) -> Any:
        if value.lower() not in words:
            raise argparse.ArgumentTypeError(f"{value!r} is not allowed; allowed: {', '.join(words)}")
        return words[value.lower()]

    return parse


def add_spec_arguments(parser: argparse.ArgumentParser) -> None:
    """A flag per race option: its help, default and type from the options table."""
    for option in OPTIONS.values():
        kwargs: dict[str, Any] = {"help": option.text(option.help)}
        if option.type is bool and option.optional:  # --dynamic alone means true
            kwargs.update(type=tri_state(option), nargs="?", const=True, default=option.default)
        elif option.type is bool:  # the table's on/off options are off by default
            kwargs.update(action="store_true")
        else:
            kwargs["default"] = None if option.flag_unset else option.default
            if option.type is not str:
                kwargs["type"] = option.type
            if option.metavar:
                kwargs["metavar"] = option.metavar
        parser.add_argument(option.flag, **kwargs)


def spec_from_args(args: argparse.Namespace) -> RunSpec:
    """The race the flags describe: --model or --model-file names the model, and a batch size not
    given is the model's own."""
    from core.engine.models.sources import default_batch_size, default_file_model_name, model_name_problem

    values = {name: getattr(args, name) for name in OPTIONS}
    model, model_file = args.model or OPTIONS["model"].default, None
    if args.model_file:
        if args.model:
            raise SpecError([Problem("model", "give --model or --model-file, not both")])
        model, model_file = default_file_model_name(args.model_file), os.path.abspath(args.model_file)
    values.update(model=model, model_file=model_file)
    if values["batch_size"] is None:
        ok = model_name_problem(model) is None
        values["batch_size"] = default_batch_size(model) if ok else OPTIONS["batch_size"].default
    return RunSpec(**values)


RACE_COMMAND = "python -m core race"


def race_command(spec: RunSpec) -> str:
    """The command that races `spec` from a terminal: the terminal's form of a suggestion the page
    offers as a link (core.view.answers.race_link), its flags from the options table (spec_flags),
    quoted for a POSIX shell."""
    return " ".join([RACE_COMMAND, *(shlex.quote(arg) for arg in spec_flags(spec))])
