"""The race's records are plain: a reader of events (the worker's sink, the CLI's printer, the
store, a page) gets them without torch, and they say the same thing as the trainer that made them."""

import subprocess
import sys

from support import ROOT

from core.engine.events import VARIANTS, CompileEvent, EpochEvent, RaceResult, StepEvent, VariantResult
from core.engine.summary import Summary


def test_importing_the_records_never_imports_torch():
    script = "import core.engine.events, sys; assert 'torch' not in sys.modules, 'torch was imported'"
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_a_variant_result_reads_its_train_times_and_final_loss():
    steps = [StepEvent("eager", "train", 1, 1, 0.5, 2.0, 8), StepEvent("eager", "eval", 1, 1, 0.1, 1.5, 8)]
    steps.append(StepEvent("eager", "train", 1, 2, 0.25, 1.0, 8))
    result = VariantResult("eager", steps=steps)
    assert result.times() == [0.5, 0.25] and result.times("eval") == [0.1]
    assert result.final_loss == 1.0 and VariantResult("compiled").final_loss is None


def test_a_race_result_is_failed_when_it_carries_an_error_and_lists_both_variants():
    from core.engine.compile_stats import CompileStats
    from core.engine.spec import RunSpec

    compiled = VariantResult("compiled", epochs=[EpochEvent("compiled", 1, 1.0, None)])
    compiled.compiles.append(CompileEvent("compiled", "train", 1, 1, "compiled forward"))
    result = RaceResult(RunSpec(), {}, VariantResult("eager"), compiled, CompileStats(), Summary(), error="cancelled")
    data = result.to_dict()
    assert result.status == data["status"] == "failed"
    assert tuple(data["variants"]) == VARIANTS
    assert data["variants"]["compiled"]["compiles"] == [
        {"variant": "compiled", "phase": "train", "epoch": 1, "step": 1, "note": "compiled forward"}
    ]
