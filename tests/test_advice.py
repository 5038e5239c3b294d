"""Advice that helps: a suggestion only where what the race measured supports it, a recompile's
diagnosis that names the guard's real cause, the race's own headline and kernels behind every word,
each suggestion's promise, and "which mode?" answered in one place per device
(core.engine.recommend, core.engine.compile_stats, core.engine.cause)."""

import pytest
from test_answers import CPU_ENV, H100_ENV, part, recording, summary

from core.engine import recommend
from core.engine.cause import CONVOLUTIONS, MATMULS, race_cause
from core.engine.compile_stats import INPUT_SIZE, STATE_SIZE, recompile_words, size_cause
from core.engine.recommend import EXPECTS, advise, expect_words, headline_verdict, which_mode
from core.view.answers import finished_answers

# What torch 2.x says when regional compile reuses one block's code for a block of another width.
STATE_GUARD = "tensor 'self._modules['bn1']._buffers['running_var']' size mismatch at index 0. expected 64, actual 128"
OLD_STATE_GUARD = "tensor 'L['self'].bn1.running_var' size mismatch at index 0. expected 64, actual 128"
INPUT_GUARD = "tensor 'L['x']' size mismatch at index 0. expected 48, actual 24"
# The same race's other guard: a block's input, 64 channels wide in one stage and 128 in the next.
BLOCK_INPUT_GUARD = "tensor 'x' size mismatch at index 1. expected 64, actual 128"
RESNET18_KERNELS = (  # the compiled profile's top kernels of a resnet18 race on a CPU
    ("aten::convolution_backward", 5.0),
    ("aten::sqrt", 1.0),
    ("aten::mkldnn_convolution", 3.0),
    ("aten::copy_", 1.0),
)


def regional_resnet18(guard=STATE_GUARD, recompiles=6, step=1):
    """A regional resnet18 race whose recompiles on `guard` came at `step` (1: the call that compiled
    first, where every block saw the same batch)."""
    s = summary("slower", 0.8, part(10.0, 8.0), part(12.5, 10.0), ci=(0.7, 0.9), compile_time_s=173.0)
    s["compiled_step_times_s"] = [5.0] + [0.1] * 39
    first = {"variant": "compiled", "phase": "train", "epoch": 1, "step": 1, "note": "forward graph compiled"}
    s["compile_events"] = [first] + [
        {"variant": "compiled", "phase": "train", "epoch": 1, "step": step, "note": f"recompile: {guard}"}
        for _ in range(recompiles)
    ]
    return s, {"model": "resnet18", "batch_size": 16, "device": "cpu", "compile_scope": "regional"}


# -- the recompile's diagnosis ---------------------------------------------------------------------


@pytest.mark.parametrize("guard", [STATE_GUARD, OLD_STATE_GUARD, BLOCK_INPUT_GUARD])
def test_a_guard_on_a_buffers_size_across_blocks_is_not_called_a_batch_size(guard):
    s, params = regional_resnet18(guard)
    assert size_cause(guard) == (INPUT_SIZE if guard == BLOCK_INPUT_GUARD else STATE_SIZE)
    said = recompile_words(s, params)
    assert ("block's input x" if guard == BLOCK_INPUT_GUARD else "bn1.running_var") in said
    assert said.startswith("Compiled recompiled 6 times: at step 1 (")
    assert "differs in size between the repeated blocks" in said
    for wrong in ("batch size", "drop_last", "dynamic=True", "mark_dynamic"):
        assert wrong not in said, wrong
    advice = advise(s, params, CPU_ENV)
    changes = [a.changes for a in advice.suggestions]
    assert {"dynamic": True} not in changes
    assert not any("dynamic" in a.label or "dynamic=True" in a.why for a in advice.suggestions)
    assert changes[0] == {"compile_scope": "whole"}


def test_an_inputs_new_size_is_still_a_batch_size_with_dynamic_shapes_advised():
    s, params = regional_resnet18(INPUT_GUARD, recompiles=1, step=40)  # the short last batch
    assert size_cause(INPUT_GUARD) == INPUT_SIZE
    assert "A new batch size failed the guard" in recompile_words(s, params)
    assert {"dynamic": True} in [a.changes for a in advise(s, params, CPU_ENV).suggestions]


# -- the race's own headline and kernels -------------------------------------------------------------


@pytest.mark.parametrize("verdict", ["faster", "machine busy", "no clear difference", None])
def test_advice_never_says_no_clear_gain_for_a_race_whose_interval_lies_above_1(verdict):
    s = summary(verdict, 1.11, part(10.0, 9.0), part(9.0, 8.0), ci=(1.05, 1.18), compile_time_s=108.6)
    params = {"model": "mlp", "batch_size": 64, "mode": "max-autotune-no-cudagraphs", "device": "cpu"}
    assert headline_verdict(s) == (None if verdict == "machine busy" else "faster")  # busy: no verdict to rest on
    # With the cause a faster race has (a busy one names none), so the mode's branch is reached.
    cause = race_cause({**s, "verdict": "faster"}, params, CPU_ENV)
    advice = advise(s, params, CPU_ENV, cause)
    said = " ".join(a.why for a in advice.suggestions)
    assert "no clear gain" not in said and "gains nothing" not in said
    assert {"mode": "default"} not in [a.changes for a in advice.suggestions]


def test_a_tuned_mode_that_bought_nothing_the_interval_can_tell_is_told_the_default_mode():
    s = summary("no clear difference", 1.0, part(10.0, 9.0), part(10.0, 9.0), ci=(0.95, 1.05), compile_time_s=108.6)
    params = {"model": "mlp", "mode": "max-autotune-no-cudagraphs", "device": "cpu"}
    first = advise(s, params, CPU_ENV).suggestions[0]
    assert first.changes == {"mode": "default"} and "no clear gain" in first.why


def test_the_kernel_mix_names_what_the_profiles_top_kernels_are():
    s = summary("no clear difference", 1.0, part(10.2, 10.0), part(10.1, 10.0, top=RESNET18_KERNELS), ci=(0.95, 1.05))
    params = {"model": "resnet18", "batch_size": 16, "device": "cpu"}
    found = race_cause(s, params, CPU_ENV)
    assert found.library_kind == CONVOLUTIONS and found.library_share == pytest.approx(0.8)
    assert "library convolutions (aten::convolution_backward, aten::mkldnn_convolution)" in found.sentence
    assert "sqrt" not in found.sentence and "matmul" not in found.sentence
    advice = advise(s, params, CPU_ENV, found)
    assert not any("matmul" in a.why for a in advice.suggestions)
    # On a CPU convolutions stay oneDNN calls in every mode: max-autotune is no cure for them.
    assert all(a.changes.get("mode") is None for a in advice.suggestions)


def test_library_matmuls_are_named_as_such_and_get_the_tuned_mode_on_a_cpu():
    top = (("aten::mm", 5.0), ("aten::addmm", 3.0), ("aten::sqrt", 1.0))
    s = summary("no clear difference", 1.0, part(10.2, 10.0), part(10.1, 10.0, top=top), ci=(0.95, 1.05))
    params = {"model": "mlp", "batch_size": 64, "device": "cpu"}
    found = race_cause(s, params, CPU_ENV)
    assert found.library_kind == MATMULS and "library matmuls" in found.sentence
    modes = [a for a in advise(s, params, CPU_ENV, found).suggestions if "mode" in a.changes]
    assert modes[0].changes == {"mode": "max-autotune-no-cudagraphs"} and "matmuls" in modes[0].why


# -- a suggestion only where the race supports it, with its promise --------------------------------------


def test_regional_compile_is_offered_only_where_the_repeated_blocks_share_shapes():
    def scopes(model):
        s = summary("faster", 1.3, part(10.0, 8.0), part(7.7, 6.0), ci=(1.2, 1.4), compile_time_s=40.0)
        params = {"model": model, "batch_size": 16, "device": "cpu", "cache": "warm"}
        return [a for a in advise(s, params, CPU_ENV).suggestions if "compile_scope" in a.changes]

    assert scopes("resnet18") == []  # 8 residual blocks of 7 kinds: each kind compiles its own
    assert scopes("convnext_tiny") == []
    offered = scopes("gpt")  # every transformer block alike: one compile serves them all
    assert offered and offered[0].changes == {"compile_scope": "regional"} and "all alike" in offered[0].why


def races_to_advise():
    yield from (
        (recording(n)["summary"], recording(n)["params"], recording(n)["environment"])
        for n in ("cpu-break-even-demo", "cpu-compile-never-pays-off", "cpu-recompiles-varying-shapes")
    )
    yield (*regional_resnet18(), CPU_ENV)
    for env, device in ((CPU_ENV, "cpu"), (H100_ENV, "cuda")):
        for verdict, speedup, ci in (("slower", 0.7, (0.65, 0.75)), ("no clear difference", 1.0, (0.95, 1.05))):
            for top in ((), RESNET18_KERNELS, (("aten::mm", 8.0),)):
                s = summary(verdict, speedup, part(10.0, 2.0), part(14.0, 9.0, top=top), ci=ci, compile_time_s=40.0)
                s["graph_breaks"] = 2
                yield s, {"model": "gpt", "batch_size": 16, "device": device, "mode": "max-autotune"}, env
                yield s, {"model": "mlp", "batch_size": 16, "device": device, "backend": "aot_eager"}, env
        s = summary("faster", 1.3, part(10.0, 8.0), part(7.7, 6.0), ci=(1.2, 1.4), compile_time_s=40.0)
        yield s, {"model": "gpt", "batch_size": 16, "device": device}, env


def test_every_suggestion_says_what_it_expects_to_change():
    seen = set()
    for s, params, env in races_to_advise():
        for a in advise(s, params, env).suggestions:
            assert a.expects in EXPECTS, a
            assert a.why.endswith(expect_words(a.expects)), a
            seen.add(a.expects)
        for race in finished_answers(s, params, env).next_races:  # what the page and the terminal show
            assert "Expect: " in race.why
    assert seen == set(EXPECTS)  # every kind of promise was exercised


# -- which mode, in one place per device -----------------------------------------------------------------


def test_which_mode_is_answered_per_device_and_a_cpu_never_gets_cuda_graphs():
    overhead = race_cause(
        summary("no clear difference", 1.0, part(10.0, 2.0), part(10.1, 2.0), ci=(0.95, 1.05)), {}, CPU_ENV
    )
    assert overhead.overhead_bound
    assert which_mode("cuda", overhead).mode == "reduce-overhead"
    assert which_mode("cpu", overhead).mode == "default"
    assert "need a CUDA GPU" in which_mode("cpu", overhead).why
    for device in ("cpu", "mps", None):
        assert which_mode(device).mode == "default" and "need" in which_mode(device).why
    assert "reduce-overhead pays" in which_mode("cuda").why


def test_every_mode_the_advice_suggests_is_the_one_which_mode_answers(monkeypatch):
    s = summary("no clear difference", 1.0, part(10.0, 2.0), part(10.1, 2.0), ci=(0.95, 1.05))
    asked = []

    def answer(device_type, cause=None, compile_s=None):
        asked.append(device_type)
        return recommend.ModeAnswer("max-autotune-no-cudagraphs", "the one answer.", recommend.STEP_FASTER)

    monkeypatch.setattr(recommend, "which_mode", answer)
    for env, device in ((CPU_ENV, "cpu"), (H100_ENV, "cuda")):
        advice = advise(s, {"model": "mlp", "batch_size": 64, "device": device}, env)
        modes = [a for a in advice.suggestions if "mode" in a.changes]
        assert [a.changes for a in modes] == [{"mode": "max-autotune-no-cudagraphs"}]
        assert modes[0].why.startswith("the one answer.")
    assert asked == ["cpu", "cuda"]
