"""Compile scope: regional compile finds each model's repeated block, compiles the block (once per
distinct block, reused by the others) in place, and trains to the same losses as whole-model compile."""

import copy

import pytest
import torch
from support import CPU, quick_spec

from core.engine.compile_stats import read_compile_stats, reset_compile_state
from core.engine.models.sources import (
    MODELS,
    REGIONAL_BLOCKS,
    block_kind,
    blocks_share_shapes,
    compile_regions,
    region_problem,
    repeated_blocks,
)
from core.engine.models.workload import build_model, loss_fn
from core.engine.spec import RunSpec, validate
from core.engine.trainer import run_race
from core.engine.variant import compile_model


def counting_backend(calls: list[int]):
    """A torch.compile backend that runs the captured graph as it is and counts each run of it."""

    def backend(graph_module, example_inputs):
        calls.append(0)  # one more graph compiled
        index = len(calls) - 1

        def run(*args):
            calls[index] += 1
            return graph_module.forward(*args)

        return run

    return backend


def gpt(layers: int = 2) -> torch.nn.Module:
    from core.engine.models.workload import TinyGPT

    torch.manual_seed(0)
    return TinyGPT(max_len=16, layers=layers)


@pytest.mark.parametrize("layers", [2, 4])
def test_regional_compile_of_gpt_compiles_one_region_per_block(layers):
    model = gpt(layers)
    tokens = torch.randint(0, 512, (2, 16))
    calls: list[int] = []
    reset_compile_state()
    assert compile_regions(model, "gpt", backend=counting_backend(calls)) == layers
    model(tokens)
    model(tokens)
    stats = read_compile_stats()
    # Each block runs as a compiled region: one region call per block per forward pass ...
    assert sum(calls) == 2 * layers
    # ... and the blocks share their code and shapes, so torch compiled the region once for all of them.
    assert len(calls) == 1 and stats.graphs == 1 and stats.frames_compiled == 1 and stats.recompiles == 0
    assert all(block._compiled_call_impl is not None for block in model.blocks)


def test_whole_model_compile_of_gpt_is_one_region_for_the_whole_forward():
    model = gpt(2)
    calls: list[int] = []
    reset_compile_state()
    compiled = torch.compile(model, backend=counting_backend(calls))
    compiled(torch.randint(0, 512, (2, 16)))
    assert calls == [1] and read_compile_stats().graphs == 1


def train_losses(model: torch.nn.Module, batches, lr: float = 1e-3) -> list[float]:
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def whole_and_regional_losses(backend: str) -> tuple[list[float], list[float], list[float]]:
    torch.manual_seed(1)
    batch = (torch.randint(0, 512, (4, 16)), torch.randint(0, 512, (4, 16)))
    batches = [batch] * 4  # the same batch: the loss must fall
    initial = gpt(2)
    out = []
    for scope in (None, "whole", "regional"):
        model = copy.deepcopy(initial)
        reset_compile_state()
        if scope is not None:
            spec = RunSpec(model="gpt", backend=backend, compile_scope=scope, device="cpu")
            model = compile_model(model, spec)
        out.append(train_losses(model, batches))
    return tuple(out)


def test_regional_and_whole_model_compile_agree_on_the_loss():
    eager, whole, regional = whole_and_regional_losses("aot_eager")
    assert regional == pytest.approx(whole, rel=1e-5) and whole == pytest.approx(eager, rel=1e-5)
    assert regional[-1] < regional[0]  # it trains


@pytest.mark.slow
def test_regional_and_whole_model_compile_agree_on_the_loss_under_inductor():
    eager, whole, regional = whole_and_regional_losses("inductor")
    assert regional == pytest.approx(whole, rel=1e-4) and regional == pytest.approx(eager, rel=1e-4)


@pytest.mark.parametrize("name", sorted(REGIONAL_BLOCKS))
def test_every_model_with_a_region_has_a_repeated_block(name):
    with torch.device("meta"):
        model = build_model(name, 32 if MODELS[name].input_kind == "image" else None)
    blocks = repeated_blocks(model, name)
    assert len(blocks) >= 2 and all(type(b).__name__ == REGIONAL_BLOCKS[name][0] for b in blocks)
    inside = {id(m) for b in blocks for m in list(b.modules())[1:]}
    assert not any(id(b) in inside for b in blocks)  # no block nested in another


@pytest.mark.parametrize("name", sorted(REGIONAL_BLOCKS))
def test_the_zoos_count_of_block_kinds_is_the_built_models(name):
    # What the advice reads to offer regional compile only where one compiled block serves them all.
    with torch.device("meta"):
        model = build_model(name, 32 if MODELS[name].input_kind == "image" else None)
    kinds = {block_kind(b) for b in repeated_blocks(model, name)}
    assert MODELS[name].block_kinds == len(kinds)
    assert blocks_share_shapes(name) == (len(kinds) == 1)


def test_resnet18_compiles_each_residual_block():
    with torch.device("meta"):
        model = build_model("resnet18", 32)
    assert len(repeated_blocks(model, "resnet18")) == 8  # 4 stages x 2 BasicBlocks


def test_regional_scope_is_refused_for_a_model_without_a_repeated_block():
    problems = validate(RunSpec(model="mlp", compile_scope="regional", device="cpu"), CPU)
    assert [p.field for p in problems] == ["compile_scope"]
    assert problems[0].message == region_problem("mlp") and "use 'whole'" in problems[0].message
    assert [p.field for p in validate(RunSpec(compile_scope="both"), CPU)] == ["compile_scope"]
    assert validate(RunSpec(model="pointwise_mlp", compile_scope="regional", device="cpu"), CPU) == []


@pytest.mark.parametrize("model", ["timm:resnet18", "hf:gpt2", "file:my_model.py"])
def test_regional_scope_is_refused_at_validation_for_models_outside_the_zoo(model):
    # Otherwise the race would queue, run its eager half, and fail only when compiling.
    problems = [p for p in validate(RunSpec(model=model, compile_scope="regional", device="cpu"), CPU)
                if p.field == "compile_scope"]  # fmt: skip
    assert len(problems) == 1 and "use 'whole'" in problems[0].message
    assert "regional compile needs a zoo model" in problems[0].message and "convnext_tiny" in problems[0].message
    whole = validate(RunSpec(model=model, compile_scope="whole", device="cpu"), CPU)
    assert not [p for p in whole if p.field == "compile_scope"]


def test_every_convnext_block_runs_compiled_although_each_compiles_its_own_graph():
    # convnext_tiny's 18 blocks each guard on their own drop-path rate: 18 graphs of one code
    # object, past Dynamo's default recompile limit (8), beyond which a block silently runs eager.
    import torch._dynamo.config as dynamo_config

    torch.manual_seed(0)
    model = build_model("convnext_tiny", 32).train()
    calls: list[int] = []
    reset_compile_state()
    setting = "recompile_limit" if hasattr(dynamo_config, "recompile_limit") else "cache_size_limit"
    before = getattr(dynamo_config, setting)
    try:
        setattr(dynamo_config, setting, 8)  # torch's default, whatever an earlier test set
        blocks = compile_regions(model, "convnext_tiny", backend=counting_backend(calls))
        assert blocks == 18 and getattr(dynamo_config, setting) > blocks
        model(torch.randn(2, 3, 32, 32))
    finally:
        setattr(dynamo_config, setting, before)
    assert sum(calls) == blocks  # each block ran as a compiled graph, none fell back to eager
    assert len(calls) == blocks and read_compile_stats().graphs == blocks  # one graph each: they differ


def test_a_regional_race_runs_and_records_its_scope():
    spec = quick_spec(model="pointwise_mlp", batch_size=32, compile_scope="regional")
    result = run_race(spec, caps=CPU)
    assert result.error is None and result.summary.steady_state_speedup is not None
    assert result.to_dict()["spec"]["compile_scope"] == "regional"
    assert result.compile_stats.graphs >= 1 and result.summary.compile_skipped is None
