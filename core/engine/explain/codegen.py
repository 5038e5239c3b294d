"""The code Inductor writes: a small function, compiled, and the kernel source it became.

Eager PyTorch runs one ATen op at a time, each reading and writing the whole tensor; Inductor
fuses them into one loop (C++ with OpenMP and vector instructions on a CPU, Triton on a GPU).
Showing the generated source makes "fusion" concrete. The source comes from
`torch._inductor.utils.run_and_get_code`, a private API used defensively: a torch without it
gives an "unavailable" message for that part.

`torch._dynamo.reset()` runs before compiling, but the on-disk Inductor cache cannot be swapped
midway through a process: with a warm cache the code comes from the cache (the same code, and a
much shorter compile time).
"""

from __future__ import annotations

import importlib
import inspect
import re
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from core.engine.compile_stats import reset_compile_state
from core.engine.explain import source_of
from core.engine.explain.params import CODEGEN_DEFAULTS as DEFAULTS
from core.engine.explain.params import CODEGEN_ROWS as ROWS
from core.engine.explain.params import codegen_problems as validate  # noqa: F401 - a demo module's API: DEFAULTS, validate, run

MAX_MODULE_LINES = 400  # the generated module is shown up to this many lines


# --- the functions (their source is shown on the page) -------------------------------------------


def gelu_chain(x: torch.Tensor) -> torch.Tensor:
    """x * sigmoid(x), then GELU, then + 1: four elementwise ops that eager runs one after another."""
    y = x * torch.sigmoid(x)
    y = F.gelu(y)
    return y + 1


def layernorm_relu(x: torch.Tensor) -> torch.Tensor:
    """LayerNorm over the last dimension, then ReLU: a reduction (mean, variance) followed by elementwise work."""
    y = F.layer_norm(x, x.shape[-1:])
    return torch.relu(y)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension: one op in eager, a max, a subtract, an exp, a sum and a divide inside."""
    return torch.softmax(x, dim=-1)


FUNCTIONS: dict[str, tuple[str, Callable[[torch.Tensor], torch.Tensor]]] = {
    "gelu_chain": ("x * sigmoid(x), GELU, + 1", gelu_chain),
    "layernorm_relu": ("LayerNorm + ReLU", layernorm_relu),
    "softmax": ("Softmax over the last dimension", softmax),
}


def run(params: dict[str, Any], device: str = "cpu") -> dict[str, Any]:
    """Compile the chosen function with Inductor and return its source, the generated code and the counts."""
    p = {**DEFAULTS, **params}
    title, fn = FUNCTIONS[p["function"]]
    result: dict[str, Any] = {
        "function": p["function"],
        "title": title,
        "doc": inspect.cleandoc(fn.__doc__ or ""),
        "source": source_of(fn),
        "device": str(device),
        "input_shape": [ROWS, p["size"]],
        "torch_version": torch.__version__,
    }
    if str(device).startswith("cuda") and not torch.cuda.is_available():
        unavailable = {
            "unavailable": f"device {device!r} was asked for, but torch {torch.__version__} sees no CUDA GPU"
        }
        return {**result, "eager_ops": unavailable, "decomposed_ops": unavailable, "generated": unavailable}
    torch.manual_seed(0)
    x = torch.randn(ROWS, p["size"], device=device)
    result["eager_ops"] = aten_ops(fn, x, decompose=False)
    result["decomposed_ops"] = aten_ops(fn, x, decompose=True)
    result["generated"] = generated_code(fn, x)
    ops, kernels = result["eager_ops"].get("count"), result["generated"].get("kernel_count")
    result["fewer_kernels_than_ops"] = None if ops is None or kernels is None else kernels < ops
    return result


def aten_ops(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, decompose: bool) -> dict[str, Any]:
    """The ATen ops `fn` calls, traced with make_fx: as eager runs them, or after Inductor's decompositions."""
    what = "torch._inductor.decomposition.select_decomp_table" if decompose else "make_fx"
    try:
        make_fx = importlib.import_module("torch.fx.experimental.proxy_tensor").make_fx
        table = importlib.import_module("torch._inductor.decomposition").select_decomp_table() if decompose else None
    except (ImportError, AttributeError) as exc:
        return {"unavailable": f"{what} is missing in torch {torch.__version__} ({type(exc).__name__}: {exc})"}
    try:
        gm = make_fx(fn, decomposition_table=table)(x)
    except Exception as exc:  # noqa: BLE001 - tracing is a nicety; the generated code still shows
        return {"unavailable": f"tracing {fn.__name__} with make_fx failed in torch {torch.__version__}: {exc}"}
    ops = [str(n.target) for n in gm.graph.nodes if n.op == "call_function" and str(n.target).startswith("aten.")]
    return {"ops": ops, "count": len(ops)}


def generated_code(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> dict[str, Any]:
    """Compile `fn` with Inductor and describe the module it generated, or {"unavailable": why}."""
    version = torch.__version__
    try:
        run_and_get_code = importlib.import_module("torch._inductor.utils").run_and_get_code
    except (ImportError, AttributeError) as exc:
        return {"unavailable": f"torch._inductor.utils.run_and_get_code is missing in torch {version} ({exc})"}
    reset_compile_state()
    started = time.perf_counter()
    try:
        compiled_out, sources = run_and_get_code(torch.compile(fn, backend="inductor"), x)
        if x.device.type == "cuda":
            torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - e.g. no C++ compiler on the machine: say so, do not crash
        text = str(exc).strip()
        first = text.splitlines()[0] if text else ""
        return {
            "unavailable": f"Inductor could not compile {fn.__name__} with torch {version}: {type(exc).__name__}: {first}"
        }
    finally:
        compile_s = time.perf_counter() - started
        reset_compile_state()
    sources = [s for s in (sources or []) if isinstance(s, str) and s.strip()]
    if not sources:
        return {"unavailable": f"run_and_get_code returned no generated source in torch {version}"}
    module = "\n\n# ---- next generated module ----\n\n".join(sources)
    names = kernel_names(module)
    shown, truncated_note = truncate_lines(module, MAX_MODULE_LINES)
    with torch.no_grad():
        diff = (compiled_out.float() - fn(x).float()).abs().max().item()
    return {
        "language": detect_language(module),
        "module_source": shown,
        "module_lines": len(module.splitlines()),
        "truncated_note": truncated_note,
        "kernel_names": names,
        "kernel_count": len(names),
        "first_kernel": kernel_region(module, names[0]) if names else None,
        "extern_calls": sorted(set(re.findall(r"\bextern_kernels\.(\w+)\(", module))),
        "compile_and_first_call_s": round(compile_s, 3),
        "max_abs_diff_vs_eager": diff,
    }


def detect_language(source: str) -> str:
    """ "Triton" for GPU kernels, "C++" for Inductor's CPU backend, else "unknown"."""
    if "@triton.jit" in source or "async_compile.triton(" in source:
        return "Triton"
    if 'extern "C"' in source or "cpp_fused" in source or "async_compile.cpp" in source:
        return "C++"
    return "unknown"


_KERNEL_DEF = re.compile(r"^(\w+)\s*=\s*async_compile\.\w+\(", re.MULTILINE)
_KERNEL_NAME = re.compile(r"\b(cpp_fused_\w+|triton_(?:poi|red|per|tem|for|mm|bmm)_\w+)")


def kernel_names(source: str) -> list[str]:
    """Names of the kernels a generated module defines, in order (by their definition, else by name pattern)."""
    names = _KERNEL_DEF.findall(source) or _KERNEL_NAME.findall(source)
    return list(dict.fromkeys(names))


def kernel_region(source: str, name: str) -> dict[str, Any]:
    """The lines that define kernel `name`: from `name = async_compile...(` to the closing quotes."""
    lines = source.splitlines()
    start = next(
        (i for i, line in enumerate(lines) if re.match(rf"{re.escape(name)}\s*=\s*async_compile\.", line)), None
    )
    if start is None:
        start = next((i for i, line in enumerate(lines) if name in line), None)
        if start is None:
            return {"name": name, "source": "", "start_line": None, "end_line": None}
        end = min(len(lines) - 1, start + 60)
    else:
        closing = (i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith(("'''", '"""')))
        end = next(closing, min(len(lines) - 1, start + 60))
    return {"name": name, "source": "\n".join(lines[start : end + 1]), "start_line": start + 1, "end_line": end + 1}


def truncate_lines(source: str, limit: int) -> tuple[str, str | None]:
    """The first `limit` lines of `source`, and a note saying what was left out (None when nothing)."""
    lines = source.splitlines()
    if len(lines) <= limit:
        return source, None
    note = f"showing the first {limit} of {len(lines)} lines; the fused kernel is shown in full separately"
    return "\n".join(lines[:limit]) + f"\n# ... {len(lines) - limit} more lines not shown", note
