"""Where compile time goes, and what caches save: the same compile cold (a fresh Inductor cache
directory) and warm (the directory the cold one filled), each in a fresh process so that no
in-memory cache flatters the warm number; then recompilation when input shapes change.

A cold compile is what a new user pays; a warm one is every later run on the same machine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

DEFAULTS: dict[str, Any] = {
    "model": "mlp",
    "batch_size": 32,
    "shapes": [8, 16, 32, 64],
    "recompile_backend": "inductor",
}
MODELS = ("mlp", "pointwise_mlp", "small_cnn", "resnet18", "gpt")
BACKENDS = ("inductor", "aot_eager", "eager")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def validate(params: dict[str, Any]) -> list[str]:
    p = {**DEFAULTS, **params}
    problems = [f"unknown parameter {k!r}; known: {', '.join(DEFAULTS)}" for k in params if k not in DEFAULTS]
    if p["model"] not in MODELS:
        problems.append(f"model: {p['model']!r} is not allowed; allowed: {', '.join(MODELS)}")
    if not isinstance(p["batch_size"], int) or isinstance(p["batch_size"], bool) or not 1 <= p["batch_size"] <= 1024:
        problems.append(f"batch_size: must be a whole number from 1 to 1024 (got {p['batch_size']!r})")
    shapes = p["shapes"]
    if (
        not isinstance(shapes, list)
        or not 2 <= len(shapes) <= 8
        or not all(isinstance(s, int) and not isinstance(s, bool) and 1 <= s <= 4096 for s in shapes)
    ):
        problems.append("shapes: 2 to 8 whole numbers from 1 to 4096")
    if p["recompile_backend"] not in BACKENDS:
        problems.append(f"recompile_backend: allowed: {', '.join(BACKENDS)}")
    return problems


def compile_in_fresh_process(cache_dir: str, model: str, batch_size: int, device: str) -> dict[str, Any]:
    """Run core.explain.compile_once in a new process with TORCHINDUCTOR_CACHE_DIR=cache_dir."""
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache_dir, "PYTHONPATH": ROOT}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "core.explain.compile_once", model, str(batch_size), device],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"error": f"compile process failed: {tail[0]}"}
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_wall_s"] = time.perf_counter() - started
    return result


def recompiles(shapes: list[int], backend: str) -> list[dict[str, Any]]:
    """Call one compiled function on several input lengths, under each `dynamic` setting."""
    import torch

    from core.compile_stats import read_compile_stats, reset_compile_state

    def f(x: torch.Tensor) -> torch.Tensor:
        return (torch.sin(x) * 2 + x.square()).sum()

    rows = []
    for dynamic in (False, None, True):
        reset_compile_state()
        compiled = torch.compile(f, backend=backend, dynamic=dynamic)
        calls = []
        for n in shapes:
            t = time.perf_counter()
            compiled(torch.randn(n))
            calls.append({"length": n, "time_s": time.perf_counter() - t})
        stats = read_compile_stats()
        rows.append(
            {
                "dynamic": {False: "False", None: "None (automatic)", True: "True"}[dynamic],
                "calls": calls,
                "graphs": stats.graphs,
                "recompiles": stats.recompiles,
                "recompile_reasons": stats.recompile_reasons[:4],
                "total_s": sum(c["time_s"] for c in calls),
            }
        )
    return rows


def run(params: dict[str, Any], device: str = "cpu") -> dict[str, Any]:
    p = {**DEFAULTS, **params}
    cache_dir = tempfile.mkdtemp(prefix="compile-lab-cache-demo-")
    try:
        cold = compile_in_fresh_process(cache_dir, p["model"], p["batch_size"], device)
        warm = compile_in_fresh_process(cache_dir, p["model"], p["batch_size"], device)
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    result: dict[str, Any] = {
        "model": p["model"],
        "batch_size": p["batch_size"],
        "device": device,
        "cold": cold,
        "warm": warm,
    }
    if "compile_s" in cold and "compile_s" in warm and warm["compile_s"] > 0:
        result["warm_saves"] = cold["compile_s"] / warm["compile_s"]
    try:
        result["recompiles"] = recompiles(p["shapes"], p["recompile_backend"])
    except Exception as exc:  # noqa: BLE001 - a torch without these counters still shows the cache part
        result["recompiles"] = {"unavailable": f"{type(exc).__name__}: {exc}"}
    return result
