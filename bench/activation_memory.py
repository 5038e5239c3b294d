"""What one training sample of each zoo model keeps for its backward pass: the figure behind the zoo
rows' `activation_bytes` (core.engine.models.sources) and the memory guard (core.engine.race_memory).

For each model at its default input size, in training mode: one forward and loss at batch B1 and at
B2, counting every tensor autograd saves for backward (torch.autograd.graph.saved_tensors_hooks),
each storage once. The parameters autograd saves are the same at both sizes, so (bytes at B2 - bytes
at B1) / (B2 - B1) is what one more sample keeps. That is a floor of the eager step's peak: the
backward pass allocates gradients beside it, and the allocator rounds up. Then, as a check, the
process's peak RSS over a real eager step (forward, backward, Adam) at batch B2, against what the
guard's estimate says for it.

Prints figures, never asserts. Run from the repo root: python bench/activation_memory.py [--models resnet18]
"""

from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import torch

from core.engine.models.sources import MODELS
from core.engine.models.workload import build_model, loss_fn, random_batch


def saved_bytes(name: str, batch: int) -> int:
    """Bytes autograd keeps for backward over one forward and loss of `name` at `batch`."""
    info = MODELS[name]
    torch.manual_seed(0)
    model = build_model(name, info.default_size).train()
    x, y = random_batch(info.input_kind, batch, info.default_size, torch.Generator().manual_seed(0))
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor):
        storage = t.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = loss_fn(model(x), y)
    del loss
    return sum(storages.values())


def peak_rss() -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmHWM:"))


def eager_peak(name: str, batch: int, steps: int) -> None:
    """A real eager training run's peak RSS (forward, backward, Adam over the synthetic pool) against
    the guard's floor for it: run in a process of its own (--check), since the peak never falls."""
    from core.engine.race_memory import race_memory_bytes
    from core.engine.spec import RunSpec

    info = MODELS[name]
    before = peak_rss()
    model = build_model(name, info.default_size).train()
    optimizer = torch.optim.Adam(model.parameters())
    gen = torch.Generator().manual_seed(0)
    pool = [random_batch(info.input_kind, batch, info.default_size, gen) for _ in range(min(steps, 8))]
    for i in range(steps):
        x, y = pool[i % len(pool)]
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        optimizer.step()
    floor = race_memory_bytes(RunSpec(model=name, batch_size=batch, steps_per_epoch=steps))
    grown = peak_rss() - before
    print(
        f"{name:20s} batch {batch:6d}: peak RSS grew {grown / 2**30:6.2f} GiB, floor {floor / 2**30:6.2f} GiB "
        f"(peak / floor {grown / floor:.2f})",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    parser.add_argument("--batches", nargs=2, type=int, default=(2, 6))
    parser.add_argument("--check", type=int, default=None, help="instead: one eager run at this batch, its peak RSS")
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.check:
        for name in args.models:
            eager_peak(name, args.check, args.steps)
        return
    low, high = args.batches
    for name in args.models:
        per_sample = (saved_bytes(name, high) - saved_bytes(name, low)) / (high - low)
        print(f"{name:20s} size {MODELS[name].default_size:4d}: {per_sample / 1024:10.1f} KiB per sample", flush=True)


if __name__ == "__main__":
    main()
