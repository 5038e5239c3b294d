"""RunSpec validation: every bad input is caught before any work, naming field and allowed values."""

import pytest
from support import AMPERE, CPU, VOLTA

from core.engine.spec import DeviceCaps, RunSpec, SpecError, check, resolve_device, validate


def fields(problems):
    return [p.field for p in problems]


def test_default_spec_is_valid_on_cpu():
    assert validate(RunSpec(), CPU) == []


@pytest.mark.parametrize(
    "overrides, field, must_mention",
    [
        ({"batch_size": 0}, "batch_size", "from 1 to"),
        ({"batch_size": -3}, "batch_size", "from 1 to"),
        ({"batch_size": 2.5}, "batch_size", "whole number"),
        ({"model": "nope"}, "model", "resnet50"),
        ({"precision": "fp8"}, "precision", "amp-bf16"),
        ({"mode": "fastest"}, "mode", "reduce-overhead"),
        ({"backend": "tvm"}, "backend", "aot_eager"),
        ({"epochs": 0}, "epochs", "from 1 to"),
        ({"steps_per_epoch": 0}, "steps_per_epoch", "from 1 to"),
        ({"eval_steps": -1}, "eval_steps", "from 0 to"),
        ({"data": "imagenet"}, "data", "synthetic"),
        ({"cache": "lukewarm"}, "cache", "cold, warm"),
        ({"device": "tpu"}, "device", "auto, cuda, cpu, mps"),
        ({"lr": 0}, "lr", "between 0 and 10"),
        ({"model": "resnet50", "image_size": 7}, "image_size", "at least 32"),
        ({"model": "vit_b_16", "image_size": 40}, "image_size", "multiple of 16"),
        ({"model": "gpt", "image_size": 4}, "image_size", "at least 8"),
        ({"model": "mlp", "image_size": 100}, "image_size", "exactly 512"),
        ({"model": "gpt", "data": "fakedata"}, "data", "synthetic"),
        ({"data": "cifar10", "model": "resnet18"}, "data_dir", "cifar-10-batches-py"),
        ({"backend": "aot_eager", "mode": "max-autotune-no-cudagraphs"}, "mode", "Inductor mode"),
    ],
)
def test_bad_input_names_the_field_and_what_is_allowed(overrides, field, must_mention):
    problems = validate(RunSpec(**overrides), CPU)
    assert field in fields(problems)
    message = next(p.message for p in problems if p.field == field)
    assert must_mention in message


def test_every_problem_is_reported_at_once():
    problems = validate(RunSpec(model="nope", batch_size=0, precision="fp8", epochs=0), CPU)
    assert set(fields(problems)) == {"model", "batch_size", "precision", "epochs"}


def test_check_raises_spec_error_carrying_all_problems():
    with pytest.raises(SpecError) as info:
        check(RunSpec(batch_size=0, epochs=0), CPU)
    assert fields(info.value.problems) == ["batch_size", "epochs"]
    assert "batch_size" in str(info.value)


@pytest.mark.parametrize(
    "overrides, caps, field",
    [
        ({"precision": "amp-fp16", "device": "cpu"}, CPU, "precision"),
        ({"precision": "tf32", "device": "cpu"}, CPU, "precision"),
        ({"mode": "reduce-overhead"}, CPU, "mode"),
        ({"mode": "max-autotune"}, CPU, "mode"),
        ({"device": "cuda"}, CPU, "device"),
        ({"device": "mps"}, CPU, "device"),
        ({"precision": "amp-bf16", "device": "cuda"}, VOLTA, "precision"),
        ({"precision": "tf32", "device": "cuda"}, VOLTA, "precision"),
        ({"precision": "amp-fp16", "device": "mps"}, DeviceCaps(mps=True), "precision"),
        ({"mode": "reduce-overhead", "device": "mps"}, DeviceCaps(mps=True), "mode"),
    ],
)
def test_combinations_the_device_cannot_run_are_rejected_with_a_reason(overrides, caps, field):
    problems = validate(RunSpec(**overrides), caps)
    assert field in fields(problems), problems


@pytest.mark.parametrize(
    "overrides, caps",
    [
        ({"precision": "amp-bf16", "device": "cpu"}, CPU),
        ({"mode": "max-autotune-no-cudagraphs"}, CPU),
        ({"mode": "reduce-overhead", "precision": "amp-fp16"}, AMPERE),
        ({"precision": "tf32", "device": "cuda"}, AMPERE),
        ({"precision": "amp-fp16"}, VOLTA),
        ({"model": "vit_b_16", "image_size": 32}, CPU),
        ({"model": "gpt", "image_size": 64}, CPU),
    ],
)
def test_combinations_the_device_can_run_pass(overrides, caps):
    assert validate(RunSpec(**overrides), caps) == []


def test_device_problems_are_not_checked_without_caps():
    assert validate(RunSpec(precision="amp-fp16", device="cpu")) == []


def test_auto_resolves_to_the_best_device_present():
    assert resolve_device("auto", CPU) == "cpu"
    assert resolve_device("auto", AMPERE) == "cuda"
    assert resolve_device("auto", DeviceCaps(mps=True)) == "mps"
    assert resolve_device("cpu", AMPERE) == "cpu"


def test_auto_on_a_gpu_machine_applies_gpu_rules():
    assert validate(RunSpec(precision="amp-fp16"), AMPERE) == []
    assert "precision" in fields(validate(RunSpec(precision="amp-fp16"), CPU))


def test_cifar10_with_a_prepared_folder_passes(tmp_path):
    (tmp_path / "cifar-10-batches-py").mkdir()
    assert validate(RunSpec(model="resnet18", data="cifar10", data_dir=str(tmp_path)), CPU) == []


def test_spec_round_trips_through_a_dict():
    spec = RunSpec(model="gpt", batch_size=8, dynamic=True, image_size=64)
    assert RunSpec.from_dict(spec.to_dict()) == spec


def test_unknown_keys_in_a_dict_are_an_error_not_ignored():
    with pytest.raises(SpecError) as info:
        RunSpec.from_dict({"model": "mlp", "batchsize": 3})
    assert fields(info.value.problems) == ["batchsize"]


def test_input_size_defaults_to_the_models():
    assert RunSpec(model="resnet50").input_size == 224
    assert RunSpec(model="resnet50", image_size=64).input_size == 64


def test_host_limits_come_from_a_config_file_and_the_environment_wins(tmp_path):
    from core.runs.limits import load_host_limits

    config = tmp_path / "compile_lab.toml"
    config.write_text('[limits]\nallowed_models = ["mlp", "resnet50"]\nmax_batch_size = 256\njob_time_limit_s = 600\n')
    limits = load_host_limits({"COMPILE_LAB_CONFIG": str(config), "COMPILE_LAB_MAX_BATCH_SIZE": "128"})
    assert limits.allowed_models == ("mlp", "resnet50")
    assert limits.max_batch_size == 128 and limits.job_time_limit_s == 600
    assert load_host_limits({"COMPILE_LAB_ALLOWED_MODELS": "mlp, gpt"}).allowed_models == ("mlp", "gpt")
    assert load_host_limits({"COMPILE_LAB_JOB_TIME_LIMIT_S": "none"}).job_time_limit_s is None


def test_host_limits_default_to_an_hour_per_job_and_nothing_else():
    from core.runs.limits import HostLimits, load_host_limits

    assert load_host_limits({}) == HostLimits(job_time_limit_s=3600.0)


@pytest.mark.parametrize(
    "environ, message",
    [
        ({"COMPILE_LAB_MAX_BATCH_SIZE": "lots"}, "COMPILE_LAB_MAX_BATCH_SIZE must be a whole number"),
        ({"COMPILE_LAB_JOB_TIME_LIMIT_S": "soon"}, "COMPILE_LAB_JOB_TIME_LIMIT_S must be a number of seconds"),
    ],
)
def test_a_limit_that_does_not_parse_is_an_error_naming_it(environ, message):
    from core.runs.limits import load_host_limits

    with pytest.raises(ValueError, match=message):
        load_host_limits(environ)


def test_an_unknown_limit_in_the_config_file_is_an_error(tmp_path):
    from core.runs.limits import load_host_limits

    config = tmp_path / "c.toml"
    config.write_text("[limits]\nmax_gpus = 3\n")
    with pytest.raises(ValueError, match=r"max_gpus in \[limits\] of .*: unknown setting"):
        load_host_limits({"COMPILE_LAB_CONFIG": str(config)})
