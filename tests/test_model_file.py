"""Your own model file: it races like any model, and each way it can be wrong (no build_model, it
raises, its output does not fit the loss, it does not fit in memory, a bad example_batch or loss)
fails early, before any timed step, with a sentence naming the file and the part that failed.
A compile error on it is a finding, not a crash; graph breaks are part of the reading."""

import json
import textwrap

import pytest
from support import CPU

from core.cli.main import main
from core.engine.models.workload import ModelError, describe_model
from core.engine.reading import reading
from core.engine.spec import RunSpec
from core.engine.trainer import run_race

GOOD = """
import torch

def build_model():
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 8 * 8, 10))
"""

REGRESSION = """
import torch

def build_model():
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))

def example_batch(batch_size, device):
    x = torch.randn(batch_size, 6, device=device)
    return {"input": x}, x.sum(dim=1, keepdim=True)

def loss(output, batch):
    return torch.nn.functional.mse_loss(output, batch[1])
"""

BREAKS = """
import torch

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = torch.nn.Linear(4, 10)

    def forward(self, x):
        h = self.a(x)
        torch._dynamo.graph_break()
        return self.b(h)

def build_model():
    return Net()

def example_batch(batch_size, device):
    return torch.randn(batch_size, 4, device=device), torch.randint(0, 10, (batch_size,), device=device)
"""


def model_file(tmp_path, source: str, name: str = "net.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return str(path)


def race(path: str, **overrides):
    spec = dict(model="file:net.py", model_file=path, batch_size=4, epochs=1, steps_per_epoch=3, backend="aot_eager")
    return run_race(RunSpec(**{**spec, "device": "cpu", **overrides}), caps=CPU)


def test_a_file_with_only_build_model_races_on_images(tmp_path):
    result = race(model_file(tmp_path, GOOD), image_size=8)
    assert result.status == "done", result.error
    assert len(result.eager.steps) == len(result.compiled.steps) == 3
    assert result.eager.steps[0].loss == pytest.approx(result.compiled.steps[0].loss, rel=1e-5)


def test_a_files_own_batches_and_loss_are_used_and_identical_for_both_variants(tmp_path):
    result = race(model_file(tmp_path, REGRESSION))
    assert result.status == "done", result.error
    eager, compiled = (v.steps for v in (result.eager, result.compiled))
    assert [s.loss for s in eager] == pytest.approx([s.loss for s in compiled], rel=1e-4)
    assert eager[0].samples == 4
    facts = describe_model(RunSpec(model="file:net.py", model_file=str(tmp_path / "net.py")))
    assert facts["params"] == 6 * 16 + 16 + 16 + 1 and facts["input"] == "batch of 2: input: float32 2x6"
    assert facts["task"] == "custom"


@pytest.mark.parametrize(
    ("source", "says"),
    [
        ("import torch\n", "net.py defines no build_model(): it must define build_model() returning a torch.nn.Module"),
        (
            "def build_model():\n    raise ValueError('no weights here')\n",
            "build_model() in net.py raised: ValueError: no weights here",
        ),
        ("def build_model():\n    return 42\n", "build_model() in net.py must return a torch.nn.Module (got int)"),
        ("import not_a_module_anywhere\n", "net.py failed while loading: ModuleNotFoundError"),
        (
            "import torch\ndef build_model():\n    return torch.nn.Linear(3 * 8 * 8, 3)\n"
            "def example_batch(batch_size, device):\n    return torch.randn(batch_size, 192), torch.full((batch_size,), 9)\n",
            "the output of file:net.py does not fit the loss: IndexError: Target 9 is out of bounds",
        ),
        (
            "import torch\ndef build_model():\n    return torch.nn.Linear(4, 2)\n"
            "def example_batch(batch_size, device):\n    return torch.randn(batch_size, 5), None\n",
            "file:net.py failed on its input (float32 4x5): RuntimeError: mat1 and mat2 shapes cannot be multiplied",
        ),
        (
            "import torch\ndef build_model():\n    return torch.nn.Linear(4, 2)\n"
            "def example_batch(batch_size, device):\n    return torch.randn(batch_size, 4)\n",
            "example_batch() in net.py must return (inputs, target); got Tensor",
        ),
        (
            "import torch\ndef build_model():\n    return torch.nn.Linear(4, 2)\n"
            "def example_batch(batch_size, device):\n    return torch.randn(batch_size, 4), None\n"
            "def loss(output, batch):\n    return output.sum(dim=1)\n",
            "the loss of file:net.py must be a single number (a scalar tensor), got 4",
        ),
    ],
    ids=[
        "no-build-model",
        "build-raises",
        "not-a-module",
        "import-fails",
        "output-vs-loss",
        "input-shape",
        "batch-shape",
        "loss-shape",
    ],
)
def test_each_mistake_in_a_model_file_fails_before_any_timed_step_and_says_what(tmp_path, source, says):
    result = race(model_file(tmp_path, source), image_size=8)
    assert result.status == "failed"
    assert result.error.startswith(says), result.error
    assert result.eager.steps == [] and result.compiled.steps == []


def test_a_model_that_does_not_fit_in_memory_says_so(tmp_path):
    huge = "import torch\ndef build_model():\n    return torch.nn.Linear(2**26, 2**26)  # 16 PiB of weights\n"
    result = race(model_file(tmp_path, huge))
    assert result.status == "failed"
    assert result.error.startswith("file:net.py does not fit in memory on cpu: building it failed")
    batch = (
        "import torch\ndef build_model():\n    return torch.nn.Linear(4, 2)\n"
        "def example_batch(batch_size, device):\n    return torch.empty(batch_size, 2**50), None\n"
    )
    result = race(model_file(tmp_path, batch))
    assert result.error.startswith("out of memory at batch size 4 on cpu")


def test_a_compile_error_on_the_model_is_a_finding_and_eager_results_stand(tmp_path):
    result = race(model_file(tmp_path, BREAKS), fullgraph=True)
    assert result.status == "done" and result.error is None
    reason = result.summary.compile_failed
    assert "graph break" in reason
    assert reading(result.summary) == f"Compile failed on this model: {reason}; eager ran."
    assert len(result.eager.steps) == 3 and result.compiled.steps == []
    assert result.summary.eager_median_step_s is None  # nothing to compare with: no ratio is claimed
    assert result.summary.steady_state_speedup is None


def test_graph_breaks_are_part_of_the_reading(tmp_path):
    result = race(model_file(tmp_path, BREAKS))
    assert result.status == "done" and result.summary.graph_breaks >= 1
    assert "torch.compile split this model into" in reading(result.summary) and "graph break" in reading(result.summary)


def test_describe_catches_a_loss_mismatch_before_a_race_is_queued(tmp_path):
    source = """
    import torch

    class Pooled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = torch.nn.Parameter(torch.ones(1))

        def forward(self, x):
            return x.flatten(1).sum(1) * self.scale  # one number per image: no class logits

    def build_model():
        return Pooled()
    """
    path = model_file(tmp_path, source)
    with pytest.raises(ModelError, match="does not fit the loss"):
        describe_model(RunSpec(model="file:net.py", model_file=path))


def test_the_cli_races_a_model_file(tmp_path, capsys):
    path = model_file(tmp_path, GOOD, name="tiny net.py")
    flags = [
        "--batch-size",
        "4",
        "--epochs",
        "1",
        "--steps-per-epoch",
        "2",
        "--backend",
        "aot_eager",
        "--device",
        "cpu",
    ]
    code = main(["race", "--model-file", path, "--image-size", "8", *flags, "--json", "--quiet"])
    out = capsys.readouterr()
    assert code == 0, out.err
    data = json.loads(out.out)
    assert data["spec"]["model"] == "file:tiny_net.py" and data["spec"]["model_file"] == path
    assert data["status"] == "done"


def test_the_cli_takes_a_model_or_a_model_file_not_both(tmp_path, capsys):
    path = model_file(tmp_path, GOOD)
    assert main(["race", "--model", "mlp", "--model-file", path, "--device", "cpu"]) == 2
    assert capsys.readouterr().err.strip() == "error: model: give --model or --model-file, not both"
    assert main(["race", "--model-file", str(tmp_path / "missing.py"), "--device", "cpu"]) == 2
    assert f"error: model_file: no such file: {tmp_path / 'missing.py'}" in capsys.readouterr().err


def test_submitting_a_model_file_needs_the_host_to_allow_it(tmp_path):
    import os
    import subprocess
    import sys

    from support import ROOT

    path = model_file(tmp_path, GOOD)
    store = str(tmp_path / "store.sqlite3")
    flags = [
        "--model-file",
        path,
        "--image-size",
        "8",
        "--batch-size",
        "4",
        "--epochs",
        "1",
        "--steps-per-epoch",
        "2",
        "--replicates",
        "0",
    ]
    command = [sys.executable, "-m", "core", "submit", *flags, "--backend", "aot_eager", "--device", "cpu"]
    command += ["--store", store, "--wait"]
    refused = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2
    assert refused.stderr.strip().startswith("error: model: this host does not run uploaded model files")
    env = {**os.environ, "COMPILE_LAB_ALLOW_CUSTOM_MODELS": "true"}
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "steady-state speedup" in done.stdout
