"""Does a race's script give what the race gave? For each model: `python -m core race` (its first
process and replicates, as the terminal runs it), then the race written as one script
(core.runs.race_script, from the race's own JSON) run at once from a temporary folder with
`python -I` (no Compile Lab on the path), back to back on the same machine. Prints, per model, the
race's steady speedup and 95% interval, the script's speedup and its own interval, and whether the
script's speedup lies inside the race's interval; the machine's load before each. Never asserts.

Run from the repo root: python bench/race_script_agreement.py [--models pointwise_mlp,mlp,gpt]
[--backend inductor] [--quick] (--quick: one epoch of 20 steps, no replicates, to try it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from core.engine import words
from core.runs.race_script import script_text


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def race(model: str, backend: str, quick: bool) -> dict:
    flags = ["--model", model, "--device", "cpu", "--backend", backend, "--json", "--quiet"]
    if quick:
        flags += ["--epochs", "1", "--replicates", "0"]
    done = subprocess.run([sys.executable, "-m", "core", "race", *flags], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"race of {model} failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout)


def script_run(result: dict, folder: str) -> tuple[float, str]:
    path = os.path.join(folder, f"race_{result['spec']['model']}.py")
    with open(path, "w") as fh:
        fh.write(script_text(result["spec"], result["environment"], result["summary"], "a bench race", __file__))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "COMPILE_LAB"))}
    done = subprocess.run([sys.executable, "-I", path], cwd=folder, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"script of {result['spec']['model']} failed: {done.stderr.strip().splitlines()[-1:]}")
    line = next(x for x in done.stdout.splitlines() if x.startswith("steady speedup: "))
    point = float(line.split()[2].rstrip("x"))
    return point, line.split("(", 1)[1].split(",", 1)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="pointwise_mlp,mlp,gpt")
    parser.add_argument("--backend", default="inductor")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    print("| model | race: speedup (95% interval), processes | script: speedup (its own interval) | inside | load |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="race-script-") as folder:
        for model in args.models.split(","):
            before = load()
            result = race(model, args.backend, args.quick)
            s = result["summary"]
            low, high = s["speedup_ci95"] or (float("nan"), float("nan"))
            point, own = script_run(result, folder)
            inside = "yes" if low <= point <= high else "no"
            race_text = f"{words.speedup(s['steady_state_speedup'])} ({words.speedup_range(low, high)}), "
            race_text += f"{1 + len(s.get('replicates') or [])} processes"
            print(f"| {model} | {race_text} | {point:.2f}x ({own}) | {inside} | {before} / {load()} |", flush=True)


if __name__ == "__main__":
    main()
