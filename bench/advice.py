"""Does the advice help? Races a configuration, takes the advice the app gives on it, races every
suggestion, and says side by side whether the suggested race did better on what it promised.

Each race is `python -m core race --json` on the CPU (the engine's own door, as bench/race_process.py
runs it), short (a few small zoo models, few steps, no replicate processes: the first process's
interval), in a data dir of its own, so the warm Inductor cache holds only what this bench's cold
races filled. The advice is the one every surface shows (core.view.answers.finished_answers); each
suggestion names what it expects to change (core.engine.recommend.EXPECTS), and its race is judged
on that figure:

- compile time down: the compile time falls by at least a tenth;
- steady step faster: the suggested race's steady speedup interval lies above the first race's;
- fewer recompiles: fewer recompiles, the compile time beside them.

Prints one Markdown table (configuration, suggestion, promise, compile s and steady speedup with its
interval before and after, helped), then the machine's load. Prints, never asserts.

Run from the repo root: python bench/advice.py [--steps 20] [--only NAME] [--keep DIR]
(--keep: write each race's JSON there, to read what the advice was given.)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from core.cli.races import spec_flags
from core.engine.recommend import COMPILE_DOWN, RECOMPILES_GONE, STEP_FASTER
from core.engine.spec import RunSpec
from core.view.answers import finished_answers

# name -> the race's flags beyond the common ones: zoo models, precisions, modes, scopes, shapes.
CONFIGS = {
    "mlp fp32 default": ["--model", "mlp", "--batch-size", "64"],
    "mlp amp-bf16 default": ["--model", "mlp", "--batch-size", "64", "--precision", "amp-bf16"],
    "mlp max-autotune-no-cudagraphs": ["--model", "mlp", "--batch-size", "64", "--mode", "max-autotune-no-cudagraphs"],
    "small_cnn fp32 default": ["--model", "small_cnn", "--batch-size", "32"],
    "pointwise_mlp fp32 default": ["--model", "pointwise_mlp", "--batch-size", "1024"],
    "gpt fp32 default": ["--model", "gpt", "--batch-size", "8", "--image-size", "64"],
    "gpt varying shapes": ["--model", "gpt", "--batch-size", "8", "--image-size", "64", "--shapes", "varying"],
    "resnet18 regional": ["--model", "resnet18", "--batch-size", "8", "--compile-scope", "regional"],
}


def race(flags: list[str], steps: int, data_dir: str, keep: str | None = None) -> dict:
    command = [
        sys.executable, "-m", "core", "race", "--json", "--quiet", "--device", "cpu", "--epochs", "2",
        "--steps-per-epoch", str(steps), "--eval-steps", "0", "--replicates", "0", *flags,
    ]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "COMPILE_LAB_DATA": data_dir}
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"error": (done.stderr.strip().splitlines() or ["no result"])[-1], "load": os.getloadavg()[0]}
    data = json.loads(lines[-1])
    if keep:
        os.makedirs(keep, exist_ok=True)
        with open(os.path.join(keep, f"race-{len(os.listdir(keep)) + 1}.json"), "w") as fh:
            fh.write(lines[-1])
    data["wall_s"] = time.perf_counter() - start
    data["load"] = os.getloadavg()[0]
    return data


def figures(data: dict) -> dict:
    s = data.get("summary") or {}
    ci = s.get("speedup_ci95")
    return {
        "compile_s": s.get("compile_time_s"),
        "speedup": s.get("steady_state_speedup"),
        "ci": tuple(ci) if ci else None,
        "recompiles": s.get("recompiles") or 0,
        "verdict": s.get("verdict"),
    }


def said(f: dict) -> str:
    if f.get("speedup") is None:
        return "no result"
    ci = f"{f['ci'][0]:.2f}-{f['ci'][1]:.2f}x" if f["ci"] else "no interval"
    compile_s = f"{f['compile_s']:.1f} s" if isinstance(f["compile_s"], int | float) else "-"
    busy = ", machine busy: no verdict" if f.get("verdict") == "machine busy" else ""
    return f"compile {compile_s}, {f['speedup']:.2f}x ({ci}){busy}, {f['recompiles']} recompiles"


def helped(promise: str, before: dict, after: dict) -> str:
    if after.get("speedup") is None or before.get("speedup") is None:
        return "no result"
    if promise == COMPILE_DOWN:
        b, a = before["compile_s"] or 0.0, after["compile_s"] or 0.0
        return "yes" if a <= 0.9 * b else "no"
    if promise == STEP_FASTER:
        if before["ci"] and after["ci"]:
            if after["ci"][0] > before["ci"][1]:
                return "yes"
            return "no (worse)" if after["ci"][1] < before["ci"][0] else "no (intervals overlap)"
        return "yes" if after["speedup"] > before["speedup"] else "no"
    if promise == RECOMPILES_GONE:
        return "yes" if after["recompiles"] < before["recompiles"] else "no"
    return "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="steps per epoch (2 epochs)")
    parser.add_argument("--only", default=None, help="one configuration's name")
    parser.add_argument("--keep", default=None, help="a folder for each race's JSON")
    args = parser.parse_args()
    configs = {k: v for k, v in CONFIGS.items() if args.only in (None, k)}
    data_dir = tempfile.mkdtemp(prefix="compile-lab-advice-")
    rows, loads, started = [], [], time.time()
    print(f"# advice bench, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {os.getloadavg()}", flush=True)
    for name, flags in configs.items():
        base = race(flags, args.steps, data_dir, args.keep)
        loads.append(base["load"])
        if base.get("error") and not base.get("summary"):
            rows.append((name, "(race failed)", "-", base["error"][:60], "-", "-"))
            continue
        before = figures(base)
        answers = finished_answers(base["summary"], base["spec"], base["environment"], base.get("compile"))
        suggestions = answers.advice.suggestions if answers.advice else ()
        print(f"{name}: {said(before)}; {len(suggestions)} suggestion(s)", flush=True)
        if not suggestions:
            rows.append((name, "(none)", "-", said(before), "-", "-"))
        spec = RunSpec.from_dict(base["spec"])
        for suggestion in suggestions:
            changed = dataclasses.replace(spec, **suggestion.changes)
            after_data = race(spec_flags(changed), args.steps, data_dir, args.keep)
            loads.append(after_data["load"])
            after = figures(after_data) if after_data.get("summary") else {}
            verdict = helped(suggestion.expects, before, after)
            rows.append((name, suggestion.label, suggestion.expects, said(before), said(after), verdict))
            print(f"  {suggestion.label} ({suggestion.expects}): {said(after)} -> helped: {verdict}", flush=True)
    print()
    print("| configuration | suggestion | promised | before | after | helped |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    followed = [r for r in rows if r[2] not in ("-",)]
    yes = sum(r[5] == "yes" for r in followed)
    print(
        f"\n{yes} of {len(followed)} suggestions followed helped on what they promised; "
        f"{len(configs)} configurations, {time.time() - started:.0f} s, load average at each race "
        f"{min(loads):.1f}-{max(loads):.1f} (1 min), {os.cpu_count()} CPUs"
    )


if __name__ == "__main__":
    main()
