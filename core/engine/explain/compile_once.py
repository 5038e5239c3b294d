"""`python -m core.engine.explain.compile_once MODEL BATCH DEVICE [--save FILE | --load FILE]`: compile one
training step in this fresh process and print one JSON line: how long the first (compiling) step took
against a steady one, and torch's own breakdown by phase. Used by core.engine.explain.caches for cold
vs warm caches, and for what a fresh machine pays with another's portable cache: `--save` writes the
compile's artifacts (torch.compiler.save_cache_artifacts) to FILE after it; `--load` loads FILE's
(torch.compiler.load_cache_artifacts) into this process's empty cache before it, timed apart."""

from __future__ import annotations

import json
import sys
import time

import torch
from torch.nn import functional as F

from core.engine.compile_stats import read_compile_stats
from core.engine.device_state import device_sync, probe_cpu_vector_isa
from core.engine.models.sources import get_model_info
from core.engine.models.workload import build_model, random_batch


def main(
    model_name: str, batch_size: int, device_name: str, save_to: str | None = None, load_from: str | None = None
) -> dict:
    device = torch.device(device_name)
    info = get_model_info(model_name)
    torch.manual_seed(0)
    model = build_model(model_name).to(device)
    x, y = (
        t.to(device)
        for t in random_batch(info.input_kind, batch_size, info.default_size, torch.Generator().manual_seed(0))
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(runner) -> float:
        device_sync(device)
        t = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        out = runner(x)
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        device_sync(device)
        return time.perf_counter() - t

    probe_s = probe_cpu_vector_isa(device, "inductor")  # once per machine: not this model's compile
    # One untimed eager step first: a fresh process pays one-time device costs (CUDA context,
    # cuBLAS/cuDNN handles, allocator growth) on its first step, and they are not compile time.
    step(model)
    load_s = None
    if load_from:  # another machine's artifacts into this process's empty cache, before anything compiles
        with open(load_from, "rb") as fh:
            artifacts = fh.read()
        started = time.perf_counter()
        torch.compiler.load_cache_artifacts(artifacts)
        load_s = time.perf_counter() - started
    compiled = torch.compile(model)
    first = step(compiled)
    steady = sorted(step(compiled) for _ in range(5))[2]
    stats = read_compile_stats()
    saved_bytes = None
    if save_to:
        saved = torch.compiler.save_cache_artifacts()
        if saved is not None:
            with open(save_to, "wb") as fh:
                fh.write(saved[0])
            saved_bytes = len(saved[0])
    return {
        "load_s": load_s,
        "artifact_bytes": saved_bytes,
        "first_step_s": first,
        "steady_step_s": steady,
        "compile_s": max(first - steady, 0.0),
        "phases": stats.phases,
        "cache_hits": stats.cache_hits,
        "cache_misses": stats.cache_misses,
        "graphs": stats.graphs,
        "cpu_isa_probe_s": probe_s,
    }


def entry(argv: list[str]) -> int:
    """The command line's work, as an entry point a warm server can fork (core.runs.warm_start)."""
    extra = dict(zip(argv[3::2], argv[4::2]))  # --save FILE or --load FILE
    print(json.dumps(main(argv[0], int(argv[1]), argv[2], extra.get("--save"), extra.get("--load"))))
    return 0


if __name__ == "__main__":
    sys.exit(entry(sys.argv[1:]))
