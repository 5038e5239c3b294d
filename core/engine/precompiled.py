"""The precompiled cache: the model's forward compiled ahead of time in another process
(`torch.compile(...).aot_compile`, experimental in torch's docs), saved as one artifact, and loaded by
the race's process (`torch.compiler.load_compiled_function`) at the compiled variant's first step.

So a race with cache "precompiled" measures what a process pays that starts from a precompiled
artifact: its compile cost is the load and the first step, beside cold (a fresh Inductor cache), warm
(the cache earlier races filled) and the portable cache (Under the hood: save_cache_artifacts). What the
ahead-of-time compile itself cost is recorded beside it (`environment["precompiled"]`), not timed as
the race's compile: a build machine pays it once.

The compiled function is `forward_of(model, *inputs)`, the model an input kept out of the artifact
(`external_data`), so that the loaded step trains the race's own model; AOT autograd compiled its
backward too. It is traced at the race's batch, in training mode and outside autocast, without graph
breaks (aot_compile needs fullgraph): what validation asks of a precompiled race (core.engine.spec).
The artifact lies in the race's cache folder, so the race's replicate processes load it as well.

    python -m core.engine.precompiled SPEC_JSON ARTIFACT   # the ahead-of-time process; prints one JSON line
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from typing import Any

import torch

from core import PROJECT_ROOT
from core.engine.cold_caches import make_cold_cache
from core.engine.device_state import cache_environment
from core.engine.spec import Problem, RunSpec

ARTIFACT = "precompiled-step.bin"
TIME_LIMIT_S = 1800  # the ahead-of-time process: a large model's Inductor compile on a small CPU


def forward_of(model: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
    """The function compiled ahead of time: the model's forward, the model an argument."""
    return model(*args, **kwargs)


def call_parts(inputs: Any) -> tuple[tuple, dict]:
    """(args, kwargs) of a batch's inputs as core.engine.models.workload.call_model passes them."""
    if isinstance(inputs, dict):
        return (), dict(inputs)
    if isinstance(inputs, (tuple, list)):
        return tuple(inputs), {}
    return (inputs,), {}


def artifact_path(cache_dir: str) -> str:
    """Where a race's artifact lies: in its compile cache folder (replicates are given that folder)."""
    return os.path.join(cache_dir, ARTIFACT)


def torch_problem() -> str | None:
    """Why this torch cannot precompile a step, or None: it needs torch.compile(...).aot_compile and
    torch.compiler.load_compiled_function (both experimental, in newer torch only)."""
    has_aot = callable(getattr(torch.compile(forward_of), "aot_compile", None))  # lazy: compiles nothing
    if has_aot and callable(getattr(torch.compiler, "load_compiled_function", None)):
        return None
    return (
        f"torch {torch.__version__} has no torch.compile(...).aot_compile and torch.compiler.load_compiled_function "
        "(a newer torch has them): use cache cold or warm"
    )


class PrecompiledStep:
    """The compiled variant's model with cache "precompiled": at its first call it loads the artifact
    (so the first compiled step pays the load, as a process starting from it does), then calls the
    loaded function with the model."""

    def __init__(self, path: str, model: torch.nn.Module):
        self.path, self.model, self._loaded = path, model, None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._loaded is None:
            with open(self.path, "rb") as fh:
                self._loaded = torch.compiler.load_compiled_function(fh, external_data={"model": self.model})
        return self._loaded(self.model, *args, **kwargs)


def precompile_ahead(spec: RunSpec, cache_dir: str) -> dict[str, Any]:
    """Compile the race's step ahead of time in a fresh process with an Inductor cache of its own (so
    nothing it compiles warms the race's), its artifact into the race's cache folder. Returns what it
    cost (`compile_s` inside that process, `process_wall_s`, `bytes`), or {"error": why}."""
    own = make_cold_cache("precompile")
    env = {**os.environ, **cache_environment(own)}
    command = [sys.executable, "-m", "core.engine.precompiled", json.dumps(spec.to_dict()), artifact_path(cache_dir)]
    started = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=TIME_LIMIT_S)
    except subprocess.TimeoutExpired:
        return {"error": f"the ahead-of-time compile took longer than {TIME_LIMIT_S} s"}
    finally:
        shutil.rmtree(own, ignore_errors=True)
    if done.returncode != 0:
        lines = [line for line in (done.stderr or done.stdout).strip().splitlines() if line.strip()]
        return {"error": lines[-1].strip() if lines else f"exit status {done.returncode}"}
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_wall_s"] = round(time.perf_counter() - started, 3)
    return result


def precompile(spec: RunSpec, path: str) -> dict[str, Any]:
    """In the ahead-of-time process: build the model as the race does (seeded), trace it on one batch
    of the race's shape in training mode, compile forward and backward, save the artifact."""
    from core.engine.data import BatchSource
    from core.engine.device_state import precision_settings
    from core.engine.models.resolve import workload_for
    from core.engine.spec import detect_device_caps, resolve_device

    device = torch.device(resolve_device(spec.device, detect_device_caps()))
    workload = workload_for(spec)
    torch.manual_seed(spec.seed)
    model = workload.build().to(device).train()
    source = BatchSource(spec, device, workload)
    inputs, _ = next(iter(source.train_epoch(1)))
    args, kwargs = call_parts(inputs)
    options: dict[str, Any] = {"backend": spec.backend, "dynamic": spec.dynamic, "fullgraph": True}
    if spec.backend == "inductor":
        options["mode"] = spec.mode
    with precision_settings(spec):
        started = time.perf_counter()
        compiled = torch.compile(forward_of, **options).aot_compile(((model, *args), kwargs))
        compiled.save_compiled_function(path, external_data={"model": model})
        seconds = time.perf_counter() - started
    return {"compile_s": round(seconds, 3), "bytes": os.path.getsize(path)}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    spec = RunSpec.from_dict(json.loads(argv[0]))
    print(json.dumps(precompile(spec, argv[1])))
    return 0


def precompiled_torch_problems(spec: RunSpec) -> list[Problem]:
    """The precompiled cache on a torch without it: the reason, on the cache field."""
    if spec.cache != "precompiled":
        return []
    problem = torch_problem()
    return [Problem("cache", problem)] if problem else []


if __name__ == "__main__":
    raise SystemExit(main())
