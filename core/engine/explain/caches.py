"""Where compile time goes, and what caches save: the same compile cold (a fresh Inductor cache
directory) and warm (the directory the cold one filled), each in a fresh process so that no
in-memory cache flatters the warm number; then recompilation when input shapes change, each
`dynamic` setting with its own empty cache (after one untimed warm-up compile has paid the
process's one-time costs), so no row reads code a row above it wrote.

A cold compile is what a new user pays; a warm one is every later run on the same machine; a portable
one is a fresh machine (an empty cache, a new process) that loads the artifacts the cold compile saved
(torch.compiler.save_cache_artifacts / load_cache_artifacts): what shipping the cache saves a host.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from core import PROJECT_ROOT
from core.engine.device_state import cache_environment
from core.engine.explain.params import CACHES_DEFAULTS as DEFAULTS
from core.engine.explain.params import caches_problems as validate  # noqa: F401 - a demo module's API: DEFAULTS, validate, run
from core.engine.warm_cache import make_cold_cache


def run_fresh(
    entry: str, module: str, argv: list[str], env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess:
    """`python -m module *argv` in a new process, its output captured: how a fresh process starts when
    no warm one is offered (the worker offers core.runs.warm_start.run_fresh, which forks `entry`
    from a server that has imported torch and nothing more, as clean as this)."""
    command = [sys.executable, "-m", module, *argv]
    return subprocess.run(command, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def compile_in_fresh_process(
    cache_dir: str, model: str, batch_size: int, device: str, *extra: str, fresh_process: Callable[..., Any] = run_fresh
) -> dict[str, Any]:
    """Run core.engine.explain.compile_once in a new process whose Inductor and Triton caches are
    both inside cache_dir (as a race's: core.engine.device_state), so a host's TRITON_CACHE_DIR
    cannot make the cold compile warm. `extra`: its --save or --load FILE."""
    env = {**os.environ, **cache_environment(cache_dir)}  # `-m` from PROJECT_ROOT finds core itself
    started = time.perf_counter()
    done = fresh_process(
        "core.engine.explain.compile_once:entry",
        "core.engine.explain.compile_once",
        [model, str(batch_size), device, *extra],
        env,
        timeout=900,
    )
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"error": f"compile process failed: {tail[0]}"}
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_wall_s"] = time.perf_counter() - started
    return result


def recompiles(shapes: list[int], backend: str, device: str = "cpu") -> list[dict[str, Any]]:
    """Call one compiled function on several input lengths, under each `dynamic` setting, on the
    demo's device (timed device-correctly: a GPU's work is waited for)."""
    import torch

    from core.engine.compile_stats import read_compile_stats, reset_compile_state
    from core.engine.device_state import Stopwatch

    def f(x: torch.Tensor) -> torch.Tensor:
        return (torch.sin(x) * 2 + x.square()).sum()

    def warm_up(x: torch.Tensor) -> torch.Tensor:
        return torch.cos(x) + 1

    with own_cache():  # imports, the CPU feature probe, the compiler's first start: not any row's cost
        reset_compile_state()
        torch.compile(warm_up, backend=backend)(torch.randn(4, device=device))
    rows = []
    for dynamic in (False, None, True):
        with own_cache() as cache:
            reset_compile_state()
            compiled = torch.compile(f, backend=backend, dynamic=dynamic)
            calls = []
            for n in shapes:
                x = torch.randn(n, device=device)
                stopwatch = Stopwatch(device)
                stopwatch.start()
                compiled(x)
                calls.append({"length": n, "time_s": stopwatch.stop()})
            stats = read_compile_stats()
        rows.append(
            {
                "dynamic": {False: "False", None: "None (automatic)", True: "True"}[dynamic],
                "calls": calls,
                "graphs": stats.graphs,
                "recompiles": stats.recompiles,
                "recompile_reasons": stats.recompile_reasons[:4],
                "total_s": sum(c["time_s"] for c in calls),
                "cache": cache,
            }
        )
    reset_compile_state()
    return rows


OWN_CACHE, SHARED_CACHE = "own", "shared"


@contextlib.contextmanager
def own_cache():
    """An empty Inductor cache (on disk and in memory) for what runs inside, under the data dir;
    yields OWN_CACHE, or SHARED_CACHE where this torch has no way to give one (then the rows share
    the process's cache, and the page says so)."""
    try:
        from torch._inductor.utils import fresh_cache
    except ImportError:  # private API: without it the rows share one cache, said on the page
        yield SHARED_CACHE
        return
    folder = make_cold_cache("recompiles")
    try:
        with fresh_cache(dir=folder):
            yield OWN_CACHE
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run(params: dict[str, Any], device: str = "cpu", fresh_process: Callable[..., Any] = run_fresh) -> dict[str, Any]:
    """`fresh_process`: how a fresh process is started (run_fresh's signature)."""
    p = {**DEFAULTS, **params}
    cache_dir, fresh_dir, kept = make_cold_cache("demo"), make_cold_cache("demo-fresh"), make_cold_cache("artifacts")
    artifacts = os.path.join(kept, "artifacts.bin")  # outside both caches: what a host would ship
    try:
        cold = compile_in_fresh_process(
            cache_dir, p["model"], p["batch_size"], device, "--save", artifacts, fresh_process=fresh_process
        )
        warm = compile_in_fresh_process(cache_dir, p["model"], p["batch_size"], device, fresh_process=fresh_process)
        # A fresh machine: an empty cache of its own, loading the artifacts the cold compile saved.
        portable = (
            compile_in_fresh_process(
                fresh_dir, p["model"], p["batch_size"], device, "--load", artifacts, fresh_process=fresh_process
            )
            if os.path.isfile(artifacts)
            else {"error": "this torch saved no cache artifacts"}
        )
    finally:
        for folder in (cache_dir, fresh_dir, kept):
            shutil.rmtree(folder, ignore_errors=True)
    result: dict[str, Any] = {
        "model": p["model"],
        "batch_size": p["batch_size"],
        "device": device,
        "cold": cold,
        "warm": warm,
        "portable": portable,
    }
    if "compile_s" in cold and "compile_s" in warm and warm["compile_s"] > 0:
        result["warm_saves"] = cold["compile_s"] / warm["compile_s"]
    try:
        result["recompiles"] = recompiles(p["shapes"], p["recompile_backend"], device)
    except Exception as exc:  # noqa: BLE001 - a torch without these counters still shows the cache part
        result["recompiles"] = {"unavailable": f"{type(exc).__name__}: {exc}"}
    return result
