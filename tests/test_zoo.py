"""Every model in the zoo builds with random weights and trains one step at its smallest size."""

import subprocess
import sys

import pytest
import torch
from support import ROOT

from core.engine.models.sources import MODELS, get_model_info
from core.engine.models.workload import build_model, loss_fn, random_batch, zoo_parameter_count


@pytest.mark.parametrize("name", list(MODELS))
def test_model_trains_a_step_at_its_minimum_input_size(name):
    info = MODELS[name]
    size = info.min_size
    torch.manual_seed(0)
    model = build_model(name, size)
    x, y = random_batch(info.input_kind, 2, size, torch.Generator().manual_seed(0))
    out = model(x)
    loss = loss_fn(out, y)
    loss.backward()
    assert torch.isfinite(loss)
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


@pytest.mark.parametrize("name", ["mlp", "small_cnn", "pointwise_mlp", "gpt", "resnet18"])
def test_parameter_count_on_meta_matches_the_real_model(name):
    real = sum(p.numel() for p in build_model(name).parameters())
    assert zoo_parameter_count(name) == real > 0


@pytest.mark.parametrize("name", list(MODELS))
def test_the_registrys_parameter_counts_are_the_built_models(name):
    assert MODELS[name].params == zoo_parameter_count(name)


def test_the_registry_validation_and_queue_do_not_import_torch():
    import subprocess
    import sys

    code = "import sys, core.engine.models.sources, core.engine.spec, core.runs.queue, core.runs.store, core.runs.bundle; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"


def test_the_tutorials_model_is_resnet50_with_a_10_class_head():
    model = build_model("resnet50", 32)
    assert model.fc.out_features == 10
    assert 23e6 < zoo_parameter_count("resnet50") < 24e6


def test_gpt_uses_scaled_dot_product_attention(monkeypatch):
    calls = []
    real = torch.nn.functional.scaled_dot_product_attention

    def spy(*args, **kwargs):
        calls.append(kwargs.get("is_causal"))
        return real(*args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    x, _ = random_batch("tokens", 2, 16, torch.Generator().manual_seed(0))
    build_model("gpt", 16)(x)
    assert calls and all(calls)


def test_unknown_model_lookup_names_the_allowed_ones():
    with pytest.raises(KeyError, match="resnet50"):
        get_model_info("nope")


def test_the_registry_imports_neither_torch_nor_the_networks():
    code = "import sys, core.engine.models.sources; print(sorted(m for m in ('torch', 'core.engine.models.workload') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def saved_for_backward(name: str, batch: int) -> int:
    """Bytes autograd keeps for backward over one forward and loss (each storage once)."""
    info = MODELS[name]
    torch.manual_seed(0)
    model = build_model(name).train()
    x, y = random_batch(info.input_kind, batch, info.default_size, torch.Generator().manual_seed(0))
    storages = {}

    def pack(t):
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss_fn(model(x), y)
    return sum(storages.values())


@pytest.mark.parametrize("name", ["mlp", "small_cnn", "pointwise_mlp", "gpt", "resnet18"])
def test_the_registrys_activation_figures_are_what_a_sample_keeps_for_backward(name):
    """The memory guard's floor (core.engine.race_memory) rests on these: a row that overstates them
    would refuse races that fit."""
    per_sample = (saved_for_backward(name, 6) - saved_for_backward(name, 2)) / 4
    assert 0.95 * per_sample <= MODELS[name].activation_bytes <= per_sample
