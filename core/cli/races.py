"""`race`: train eager and compiled side by side in this process, with progress on stderr, then
the summary table (or JSON)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import TextIO

from core.cli.common import EXIT_CANCELLED, EXIT_FAILED, EXIT_OK, EXIT_USAGE
from core.cli.race_flags import add_spec_arguments, race_command, spec_from_args
from core.engine import words
from core.engine.spec import SpecError


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
    from core.runs.replicate_process import OwnWarmServer
    from core.runs.worker_cores import CoreSettingError
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
