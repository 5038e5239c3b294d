"""`runs`, `export`, `import`: the stored races as a table, and a run as a JSON bundle out of one
store and into another."""

from __future__ import annotations

import argparse
import json
import sys

from core.cli.common import EXIT_OK, EXIT_USAGE, open_store, row_limit, run_id_arg, say, store_parser


def cmd_runs(args: argparse.Namespace) -> int:
    from core.engine import words
    from core.runs.store.records import unreadable_runs_text
    from core.view.report import run_row
    from core.view.safe_text import terminal_text

    store = open_store(args)
    runs = store.list_runs(kind="race", limit=args.limit)
    if store.unreadable_runs:
        print(f"warning: {unreadable_runs_text(store.unreadable_runs, store.path)}", file=sys.stderr)
    if args.json:
        print(json.dumps([run_row(r) for r in runs], default=float))
        return EXIT_OK
    from core.view.report import text_table

    headers = ["id", "status", "created", "device", "model", "batch", "precision", "mode", "scope", "cache"]
    headers += ["overhead", "speedup", "compile", "break-even"]
    rows = []
    for r in runs:
        row = run_row(r)
        row = {k: terminal_text(v) if isinstance(v, str) else v for k, v in row.items()}  # a bundle's text
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
                row["scope"],
                row["cache"],
                words.seconds(row["first_epoch_overhead_s"], signed=True),
                words.speedup(row["steady_state_speedup"]),
                row["compile"] or "-",
                row["break_even"],
            ]
        )
    for line in text_table(headers, rows, right={"id", "batch", "overhead", "speedup"}):
        say(line)
    if any(r.imported for r in runs):
        print("* imported")
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    from core.runs.bundle import BundleError, export_bundle

    if args.script or args.report:
        return _export_for_pytorch(args)
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


def _export_for_pytorch(args: argparse.Namespace) -> int:
    """--script: the race as one Python file; --report: the zip a torch.compile issue is filed from."""
    from core.runs import race_script

    store = open_store(args)
    run = store.get_run(args.run_id)
    if run is None:
        print(f"error: there is no run {args.run_id}", file=sys.stderr)
        return EXIT_USAGE
    written_by = f"python -m core export {run.id} --script FILE"
    try:
        outputs = []
        if args.script:
            outputs.append((args.script, race_script.script_for_run(run, written_by).encode(), "script"))
        if args.report:
            outputs.append((args.report, race_script.report_zip(store.path, run), "report"))
    except race_script.ScriptError as exc:
        print(f"error: run {run.id} cannot be written as a script: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for path, data, what in outputs:
        try:
            with open(path, "wb") as fh:
                fh.write(data)
        except OSError as exc:
            print(f"error: cannot write {path}: {exc.strerror}", file=sys.stderr)
            return EXIT_USAGE
        print(f"run {run.id}: {what} written to {path}")
    return EXIT_OK


def cmd_import(args: argparse.Namespace) -> int:
    from core.runs.bundle import AlreadyImported, BundleError, import_bundle, load_bundle_file

    try:
        run_id = import_bundle(open_store(args), load_bundle_file(args.file), args.owner)
    except AlreadyImported as exc:  # one bundle, one run
        print(f"already imported as run {exc.run_id}: not imported again")
        return EXIT_OK
    except BundleError as exc:
        print(f"error: {args.file}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"imported as run {run_id}")
    return EXIT_OK


def add_commands(sub) -> None:
    """`runs`, `export`, `import`."""
    runs = store_parser(sub, "runs", "table of stored races")
    runs.add_argument("--limit", type=row_limit, default=50, help="how many of the newest runs (50)")
    runs.add_argument("--json", action="store_true")
    runs.set_defaults(func=cmd_runs)
    export = store_parser(sub, "export", "write a run as a JSON bundle (spec, environment, events, summary)")
    export.add_argument("run_id", type=run_id_arg)
    export.add_argument("-o", "--output", help="file to write (default: stdout)")
    export.add_argument(
        "--script", metavar="FILE", help="write the race as one Python script instead (needs only torch to run)"
    )
    export.add_argument(
        "--report",
        metavar="FILE",
        help="write a torch.compile issue report instead: a zip of report.md (PyTorch's template), the script "
        "and the race's TORCH_TRACE where it was traced",
    )
    export.set_defaults(func=cmd_export)
    imp = store_parser(sub, "import", "add a bundle from another machine as an imported run", owner=True)
    imp.add_argument("file")
    imp.set_defaults(func=cmd_import)
