"""Command line: `python -m core models | race | sweep | sweeps | plan | submit | status | cancel | delete | runs | export
| import | doctor`.

Errors a user can cause end with one line on stderr and exit status 2; a run that fails part
way prints what it measured, then the reason, and exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from typing import TextIO

from core.engine.spec import (
    BACKENDS,
    CACHES,
    COMPILE_SCOPES,
    DATA_SOURCES,
    DEVICES,
    MODES,
    PRECISIONS,
    Problem,
    RunSpec,
    SpecError,
)

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_CANCELLED = 0, 1, 2, 130
EXIT_BROKEN_PIPE = 141  # what a shell reports for a program stopped by SIGPIPE (`... | head -1`)


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage error as a single line (no usage dump), exit status 2."""

    def error(self, message: str):  # noqa: D102
        self.exit(EXIT_USAGE, f"error: {message} (see: python -m core {self.prog.split()[-1]} --help)\n")


def run_id_arg(value: str) -> int:
    """A run id as the store can hold it (SQLite integers are 64-bit)."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a run id (a whole number)") from None
    if not 1 <= number < 2**63:
        raise argparse.ArgumentTypeError(f"{value} is not a run id (from 1 to {2**63 - 1})")
    return number


def row_limit(value: str) -> int:
    """How many rows to list: a whole number SQLite can hold."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of rows") from None
    if not 1 <= number < 2**63:
        raise argparse.ArgumentTypeError(f"{value} rows: give a whole number from 1 to {2**63 - 1}")
    return number


def say(text: str, file: TextIO | None = None) -> None:
    """Print text that holds stored data (a bundle's device name, a run's error) with its control
    characters removed, so a terminal shows it and obeys none of it."""
    from core.view.safe_text import terminal_text

    print(terminal_text(text, one_line=False), file=file or sys.stdout)


def positive_int(value: str) -> int:
    """A count of steps or epochs: a whole number from 1."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value} must be 1 or more")
    return number


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
    a(
        "--model",
        default=None,
        help=f"a zoo model (see `python -m core models`), timm:<name> or hf:<name> (default: {d.model})",
    )
    a(
        "--model-file",
        default=None,
        metavar="PATH",
        help="your own model: a Python file defining build_model() (and optionally example_batch, loss)",
    )
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
    a(
        "--compile-scope",
        default=d.compile_scope,
        help=f"what torch.compile compiles: {', '.join(COMPILE_SCOPES)} (regional: each repeated block, in place)",
    )
    a("--epochs", type=int, default=d.epochs)
    a("--steps-per-epoch", type=int, default=d.steps_per_epoch)
    a("--eval-steps", type=int, default=d.eval_steps, help="evaluation steps after each epoch (0: none)")
    a("--image-size", type=int, default=None, help="input size: image side, sequence length (default: the model's)")
    a("--data", default=d.data, help=f"one of {', '.join(DATA_SOURCES)}")
    a("--data-dir", default=None, help="for cifar10: the folder holding cifar-10-batches-py")
    a(
        "--download",
        action="store_true",
        help="cifar10: download it if missing; hf: fetch the model's config.json (never weights); needs network",
    )
    a(
        "--cache",
        default=d.cache,
        help=f"Inductor cache: {', '.join(CACHES)} (cold: a fresh cache, what a new user pays)",
    )
    a(
        "--schedule",
        default=d.schedule,
        help="sequential (eager, then compiled), or alternating (they take turns epoch by epoch; both models in memory)",
    )
    a("--shapes", default=d.shapes, help="fixed, or varying: sequence length per batch (gpt), a smaller last batch")
    a(
        "--stance",
        default=d.stance,
        help="torch.compiler.set_stance after the first compile: default, fail_on_recompile, eager_on_recompile",
    )
    a(
        "--profile-steps",
        type=int,
        default=d.profile_steps,
        help="steady steps profiled per variant afterwards (0: none)",
    )
    a(
        "--compile-trace",
        action="store_true",
        help="keep torch's structured compile trace (TORCH_TRACE; tlparse reads it)",
    )
    a("--seed", type=int, default=d.seed)
    a("--device", default=d.device, help=f"one of {', '.join(DEVICES)}")
    a("--lr", type=float, default=d.lr, help="Adam learning rate")


def spec_from_args(args: argparse.Namespace) -> RunSpec:
    import os

    from core.engine.models.sources import default_batch_size, default_file_model_name, model_name_problem

    model, model_file = args.model or RunSpec().model, None
    if args.model_file:
        if args.model:
            raise SpecError([Problem("model", "give --model or --model-file, not both")])
        model, model_file = default_file_model_name(args.model_file), os.path.abspath(args.model_file)
    batch_size = args.batch_size
    if batch_size is None:
        batch_size = default_batch_size(model) if model_name_problem(model) is None else RunSpec().batch_size
    return RunSpec(
        model=model,
        model_file=model_file,
        batch_size=batch_size,
        precision=args.precision,
        mode=args.mode,
        backend=args.backend,
        dynamic=args.dynamic,
        fullgraph=args.fullgraph,
        compile_scope=args.compile_scope,
        epochs=args.epochs,
        steps_per_epoch=args.steps_per_epoch,
        eval_steps=args.eval_steps,
        image_size=args.image_size,
        data=args.data,
        data_dir=args.data_dir,
        download=args.download,
        cache=args.cache,
        shapes=args.shapes,
        schedule=args.schedule,
        stance=args.stance,
        profile_steps=args.profile_steps,
        compile_trace=args.compile_trace,
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
        self._compile_started: float | None = None

    def __call__(self, event) -> None:
        from core.engine.events import CompileEvent, EpochEvent, StartEvent, StatusEvent, StepEvent
        from core.view.report import environment_header

        if isinstance(event, StartEvent):
            self._line(environment_header(event.environment))
        elif isinstance(event, CompileEvent):
            self._line(f"[{event.variant}] {event.phase} step {event.step}: {event.note}")
        elif isinstance(event, StatusEvent):
            if event.state == "compile_phase":
                if event.message:
                    self._compile_started = self._compile_started or time.monotonic()
                    elapsed = time.monotonic() - self._compile_started
                    self._line(f"[{event.variant}] compiling, {elapsed:.1f} s in: {event.message}")
                else:
                    self._compile_started = None
            elif event.state == "compiling":
                self._line(f"[compiled] {event.message} ...")
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
                f"{event.time_s * 1000:.1f} ms  loss {event.loss:.4f}   "
            )
            self.stream.flush()
        elif isinstance(event, EpochEvent):
            from core.view.report import fmt_seconds

            evals = f", eval {fmt_seconds(event.eval_time_s)}" if event.eval_time_s is not None else ""
            self._line(f"[{event.variant}] epoch {event.epoch} done: train {fmt_seconds(event.train_time_s)}{evals}")

    def _line(self, text: str) -> None:
        from core.view.safe_text import terminal_text

        # Notes and errors carry a model's or a model file's text: printed, never obeyed (our own \r\033[K only).
        self.stream.write(("\r\033[K" if self.tty else "") + terminal_text(text, one_line=False) + "\n")
        self.stream.flush()


def cmd_models(args: argparse.Namespace) -> int:
    from core.engine.models.zoo import MODELS

    if args.describe or args.search is not None:
        return models_lookup(args)

    rows = [
        {
            "name": info.name,
            "params": info.params,
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
    print()
    for line in library_lines():
        print(line)
    return EXIT_OK


def library_lines() -> list[str]:
    """What else can race here: timm and Hugging Face models (or how to install them), a file."""
    from core.engine.models.sources import INSTALL_HINT, library_version

    timm, transformers = library_version("timm"), library_version("hf")
    return [
        f"timm:<name>   any timm model, random weights ({f'timm {timm}' if timm else 'needs timm: ' + INSTALL_HINT}); "
        "`models --search convnext` lists names",
        f"hf:<name>     a Hugging Face transformers architecture from its configuration, random weights "
        f"({f'transformers {transformers}' if transformers else 'needs transformers: ' + INSTALL_HINT}); "
        "e.g. hf:gpt2, hf:bert-base-uncased, hf:t5-small, hf:llama, hf:gpt2:n_layer=2",
        "--model-file  your own Python file defining build_model() (optionally example_batch, loss)",
        "`models --describe NAME` builds one (on the meta device) and prints its parameters and input",
    ]


def models_lookup(args: argparse.Namespace) -> int:
    """`models --search PATTERN` (timm names) or `models --describe NAME` (parameters, input, task)."""
    from core.engine.models.sources import library_problem

    if args.search is not None:
        problem = library_problem("timm")
        if problem:
            say(f"error: {problem}", file=sys.stderr)
            return EXIT_USAGE
        from core.engine.models.library_models import timm_model_names

        needle = args.search.lower()
        names = [f"timm:{n}" for n in timm_model_names() if needle in n.lower()]
        say(json.dumps(names) if args.json else "\n".join(names) or f"no timm model name contains {args.search!r}")
        return EXIT_OK
    from core.engine.models.resolve import describe_model
    from core.engine.models.workload import ModelError
    from core.engine.spec import DeviceCaps, check

    try:
        spec = check(RunSpec(model=args.describe, device="cpu"), DeviceCaps())  # caps: libraries installed?
        facts = describe_model(spec)
    except SpecError as exc:  # these quote the typed name, and a model file's own exception text
        for problem in exc.problems:
            say(f"error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    except ModelError as exc:
        say(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    say(json.dumps(facts, indent=2) if args.json else f"{args.describe}: {facts['summary']}")
    return EXIT_OK


def cmd_race(args: argparse.Namespace) -> int:
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

    from core.engine.trainer import run_race
    from core.view.report import summary_table

    result = run_race(
        spec, on_event=None if args.quiet else ProgressPrinter(sys.stderr), caps=caps, trace_dir=args.trace_dir
    )
    if trace and not args.quiet:
        print(f"compile trace (TORCH_TRACE, for tlparse): {trace}", file=sys.stderr)
    data = result.to_dict()
    if args.json:
        print(json.dumps(data, default=float))
    else:
        print(summary_table(data))
    if result.error:
        print(f"error: run {'cancelled' if result.error == 'cancelled' else 'failed'}: {result.error}", file=sys.stderr)
        return EXIT_CANCELLED if result.error == "cancelled" else EXIT_FAILED
    return EXIT_OK


def default_owner() -> str:
    import getpass

    try:
        return f"cli:{getpass.getuser()}"
    except Exception:  # noqa: BLE001 - no user database (some containers)
        return "cli"


def open_store(args: argparse.Namespace):
    from core.runs.store import Store

    return Store(args.store)


def stored_result(run) -> dict:
    """A stored run in the shape summary_table reads (the same as race --json)."""
    details = run.details or {}
    return {
        "summary": run.summary or {},
        "variants": details.get("variants", {"eager": {"final_loss": None}, "compiled": {"final_loss": None}}),
        "compile": details.get("compile", {}),
    }


def progress_bar(fraction: float, width: int = 30) -> str:
    filled = int(round(max(0.0, min(fraction, 1.0)) * width))
    return "[" + "#" * filled + "." * (width - filled) + f"] {fraction * 100:3.0f}%"


def queued_or_refused(enqueue: Callable[[], int]) -> int | None:
    """What `enqueue` queued (a run or sweep id), or None once it was refused, with one line per
    reason on stderr: bad input, a full queue, an unreadable host configuration."""
    from core.runs import queue

    try:
        return enqueue()
    except SpecError as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
    except queue.JobError as exc:
        print(f"error: {exc}", file=sys.stderr)
    except (ValueError, OSError) as exc:  # the host's limits configuration is unreadable
        print(f"error: configuration: {exc}", file=sys.stderr)
    return None


def cmd_submit(args: argparse.Namespace) -> int:
    from core.runs import queue
    from core.runs.limits import load_host_limits
    from core.view.queue import describe

    store = open_store(args)

    def enqueue() -> int:
        limits = load_host_limits()  # before anything runs: a broken configuration is said at once
        spec = spec_from_args(args)
        caps = queue.ensure_probe(store, owner=args.owner, wait_s=60)
        return queue.enqueue(store, spec, args.owner, limits=limits, caps=caps)

    run_id = queued_or_refused(enqueue)
    if run_id is None:
        return EXIT_USAGE
    run = store.get_run(run_id)
    print(f"run {run_id}: {describe(store, run)} on {run.device_key}")
    if not args.wait:
        return EXIT_OK
    return follow(store, run_id, args)


def follow(store, run_id: int, args: argparse.Namespace) -> int:
    """Follow a run to its end with a progress bar on stderr, ticking the queue meanwhile."""
    from core.runs import queue
    from core.view.queue import describe
    from core.view.report import summary_table
    from core.view.safe_text import terminal_text

    stream = sys.stderr
    last = ""
    while True:
        queue.tick(store)
        run = store.get_run(run_id)
        line = f"run {run_id} {progress_bar(run.progress)} {terminal_text(describe(store, run))}"
        if line != last:
            stream.write(("\r\033[K" + line) if stream.isatty() else line + "\n")
            stream.flush()
            last = line
        if run.finished:
            break
        time.sleep(0.5)
    if stream.isatty():
        stream.write("\n")
    if run.summary and args.json:
        print(json.dumps(stored_result(run), default=float))
    elif run.summary:
        say(summary_table(stored_result(run)))
    if run.status == "failed":
        say(f"error: run {run_id} failed: {run.error}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_CANCELLED if run.status == "cancelled" else EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    from core.runs import queue
    from core.runs.identity import shown_owner
    from core.view.queue import describe

    store = open_store(args)
    queue.tick(store)
    if args.run_id is not None:
        run = store.get_run(args.run_id)
        if run is None:
            print(f"error: there is no run {args.run_id}", file=sys.stderr)
            return EXIT_USAGE
        # An owner's whole token would let anyone with a shell cancel or delete that visitor's runs.
        say(f"run {run.id} ({run.kind}, owner {shown_owner(run.owner)}, {run.device_key}): {describe(store, run)}")
        if run.summary and run.summary.get("reading"):
            say(run.summary["reading"])
        return EXIT_OK
    active = store.list_runs(status=("queued", "starting", "running"))
    if not active:
        print("nothing queued or running")
    if store.queue_paused():
        print("the queue is paused by the host: queued jobs wait")
    for run in reversed(active):
        say(f"run {run.id:>5}  {run.device_key:<8} {shown_owner(run.owner):<16} {describe(store, run)}")
    return EXIT_OK


def cmd_cancel(args: argparse.Namespace) -> int:
    from core.runs import queue

    try:
        status = queue.cancel(open_store(args), args.run_id, args.owner)
    except queue.JobError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"run {args.run_id}: {status}")
    return EXIT_OK


def cmd_delete(args: argparse.Namespace) -> int:
    from core.runs import queue

    try:
        queue.delete(open_store(args), args.run_id, args.owner)
    except queue.JobError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"run {args.run_id}: deleted")
    return EXIT_OK


def cmd_runs(args: argparse.Namespace) -> int:
    from core.view.report import fmt_seconds, fmt_speedup, run_row
    from core.view.safe_text import terminal_text

    runs = open_store(args).list_runs(kind="race", limit=args.limit)
    if args.json:
        print(json.dumps([run_row(r) for r in runs], default=float))
        return EXIT_OK
    from core.view.report import text_table

    headers = ["id", "status", "created", "device", "model", "batch", "precision", "mode", "overhead", "speedup"]
    headers.append("break-even")
    rows = []
    for r in runs:
        row, s = run_row(r), r.summary or {}
        row = {k: terminal_text(v) if isinstance(v, str) else v for k, v in row.items()}  # a bundle's text
        be = f"step {s['break_even_step']}" if s.get("break_even_step") else (s.get("break_even_reason") or "-")
        rows.append(
            [
                str(row["id"]),
                row["status"] + ("*" if r.imported else ""),
                row["created"],
                row["device"],
                row["model"],
                str(row["batch_size"]),
                row["precision"],
                row["mode"],
                fmt_seconds(s.get("first_epoch_overhead_s"), signed=True),
                fmt_speedup(row["steady_state_speedup"]),
                terminal_text(be),
            ]
        )
    for line in text_table(headers, rows, right={"id", "batch", "overhead", "speedup"}):
        say(line)
    if any(r.imported for r in runs):
        print("* imported")
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    from core.runs.bundle import BundleError, export_bundle

    try:
        bundle = export_bundle(open_store(args), args.run_id)
    except BundleError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    text = json.dumps(bundle, indent=1)
    if args.output:
        try:
            with open(args.output, "w") as fh:
                fh.write(text)
        except OSError as exc:
            print(f"error: cannot write {args.output}: {exc.strerror}", file=sys.stderr)
            return EXIT_USAGE
        print(f"run {args.run_id} exported to {args.output}")
    else:
        print(text)
    return EXIT_OK


def cmd_import(args: argparse.Namespace) -> int:
    from core.runs.bundle import BundleError, import_bundle, load_bundle_file

    try:
        run_id = import_bundle(open_store(args), load_bundle_file(args.file), args.owner)
    except BundleError as exc:
        print(f"error: {args.file}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"imported as run {run_id}")
    return EXIT_OK


def cmd_doctor(args: argparse.Namespace) -> int:
    from core.runs.doctor import doctor

    return doctor(args.store, args.out, cpu_smoke=args.cpu_smoke)


# -- sweeps and planning ----------------------------------------------------------------------------

SWEEP_AXIS_FLAGS = (
    ("batch_size", "--batch-sizes", "batch sizes, e.g. 64,256,1024,4096 (shown on a log-2 axis)"),
    ("precision", "--precisions", f"precisions, e.g. fp32,amp-bf16 (of {', '.join(PRECISIONS)})"),
    ("mode", "--modes", f"compile modes (of {', '.join(MODES)})"),
    ("compile_scope", "--compile-scopes", f"compile scopes: {','.join(COMPILE_SCOPES)}"),
)


def sweep_from_args(args: argparse.Namespace):
    """The sweep the flags describe: the race flags are the base, each axis flag one axis."""
    from core.runs.sweeps import SweepSpec, axis_from_text

    axes = tuple(axis_from_text(name, getattr(args, name + "_values")) for name, _, _ in SWEEP_AXIS_FLAGS
                 if getattr(args, name + "_values") is not None)  # fmt: skip
    return SweepSpec(spec_from_args(args), axes)


def cmd_sweep(args: argparse.Namespace) -> int:
    from core.runs import queue, sweeps

    store = open_store(args)

    def enqueue() -> int:
        sweep = sweep_from_args(args)
        caps = queue.ensure_probe(store, owner=args.owner, wait_s=60)
        return sweeps.enqueue_sweep(store, sweep, args.owner, caps=caps)

    sweep_id = queued_or_refused(enqueue)
    if sweep_id is None:
        return EXIT_USAGE
    points = store.sweep_runs(sweep_id)
    print(
        f"sweep {sweep_id}: {len(points)} points queued on {points[0].device_key}",
        file=sys.stderr if args.json else sys.stdout,
    )
    if args.detach:
        return EXIT_OK
    return follow_sweep(store, sweep_id, args)


def follow_sweep(store, sweep_id: int, args: argparse.Namespace) -> int:
    """Follow a sweep to its end: a line per finished point and a progress line on stderr; Ctrl-C
    cancels the whole sweep. Then the report (or JSON) on stdout. A sweep deleted while followed
    (by its owner elsewhere, or the host) ends the follow with one line saying so."""
    from core.runs import queue, sweeps
    from core.view.safe_text import terminal_text
    from core.view.sweep import point_line, sweep_frame, sweep_state

    stream, reported, last = sys.stderr, set(), ""
    cancelled = False
    while True:
        try:
            queue.tick(store)
            found = sweeps.stored_sweep(store, sweep_id)
            if found is None or not found[1]:
                if stream.isatty() and last:
                    stream.write("\n")
                print(f"error: {sweep_gone(store, sweep_id)}", file=sys.stderr)
                return EXIT_FAILED
            sweep, runs = found
            frame = sweep_frame(sweep, runs, store)
            for row in frame.itertuples():
                if row.status in ("done", "failed", "cancelled") and row.run_id not in reported:
                    reported.add(row.run_id)
                    stream.write(("\r\033[K" if stream.isatty() else "") + point_line(row, len(frame)) + "\n")
            state = sweep_state(store, runs)
            line = f"sweep {sweep_id} {progress_bar(sweeps.sweep_progress(runs))} {terminal_text(state)}"
            if stream.isatty() and line != last:
                stream.write("\r\033[K" + line)
                last = line
            stream.flush()
            if sweeps.sweep_finished(runs):
                break
            time.sleep(0.5)
        except KeyboardInterrupt:
            sweeps.cancel_sweep(store, sweep_id, args.owner)
            cancelled = True
    if stream.isatty():
        stream.write("\n")
    if not print_sweep(store, sweep_id, args):
        return EXIT_FAILED
    statuses = {r.status for r in store.sweep_runs(sweep_id)}
    if cancelled or "cancelled" in statuses:
        return EXIT_CANCELLED
    return EXIT_FAILED if "failed" in statuses else EXIT_OK


def sweep_gone(store, sweep_id: int) -> str:
    """Why a sweep cannot be shown: deleted, its points deleted, or its definition damaged."""
    if store.get_sweep(sweep_id) is None:
        return f"sweep {sweep_id} no longer exists (it was deleted)"
    if not store.sweep_runs(sweep_id):
        return f"sweep {sweep_id} has no points left (they were deleted)"
    return f"sweep {sweep_id} cannot be read: its stored definition is damaged"


def print_sweep(store, sweep_id: int, args: argparse.Namespace) -> bool:
    """The sweep's report (or JSON) on stdout; False, with one line on stderr, if it is gone."""
    from core.runs import sweeps
    from core.view.safe_text import terminal_text
    from core.view.sweep import sweep_frame, sweep_json, sweep_report, sweep_state

    found = sweeps.stored_sweep(store, sweep_id)
    if found is None:
        print(f"error: {sweep_gone(store, sweep_id)}", file=sys.stderr)
        return False
    sweep, runs = found
    frame = sweep_frame(sweep, runs, store)
    state = sweep_state(store, runs)
    plan_steps = getattr(args, "plan_steps", None)
    if args.json:
        data = sweep_json(sweep_id, sweep, runs, frame, state)
        if plan_steps:
            from core.view.sweep import plan_rows

            data["plan"] = {"steps": plan_steps, "points": plan_rows(frame, runs, plan_steps)}
        print(json.dumps(data, default=float))  # json escapes every control character
    else:
        print(terminal_text(sweep_report(sweep, frame, state, plan_steps, runs), one_line=False))
    return True


def cmd_sweeps(args: argparse.Namespace) -> int:
    from core.runs import queue, sweeps
    from core.runs.identity import shown_owner
    from core.view.safe_text import terminal_text
    from core.view.sweep import sweep_state

    store = open_store(args)
    queue.tick(store)
    if args.sweep_id is not None:
        if store.get_sweep(args.sweep_id) is None:
            print(f"error: there is no sweep {args.sweep_id}", file=sys.stderr)
            return EXIT_USAGE
        return EXIT_OK if print_sweep(store, args.sweep_id, args) else EXIT_FAILED
    rows = []
    for row in store.list_sweeps(limit=args.limit):
        found = sweeps.stored_sweep(store, row.id)
        if found is None:
            continue
        sweep, runs = found
        rows.append((row, sweep, sweep_state(store, runs)))
    if args.json:
        # An owner's whole token would let anyone with a shell cancel or delete that visitor's sweeps.
        listing = [{"sweep_id": r.id, "owner": shown_owner(r.owner), "state": st, **sw.to_dict()} for r, sw, st in rows]
        print(json.dumps(listing))
        return EXIT_OK
    if not rows:
        print("no sweeps stored")
    for row, sweep, state in rows:
        axes = "; ".join(f"{a.label} {','.join(map(str, a.values))}" for a in sweep.axes)
        print(terminal_text(f"sweep {row.id:>4}  {sweep.base.model:<16} {axes:<44} {state}"))
    return EXIT_OK


def cmd_sweep_action(args: argparse.Namespace) -> int:
    from core.runs import queue, sweeps

    try:
        if args.action == "cancel":
            count = sweeps.cancel_sweep(open_store(args), args.sweep_id, args.owner)
            print(f"sweep {args.sweep_id}: {count} points cancelled")
        else:
            sweeps.delete_sweep(open_store(args), args.sweep_id, args.owner)
            print(f"sweep {args.sweep_id}: deleted")
    except queue.JobError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


def cmd_plan(args: argparse.Namespace) -> int:
    import dataclasses

    from core.engine.planning import plan_from_summary
    from core.view.sweep import plan_figures

    steps = args.steps if args.steps is not None else (args.epochs or 0) * (args.steps_per_epoch or 0)
    if steps < 1:
        print("error: give the run's length: --steps N, or --epochs E --steps-per-epoch S", file=sys.stderr)
        return EXIT_USAGE
    store = open_store(args)
    if args.sweep is not None:
        if store.get_sweep(args.sweep) is None:
            print(f"error: there is no sweep {args.sweep}", file=sys.stderr)
            return EXIT_USAGE
        args.plan_steps = steps
        return EXIT_OK if print_sweep(store, args.sweep, args) else EXIT_FAILED
    run = store.get_run(args.run_id) if args.run_id is not None else None
    if run is None or run.kind != "race":
        print(f"error: there is no race {args.run_id} (give a run id, or --sweep SWEEP_ID)", file=sys.stderr)
        return EXIT_USAGE
    plan = plan_from_summary(run.summary or {}, steps) if run.status == "done" else None
    if plan is None:
        print(f"error: run {run.id} has no finished measurement to plan from ({run.status})", file=sys.stderr)
        return EXIT_USAGE
    figures = plan_figures(plan)
    if args.json:
        print(json.dumps({"run_id": run.id, **dataclasses.asdict(plan), "sentence": figures["what compile does"]}))
        return EXIT_OK
    for label in ("eager total", "compiled total, compile included"):
        print(f"{label:<34}{figures[label]}")
    print(figures["what compile does"])
    return EXIT_OK


def add_sweep_commands(sub, store_parser) -> None:
    """`sweep`, `sweeps`, `cancel-sweep`, `delete-sweep`, `plan`."""
    sweep = store_parser("sweep", "queue a sweep (one race per point) and follow it to the end", owner=True)
    add_spec_arguments(sweep)
    axes = sweep.add_argument_group("axes (one or two)")
    for name, flag, text in SWEEP_AXIS_FLAGS:
        axes.add_argument(flag, dest=name + "_values", default=None, help=text)
    sweep.add_argument("--json", action="store_true", help="print one JSON object at the end instead of the report")
    sweep.add_argument("--detach", action="store_true", help="queue it and return (follow later: sweeps SWEEP_ID)")
    sweep.add_argument(
        "--plan-steps", type=positive_int, default=None, help="also plan a training run of this many steps"
    )
    sweep.set_defaults(func=cmd_sweep)
    listing = store_parser("sweeps", "stored sweeps, or one sweep's points and readings")
    listing.add_argument("sweep_id", nargs="?", type=run_id_arg)
    listing.add_argument("--limit", type=int, default=50)
    listing.add_argument("--json", action="store_true")
    listing.add_argument(
        "--plan-steps", type=positive_int, default=None, help="also plan a training run of this many steps"
    )
    listing.set_defaults(func=cmd_sweeps)
    for action, text in (("cancel", "cancel every unfinished point of your sweep"), ("delete", "delete your sweep")):
        p = store_parser(f"{action}-sweep", text, owner=True)
        p.add_argument("sweep_id", type=run_id_arg)
        p.set_defaults(func=cmd_sweep_action, action=action)
    plan = store_parser("plan", "predict a training run's time eager vs compiled from a finished race or sweep")
    plan.add_argument("run_id", nargs="?", type=run_id_arg)
    plan.add_argument("--sweep", type=run_id_arg, default=None, help="plan from every point of this sweep")
    plan.add_argument("--steps", type=positive_int, default=None, help="the run's length in steps")
    plan.add_argument("--epochs", type=positive_int, default=None)
    plan.add_argument("--steps-per-epoch", type=positive_int, default=None)
    plan.add_argument("--json", action="store_true")
    plan.set_defaults(func=cmd_plan)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m core", description="Compile Lab: eager vs torch.compile, measured.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    models = sub.add_parser("models", help="list the model zoo; search timm's names; describe any model")
    models.add_argument("--json", action="store_true")
    models.add_argument("--search", metavar="TEXT", default=None, help="timm model names containing TEXT")
    models.add_argument(
        "--describe", metavar="NAME", default=None, help="parameters, input and task of a model (timm:, hf:, zoo)"
    )
    models.set_defaults(func=cmd_models)
    race = sub.add_parser("race", help="train eager and compiled side by side, then summarize")
    add_spec_arguments(race)
    race.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    race.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    race.add_argument(
        "--trace-dir", default=None, help="write each variant's profiled steps as a Chrome/Perfetto trace here"
    )
    race.set_defaults(func=cmd_race)

    def store_parser(name: str, help_text: str, owner: bool = False) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text)
        p.add_argument(
            "--store", default=None, help="store file (default: $COMPILE_LAB_STORE or data/compile_lab.sqlite3)"
        )
        if owner:
            p.add_argument("--owner", default=default_owner(), help="who you are to the queue (default: cli:<user>)")
        return p

    submit = store_parser("submit", "queue a race for a background worker", owner=True)
    add_spec_arguments(submit)
    submit.add_argument("--wait", action="store_true", help="follow the run with a progress bar until it ends")
    submit.add_argument("--json", action="store_true", help="with --wait: print the result as JSON")
    submit.set_defaults(func=cmd_submit)
    status = store_parser("status", "the state of one run, or of the queue")
    status.add_argument("run_id", nargs="?", type=run_id_arg)
    status.set_defaults(func=cmd_status)
    for name, func, text in (
        ("cancel", cmd_cancel, "cancel your queued or running run"),
        ("delete", cmd_delete, "delete your run and its events"),
    ):
        p = store_parser(name, text, owner=True)
        p.add_argument("run_id", type=run_id_arg)
        p.set_defaults(func=func)
    runs = store_parser("runs", "table of stored races")
    runs.add_argument("--limit", type=row_limit, default=50, help="how many of the newest runs (50)")
    runs.add_argument("--json", action="store_true")
    runs.set_defaults(func=cmd_runs)
    export = store_parser("export", "write a run as a JSON bundle (spec, environment, events, summary)")
    export.add_argument("run_id", type=run_id_arg)
    export.add_argument("-o", "--output", help="file to write (default: stdout)")
    export.set_defaults(func=cmd_export)
    imp = store_parser("import", "add a bundle from another machine as an imported run", owner=True)
    imp.add_argument("file")
    imp.set_defaults(func=cmd_import)
    doc = sub.add_parser(
        "doctor",
        help="on a GPU box: check every CUDA path (precisions, modes, out of memory, demos) and print one table",
    )
    doc.add_argument("--store", default=None, help="store to run the checks in (default: a fresh temporary one)")
    doc.add_argument(
        "--out", default=None, help="folder for the table (doctor.txt, doctor.json) and the ResNet-50 bundle"
    )
    doc.add_argument("--cpu-smoke", action="store_true", help=argparse.SUPPRESS)  # the machinery at toy size, for tests
    doc.set_defaults(func=cmd_doctor)
    add_sweep_commands(sub, store_parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    from core.runs.store import StoreError

    args = build_parser().parse_args(argv)
    try:
        code = args.func(args)
        sys.stdout.flush()  # inside the try: a reader that went away is noticed here, not at exit
    except StoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # `python -m core status | head -1`: the reader has what it wanted. Point stdout at
        # /dev/null so the interpreter's own flush at exit does not complain, and stop quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    return code


if __name__ == "__main__":
    sys.exit(main())
