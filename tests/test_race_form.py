"""The Race page's form as pure functions: device defaults, what the device cannot run (and why),
a rough duration, and the configuration as a shareable link."""

import dataclasses

import pytest
from support import AMPERE, CPU, VOLTA

from core.engine.race_estimates import estimate_seconds, expected_compile_estimate
from core.engine.spec import DeviceCaps, RunSpec, validate
from core.runs.limits import HostLimits
from core.view.race_form import (
    CHOICES,
    CPU_BREAK_EVEN_PRESET,
    FORM_FIELDS,
    default_spec,
    describe_duration,
    form_spec,
    link_configures,
    notes_still_true,
    race_promise,
    spec_from_query,
    spec_to_query,
    unavailable_options,
    unavailable_summary,
)

MPS = DeviceCaps(mps=True)
SPEC_FIELDS = {f.name for f in dataclasses.fields(RunSpec)}


# -- defaults ----------------------------------------------------------------------------------


@pytest.mark.parametrize("caps", [None, CPU, MPS], ids=["unknown", "cpu", "mps"])
def test_default_spec_without_a_cuda_gpu_is_a_small_quick_cpu_run(caps):
    spec = default_spec(caps)
    assert spec.device == "cpu"
    assert spec.model == "pointwise_mlp"
    assert spec.precision == "fp32"
    assert spec.total_steps <= 300
    assert validate(spec) == []
    assert validate(spec, CPU) == []


def test_default_spec_on_an_ampere_gpu_is_the_tutorial_setup_in_bfloat16():
    spec = default_spec(AMPERE)
    assert (spec.model, spec.batch_size, spec.precision, spec.device) == ("resnet50", 128, "amp-bf16", "cuda")


def test_default_spec_on_a_volta_gpu_uses_float16_because_it_has_no_bfloat16():
    spec = default_spec(VOLTA)
    assert (spec.model, spec.batch_size, spec.precision, spec.device) == ("resnet50", 128, "amp-fp16", "cuda")


def test_default_spec_on_an_ampere_class_gpu_without_bfloat16_support_falls_back_to_float16():
    caps = DeviceCaps(cuda=True, cuda_name="odd GPU", compute_capability=(8, 6), cuda_bf16=False)
    assert default_spec(caps).precision == "amp-fp16"


@pytest.mark.parametrize("caps", [None, CPU, MPS, AMPERE, VOLTA], ids=["unknown", "cpu", "mps", "ampere", "volta"])
def test_every_default_spec_is_valid_on_the_device_it_was_made_for(caps):
    assert validate(default_spec(caps), caps) == []


def test_the_cpu_break_even_preset_is_valid_on_a_cpu():
    spec = dataclasses.replace(default_spec(CPU), **CPU_BREAK_EVEN_PRESET)
    assert validate(spec, CPU) == []


# -- what the device cannot run ----------------------------------------------------------------


def test_a_cpu_cannot_run_fp16_or_tf32_and_each_comes_with_the_reason():
    blocked = unavailable_options(default_spec(CPU), "precision", CPU)
    assert set(blocked) == {"amp-fp16", "tf32"}
    assert "CUDA" in blocked["amp-fp16"] and "CUDA" in blocked["tf32"]
    assert "allowed here: fp32, amp-bf16" in blocked["amp-fp16"]


def test_an_ampere_gpu_can_run_every_precision():
    assert unavailable_options(default_spec(AMPERE), "precision", AMPERE) == {}


def test_a_volta_gpu_cannot_run_bfloat16_or_tf32():
    blocked = unavailable_options(default_spec(VOLTA), "precision", VOLTA)
    assert set(blocked) == {"amp-bf16", "tf32"}
    assert "compute capability 8.0" in blocked["tf32"]


def test_cuda_graph_modes_are_unavailable_on_a_cpu():
    blocked = unavailable_options(default_spec(CPU), "mode", CPU)
    assert set(blocked) == {"reduce-overhead", "max-autotune"}
    assert all("CUDA graphs" in why for why in blocked.values())


def test_a_vector_model_cannot_take_image_data():
    spec = RunSpec(model="mlp", device="cpu")
    blocked = unavailable_options(spec, "data", CPU)
    assert set(blocked) == {"fakedata"}
    assert "synthetic" in blocked["fakedata"]
    assert unavailable_options(RunSpec(model="resnet18", device="cpu"), "data", CPU) == {}


def test_the_form_never_offers_cifar10_because_it_needs_a_local_folder():
    assert "cifar10" not in CHOICES["data"]


def test_a_field_the_form_has_no_choices_for_has_nothing_unavailable():
    assert unavailable_options(default_spec(CPU), "batch_size", CPU) == {}


# -- duration ----------------------------------------------------------------------------------


def test_estimate_grows_with_steps_and_with_batch_size():
    base = default_spec(CPU)
    low, high = estimate_seconds(base, CPU)
    more_steps = estimate_seconds(dataclasses.replace(base, steps_per_epoch=base.steps_per_epoch * 4), CPU)
    bigger_batch = estimate_seconds(dataclasses.replace(base, batch_size=base.batch_size * 4), CPU)
    assert more_steps[0] > low and more_steps[1] > high
    assert bigger_batch[0] > low and bigger_batch[1] > high


@pytest.mark.parametrize("caps", [None, CPU, AMPERE], ids=["unknown", "cpu", "ampere"])
def test_estimate_is_a_range_with_low_below_high(caps):
    low, high = estimate_seconds(default_spec(caps), caps)
    assert 0 < low < high


def test_estimate_counts_the_inductor_compile_as_slower_than_aot_eager():
    spec = default_spec(CPU)
    inductor = estimate_seconds(spec, CPU)
    aot_eager = estimate_seconds(dataclasses.replace(spec, backend="aot_eager"), CPU)
    assert inductor[0] > aot_eager[0] and inductor[1] > aot_eager[1]


def test_estimate_grows_with_the_image_side_for_image_models():
    spec = RunSpec(model="resnet18", device="cpu")
    assert estimate_seconds(dataclasses.replace(spec, image_size=64), CPU)[1] > estimate_seconds(spec, CPU)[1]


def test_estimate_of_an_unknown_model_is_zero():
    assert estimate_seconds(RunSpec(model="nope"), CPU) == (0.0, 0.0)


@pytest.mark.parametrize(
    "low, high, text",
    [
        (10, 40, "roughly 10 s to 40 s"),
        (75, 85, "roughly 75 s to 85 s"),
        (30, 120, "roughly 30 s to 2.0 min"),
        (600, 2400, "roughly 10 min to 40 min"),
    ],
)
def test_duration_reads_in_seconds_below_a_minute_and_a_half_and_in_minutes_above(low, high, text):
    assert describe_duration(low, high) == text


# -- the configuration as a link ---------------------------------------------------------------


def test_the_link_holds_only_form_fields_never_the_visitor_or_local_paths():
    spec = RunSpec(
        data_dir="/home/alice/datasets",
        download=True,
        device="cuda",
        dynamic=True,
        image_size=64,
        target_interval=0.03,
        replicates=4,
    )  # the optional fields set: a link leaves out what is None
    query = spec_to_query(spec)
    assert set(query) <= SPEC_FIELDS
    assert set(FORM_FIELDS) <= set(query)
    assert not {"owner", "visitor", "data_dir", "download", "device", "lr"} & set(query)
    assert not any("alice" in value for value in query.values())
    assert all(isinstance(value, str) for value in query.values())


def test_the_link_writes_booleans_in_lower_case_and_leaves_out_unset_values():
    query = spec_to_query(RunSpec(dynamic=None, fullgraph=True, image_size=None))
    assert query["fullgraph"] == "true"
    assert "dynamic" not in query and "image_size" not in query
    assert spec_to_query(RunSpec(dynamic=False))["dynamic"] == "false"


@pytest.mark.parametrize(
    "spec",
    [
        RunSpec(),
        default_spec(CPU),
        default_spec(AMPERE),
        RunSpec(model="resnet18", batch_size=32, mode="max-autotune", dynamic=True, fullgraph=True, image_size=64),
        RunSpec(model="gpt", backend="aot_eager", dynamic=False, epochs=7, steps_per_epoch=11, eval_steps=3),
        RunSpec(model="vit_b_16", data="fakedata", cache="warm", seed=42, image_size=48, precision="amp-bf16"),
    ],
    ids=["defaults", "cpu-default", "ampere-default", "dynamic-fullgraph", "dynamic-false", "image-size"],
)
def test_a_spec_survives_the_round_trip_through_its_link(spec):
    base = RunSpec(device=spec.device)  # the device is the host's, not the link's
    restored, notes = spec_from_query(spec_to_query(spec), base)
    assert restored == spec
    assert notes == []


def test_a_link_with_dynamic_none_restores_automatic_dynamic():
    restored, notes = spec_from_query({"dynamic": "none"}, RunSpec(dynamic=True))
    assert restored.dynamic is None and notes == []


@pytest.mark.parametrize(
    "name, raw",
    [
        ("batch_size", "lots"),
        ("epochs", "2.5"),
        ("seed", ""),
        ("image_size", "big"),
        ("dynamic", "maybe"),
        ("fullgraph", "yes"),
    ],
)
def test_an_unparseable_link_value_is_skipped_with_a_note_naming_the_field(name, raw):
    base = RunSpec(batch_size=64, epochs=2, seed=1, image_size=None, dynamic=True, fullgraph=False)
    restored, notes = spec_from_query({name: raw, "model": "mlp"}, base)
    assert getattr(restored, name) == getattr(base, name)
    assert restored.model == "mlp"  # the rest of the link still applies
    assert len(notes) == 1 and notes[0].field == name and repr(raw) in notes[0].text
    assert notes[0].value == getattr(base, name)  # the note stays while the field keeps the value it reports


def test_fullgraph_none_in_a_link_is_skipped_with_a_note_since_fullgraph_is_true_or_false():
    restored, notes = spec_from_query({"fullgraph": "none"}, RunSpec())
    assert restored.fullgraph is False
    assert len(notes) == 1 and "fullgraph" in notes[0].text


def test_a_choice_the_app_does_not_know_is_skipped_with_a_note():
    restored, notes = spec_from_query({"precision": "fp64", "model": "nope"}, RunSpec())
    assert restored.precision == "fp32" and restored.model == RunSpec().model
    assert sorted(n.text for n in notes) == [
        "ignored model='nope' from the link",
        "ignored precision='fp64' from the link",
    ]


@pytest.mark.parametrize(
    "name, raw, expected, words",
    [
        ("batch_size", "1000000000", 65536, "above the largest allowed (65536)"),
        ("epochs", "0", 1, "below the smallest allowed (1)"),
        ("steps_per_epoch", "-5", 1, "below the smallest allowed (1)"),
        ("seed", str(2**40), 2**31 - 1, "above the largest allowed"),
        ("batch_size", "99999999999999999999999", 65536, "above the largest allowed"),
    ],
)
def test_a_link_value_out_of_range_moves_to_the_nearest_allowed_with_a_note(name, raw, expected, words):
    restored, notes = spec_from_query({name: raw}, RunSpec())
    assert getattr(restored, name) == expected
    assert [(n.field, n.value) for n in notes] == [(name, expected)]
    assert f"{name}={raw} from the link is {words}" in notes[0].text and notes[0].text.endswith(f"using {expected}")


def test_a_link_value_over_the_hosts_limit_moves_to_the_limit_and_says_whose():
    limits = HostLimits(max_batch_size=256, max_epochs=5)
    restored, notes = spec_from_query(
        {"batch_size": "1000000000", "epochs": "9", "steps_per_epoch": "7"}, RunSpec(), limits
    )
    assert (restored.batch_size, restored.epochs, restored.steps_per_epoch) == (256, 5, 7)
    assert [n.text for n in notes] == [
        "batch_size=1000000000 from the link is above this host's limit (256): using 256",
        "epochs=9 from the link is above this host's limit (5): using 5",
    ]
    assert validate(restored, CPU) == [] and limits.problems(restored) == []


def test_link_notes_stay_until_the_visitor_changes_that_field():
    _, notes = spec_from_query({"batch_size": "1000000000", "epochs": "0"}, RunSpec())
    state = {"form_batch_size": 65536, "form_epochs": 1}
    assert notes_still_true(notes, state) == notes  # a rerun changes nothing: both still shown
    state["form_epochs"] = 3
    assert [n.field for n in notes_still_true(notes, state)] == ["batch_size"]


def test_parameters_outside_the_form_are_ignored():
    base = RunSpec()
    restored, notes = spec_from_query({"run": "12", "device": "cuda", "data_dir": "/etc", "lr": "5"}, base)
    assert restored == base and notes == []


# -- the form's state ---------------------------------------------------------------------------


def test_form_spec_builds_the_spec_from_form_keys_over_the_defaults():
    state = {"form_model": "mlp", "form_precision": "amp-bf16", "form_fullgraph": True, "model": "ignored", "run": 3}
    assert form_spec(state) == RunSpec(model="mlp", precision="amp-bf16", fullgraph=True)


def test_form_spec_turns_whole_floats_from_number_inputs_into_ints():
    state = {"form_batch_size": 64.0, "form_epochs": 2.0, "form_steps_per_epoch": 10.0, "form_seed": 3.0}
    spec = form_spec(state)
    assert (spec.batch_size, spec.epochs, spec.steps_per_epoch, spec.seed) == (64, 2, 10, 3)
    assert all(type(v) is int for v in (spec.batch_size, spec.epochs, spec.steps_per_epoch, spec.seed))
    assert validate(spec, CPU) == []


def test_form_spec_keeps_a_fractional_batch_size_so_validation_can_reject_it():
    spec = form_spec({"form_batch_size": 2.5})
    assert spec.batch_size == 2.5
    assert "batch_size" in [p.field for p in validate(spec, CPU)]


def test_form_spec_of_an_empty_state_is_the_runspec_default():
    assert form_spec({}) == RunSpec()


# -- the words around Launch ------------------------------------------------------------------


def test_unavailable_options_are_said_once_in_one_line():
    spec = default_spec(CPU)
    blocked = {field: unavailable_options(spec, field, CPU) for field in CHOICES}
    line = unavailable_summary(blocked)
    assert line.startswith("Not offered here: reduce-overhead, max-autotune, tf32 and amp-fp16 need a CUDA GPU")
    assert line.count("CUDA") == 1 and "\n" not in line
    assert "fakedata: pointwise_mlp takes vectors, not images: choose synthetic data" in line  # reasons stay
    assert (
        unavailable_summary({field: unavailable_options(default_spec(AMPERE), field, AMPERE) for field in ("mode",)})
        is None
    )


def test_the_line_above_launch_says_what_a_race_gives_and_how_long_saying_rough_once():
    spec = dataclasses.replace(default_spec(CPU), epochs=3, steps_per_epoch=500)
    line = race_promise(spec, CPU)
    assert "compile cost" in line and "steady speedup" in line and "when compile pays off" in line
    assert "eager and compiled taking turns every 5 steps (1,500 steps each)" in line  # the default schedule
    low, high = estimate_seconds(spec, CPU)
    assert describe_duration(low, high) in line
    assert line.lower().count("rough") == 1


def compile_and_start_s(spec: RunSpec, caps: DeviceCaps) -> float:
    """What estimate_seconds adds to the steps (the compile and the worker's start): its total is
    linear in the step count, so two counts extrapolate it to zero steps."""
    totals = [
        estimate_seconds(dataclasses.replace(spec, steps_per_epoch=n, eval_steps=0), caps)[1] / 2.0 for n in (10, 20)
    ]
    return 2 * totals[0] - totals[1]


@pytest.mark.parametrize("caps", [CPU, AMPERE], ids=["cpu", "gpu"])
def test_expected_compile_estimate_is_the_one_the_duration_estimate_uses(caps):
    """The live view's "compile (about N s)" and the form's duration assume the same compile, for
    every model, backend and mode: they differ by the worker's start alone, the same for all."""
    on_gpu = caps is AMPERE
    offsets = {}
    for model in CHOICES["model"]:
        for backend in CHOICES["backend"]:
            for mode in CHOICES["mode"]:
                spec = RunSpec(
                    model=model, backend=backend, mode=mode, device="cuda" if on_gpu else "cpu", replicates=0
                )
                expected = expected_compile_estimate(spec.to_dict(), on_gpu=on_gpu)
                offsets[(model, backend, mode)] = round(compile_and_start_s(spec, caps) - expected, 6)
    assert len(offsets) > 20 and len(set(offsets.values())) == 1, offsets
    assert 0 <= next(iter(offsets.values())) <= 10  # a worker's start: seconds, not a compile


def test_a_link_configures_a_race_when_it_carries_its_fields_and_no_run():
    assert link_configures(spec_to_query(default_spec(CPU)))
    assert link_configures({"batch_size": "64"})
    assert not link_configures({**spec_to_query(default_spec(CPU)), "run": "7"})  # a run to show: it comes first
    assert not link_configures({})
    assert not link_configures({"present": "1", "replay": "file:x"})
