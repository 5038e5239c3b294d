"""Command line: `python -m core models | race ...`.

Errors a user can cause end with one line on stderr and exit status 2; a run that fails part
way prints what it measured, then the reason, and exits 1.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TextIO

from core.spec import BACKENDS, CACHES, DATA_SOURCES, DEVICES, MODES, PRECISIONS, RunSpec, SpecError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_CANCELLED = 0, 1, 2, 130


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage error as a single line (no usage dump), exit status 2."""

    def error(self, message: str):  # noqa: D102
        self.exit(EXIT_USAGE, f"error: {message} (see: python -m core {self.prog.split()[-1]} --help)\n")


def _dynamic(value: str) -> bool | None:
    table = {"auto": None, "true": True, "false": False}
    if value.lower() not in table:
        raise argparse.ArgumentTypeError(f"{value!r} is not allowed; allowed: auto, true, false")
    return table[value.lower()]


def add_spec_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags mirroring RunSpec. Choices are checked by RunSpec validation, not argparse, so the
    CLI, the UI and the worker give the same messages."""
    d = RunSpec()
    a = parser.add_argument
    a("--model", default=d.model, help="model name (see `python -m core models`)")
    a("--batch-size", type=int, default=None, help="samples per step (default: the model's)")
    a("--precision", default=d.precision, help=f"one of {', '.join(PRECISIONS)}")
    a("--mode", default=d.mode, help=f"torch.compile mode: {', '.join(MODES)}")
    a("--backend", default=d.backend, help=f"torch.compile backend: {', '.join(BACKENDS)}")
    a(
        "--dynamic",
        type=_dynamic,
        nargs="?",
        const=True,
        default=None,
        help="dynamic shapes: auto (default), true, false",
    )
    a("--fullgraph", action="store_true", help="fail on any graph break instead of splitting the graph")
    a("--epochs", type=int, default=d.epochs)
    a("--steps-per-epoch", type=int, default=d.steps_per_epoch)
    a("--eval-steps", type=int, default=d.eval_steps, help="evaluation steps after each epoch (0: none)")
    a("--image-size", type=int, default=None, help="input size: image side, sequence length (default: the model's)")
    a("--data", default=d.data, help=f"one of {', '.join(DATA_SOURCES)}")
    a("--data-dir", default=None, help="for cifar10: the folder holding cifar-10-batches-py")
    a("--download", action="store_true", help="for cifar10: download it if missing (needs network)")
    a(
        "--cache",
        default=d.cache,
        help=f"Inductor cache: {', '.join(CACHES)} (cold: a fresh cache, what a new user pays)",
    )
    a("--seed", type=int, default=d.seed)
    a("--device", default=d.device, help=f"one of {', '.join(DEVICES)}")
    a("--lr", type=float, default=d.lr, help="Adam learning rate")


def spec_from_args(args: argparse.Namespace) -> RunSpec:
    from core.zoo import MODELS

    batch_size = args.batch_size
    if batch_size is None:
        batch_size = MODELS[args.model].default_batch_size if args.model in MODELS else RunSpec().batch_size
    return RunSpec(
        model=args.model,
        batch_size=batch_size,
        precision=args.precision,
        mode=args.mode,
        backend=args.backend,
        dynamic=args.dynamic,
        fullgraph=args.fullgraph,
        epochs=args.epochs,
        steps_per_epoch=args.steps_per_epoch,
        eval_steps=args.eval_steps,
        image_size=args.image_size,
        data=args.data,
        data_dir=args.data_dir,
        download=args.download,
        cache=args.cache,
        seed=args.seed,
        device=args.device,
        lr=args.lr,
    )


class ProgressPrinter:
    """Live progress on stderr: phase lines always, a rewritten step line on a terminal."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.tty = stream.isatty()
        self._last = 0.0

    def __call__(self, event) -> None:
        from core.report import environment_header
        from core.trainer import EpochEvent, StartEvent, StatusEvent, StepEvent

        if isinstance(event, StartEvent):
            self._line(environment_header(event.environment))
        elif isinstance(event, StatusEvent):
            if event.state == "compiling":
                self._line(f"[compiled] {event.message} ...")
            elif event.state == "starting":
                self._line(f"[{event.variant}] starting")
            elif event.state == "failed":
                self._line(f"[{event.variant}] failed: {event.message}")
        elif isinstance(event, StepEvent) and self.tty and time.monotonic() - self._last > 0.2:
            self._last = time.monotonic()
            self.stream.write(
                f"\r[{event.variant}] epoch {event.epoch} {event.phase} step {event.step}  "
                f"{event.time_s * 1000:.1f} ms  loss {event.loss:.4f}   "
            )
            self.stream.flush()
        elif isinstance(event, EpochEvent):
            from core.report import fmt_seconds

            evals = f", eval {fmt_seconds(event.eval_time_s)}" if event.eval_time_s is not None else ""
            self._line(f"[{event.variant}] epoch {event.epoch} done: train {fmt_seconds(event.train_time_s)}{evals}")

    def _line(self, text: str) -> None:
        self.stream.write(("\r\033[K" if self.tty else "") + text + "\n")
        self.stream.flush()


def cmd_models(args: argparse.Namespace) -> int:
    from core.zoo import MODELS, parameter_count

    rows = [
        {
            "name": info.name,
            "params": parameter_count(info.name),
            "input": info.input_kind,
            "default_size": info.default_size,
            "min_size": info.min_size,
            "default_batch_size": info.default_batch_size,
            "description": info.description,
        }
        for info in MODELS.values()
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    print(f"{'model':<20}{'params':>12}  {'input':<8}{'size':>6}{'min':>6}{'batch':>7}  description")
    for r in rows:
        print(
            f"{r['name']:<20}{r['params'] / 1e6:>10.2f} M  {r['input']:<8}{r['default_size']:>6}"
            f"{r['min_size']:>6}{r['default_batch_size']:>7}  {r['description']}"
        )
    return EXIT_OK


def cmd_race(args: argparse.Namespace) -> int:
    from core.spec import check, detect_device_caps

    try:
        spec = spec_from_args(args)
        caps = detect_device_caps()
        check(spec, caps)
    except SpecError as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
        return EXIT_USAGE

    from core.report import summary_table
    from core.trainer import run_race

    result = run_race(spec, on_event=None if args.quiet else ProgressPrinter(sys.stderr), caps=caps)
    data = result.to_dict()
    if args.json:
        print(json.dumps(data, default=float))
    else:
        print(summary_table(data))
    if result.error:
        print(f"error: run {'cancelled' if result.error == 'cancelled' else 'failed'}: {result.error}", file=sys.stderr)
        return EXIT_CANCELLED if result.error == "cancelled" else EXIT_FAILED
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m core", description="Compile Lab: eager vs torch.compile, measured.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    models = sub.add_parser("models", help="list the model zoo")
    models.add_argument("--json", action="store_true")
    models.set_defaults(func=cmd_models)
    race = sub.add_parser("race", help="train eager and compiled side by side, then summarize")
    add_spec_arguments(race)
    race.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    race.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    race.set_defaults(func=cmd_race)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
