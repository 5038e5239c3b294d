"""Every demo's parameters: defaults and validation, with no torch import.

The queue validates a demo job before it is stored, in whatever process enqueues it (the app's
too), so this is all the app needs of a demo; the demo modules themselves import torch and run
only in workers. Each validator returns one message per problem, naming the allowed values.
"""

from __future__ import annotations

from typing import Any

from core.engine.models.sources import MODELS

FUSION_OP_SET_NAMES = ("cheap", "mixed")  # fusion.OP_SETS has the ops; a test keeps the two in step
GRAPH_EXAMPLES = ("clean", "prints", "item", "data_dependent")  # graphs.EXAMPLES, likewise
CODEGEN_FUNCTIONS = ("gelu_chain", "layernorm_relu", "softmax")  # codegen.FUNCTIONS, likewise
FUSION_MAX_K = 64
FUSION_MAX_KS = 10
FUSION_MAX_NUMEL = 128 * 1024 * 1024  # 512 MiB per float32 tensor
FUSION_MAX_REPEATS = 100
FUSION_MAX_WARMUP = 20
FUSION_MAX_CALLS_PER_SAMPLE = 10_000
AUTO = "auto"


# numel "auto": input + output several times the last-level cache, so the figures measure main
# memory (core.engine.explain.fusion); calls_per_sample "auto": enough back-to-back calls
# that one timed sample lasts ~20 ms (on a GPU one call of a fused kernel is mostly its launch).
# "cheap" ops by default: the fused kernel stays memory-bound, so fusion shows on a CPU too.
FUSION_DEFAULTS: dict[str, Any] = {
    "ks": [1, 2, 4, 8, 16],
    "numel": AUTO,
    "op_set": "cheap",
    "repeats": 5,
    "warmup": 1,
    "calls_per_sample": AUTO,
    # Bytes the input plus output may take at most (None: as "auto" sizes them): a host's limit,
    # max_demo_working_set, which the page passes on (core.runs.limits).
    "max_working_set": None,
}
FUSION_MIN_WORKING_SET = 2 * 4 * 1024  # two float32 tensors of 1,024 elements
FUSION_MAX_WORKING_SET = 2 * 4 * FUSION_MAX_NUMEL


def fusion_problems(params: dict) -> list[str]:
    """Problems with `params`, one message per field naming the allowed values; empty if fine."""
    if not isinstance(params, dict):
        return ["params: must be a mapping of field names to values"]
    errors = [
        f"{key}: unknown field (known: {', '.join(FUSION_DEFAULTS)})" for key in params if key not in FUSION_DEFAULTS
    ]
    if "ks" in params:
        errors += check_int_list(params["ks"], "ks", 1, FUSION_MAX_K, FUSION_MAX_KS)
    if "numel" in params:
        errors += check_int_or_auto(params["numel"], "numel", 1, FUSION_MAX_NUMEL)
    if "calls_per_sample" in params:
        errors += check_int_or_auto(params["calls_per_sample"], "calls_per_sample", 1, FUSION_MAX_CALLS_PER_SAMPLE)
    if "repeats" in params:
        errors += check_int(params["repeats"], "repeats", 1, FUSION_MAX_REPEATS)
    if "warmup" in params:
        errors += check_int(params["warmup"], "warmup", 0, FUSION_MAX_WARMUP)
    if params.get("max_working_set") is not None:
        errors += check_int(
            params["max_working_set"], "max_working_set", FUSION_MIN_WORKING_SET, FUSION_MAX_WORKING_SET
        )
    if "op_set" in params and params["op_set"] not in FUSION_OP_SET_NAMES:
        errors.append(f"op_set: must be one of {', '.join(FUSION_OP_SET_NAMES)} (got {params['op_set']!r})")
    return errors


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_int(value: Any, name: str, low: int, high: int) -> list[str]:
    if not is_int(value) or not low <= value <= high:
        return [f"{name}: must be an integer from {low:,} to {high:,} (got {value!r})"]
    return []


def check_int_or_auto(value: Any, name: str, low: int, high: int) -> list[str]:
    if value == AUTO or (is_int(value) and low <= value <= high):
        return []
    return [f"{name}: must be {AUTO!r} or an integer from {low:,} to {high:,} (got {value!r})"]


def check_int_list(value: Any, name: str, low: int, high: int, max_items: int) -> list[str]:
    allowed = f"a list of 1 to {max_items} different integers, each from {low:,} to {high:,}"
    if not isinstance(value, list | tuple) or not 1 <= len(value) <= max_items:
        return [f"{name}: must be {allowed} (got {value!r})"]
    bad = [item for item in value if not is_int(item) or not low <= item <= high]
    if bad:
        return [f"{name}: each value must be an integer from {low:,} to {high:,} (got {bad[0]!r})"]
    if len(set(value)) != len(value):
        return [f"{name}: must be {allowed}; {list(value)!r} repeats a value"]
    return []


OVERHEAD_MAX_K = 64
OVERHEAD_MAX_TINY_NUMEL = 4096
OVERHEAD_MAX_BATCH = 8192
OVERHEAD_MAX_BATCH_SIZES = 16
OVERHEAD_MAX_WIDTH = 1024


OVERHEAD_DEFAULTS: dict[str, Any] = {
    "ks": [1, 2, 4, 8, 16, 32],
    "numel": 16,
    "batch_sizes": [1, 2, 4, 8, 16, 32, 64, 128, 256],
    "width": 64,
    "compile_batches": True,
    "repeats": 15,
    "warmup": 20,
    "calls_per_sample": 50,
}


def overhead_problems(params: dict) -> list[str]:
    """Problems with `params`, one message per field naming the allowed values; empty if fine."""
    if not isinstance(params, dict):
        return ["params: must be a mapping of field names to values"]
    errors = [
        f"{key}: unknown field (known: {', '.join(OVERHEAD_DEFAULTS)})"
        for key in params
        if key not in OVERHEAD_DEFAULTS
    ]
    checks = {
        "ks": lambda v: check_int_list(v, "ks", 1, OVERHEAD_MAX_K, 10),
        "numel": lambda v: check_int(v, "numel", 1, OVERHEAD_MAX_TINY_NUMEL),
        "batch_sizes": lambda v: check_int_list(v, "batch_sizes", 1, OVERHEAD_MAX_BATCH, OVERHEAD_MAX_BATCH_SIZES),
        "width": lambda v: check_int(v, "width", 1, OVERHEAD_MAX_WIDTH),
        "repeats": lambda v: check_int(v, "repeats", 1, 100),
        "warmup": lambda v: check_int(v, "warmup", 0, 1000),
        "calls_per_sample": lambda v: check_int(v, "calls_per_sample", 1, 10000),
    }
    for key, check in checks.items():
        if key in params:
            errors += check(params[key])
    if "compile_batches" in params and not isinstance(params["compile_batches"], bool):
        errors.append(f"compile_batches: must be true or false (got {params['compile_batches']!r})")
    return errors


GRAPHS_DEFAULTS: dict[str, Any] = {"examples": ["clean", "prints", "item", "data_dependent"]}


def graphs_problems(params: dict[str, Any]) -> list[str]:
    """Human messages for bad parameters (empty when fine)."""
    p = {**GRAPHS_DEFAULTS, **params}
    problems = [
        f"unknown parameter {k!r}; known: {', '.join(GRAPHS_DEFAULTS)}" for k in params if k not in GRAPHS_DEFAULTS
    ]
    examples = p["examples"]
    allowed = ", ".join(GRAPH_EXAMPLES)
    if not isinstance(examples, list) or not examples:
        problems.append(f"examples: a non-empty list of example names; allowed: {allowed}")
        return problems
    unknown = [e for e in examples if e not in GRAPH_EXAMPLES]
    if unknown:
        problems.append(f"examples: unknown {', '.join(map(repr, unknown))}; allowed: {allowed}")
    elif len(set(examples)) != len(examples):
        problems.append(f"examples: each example at most once; allowed: {allowed}")
    return problems


CODEGEN_DEFAULTS: dict[str, Any] = {"function": "gelu_chain", "size": 4096}


CODEGEN_ROWS = 8  # the input is a ROWS x size matrix; layer_norm and softmax work over its last dimension
CODEGEN_MIN_SIZE, CODEGEN_MAX_SIZE = 16, 65536


def codegen_problems(params: dict[str, Any]) -> list[str]:
    """Human messages for bad parameters (empty when fine)."""
    p = {**CODEGEN_DEFAULTS, **params}
    problems = [
        f"unknown parameter {k!r}; known: {', '.join(CODEGEN_DEFAULTS)}" for k in params if k not in CODEGEN_DEFAULTS
    ]
    if p["function"] not in CODEGEN_FUNCTIONS:
        problems.append(f"function: {p['function']!r} is not allowed; allowed: {', '.join(CODEGEN_FUNCTIONS)}")
    size = p["size"]
    if not isinstance(size, int) or isinstance(size, bool) or not CODEGEN_MIN_SIZE <= size <= CODEGEN_MAX_SIZE:
        problems.append(
            f"size: a whole number from {CODEGEN_MIN_SIZE} to {CODEGEN_MAX_SIZE} (the input is a {CODEGEN_ROWS} x size matrix; got {size!r})"
        )
    return problems


CACHES_DEFAULTS: dict[str, Any] = {
    "model": "mlp",
    "batch_size": 32,
    "shapes": [8, 16, 32, 64],
    "recompile_backend": "inductor",
}


CACHES_MODELS = tuple(m.name for m in MODELS.values() if m.caches_demo)  # a column of the zoo's rows
CACHES_BACKENDS = ("inductor", "aot_eager", "eager")


def caches_problems(params: dict[str, Any]) -> list[str]:
    p = {**CACHES_DEFAULTS, **params}
    problems = [
        f"unknown parameter {k!r}; known: {', '.join(CACHES_DEFAULTS)}" for k in params if k not in CACHES_DEFAULTS
    ]
    if p["model"] not in CACHES_MODELS:
        problems.append(f"model: {p['model']!r} is not allowed; allowed: {', '.join(CACHES_MODELS)}")
    if not isinstance(p["batch_size"], int) or isinstance(p["batch_size"], bool) or not 1 <= p["batch_size"] <= 1024:
        problems.append(f"batch_size: must be a whole number from 1 to 1024 (got {p['batch_size']!r})")
    shapes = p["shapes"]
    if (
        not isinstance(shapes, list)
        or not 2 <= len(shapes) <= 8
        or not all(isinstance(s, int) and not isinstance(s, bool) and 1 <= s <= 4096 for s in shapes)
    ):
        problems.append("shapes: 2 to 8 whole numbers from 1 to 4096")
    if p["recompile_backend"] not in CACHES_BACKENDS:
        problems.append(f"recompile_backend: allowed: {', '.join(CACHES_BACKENDS)}")
    return problems


DEFAULTS: dict[str, dict[str, Any]] = {
    "fusion": FUSION_DEFAULTS,
    "overhead": OVERHEAD_DEFAULTS,
    "graphs": GRAPHS_DEFAULTS,
    "codegen": CODEGEN_DEFAULTS,
    "caches": CACHES_DEFAULTS,
}
VALIDATORS = {
    "fusion": fusion_problems,
    "overhead": overhead_problems,
    "graphs": graphs_problems,
    "codegen": codegen_problems,
    "caches": caches_problems,
}
