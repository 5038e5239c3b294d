"""Published torch.compile figures, shown beside a user's own result so they can place it.

The tutorial's per-epoch table is derived with the same analysis functions as a user's run, so
both are measured by one ruler. Sources: assets/reference/ (copied from the project's shared
reference folder, with their origins).
"""

from __future__ import annotations

import csv
import math
import os
from dataclasses import dataclass
from functools import lru_cache

from core import PROJECT_ROOT
from core.engine import analysis, words

REFERENCE_DIR = os.path.join(PROJECT_ROOT, "assets", "reference")
TUTORIAL_CSV = os.path.join(REFERENCE_DIR, "tutorial_resnet50_cifar10_epochs.csv")
REGIONAL_CSV = os.path.join(REFERENCE_DIR, "regional_compile_figures.csv")

PYTORCH2_RELEASE = {
    "source": "PyTorch 2.0 release (pytorch.org, March 2023): 163 open-source models, NVIDIA A100",
    "training_speedup_weighted": 1.43,  # 0.75 x AMP + 0.25 x float32
    "training_speedup_amp": 1.51,
    "training_speedup_fp32": 1.21,
    "models": 163,
    "works_on": 0.93,
}
TUTORIAL_SOURCE = (
    "PyTorch 2.0 intro tutorial (mrdbourke/pytorch-deep-learning, extras/pytorch_2_results): ResNet50, "
    "CIFAR-10 at 224 px, batch 128, fp32 with TF32 matmuls, 5 epochs, torch 2.0.0"
)


@dataclass(frozen=True)
class ReferenceRun:
    gpu: str
    first_epoch_overhead_s: float
    steady_speedup: float
    whole_run_speedup: float
    break_even_epochs: float | None  # observed or extrapolated, in epochs
    break_even_observed: bool


@lru_cache(maxsize=1)
def tutorial_runs() -> tuple[ReferenceRun, ...]:
    """The tutorial's A100 and RTX 4080 runs, derived from their epoch times."""
    with open(TUTORIAL_CSV) as fh:
        rows = list(csv.DictReader(line for line in fh if not line.startswith("#")))
    runs = []
    for gpu in dict.fromkeys(r["gpu"] for r in rows):
        times = {
            v: [float(r["train_epoch_time_s"]) for r in rows if r["gpu"] == gpu and r["variant"] == v]
            for v in ("eager", "compiled")
        }
        eager, compiled = times["eager"], times["compiled"]
        speed = analysis.steady_state_speedup(eager, compiled, warmup=1)
        be = analysis.break_even(eager, compiled, warmup=1)
        runs.append(
            ReferenceRun(
                gpu=gpu,
                first_epoch_overhead_s=analysis.compile_overhead(eager, compiled, 1),
                steady_speedup=speed.speedup,
                whole_run_speedup=analysis.whole_run_speedup(sum(eager), sum(compiled)),
                break_even_epochs=be.position if be.step is not None else be.extrapolated_position,
                break_even_observed=be.step is not None,
            )
        )
    return tuple(runs)


def reference_rows() -> list[dict[str, str]]:
    """Rows for a small table: the release average and the tutorial's two GPUs."""
    rel = PYTORCH2_RELEASE
    rows = [
        {
            "source": "PyTorch 2.0 release, A100, 163 models",
            "steady speedup": f"{words.speedup(rel['training_speedup_weighted'])} "
            f"(AMP {words.speedup(rel['training_speedup_amp'])}, fp32 {words.speedup(rel['training_speedup_fp32'])})",
            "first-epoch overhead": "not published",
            "break-even": "not published",
        }
    ]
    for run in tutorial_runs():
        x = run.break_even_epochs
        when = (
            f"at {x:.1f} epochs (during epoch {math.ceil(x)})" if run.break_even_observed else f"about {x:.1f} epochs"
        )
        rows.append(
            {
                "source": f"tutorial ResNet50, {run.gpu}",
                "steady speedup": words.speedup(run.steady_speedup),
                "first-epoch overhead": words.seconds(run.first_epoch_overhead_s, signed=True),
                "break-even": when + ("" if run.break_even_observed else ", beyond its 5"),
            }
        )
    return rows


@lru_cache(maxsize=1)
def regional_reference_rows() -> tuple[dict[str, str], ...]:
    """Published whole-model vs regional compile figures, each with its hardware and source."""
    with open(REGIONAL_CSV) as fh:
        rows = list(csv.DictReader(line for line in fh if not line.startswith("#")))
    return tuple(
        {
            "source": r["source"],
            "hardware": r["hardware"],
            "model, workload": f"{r['model']}, {r['workload']}",
            "whole: compile": words.seconds(float(r["whole_compile_s"])),
            "regional: compile": words.seconds(float(r["regional_compile_s"])),
            "whole: steady": r["whole_steady"],
            "regional: steady": r["regional_steady"],
        }
        for r in rows
    )
