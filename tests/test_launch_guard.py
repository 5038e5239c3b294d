"""A race that cannot fit its device's memory is refused before it starts, at every door (validation,
submit, a sweep point, the terminal's race, a link to the Race page), with the estimate and a batch
that would fit; a race that fits, or whose memory is not known, is not."""

import subprocess
import sys

import pytest
from streamlit.testing.v1 import AppTest
from support import ROOT
from test_pages import APP, record_probe

from core.engine.models.sources import MODELS
from core.engine.race_memory import FIT_SHARE, race_memory_bytes
from core.engine.spec import DeviceCaps, RunSpec, SpecError, validate
from core.runs import fleet, queue, sweeps
from core.runs.limits import HostLimits

GiB = 2**30
CPU_24 = DeviceCaps(memory_bytes=24 * GiB)
GPU_16 = DeviceCaps(
    cuda=True,
    cuda_name="Tesla T4",
    compute_capability=(7, 5),
    triton=True,
    gpu_count=1,
    cuda_memory_bytes=16 * GiB,
    memory_bytes=64 * GiB,
)
HUGE = RunSpec(model="resnet18", batch_size=65536, device="cpu")  # the hostile test's launch


def batch_problems(spec, caps):
    return [p.message for p in validate(spec, caps) if p.field == "batch_size"]


def test_a_race_that_cannot_fit_the_cpu_is_refused_with_the_estimate_and_a_batch_that_fits():
    (message,) = batch_problems(HUGE, CPU_24)
    assert message.startswith("needs at least ") and "GiB of memory at batch 65,536" in message
    assert "this CPU has 24.0 GiB" in message
    need = float(message.split("needs at least ")[1].split(" GiB")[0])
    assert need > 24
    fits = int(message.rsplit("; batch ", 1)[1].split(" would fit")[0].replace(",", ""))
    assert 1 <= fits < 65536
    smaller = RunSpec(model="resnet18", batch_size=fits, device="cpu")
    assert validate(smaller, CPU_24) == []
    assert (
        race_memory_bytes(smaller)
        <= FIT_SHARE * 24 * GiB
        < race_memory_bytes(RunSpec(model="resnet18", batch_size=fits * 2, device="cpu"))
    )


def test_a_gpu_race_is_held_to_the_gpus_memory_not_the_hosts():
    spec = RunSpec(model="resnet50", batch_size=4096, precision="amp-fp16", device="cuda")
    (message,) = batch_problems(spec, GPU_16)
    assert "Tesla T4 has 16.0 GiB" in message and "would fit" in message
    assert batch_problems(RunSpec(model="resnet50", batch_size=64, precision="amp-fp16", device="cuda"), GPU_16) == []


@pytest.mark.parametrize("name", list(MODELS))
def test_every_zoo_model_at_its_defaults_fits_a_small_box(name):
    info = MODELS[name]
    spec = RunSpec(model=name, batch_size=info.default_batch_size, device="cpu")
    assert batch_problems(spec, DeviceCaps(memory_bytes=16 * GiB)) == []


def test_unknown_memory_or_an_unknown_model_is_never_refused():
    assert batch_problems(HUGE, DeviceCaps()) == []  # a probe from before memory was recorded
    assert validate(HUGE) == []  # no device: the spec alone (an imported bundle)
    assert race_memory_bytes(RunSpec(model="timm:resnet18", batch_size=65536)) is None


def test_the_floor_grows_with_the_input_size_and_halves_its_activations_under_autocast():
    base = race_memory_bytes(RunSpec(model="resnet18", batch_size=1024))
    assert race_memory_bytes(RunSpec(model="resnet18", batch_size=1024, image_size=64)) > 3 * base
    fp32 = race_memory_bytes(RunSpec(model="gpt", batch_size=1024))
    assert race_memory_bytes(RunSpec(model="gpt", batch_size=1024, precision="amp-bf16")) < 0.6 * fp32


def test_a_gpus_memory_comes_from_the_stored_probe_an_old_one_too(store):
    env = {"device_type": "cuda", "device_name": "Tesla T4", "device_memory_bytes": 16 * GiB, "torch": "2.x"}
    old = {**GPU_16.to_dict(), "cuda_memory_bytes": None, "memory_bytes": None}
    run_id = store.create_run("probe", {}, "system", "probe", status="running", host=fleet.HOST)
    store.finish_run(run_id, "done", summary={"caps": old, "environment": env, "gpus": [{"memory_bytes": 16 * GiB}]})
    caps = fleet.known_caps(store)
    assert caps.cuda_memory_bytes == 16 * GiB and caps.memory_bytes is None
    spec = RunSpec(model="resnet50", batch_size=4096, precision="amp-fp16", device="cuda")
    with pytest.raises(SpecError, match="Tesla T4 has 16.0 GiB"):
        queue.enqueue(store, spec, "ann", limits=HostLimits(), caps=caps)
    assert store.list_runs(kind="race") == []


def test_submit_and_a_sweep_point_are_refused_by_the_same_check(store):
    with pytest.raises(SpecError, match="this CPU has 24.0 GiB"):
        queue.enqueue(store, HUGE, "ann", limits=HostLimits(), caps=CPU_24)
    sweep = sweeps.SweepSpec(HUGE, (sweeps.Axis("batch_size", (1024, 65536)),))
    problems = sweeps.sweep_problems(sweep, CPU_24, HostLimits())
    assert [p.field for p in problems] == ["batch_size"] and "at batch 65,536" in problems[0].message
    assert store.list_runs(kind="race") == []


def test_the_terminals_race_is_refused_in_one_line_before_any_step():
    # image side 512: a floor of terabytes, past any machine this runs on
    done = subprocess.run(
        [sys.executable, "-m", "core", "race", "--model", "resnet18", "--batch-size", "65536", "--image-size", "512",
         "--device", "cpu", "--epochs", "1", "--steps-per-epoch", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: batch_size: needs at least ") and "this CPU has" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and done.stdout == ""


def test_a_link_to_a_race_that_cannot_fit_shows_why_and_launch_stays_off(store):
    record_probe(store)  # a CPU with 16 GiB (its environment's memory)
    at = AppTest.from_file(APP, default_timeout=90)
    at.query_params.update(model="resnet18", batch_size="65536")
    at.run()
    assert not at.exception, at.exception
    errors = [e.value.replace("\\", "") for e in at.error]  # markdown-escaped
    assert any("needs at least" in e and "this CPU has 16.0 GiB" in e and "would fit" in e for e in errors), errors
    assert at.button(key="launch").disabled


def test_in_a_fleet_a_gpu_race_is_refused_only_where_it_fits_no_gpu(store):
    from support import AMPERE

    from core.runs import fleet

    def lane(index, name, gib):
        caps = {**AMPERE.to_dict(), "cuda_name": name, "cuda_memory_bytes": gib * GiB}
        return {"lane": f"cuda:{index}", "device_name": name, "memory_bytes": gib * GiB, "caps": caps}

    fleet.register(store, "box", 1, "lab-1", "2.14.1", [lane(0, "NVIDIA A10", 24), lane(1, "NVIDIA A100", 80)])
    caps = fleet.known_caps(store)
    assert caps.cuda_memory_bytes == 80 * GiB
    fits_the_large = RunSpec(model="resnet50", batch_size=1024, precision="amp-bf16", device="cuda")
    assert batch_problems(fits_the_large, caps) == []  # about 46 GiB: past the A10, within the A100
    assert "has 80.0 GiB" in batch_problems(RunSpec(model="resnet50", batch_size=4096, device="cuda"), caps)[0]
