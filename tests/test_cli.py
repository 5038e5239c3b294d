"""The CLI: one-line errors with exit status 2, JSON with the documented keys, partial results."""

import json
import subprocess
import sys

import pytest
import torch
from support import QUICK_CLI, ROOT

from core.cli.main import main
from core.engine import variant


def cli(*args):
    return subprocess.run([sys.executable, "-m", "core", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    "args, mentions",
    [
        (["--batch-size", "0"], ["batch_size", "from 1 to"]),
        (["--batch-size", "-3"], ["batch_size", "from 1 to"]),
        (["--model", "nope"], ["model", "allowed: mlp", "resnet50"]),
        (["--precision", "fp8"], ["precision", "allowed: fp32, tf32, amp-fp16, amp-bf16"]),
        (["--epochs", "0"], ["epochs", "from 1 to"]),
        (["--model", "resnet50", "--image-size", "7"], ["image_size", "at least 32"]),
        (["--precision", "amp-fp16", "--device", "cpu"], ["precision", "allowed here: fp32, amp-bf16"]),
        (["--batch-size", "abc"], ["--batch-size", "invalid int"]),
        (["--dynamic", "maybe"], ["--dynamic", "allowed: auto, true, false"]),
    ],
)
def test_bad_input_is_one_line_on_stderr_with_exit_status_2(args, mentions):
    done = cli("race", *args)
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    for text in mentions:
        assert text in lines[0]


def test_several_problems_give_one_line_each():
    done = cli("race", "--batch-size", "0", "--epochs", "0")
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 2


def test_json_output_has_the_documented_summary_keys():
    done = cli("race", *QUICK_CLI, "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    s = data["summary"]
    for key in (
        "compile_time_s",
        "first_epoch_overhead_s",
        "steady_state_speedup",
        "speedup_ci95",
        "break_even_step",
        "whole_run_speedup",
        "eager_step_times_s",
        "compiled_step_times_s",
    ):
        assert key in s, key
    assert len(s["speedup_ci95"]) == 2
    assert len(s["eager_step_times_s"]) == 6
    assert data["environment"]["device_type"] == "cpu" and data["environment"]["torch"] == torch.__version__
    assert data["spec"]["batch_size"] == 8 and data["status"] == "done"
    assert "[compiled] compiling" in done.stderr  # live progress goes to stderr, JSON stays clean


def test_race_prints_a_summary_table(capsys):
    code = main(["race", *QUICK_CLI, "--eval-steps", "1"])
    out = capsys.readouterr()
    assert code == 0
    for text in (
        "epoch 1 train",
        "epoch 2 eval",
        "compile time",
        "first-epoch overhead",
        "steady-state speedup",
        "95% interval",
        "break-even",
        "whole run, compile included",
        "peak memory",
        "final loss",
        "graphs / breaks / recompiles",
    ):
        assert text in out.out, text
    assert "cpu:" in out.err and "torch " in out.err  # environment header


def test_a_run_that_fails_midway_reports_what_it_measured_and_exits_1(monkeypatch, capsys):
    original = variant.VariantRun.train_step

    def oom_on_compiled(self, x, y):
        if self.name == "compiled":
            raise torch.OutOfMemoryError("CUDA out of memory")
        return original(self, x, y)

    monkeypatch.setattr(variant.VariantRun, "train_step", oom_on_compiled)
    code = main(["race", *QUICK_CLI, "--epochs", "1", "--json", "--quiet"])
    out = capsys.readouterr()
    assert code == 1
    data = json.loads(out.out)
    assert data["status"] == "failed" and len(data["summary"]["eager_step_times_s"]) == 3
    assert (
        out.err.strip()
        == "error: run failed: out of memory at batch size 8 on cpu: try a smaller batch size or amp-bf16"
    )


def test_models_lists_the_zoo_with_parameter_counts(capsys):
    assert main(["models", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    names = {r["name"] for r in rows}
    assert {
        "mlp",
        "resnet18",
        "resnet50",
        "mobilenet_v3_small",
        "convnext_tiny",
        "vit_b_16",
        "gpt",
        "pointwise_mlp",
        "small_cnn",
    } <= names
    assert all(r["params"] > 0 for r in rows)


def test_models_table_is_readable(capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "resnet50" in out and "23.53 M" in out
