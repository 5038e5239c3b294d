"""Harness overhead: the trainer's steady-state eager step time against a minimal hand-written loop.

Why: every number Compile Lab shows is measured through its trainer (core.engine.variant.VariantRun),
which wraps each step in a Stopwatch, builds a StepEvent and emits it. If that machinery costs a
noticeable share of a small model's step, eager looks slower than it is and the measured compile
speedup is skewed. This script runs both side by side in one process on CPU, eager only, and prints
trainer / hand-loop as a ratio. Goal: within 3% (<= 1.03).

Fairness: same initial weights, same pre-made batches (the trainer's own BatchSource pool), Adam
with the same lr, zero_grad(set_to_none=True), forward, cross-entropy, backward, step and
loss.item() every step in both. Time is wall time (perf_counter) around whole blocks of steps;
blocks are interleaved, the first round is a dropped warm-up, and the order inside a round
alternates (ABBA) so slow drift cancels. Run from the repo root: `python bench/harness_overhead.py`.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import gc
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch
from torch import nn
from torch.nn import functional as F

from core.engine.device_state import precision_settings
from core.engine.models.sources import FEATURES, MODELS, NUM_CLASSES
from core.engine.models.workload import build_model
from core.engine.spec import DeviceCaps, RunSpec, check
from core.engine.variant import Batch, BatchSource, VariantRun

GOAL = 1.03
BOOTSTRAP_RESAMPLES = 2000


class HandLoop:
    """The minimal training loop a user would write: nothing but the work itself."""

    def __init__(self, model: nn.Module, lr: float):
        self.model = model.train()
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        self.last_loss = float("nan")

    def run(self, batches: Sequence[Batch]) -> None:
        model, opt = self.model, self.optimizer
        loss_value = 0.0
        for x, y in batches:
            opt.zero_grad(set_to_none=True)
            logits = model(x)
            if logits.dim() == 3:  # token models: (batch, time, vocab)
                loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
            else:
                loss = F.cross_entropy(logits, y)
            loss.backward()
            opt.step()
            loss_value = loss.item()
        self.last_loss = loss_value


def timed(block: Callable[[], None]) -> float:
    """Wall seconds for one block, after a collection so neither side inherits the other's garbage."""
    gc.collect()
    t0 = time.perf_counter()
    block()
    return time.perf_counter() - t0


def bootstrap_median(values: list[float], resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """95% percentile-bootstrap interval of the median."""
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(resamples))
    return meds[int(0.025 * resamples)], meds[int(0.975 * resamples) - 1]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="mlp", choices=sorted(MODELS), help="zoo model (default: mlp)")
    p.add_argument("--batch-size", type=int, default=64, help="samples per step (default: 64)")
    p.add_argument("--steps", type=int, default=30, help="steps per timed block (default: 30)")
    p.add_argument("--rounds", type=int, default=25, help="interleaved rounds, the first one a warm-up (default: 25)")
    p.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch intra-op threads (default 0 = torch's default, as the trainer runs). On a busy 2-core box use 1: "
        "with 2 OpenMP threads, any other process stalls the thread barrier and step times swing tens of times",
    )
    p.add_argument("--budget-s", type=float, default=50.0, help="stop starting rounds past this (default: 50 s)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.rounds < 2 or args.steps < 1:
        p.error("need --rounds >= 2 (the first is dropped) and --steps >= 1")
    return args


def machinery_cost_us(spec: RunSpec, device: torch.device, steps: int, reps: int = 5) -> tuple[float, float]:
    """The harness's own per-step cost, made visible: the same comparison with a tiny model (one
    Linear layer on the mlp's input) whose step takes tens of microseconds, not milliseconds.
    Returns (trainer, hand) microseconds per step, each the fastest of `reps` blocks."""
    micro = dataclasses.replace(spec, model="mlp", image_size=None, steps_per_epoch=steps)
    torch.manual_seed(spec.seed)
    tiny = nn.Linear(FEATURES, NUM_CLASSES).to(device)
    mlp_state = build_model("mlp").state_dict()
    run = VariantRun("eager", micro, device, mlp_state, lambda event: None)
    run.model = run.runner = copy.deepcopy(tiny).train()  # swap in the tiny model, keep the machinery
    run.optimizer = torch.optim.Adam(run.model.parameters(), lr=micro.lr)
    hand = HandLoop(copy.deepcopy(tiny), micro.lr)
    source = BatchSource(micro, device)
    batches = list(BatchSource(micro, device).train_epoch(1))
    trainer_s, hand_s = [], []
    for r in range(reps + 1):
        order = (0, 1) if r % 2 == 0 else (1, 0)
        got = [0.0, 0.0]
        for who in order:
            got[who] = timed(lambda: run.run(source)) if who == 0 else timed(lambda: hand.run(batches))
        if r:
            trainer_s.append(got[0])
            hand_s.append(got[1])
    return min(trainer_s) / steps * 1e6, min(hand_s) / steps * 1e6


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    spec = check(
        RunSpec(
            model=args.model,
            batch_size=args.batch_size,
            epochs=1,  # one run() call = one epoch = one timed block
            steps_per_epoch=args.steps,
            eval_steps=0,
            device="cpu",
            seed=args.seed,
        ),
        DeviceCaps(),
    )
    device = torch.device("cpu")
    print(
        f"harness overhead: {spec.model}, batch {spec.batch_size}, {args.steps} steps/block, "
        f"{args.rounds} rounds (first dropped), cpu x {torch.get_num_threads()} threads, torch {torch.__version__}"
    )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    t_start = time.perf_counter()

    with precision_settings(spec):
        torch.manual_seed(spec.seed)
        init_state = {k: v.clone() for k, v in build_model(spec.model, spec.input_size).state_dict().items()}

        trainer = VariantRun("eager", spec, device, init_state, lambda event: None)
        source = BatchSource(spec, device)
        hand_model = build_model(spec.model, spec.input_size).to(device)
        hand_model.load_state_dict(init_state)
        hand = HandLoop(hand_model, spec.lr)
        # The very tensors the trainer will see (BatchSource keeps its pool), pre-made on the device, in order.
        hand_batches = list(source.train_epoch(1))

        def run_trainer() -> None:
            trainer.run(source)

        def run_hand() -> None:
            hand.run(hand_batches)

        t_trainer: list[float] = []  # wall time around VariantRun.run: the whole harness
        t_steps: list[float] = []  # sum of the trainer's per-step Stopwatch times (what it reports)
        t_hand: list[float] = []
        loss_gap = 0.0
        for r in range(args.rounds):
            order = ("trainer", "hand") if r % 2 == 0 else ("hand", "trainer")  # ABBA: drift cancels
            got: dict[str, float] = {}
            for who in order:
                got[who] = timed(run_trainer if who == "trainer" else run_hand)
            # Same weights, same batches, same ops: the losses must agree (the work is the same).
            loss_gap = max(loss_gap, abs(trainer.result.steps[-1].loss - hand.last_loss))
            if r == 0:
                continue  # warm-up: allocator, caches, first-touch pages
            t_trainer.append(got["trainer"])
            t_hand.append(got["hand"])
            t_steps.append(sum(s.time_s for s in trainer.result.steps[-args.steps :]))
            spent = time.perf_counter() - t_start
            if len(t_trainer) >= 3 and spent * (r + 2) / (r + 1) > args.budget_s:
                print(f"stopping after {r + 1} rounds: the next would pass the {args.budget_s:.0f} s budget")
                break

        tiny_trainer_us, tiny_hand_us = machinery_cost_us(spec, device, steps=2000)

    n = args.steps
    ratios = [a / b for a, b in zip(t_trainer, t_hand)]
    ratio = statistics.median(ratios)
    lo, hi = bootstrap_median(ratios)
    hand_min_ms = min(t_hand) / n * 1e3

    def ms(values: list[float]) -> str:
        per_step = [v / n * 1e3 for v in values]
        return f"median {statistics.median(per_step):8.3f} ms  min {min(per_step):7.3f}  max {max(per_step):8.3f}"

    print(f"per-step time, whole blocks of {n} steps, {len(ratios)} timed rounds:")
    print(f"  trainer (wall around VariantRun.run)   {ms(t_trainer)}")
    print(f"  trainer (sum of its own step times)    {ms(t_steps)}")
    print(f"  hand loop (wall)                       {ms(t_hand)}")
    print(
        f"paired ratios trainer/hand: min {min(ratios):.3f}  max {max(ratios):.3f}  "
        f"95% bootstrap CI of median [{lo:.3f}, {hi:.3f}];  ratio of fastest blocks {min(t_trainer) / min(t_hand):.3f}"
    )
    extra_us = tiny_trainer_us - tiny_hand_us
    print(
        f"machinery cost, same comparison on a 1-layer model (fastest of 5 x 2000 steps): "
        f"{tiny_trainer_us:.1f} vs {tiny_hand_us:.1f} us/step, +{extra_us:.1f} us = "
        f"{extra_us / (hand_min_ms * 1e3):.2%} of the fastest {spec.model} hand step"
    )
    print(f"largest loss difference trainer vs hand at a block end: {loss_gap:.3g} (0 = identical work)")
    print(
        f"took {time.perf_counter() - t_start:.1f} s; 1-min load average at start {load:.2f} on {os.cpu_count()} cores"
    )
    if max(ratios) / min(ratios) > 1.2:
        print("note: rounds vary a lot (other load on the machine?); trust the paired median and the 1-layer line")
    verdict = "within goal" if ratio <= GOAL else "OVER goal"
    print(f"harness overhead ratio (trainer / hand loop): {ratio:.3f}  (goal <= {GOAL:.2f}, {verdict})")
    return 0


if __name__ == "__main__":
    main()
    sys.exit(0)  # a benchmark, not a test: the verdict is in the output
