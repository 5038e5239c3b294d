"""A bundle's per-step profile (core.engine.profiling), checked field by field and kept, so an imported
run or a replay can say why compiled is faster or slower (core.engine.cause) as its own machine did.
Its numbers are the bundle's: the page words them again (core.view.run_screen.why_per_step), and the
trace file it names, a path on another machine, is dropped. No torch."""

from __future__ import annotations

from typing import Any

MAX_NAME = 500  # a kernel's name (Inductor's fused kernels' run to a few hundred characters)
MAX_TOP = 20
PER_STEP = ("graph_launches_per_step", "operators_per_step", "kernels_per_step")
SECONDS = ("host_s_per_step", "device_s_per_step")


def profile_from_bundle(value: Any, error: type[Exception]) -> dict[str, Any] | None:
    """The bundle's profile of both variants with its reading dropped (worded again here), or None
    where it has none; a field that is not what the profile records raises `error` naming it."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise error("run.summary.profile must be an object")
    out: dict[str, Any] = {}
    for variant in ("eager", "compiled"):
        part = value.get(variant)
        out[variant] = None if part is None else _part(part, f"run.summary.profile.{variant}", error)
    return out if out["eager"] or out["compiled"] else None


def _part(part: Any, where: str, error: type[Exception]) -> dict[str, Any]:
    if not isinstance(part, dict):
        raise error(f"{where} must be an object")
    out: dict[str, Any] = {"steps": _number(part.get("steps"), f"{where}.steps", 1, 1000, error)}
    for key in PER_STEP:
        out[key] = _number(part.get(key, 0.0), f"{where}.{key}", 0, 1e7, error)
    for key in SECONDS:
        out[key] = _number(part.get(key), f"{where}.{key}", 0, 1e5, error)
    counting = part.get("kernel_counting")
    if counting is not None and (not isinstance(counting, str) or len(counting) > MAX_NAME):
        raise error(f"{where}.kernel_counting must be text of at most {MAX_NAME} characters")
    out["kernel_counting"] = counting
    top = part.get("top_kernels") or []
    if not isinstance(top, list) or len(top) > MAX_TOP:
        raise error(f"{where}.top_kernels must be a list of at most {MAX_TOP}")
    out["top_kernels"] = [_kernel(k, f"{where}.top_kernels[{i}]", error) for i, k in enumerate(top)]
    return out


def _kernel(kernel: Any, where: str, error: type[Exception]) -> dict[str, Any]:
    if not isinstance(kernel, dict) or not isinstance(kernel.get("name"), str) or len(kernel["name"]) > MAX_NAME:
        raise error(f"{where} must be an object with a name of at most {MAX_NAME} characters")
    return {
        "name": kernel["name"],
        "calls_per_step": _number(kernel.get("calls_per_step"), f"{where}.calls_per_step", 0, 1e7, error),
        "s_per_step": _number(kernel.get("s_per_step"), f"{where}.s_per_step", 0, 1e5, error),
    }


def _number(value: Any, where: str, low: float, high: float, error: type[Exception]) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise error(f"{where} must be a number from {low:g} to {high:g} (got {str(value)[:40]!r})")
    return float(value)
