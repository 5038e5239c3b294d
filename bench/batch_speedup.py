"""Does compile's steady speedup grow with batch size here? Eager and compiled training steps
interleaved in one process, per batch size, so a machine busy with other work slows both alike.

A sweep (python -m core sweep) runs each point's eager steps, then its compiled steps, in a fresh
worker: the app's honest protocol, but on a shared machine the load can change between the two
halves. This script answers the batch-size question with ratios measured side by side instead:
for each model and batch size, torch.compile from scratch (Dynamo reset), a few warm-up steps,
then ROUNDS rounds of one eager step and one compiled step, alternating which goes first. It
prints the median step of each, their ratio with a bootstrap 95% interval, the first compiled
step (what compile cost, roughly), and the regime reading from the eager step times.

Prints figures, never asserts. One torch thread (as a worker on a 2-core machine uses). Run from
the repo root: python bench/batch_speedup.py [--models pointwise_mlp resnet18] [--rounds 60]
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import torch

from core.engine import analysis, words
from core.engine.models.workload import build_model, loss_fn
from core.engine.spec import RunSpec
from core.engine.variant import BatchSource

SIZES = {"pointwise_mlp": (64, 256, 1024, 4096), "resnet18": (16, 32, 64, 128)}


def step(model, optimizer, x, y) -> float:
    start = time.perf_counter()
    optimizer.zero_grad(set_to_none=True)
    loss_fn(model(x), y).backward()
    optimizer.step()
    return time.perf_counter() - start


def measure(name: str, batch: int, rounds: int) -> dict:
    torch._dynamo.reset()
    spec = RunSpec(model=name, batch_size=batch, steps_per_epoch=4, device="cpu")
    torch.manual_seed(0)
    eager = build_model(name)
    compiled_model = copy.deepcopy(eager)
    compiled = torch.compile(compiled_model)
    opt_e = torch.optim.Adam(eager.parameters(), lr=1e-3)
    opt_c = torch.optim.Adam(compiled_model.parameters(), lr=1e-3)
    batches = list(BatchSource(spec, torch.device("cpu")).train_epoch(1))
    x, y = batches[0]
    step(eager, opt_e, x, y)  # one-time costs, untimed
    first_compiled = step(compiled, opt_c, x, y)  # the compile lands here
    for _ in range(2):
        step(eager, opt_e, x, y)
        step(compiled, opt_c, x, y)
    e_times, c_times = [], []
    for i in range(rounds):
        x, y = batches[i % len(batches)]
        if i % 2:
            c_times.append(step(compiled, opt_c, x, y))
            e_times.append(step(eager, opt_e, x, y))
        else:
            e_times.append(step(eager, opt_e, x, y))
            c_times.append(step(compiled, opt_c, x, y))
    speed = analysis.steady_state_speedup(e_times, c_times, warmup=0)
    return {"batch": batch, "first_compiled_s": first_compiled, "speed": speed}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", nargs="+", default=list(SIZES))
    parser.add_argument("--rounds", type=int, default=60)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, 1 thread, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    for name in args.models:
        print(f"\n{name}: {args.rounds} interleaved rounds per batch size")
        print(f"{'batch':>7} {'eager step':>12} {'compiled step':>14} {'speedup (95%)':>22} {'1st compiled step':>18}")
        rows = []
        for batch in SIZES[name]:
            row = measure(name, batch, args.rounds)
            s = row["speed"]
            rows.append(row)
            print(
                f"{batch:>7} {s.eager_median_s * 1000:>9.2f} ms {s.compiled_median_s * 1000:>11.2f} ms "
                f"{s.speedup:>8.2f}x ({s.ci_low:.2f}-{s.ci_high:.2f}) {s.verdict:<20}"
                f"{row['first_compiled_s']:>8.1f} s   (load {os.getloadavg()[0]:.1f})"
            )
        reading = words.regime([r["batch"] for r in rows], [r["speed"].eager_median_s for r in rows])
        print("   regime: " + (reading.text if reading else "no clear regime from these step times"))


if __name__ == "__main__":
    main()
