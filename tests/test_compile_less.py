"""The newer ways to pay compile less, each a race option: the nested scope (each repeated block a
torch.compiler.nested_compile_region inside the whole model's compile) and the precompiled cache (a
step compiled ahead of time in another process, torch.compile(...).aot_compile, loaded with
torch.compiler.load_compiled_function); each refused with its reason on a torch without it."""

import dataclasses

import pytest
from support import CPU, quick_spec

from core.engine.spec import SpecError, validate


def test_the_nested_scope_needs_a_model_with_a_repeated_block():
    assert validate(quick_spec(model="pointwise_mlp", compile_scope="nested"), CPU) == []
    (problem,) = validate(quick_spec(model="mlp", compile_scope="nested"), CPU)
    assert problem.field == "compile_scope" and problem.message.startswith("mlp repeats no block")


def test_a_nested_race_marks_each_block_and_compiles_the_whole_model_once():
    from core.engine.models.sources import repeated_blocks
    from core.engine.models.workload import workload_for
    from core.engine.trainer import run_race
    from core.engine.variant import compile_model

    spec = quick_spec(model="pointwise_mlp", batch_size=8, compile_scope="nested", epochs=1, steps_per_epoch=6)
    model = workload_for(spec).build()
    compiled = compile_model(model, spec)
    assert compiled is not model  # the whole model is compiled ...
    marks = [getattr(b.forward, "__func__", None) for b in repeated_blocks(model, "pointwise_mlp")]
    assert all(hasattr(m, "__marked_compile_region_fn__") for m in marks)  # ... its blocks marked
    assert not hasattr(type(repeated_blocks(model, "pointwise_mlp")[0]).forward, "__marked_compile_region_fn__")
    result = run_race(dataclasses.replace(spec, profile_steps=0), caps=CPU)
    assert result.error is None and result.summary.compile_failed is None and result.summary.compile_skipped is None
    assert result.compile_stats.graphs >= 1 and result.summary.steady_state_speedup > 0


def test_a_torch_without_nested_compile_region_refuses_the_nested_scope(monkeypatch):
    import torch

    from core.engine.trainer import run_race

    monkeypatch.delattr(torch.compiler, "nested_compile_region")
    with pytest.raises(SpecError) as refused:
        run_race(quick_spec(model="pointwise_mlp", compile_scope="nested"), caps=CPU)
    (problem,) = refused.value.problems
    assert problem.field == "compile_scope"
    assert problem.message == (
        f"torch {torch.__version__} has no torch.compiler.nested_compile_region (newer torch has it): "
        "use 'regional' (each block compiled on its own) or 'whole'"
    )


# -- the precompiled cache -------------------------------------------------------------------------


def test_a_precompiled_race_must_be_one_shape_in_training_mode_outside_autocast():
    assert validate(quick_spec(cache="precompiled"), CPU) == []
    problems = validate(
        quick_spec(model="pointwise_mlp", cache="precompiled", compile_scope="regional", eval_steps=2,
                   shapes="varying", precision="amp-bf16"),
        CPU,
    )  # fmt: skip
    assert sorted(p.field for p in problems) == ["compile_scope", "eval_steps", "precision", "shapes"]
    assert all(p.message.startswith("a precompiled step is traced once, ahead of time") for p in problems)


def test_a_precompiled_race_loads_the_step_another_process_compiled():
    from core.engine.trainer import run_race
    from core.engine.warm_cache import cache_words

    spec = quick_spec(cache="precompiled", epochs=1, steps_per_epoch=6, profile_steps=0)
    result = run_race(spec, caps=CPU)
    assert result.error is None and result.summary.compile_failed is None
    assert result.summary.compile_skipped is None  # nothing compiles in this process, by design
    ahead = result.environment["precompiled"]
    assert ahead["compile_s"] > 0 and ahead["bytes"] > 0 and ahead["process_wall_s"] >= ahead["compile_s"]
    assert result.summary.steady_state_speedup > 0
    # Both variants trained the same model from the same weights on the same batches: the same losses.
    assert abs(result.summary.eager_final_loss - result.summary.compiled_final_loss) < 1e-4
    assert cache_words(result.environment).startswith("precompiled: another process compiled the step ahead of time")


def test_a_torch_without_aot_compile_refuses_the_precompiled_cache(monkeypatch):
    import torch

    from core.engine.trainer import run_race

    monkeypatch.delattr(torch.compiler, "load_compiled_function")
    with pytest.raises(SpecError) as refused:
        run_race(quick_spec(cache="precompiled"), caps=CPU)
    (problem,) = refused.value.problems
    assert problem.field == "cache"
    assert problem.message == (
        f"torch {torch.__version__} has no torch.compile(...).aot_compile and torch.compiler.load_compiled_function "
        "(a newer torch has them): use cache cold or warm"
    )
