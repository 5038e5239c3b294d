"""How long until the verdict: the fixed-length race against the same race stopping once its speedup is
known to ±3% (--target-interval 0.03), on this CPU, for pointwise_mlp, small_cnn and resnet18.

Each model runs both, ABBA over the models (fixed then adaptive, adaptive then fixed, ...), each
race as the app runs it: queued in one store and run by the app's worker, a fresh process per race,
its interval widened to the run-to-run spread that store has seen (core.runs.run_to_run). Per race: the wall time from the start to the verdict
(compile included), the train steps per variant, the ± the interval reached (the adaptive race's
is spent over its looks, so it is never narrower than its data supports), and the speedups side
by side. Goal (issue 23): the adaptive race reaches an interval at least as narrow in at most 60%
of the fixed race's wall time, median over the three models. The adaptive race's maximum is the
fixed race's length. Prints, never asserts.

Run from the repo root: python bench/time_to_answer.py [--quick] [--target 0.03]
(--quick: a quarter of the steps, to try it.)
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
from statistics import median

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from race_process import submitted_race  # noqa: E402

from core.engine.spec import RunSpec  # noqa: E402

# The fixed race per model, sized for a 2-core CPU (batch, epochs, steps per epoch).
MODELS = {
    "pointwise_mlp": (4096, 3, 100),
    "small_cnn": (128, 3, 200),
    "resnet18": (16, 3, 60),
}
GOAL_SHARE = 0.60


def one(spec: RunSpec, store_path: str) -> dict:
    race = submitted_race(spec, store_path)
    s = race["summary"]
    speedup, ci = s.get("steady_state_speedup"), s.get("speedup_ci95")
    return {
        "wall_s": race["wall_s"],
        "steps": len(s.get("compiled_step_times_s") or []),
        "speedup": speedup,
        "plus_minus": ci[1] / speedup - 1 if speedup and ci else None,
        "verdict": s.get("verdict"),
        "stop": s.get("stop_reason") or "",
        "error": race["error"],
        "load": os.getloadavg()[0],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a quarter of the steps")
    parser.add_argument("--target", type=float, default=0.03)
    parser.add_argument("--models", default=",".join(MODELS))
    args = parser.parse_args()
    store_path = os.path.join(tempfile.mkdtemp(prefix="compile-lab-answer-"), "store.sqlite3")
    shares, narrow_enough = [], []
    for i, model in enumerate(args.models.split(",")):
        batch, epochs, steps = MODELS[model]
        steps = max(15, steps // 4) if args.quick else steps
        fixed = RunSpec(
            model=model, batch_size=batch, epochs=epochs, steps_per_epoch=steps, device="cpu", profile_steps=0
        )
        adaptive = dataclasses.replace(fixed, target_interval=args.target)
        order = [("fixed", fixed), ("adaptive", adaptive)]
        rows = dict((name, one(spec, store_path)) for name, spec in (order if i % 2 == 0 else order[::-1]))
        f, a = rows["fixed"], rows["adaptive"]
        for name, r in (("fixed", f), ("adaptive", a)):
            pm = f"±{r['plus_minus']:.1%}" if r["plus_minus"] is not None else "-"
            sp = f"{r['speedup']:.2f}x" if r["speedup"] else "-"
            print(f"{model:<14} {name:<8} wall {r['wall_s']:6.0f} s  steps {r['steps']:>4}  {sp:>6} {pm:>7}  "
                  f"{r['verdict']}  load {r['load']:.1f}  {r['stop']}{' error: ' + r['error'] if r['error'] else ''}",
                  flush=True)  # fmt: skip
        share = a["wall_s"] / f["wall_s"] if f["wall_s"] else float("nan")
        shares.append(share)
        narrow_enough.append(
            a["plus_minus"] is not None and f["plus_minus"] is not None and a["plus_minus"] <= f["plus_minus"]
        )
        print(f"{model:<14} adaptive/fixed wall time {share:.2f}, interval at least as narrow: {narrow_enough[-1]}")
    middle = median(shares)
    met = middle <= GOAL_SHARE and sum(narrow_enough) * 2 > len(narrow_enough)
    print(f"\nmedian adaptive/fixed wall time {middle:.2f} (goal <= {GOAL_SHARE}), at least as narrow in "
          f"{sum(narrow_enough)} of {len(narrow_enough)}: goal {'met' if met else 'NOT met'}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
