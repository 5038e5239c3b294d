"""How many timm models race to completion under torch.compile on this machine, and why the rest fail.

Why: "any timm model" is a promise about hundreds of architectures Compile Lab never saw. This
samples N of them at random (a fixed seed, so a rerun with the same timm picks the same ones),
races each through the real CLI (`python -m core race`, a process per model, so a crash or a hang
costs only that model) and tallies the outcomes: done, compile failed on the model (a finding:
eager ran), compile did not happen, failed (why), timed out.

Each race is tiny: batch 2 at the model's own default input size, 1 epoch of 3 steps, backend
aot_eager (Dynamo + AOT autograd, no Inductor code generation) on the CPU. Models above
--max-params are skipped before sampling stops, so a small machine is not asked to hold a
billion-parameter model four times over (weights, gradients, two Adam moments); the cap is printed.

    python bench/timm_sample.py [--count 30] [--seed 0] [--max-params 60e6] [--timeout 600] [--budget S] [--json out.json]

Prints one line per model and the tally; never asserts (a benchmark, not a test).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def candidates(seed: int) -> list[str]:
    import timm

    names = [n for n in timm.list_models() if not n.startswith("test_")]
    random.Random(seed).shuffle(names)
    return names


def parameters_on_meta(name: str) -> int | None:
    import timm
    import torch

    try:
        with torch.device("meta"):
            model = timm.create_model(name, pretrained=False)
        return sum(p.numel() for p in model.parameters())
    except Exception:  # noqa: BLE001 - counted for real below, in the race itself
        return None


def race(name: str, timeout: float, threads: int) -> dict:
    command = [
        sys.executable,
        "-m",
        "core",
        "race",
        "--model",
        f"timm:{name}",
        "--batch-size",
        "2",
        "--epochs",
        "1",
        "--steps-per-epoch",
        "3",
        "--backend",
        "aot_eager",
        "--device",
        "cpu",
        "--json",
        "--quiet",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "HF_HUB_OFFLINE": "1"}
    start = time.monotonic()
    try:
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"outcome": "timed out", "why": f"over {timeout:.0f} s", "took_s": timeout}
    took = time.monotonic() - start
    try:
        data = json.loads(done.stdout)
    except ValueError:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"outcome": "crashed", "why": f"exit {done.returncode}: {tail[:200]}", "took_s": took}
    summary = data.get("summary") or {}
    if summary.get("compile_failed"):
        outcome, why = "compile failed", summary["compile_failed"]
    elif summary.get("compile_skipped"):
        outcome, why = "compile did not happen", summary["compile_skipped"]
    elif data.get("status") == "done":
        outcome, why = "done", f"{summary.get('graphs')} graphs, {summary.get('graph_breaks')} breaks"
    else:
        outcome, why = "failed", data.get("error") or "no reason"
    return {"outcome": outcome, "why": why, "took_s": took, "size": data.get("spec", {}).get("image_size")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-params", type=float, default=60e6)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per race (the machine may be shared)")
    parser.add_argument("--json", default=None, help="also write the results to this file")
    parser.add_argument(
        "--budget", type=float, default=None, help="stop starting new races after this many seconds (a shared machine)"
    )
    args = parser.parse_args()
    import timm

    results, skipped = [], 0
    began = time.monotonic()
    out_of_time = False
    print(
        f"timm {timm.__version__}; sample of {args.count} (seed {args.seed}), at most {args.max_params / 1e6:.0f} M params"
    )
    for name in candidates(args.seed):
        if len(results) == args.count:
            break
        if args.budget is not None and time.monotonic() - began > args.budget:
            out_of_time = True
            break
        params = parameters_on_meta(name)
        if params is not None and params > args.max_params:
            skipped += 1
            continue
        result = {"model": f"timm:{name}", "params": params, **race(name, args.timeout, args.threads)}
        results.append(result)
        millions = f"{params / 1e6:.1f} M" if params is not None else "? M"
        print(
            f"{result['model']:<52}{millions:>9}  {result['outcome']:<22} {result['took_s']:>6.0f} s  {result['why']}"
        )
        sys.stdout.flush()
    tally: dict[str, int] = {}
    for r in results:
        tally[r["outcome"]] = tally.get(r["outcome"], 0) + 1
    print(
        f"\n{tally.get('done', 0)} of {len(results)} raced to completion; "
        + ", ".join(f"{k}: {v}" for k, v in sorted(tally.items()))
    )
    print(f"({skipped} models over the parameter cap were passed over while sampling)")
    if out_of_time:
        print(f"(stopped after {len(results)} of {args.count}: the --budget of {args.budget:.0f} s ran out)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {
                    "timm": timm.__version__,
                    "seed": args.seed,
                    "max_params": args.max_params,
                    "skipped_over_cap": skipped,
                    "stopped_by_budget": out_of_time,
                    "results": results,
                },
                fh,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
