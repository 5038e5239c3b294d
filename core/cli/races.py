"""`race`: train eager and compiled side by side in this process, with progress on stderr, then
the summary table (or JSON).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from core.cli.common import EXIT_CANCELLED, EXIT_FAILED, EXIT_OK, EXIT_USAGE
from core.engine import words
from core.engine.spec import OPTIONS, Option, Problem, RunSpec, SpecError, cli_word, spec_flags

# ----------------------------------------------------------------------
# The race flags, one per row of the options table (RunSpec's fields, core.engine.spec), and the RunSpec they
# describe. Choices are checked by RunSpec validation, not argparse, so the CLI, the UI and the
# worker give the same messages.


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


class ProgressPrinter:
    """Live progress on stderr: phase lines always, a rewritten step line on a terminal."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.tty = stream.isatty()
        self._last = 0.0
        self._compile_started: float | None = None

    def __call__(self, event) -> None:
        from core.engine.events import (
            BusyEvent,
            CompileEvent,
            EpochEvent,
            ReplicateEvent,
            StartEvent,
            StatusEvent,
            StepEvent,
        )
        from core.view.report import environment_header, process_line

        if isinstance(event, StartEvent):
            self._line(environment_header(event.environment))
        elif isinstance(event, ReplicateEvent):
            self._line(process_line(event.process))
        elif isinstance(event, BusyEvent):
            steps = f"{event.first_step}-{event.last_step}" if event.last_step > event.first_step else event.first_step
            self._line(
                f"[{event.variant}] busy machine during steps {steps}: waited for a core {event.wait_share:.0%} of the time"
            )
        elif isinstance(event, CompileEvent):
            self._line(f"[{event.variant}] {event.phase} step {event.step}: {event.note}")
        elif isinstance(event, StatusEvent):
            if event.state == "compile_phase":
                if event.message:
                    self._compile_started = self._compile_started or time.monotonic()
                    elapsed = time.monotonic() - self._compile_started
                    self._line(f"[{event.variant}] compiling, {words.seconds(elapsed)} in: {event.message}")
                else:
                    self._compile_started = None
            elif event.state == "compiling":
                self._line(f"[compiled] {event.message} ...")
            elif event.state == "replicating":
                self._line(f"[{event.message}] both variants again in a new process, from the warm cache ...")
            elif event.state == "starting":
                self._line(f"[{event.variant}] starting" + (f" ({event.message})" if event.message else ""))
            elif event.state == "compile_skipped":
                self._line(f"[compiled] compile did not happen: {event.message}")
            elif event.state == "compile_failed":
                self._line(f"[compiled] compile failed on this model: {event.message}; eager ran")
            elif event.state == "failed":
                self._line(f"[{event.variant}] failed: {event.message}")
        elif isinstance(event, StepEvent) and self.tty and time.monotonic() - self._last > 0.2:
            self._last = time.monotonic()
            self.stream.write(
                f"\r[{event.variant}] epoch {event.epoch} {event.phase} step {event.step}  "
                f"{words.seconds(event.time_s)}  loss {event.loss:.4f}   "
            )
            self.stream.flush()
        elif isinstance(event, EpochEvent):
            evals = f", eval {words.seconds(event.eval_time_s)}" if event.eval_time_s is not None else ""
            self._line(f"[{event.variant}] epoch {event.epoch} done: train {words.seconds(event.train_time_s)}{evals}")

    def _line(self, text: str) -> None:
        from core.view.safe_text import terminal_text

        # Notes and errors carry a model's or a model file's text: printed, never obeyed (our own \r\033[K only).
        self.stream.write(("\r\033[K" if self.tty else "") + terminal_text(text, one_line=False) + "\n")
        self.stream.flush()


def cmd_race(args: argparse.Namespace) -> int:
    from core.runs import race_conditions

    race_conditions.restart_as_race_process()  # the malloc settings every door's race starts with
    trace = None
    if args.compile_trace:  # read when torch is imported, so before anything imports it
        trace = os.path.abspath(args.trace_dir or f"compile-lab-trace-{time.strftime('%Y%m%d-%H%M%S')}")
        os.environ["TORCH_TRACE"] = os.path.join(trace, "torch_trace")

    from core.engine.spec import check, detect_device_caps

    try:
        spec = spec_from_args(args)
        caps = detect_device_caps()
        check(spec, caps)
    except SpecError as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
        return EXIT_USAGE

    from core.engine.spec import resolve_device
    from core.engine.trainer import run_race
    from core.runs.processes import OwnWarmServer
    from core.runs.race_conditions import CoreSettingError
    from core.view.report import summary_table

    try:  # the cores, threads and malloc settings a worker's race has (core.runs.race_conditions)
        conditions = race_conditions.apply(resolve_device(spec.device, caps))
    except CoreSettingError as exc:
        print(f"error: this host's configuration: {exc}", file=sys.stderr)
        return EXIT_USAGE
    replicates = OwnWarmServer(conditions)  # replicates fork from it, as a worker's do from the app's
    try:
        result = run_race(
            spec,
            on_event=None if args.quiet else ProgressPrinter(sys.stderr),
            caps=caps,
            trace_dir=args.trace_dir,
            replicate=replicates,
            conditions=conditions.to_dict(),
        )
    finally:
        replicates.close()
    race_conditions.keep_in_environment(result.environment, conditions)
    if trace and not args.quiet:
        print(f"compile trace (TORCH_TRACE, for tlparse): {trace}", file=sys.stderr)
    data = result.to_dict()
    if args.json:
        print(json.dumps(data, default=float))
    else:
        print(summary_table(data, command=race_command))
    if result.error:
        print(f"error: run {'cancelled' if result.error == 'cancelled' else 'failed'}: {result.error}", file=sys.stderr)
        return EXIT_CANCELLED if result.error == "cancelled" else EXIT_FAILED
    return EXIT_OK


def add_commands(sub) -> None:
    """`race`."""
    race = sub.add_parser("race", help="train eager and compiled side by side, then summarize")
    add_spec_arguments(race)
    race.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    race.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    race.add_argument(
        "--trace-dir", default=None, help="write each variant's profiled steps as a Chrome/Perfetto trace here"
    )
    race.set_defaults(func=cmd_race)
