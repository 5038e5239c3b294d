"""Measured demos for the "Under the hood" page: why compile is faster (or not), on your device.

Every demo runs as a job on the same queue as races (the app's process never measures), and its
result is stored keyed by demo, parameters, device and torch version, so a revisit or a talk shows
it at once. Each demo module has DEFAULTS, validate(params) and run(params, device); the defaults
and validators live in core.engine.explain.params, torch-free, so the queue can check a demo job
in the app's process without importing a demo module. Private torch APIs (torch._dynamo,
torch._inductor) are touched only inside the demo modules, each with a clear "unavailable"
message for a torch version that lacks them.

This package file imports no torch: the registry below is what the page and the queue need.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from core.engine.explain import params as demo_params
from core.engine.explain.params import CODEGEN_FUNCTIONS  # noqa: F401 - the page offers these
from core.engine.spec import DeviceCaps, inductor_problem


@dataclass(frozen=True)
class Demo:
    name: str
    title: str
    module: str
    needs_inductor: bool = True  # graph capture alone (the graphs demo) runs wherever Dynamo does


DEMOS: dict[str, Demo] = {
    d.name: d
    for d in [
        Demo("fusion", "Fusion and memory bandwidth", "core.engine.explain.fusion"),
        Demo("overhead", "Overhead", "core.engine.explain.overhead"),
        Demo("graphs", "Graphs and graph breaks", "core.engine.explain.graphs", needs_inductor=False),
        Demo("codegen", "The code Inductor writes", "core.engine.explain.codegen"),
        Demo("caches", "Compile time and caches", "core.engine.explain.caches"),
    ]
}


def demo_device_problem(name: str, caps: DeviceCaps | None) -> str | None:
    """Why this device cannot run demo `name`, said before it starts (not half way through)."""
    demo = DEMOS.get(name)
    reason = inductor_problem(caps) if demo is not None and demo.needs_inductor and caps is not None else None
    return f"this demo compiles with Inductor, which cannot run here: {reason}" if reason else None


def demo_module(name: str) -> ModuleType:
    """The module that measures demo `name` (imports torch)."""
    return importlib.import_module(DEMOS[name].module)


def demo_problems(params: dict[str, Any]) -> list[str]:
    """Why a demo job's parameters cannot run, as sentences (empty when fine)."""
    if not isinstance(params, dict) or set(params) - {"demo", "params"}:
        return ["a demo job takes exactly: demo, params"]
    name = params.get("demo")
    if name not in DEMOS:
        return [f"unknown demo {name!r}; allowed: {', '.join(DEMOS)}"]
    inner = params.get("params", {})
    if not isinstance(inner, dict):
        return ["demo params must be an object"]
    return list(demo_params.VALIDATORS[name](inner))


def with_defaults(name: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """The demo's full parameters: its defaults overridden by `params` (the stored key)."""
    return {**demo_params.DEFAULTS[name], **(params or {})}


# The measurements the page offers (its knobs add the rest: fusion's op set, codegen's function).
# Stored results are looked up by exactly these parameters.
PAGE_PARAMS: dict[str, dict[str, Any]] = {
    "fusion": {"ks": [1, 2, 4, 8, 16]},  # numel "auto": past the last-level cache (fusion.auto_numel)
    "overhead": {},
    "graphs": {"examples": ["clean", "prints", "item", "data_dependent"]},
    "codegen": {"size": 4096},
    "caches": {"model": "mlp", "batch_size": 32, "shapes": [8, 16, 32, 64]},
}
FUSION_OP_SETS = {
    "cheap": "cheap: mul, add, relu (memory-bound)",
    "mixed": "mixed: with sin and sigmoid (costly math)",
}


def source_of(fn: Callable[..., Any]) -> str:
    """A demo function's source as the page shows it (a placeholder when Python cannot find it)."""
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return f"# source of {fn.__name__} is not available"


def resolve_params(
    params: dict[str, Any], defaults: dict[str, Any], validate: Callable[[dict[str, Any]], list[str]]
) -> dict[str, Any]:
    """`params` over a demo's `defaults`, raising ValueError with every problem if they are
    invalid; list values are copied so a run never changes the stored parameters."""
    errors = validate(params)
    if errors:
        raise ValueError("; ".join(errors))
    return {k: list(v) if isinstance(v, (list, tuple)) else v for k, v in {**defaults, **params}.items()}
