"""`models`: the model zoo, timm's names, and any model described (built on the meta device)."""

from __future__ import annotations

import argparse
import json
import sys

from core.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, say
from core.engine.spec import RunSpec, SpecError


def cmd_models(args: argparse.Namespace) -> int:
    from core.engine.models.sources import MODELS

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
    from core.engine.models.workload import ModelError, describe_model
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


def add_commands(sub) -> None:
    """`models`."""
    models = sub.add_parser("models", help="list the model zoo; search timm's names; describe any model")
    models.add_argument("--json", action="store_true")
    models.add_argument("--search", metavar="TEXT", default=None, help="timm model names containing TEXT")
    models.add_argument(
        "--describe", metavar="NAME", default=None, help="parameters, input and task of a model (timm:, hf:, zoo)"
    )
    models.set_defaults(func=cmd_models)
