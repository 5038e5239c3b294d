"""Graph capture and graph breaks: what Dynamo turns into graphs, and where it has to stop.

A graph break splits a function into several graphs with Python in between, so Inductor cannot
fuse across it and every call pays the hand-over. Each example below breaks for a common reason;
its `_fixed` twin shows the usual way out. The counts come from torch's own
`torch._dynamo.explain` (a private API, used defensively: a torch without it gives an
"unavailable" message for that part), and `fullgraph=True` shows what a strict compile says.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import os
import time
from collections.abc import Callable
from typing import Any

import torch

from core.engine.compile_stats import reset_compile_state
from core.engine.explain import source_of
from core.engine.explain.params import GRAPHS_DEFAULTS as DEFAULTS
from core.engine.explain.params import graphs_problems as validate  # noqa: F401 - a demo module's API: DEFAULTS, validate, run

# --- the examples (their source is shown on the page, so keep them short and plain) -------------


def clean(x: torch.Tensor) -> torch.Tensor:
    """Pure tensor math: Dynamo captures the whole function as one graph."""
    y = torch.sin(x) * 2
    return torch.relu(y + 1)


def prints(x: torch.Tensor) -> torch.Tensor:
    """A print in the middle: Dynamo cannot put a print in a graph, so it stops, runs it, and starts a new graph."""
    y = torch.sin(x)
    print("halfway there")
    return torch.relu(y * 2)


def prints_fixed(x: torch.Tensor) -> torch.Tensor:
    """The print removed (log outside the compiled function instead): one graph."""
    y = torch.sin(x)
    return torch.relu(y * 2)


def item(x: torch.Tensor) -> torch.Tensor:
    """`.item()` turns a tensor into a Python number: the graph ends there, and the number is baked
    into the next graph as a constant (a new value means a recompile)."""
    scale = x.sum().item()
    return torch.relu(x * scale)


def item_fixed(x: torch.Tensor) -> torch.Tensor:
    """Keep it a tensor: the sum stays on the device, inside the graph."""
    scale = x.sum()
    return torch.relu(x * scale)


def data_dependent(x: torch.Tensor) -> torch.Tensor:
    """A Python `if` on a tensor's value: which branch runs is only known at run time, so the graph breaks."""
    if x.sum() > 0:
        return x * 2
    return x - 1


def data_dependent_fixed(x: torch.Tensor) -> torch.Tensor:
    """Compute both branches and pick with `torch.where` (or use `torch.cond`): one graph, no Python branch."""
    return torch.where(x.sum() > 0, x * 2, x - 1)


# name -> (title, example, fixed counterpart or None)
EXAMPLES: dict[str, tuple[str, Callable[..., Any], Callable[..., Any] | None]] = {
    "clean": ("Pure tensor math", clean, None),
    "prints": ("A print in the middle", prints, prints_fixed),
    "item": ("Tensor.item() used as a Python number", item, item_fixed),
    "data_dependent": ("Python if on a tensor value", data_dependent, data_dependent_fixed),
}

_MESSAGE_LINES = 8  # how much of a long torch error message is worth keeping


def run(params: dict[str, Any], device: str = "cpu") -> dict[str, Any]:
    """Explain every chosen example and its fix; everything the page renders, JSON-serializable."""
    p = {**DEFAULTS, **params}
    x = torch.linspace(-1.0, 2.0, 8, device=device)  # fixed input: the data-dependent branch is reproducible
    results = []
    for name in p["examples"]:
        title, fn, fixed = EXAMPLES[name]
        started = time.perf_counter()
        entry: dict[str, Any] = {"name": name, "title": title, **describe_function(fn, x)}
        entry["fixed"] = describe_function(fixed, x) if fixed is not None else None
        entry["time_s"] = round(time.perf_counter() - started, 3)
        results.append(entry)
    return {
        "torch_version": torch.__version__,
        "device": str(device),
        "input": "torch.linspace(-1, 2, 8)",
        "examples": results,
    }


def describe_function(fn: Callable[..., Any], x: torch.Tensor) -> dict[str, Any]:
    """One function's source, what Dynamo's explain says about it, and what fullgraph=True says."""
    explained = explain(fn, x)
    strict = fullgraph_outcome(fn, x)
    out: dict[str, Any] = {
        "function": fn.__name__,
        "doc": inspect.cleandoc(fn.__doc__ or ""),
        "source": source_of(fn),
        "explain": explained,
        "fullgraph": strict,
    }
    if explained.get("graph_break_count") and strict.get("ok"):
        out["note"] = avoided_break_note(explained, strict)
    return out


def avoided_break_note(explained: dict[str, Any], strict: dict[str, Any]) -> str:
    """Why fullgraph=True compiled a function the default mode breaks: the error the intro promises
    comes only for a break torch cannot avoid, and this one it avoided (said from what it did)."""
    reasons = " ".join(r.get("reason", "") for r in explained.get("break_reasons") or [])
    again = (
        " A second input with a different value ran without a recompile: the number stays symbolic, not a constant."
        if strict.get("recompiled") is False
        else ""
    )
    if "capture_scalar_outputs" in reasons:
        return (
            f"So there is no break for fullgraph=True to refuse: torch {torch.__version__} turns on "
            "capture_scalar_outputs when asked for a full graph (it is off by default, which is why the default "
            f"mode breaks at .item()), so the number becomes a symbolic scalar inside the one graph.{again}"
        )
    return (
        f"So there is no break for fullgraph=True to refuse: asked for a full graph, torch {torch.__version__} "
        f"captured this function as one graph instead of breaking.{again}"
    )


def explain(fn: Callable[..., Any], x: torch.Tensor) -> dict[str, Any]:
    """Graphs, breaks and break reasons from `torch._dynamo.explain`, or {"unavailable": why}."""
    version = torch.__version__
    try:
        explain_fn = importlib.import_module("torch._dynamo").explain
    except (ImportError, AttributeError) as exc:
        return {"unavailable": f"torch._dynamo.explain is missing in torch {version} ({type(exc).__name__}: {exc})"}
    reset_compile_state()
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            report = explain_fn(fn)(x)
        graphs = list(getattr(report, "graphs", []) or [])
        out: dict[str, Any] = {
            "graph_count": int(report.graph_count),
            "graph_break_count": int(report.graph_break_count),
            "op_count": int(getattr(report, "op_count", 0) or 0),
            "break_reasons": [break_reason(r, fn) for r in (getattr(report, "break_reasons", []) or [])],
            "graphs": [graph_code(g) for g in graphs],
            "printed": printed.getvalue(),
        }
    except AttributeError as exc:
        return {"unavailable": f"torch._dynamo.explain in torch {version} lacks what this demo reads: {exc}"}
    except Exception as exc:  # noqa: BLE001 - a private API may change; the page still shows the rest
        return {
            "unavailable": f"torch._dynamo.explain failed in torch {version}: {type(exc).__name__}: {_first_line(exc)}"
        }
    finally:
        reset_compile_state()
    return out


def graph_code(gm: Any) -> str:
    code = getattr(gm, "code", None)
    return code.strip() if isinstance(code, str) else str(gm).strip()


def break_reason(reason: Any, fn: Callable[..., Any]) -> dict[str, Any]:
    """A break reason as a short text plus the user line it points at (from its user_stack's last frame)."""
    text = str(getattr(reason, "reason", reason))
    lines = [line.rstrip() for line in text.strip().splitlines() if line.strip()]
    # what follows is for torch developers; the explanation and hints above it are for the reader
    cut = next((i for i, line in enumerate(lines) if line.strip().startswith("Developer debug context")), len(lines))
    lines = lines[:cut]
    out: dict[str, Any] = {
        "reason": lines[0] if lines else "(no reason given)",
        "detail": "\n".join(lines[:_MESSAGE_LINES]),
        "file": None,
        "line": None,
        "code": None,
        "source_line": None,  # 1-based line within the example's shown source, when it points there
    }
    stack = getattr(reason, "user_stack", None) or []
    if not stack:
        return out
    frame = stack[-1]
    filename = getattr(frame, "filename", None)
    lineno = getattr(frame, "lineno", None)
    out["file"] = os.path.basename(filename) if filename else None
    out["line"] = int(lineno) if isinstance(lineno, int) else None
    code = getattr(frame, "line", None)
    out["code"] = code.strip() if isinstance(code, str) else None
    try:
        lines_of_fn, start = inspect.getsourcelines(fn)
        same_file = filename and os.path.abspath(filename) == os.path.abspath(inspect.getsourcefile(fn) or "")
        if same_file and out["line"] is not None and start <= out["line"] < start + len(lines_of_fn):
            out["source_line"] = out["line"] - start + 1
            if out["code"] is None:
                out["code"] = lines_of_fn[out["source_line"] - 1].strip()
    except (OSError, TypeError):
        pass
    return out


def fullgraph_outcome(fn: Callable[..., Any], x: torch.Tensor) -> dict[str, Any]:
    """What `torch.compile(fn, fullgraph=True)` says (with an eager backend that counts the graphs
    and ops it is handed): ok with the count and whether a new input value recompiled, or the error."""
    reset_compile_state()
    graphs: list[int] = []

    def counting(gm: Any, example_inputs: Any) -> Any:  # an eager backend that counts what it is given
        graphs.append(sum(1 for node in gm.graph.nodes if node.op in ("call_function", "call_method")))
        return gm.forward

    try:
        with contextlib.redirect_stdout(io.StringIO()):
            compiled = torch.compile(fn, fullgraph=True, backend=counting)
            compiled(x)
            first = len(graphs)
            compiled(x * 2 + 1)  # another value: a baked-in constant would recompile here
    except Exception as exc:  # noqa: BLE001 - the error is the answer we show
        message = str(exc).strip()
        paragraph = message.split("\n\n", 1)[0].splitlines()
        return {
            "ok": False,
            "error_type": type(exc).__name__,
            "error_module": type(exc).__module__,
            "headline": current_headline(paragraph[0].strip() if paragraph else ""),
            "message": "\n".join(line.rstrip() for line in paragraph[:_MESSAGE_LINES]),
        }
    finally:
        reset_compile_state()
    return {"ok": True, "graphs": first, "ops": sum(graphs[:first]), "recompiled": len(graphs) > first}


# Older torch versions word some of the same errors differently; the page shows today's words.
_OLDER_HEADLINES = {"Dynamic control flow is not supported": "Data-dependent branching"}


def current_headline(headline: str) -> str:
    for old, new in _OLDER_HEADLINES.items():
        if headline.startswith(old):
            return new
    return headline


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""
