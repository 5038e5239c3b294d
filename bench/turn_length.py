"""Would finer turns make a replicate worth more? Both variants of a race in one process, under a race
process's conditions (its malloc thresholds, its core and thread), taking turns every step, every 2
steps counting only the second of each turn (so every counted step follows one of its own model's,
as in a block), and every 5 steps (the blocks schedule, what a replicate does), in segments of N
steps per variant (the same steps run in each scheme: the 2-step scheme counts half of them), the
schemes' order turning from segment to segment.

Per scheme: the spread of the 5-step blocks' log ratios (what a replicate's own interval is
built from), the spread of whole segments' speedups (what a replicate's speedup is: ratio of
medians over about as many steps), and each scheme's speedup over the 5-step turns', segment by
segment (whether finer turns change what is measured). Why it matters (issue 33): a race reaches ±3% only
as fast as its replicates' speedups agree; if turning every step narrowed the segments' spread, a
replicate could be shorter or fewer. Prints, never asserts.

Run from the repo root: python bench/turn_length.py [--segments 8] [--steps 40] [--config both|default|demo]
"""

from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from core.runs import race_conditions

CONFIGS = {"default": ("pointwise_mlp", 4096), "demo": ("small_cnn", 128)}
SCHEMES = {"turns of 1": (1, None), "2nd of turns of 2": (2, 1), "turns of 5": (5, None)}  # (turn, the step kept)


def measure(model: str, batch: int, segments: int, steps: int) -> dict[str, list[tuple[list[float], list[float]]]]:
    """Eager's and compiled's counted step times of each segment, per scheme (SCHEMES)."""
    import tempfile

    import torch

    from core.engine import trainer
    from core.engine.device_state import cache_environment, precision_settings, random_state, set_random_state
    from core.engine.models.workload import workload_for
    from core.engine.spec import RunSpec
    from core.engine.variant import BatchSource, VariantRun, warm_up_device

    os.environ.update(cache_environment(tempfile.mkdtemp(prefix="compile-lab-turns-")))
    spec = trainer.replicate_spec(
        RunSpec(model=model, batch_size=batch, device="cpu"),
        len(SCHEMES) * segments * steps + 4 * trainer.BLOCK_STEPS,
    )
    device, workload = torch.device("cpu"), workload_for(spec)
    torch.manual_seed(spec.seed)
    init = {k: v.clone() for k, v in workload.build().state_dict().items()}
    out: dict[str, list] = {name: [] for name in SCHEMES}
    with precision_settings(spec):
        warm_up_device(spec, device, init, workload)
        runs, streams = {}, {}
        for name in ("eager", "compiled"):
            runs[name] = VariantRun(name, spec, device, init, lambda event: None, workload)
            runs[name].model.train()
            source = BatchSource(spec, device, workload)
            source.prepare()
            runs[name].start_epoch(source, 1)
            streams[name] = random_state(device)

        def turn(name: str, n: int) -> None:
            set_random_state(device, streams[name])
            runs[name].run_block(n)
            streams[name] = random_state(device)

        for _ in range(2):  # the compile, and the first touches of memory: not measured
            turn("eager", trainer.BLOCK_STEPS)
            turn("compiled", trainer.BLOCK_STEPS)
        names = list(SCHEMES)
        for s in range(segments):
            for scheme in names[s % len(names) :] + names[: s % len(names)]:
                length, kept = SCHEMES[scheme]
                e0, c0 = (len(runs[name].result.times("train")) for name in ("eager", "compiled"))
                for _ in range(steps // length):
                    turn("eager", length)
                    turn("compiled", length)
                e, c = runs["eager"].result.times("train")[e0:], runs["compiled"].result.times("train")[c0:]
                if kept is not None:
                    e, c = e[kept::length], c[kept::length]
                out[scheme].append((e, c))
    return out


def report(name: str, model: str, batch: int, out: dict) -> None:
    import numpy as np

    print(f"\n{name}: {model}, batch {batch}, {len(next(iter(out.values())))} segments per scheme")
    segment_logs = {}
    for scheme, segments in out.items():
        blocks, logs = [], []
        for e, c in segments:
            e, c = np.asarray(e), np.asarray(c)
            n = min(len(e), len(c)) // 5
            blocks += list(np.log(np.median(e[: n * 5].reshape(n, 5), 1) / np.median(c[: n * 5].reshape(n, 5), 1)))
            logs.append(float(np.log(np.median(e) / np.median(c))))
        segment_logs[scheme] = np.asarray(logs)
        print(
            f"  {scheme:<17}: 5-step blocks' log-ratio sd {np.std(blocks, ddof=1):.3f}; segments' speedups "
            f"{' '.join(f'{np.exp(x):.3f}' for x in logs)} (log sd {np.std(logs, ddof=1):.3f})"
        )
    for scheme in list(SCHEMES)[:-1]:
        d = segment_logs[scheme] - segment_logs["turns of 5"]
        print(
            f"  {scheme} over turns of 5, segment by segment: {np.exp(d.mean()):.3f}x (log sd {np.std(d, ddof=1):.3f})"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--segments", type=int, default=8, help="segments per scheme (default 8)")
    parser.add_argument("--steps", type=int, default=40, help="steps per variant in a segment (default 40)")
    parser.add_argument("--config", choices=("both", *CONFIGS), default="both")
    args = parser.parse_args()
    wanted = race_conditions.race_process_environment(dict(os.environ))
    if any(os.environ.get(k) != v for k, v in wanted.items()):  # glibc reads its thresholds at start only
        os.execve(sys.executable, [sys.executable, *sys.argv], wanted)
    conditions = race_conditions.apply("cpu")
    print(f"on {conditions.cores or 'all'} of {conditions.machine_cores} cores, {conditions.threads} thread(s), "
          f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
    for name, (model, batch) in CONFIGS.items():
        if args.config in ("both", name):
            report(name, model, batch, measure(model, batch, args.segments, args.steps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
