"""Shared results: a race this device finished recently is offered instead of a new measurement,
never across devices, hosts, torch versions or specs; the host can make it automatic when the queue
is long."""

import time

import pytest
from support import CPU, quick_spec
from test_pages import app, record_probe

from core.engine import analysis
from core.engine.spec import DeviceCaps
from core.runs import fleet, queue
from core.runs.device_history import recent_result, reuse_automatically
from core.runs.limits import HostLimits
from core.view.race_form import shared_result_text
from core.view.safe_text import markdown_text

SUMMARY = analysis.summarize([0.02] * 6, [0.5] + [0.01] * 5, [0.06, 0.06], [0.52, 0.03], 16)
HERE = {"device_type": "cpu", "device_name": "Test CPU", "cpu_name": "Test CPU", "torch": "2.x", "cuda": None}


def finished_race(store, spec=None, age_s=60.0, host=fleet.HOST, device_key="cpu", **environment):
    spec = spec or quick_spec()
    now = time.time()
    run_id = store.create_run(
        "race", spec.to_dict(), "someone", device_key, status="done", host=host, started_at=now - age_s - 5
    )
    store.update_run(
        run_id,
        finished_at=now - age_s,
        environment={**HERE, **environment},
        summary=SUMMARY,
    )
    return run_id


def test_the_same_spec_on_this_device_and_torch_is_offered(store):
    record_probe(store)
    run_id = finished_race(store)
    assert recent_result(store, quick_spec(), CPU, within_s=3600).id == run_id
    assert recent_result(store, quick_spec(device="auto"), CPU, within_s=3600).id == run_id  # auto is this CPU


@pytest.mark.parametrize(
    "difference",
    [
        {"torch": "2.y"},
        {"device_name": "Another CPU"},
        {"device_type": "cuda"},
        {"cuda": "12.4"},
        {"triton": "3.0"},
        {"host": "another-box"},
        {"device_key": "cuda:0"},
    ],
    ids=lambda d: next(iter(d)),
)
def test_a_result_never_crosses_devices_hosts_or_software_versions(store, difference):
    record_probe(store)
    finished_race(store, **difference)
    assert recent_result(store, quick_spec(), CPU, within_s=None) is None


@pytest.mark.parametrize("change", [{"batch_size": 32}, {"backend": "inductor"}, {"cache": "warm"}, {"seed": 1}])
def test_another_spec_is_not_offered(store, change):
    record_probe(store)
    finished_race(store)
    assert recent_result(store, quick_spec(**change), CPU, within_s=None) is None


def test_the_host_sets_how_recent(store):
    record_probe(store)
    finished_race(store, age_s=2 * 3600)
    assert recent_result(store, quick_spec(), CPU, within_s=3600) is None
    assert recent_result(store, quick_spec(), CPU, within_s=3 * 3600) is not None
    assert recent_result(store, quick_spec(), CPU, within_s=None) is not None  # none: any age
    assert recent_result(store, quick_spec(), CPU, within_s=0) is None  # 0: never


def test_imported_failed_and_unprobed_runs_are_not_offered(store):
    finished_race(store)
    assert recent_result(store, quick_spec(), CPU, within_s=None) is None  # this device is not known yet
    record_probe(store)
    store.update_run(finished_race(store), imported=1)
    store.update_run(store.list_runs(kind="race")[-1].id, status="failed")
    assert recent_result(store, quick_spec(), CPU, within_s=None) is None


def test_a_gpu_result_is_offered_only_for_that_gpu(store):
    env = {**HERE, "device_type": "cuda", "device_name": "NVIDIA A100", "cuda": "12.4"}
    caps = DeviceCaps(cuda=True, cuda_name="NVIDIA A100", compute_capability=(8, 0), cuda_bf16=True)
    probe = store.create_run("probe", {}, "system", "probe", status="done", host=fleet.HOST)
    store.update_run(probe, summary={"caps": caps.to_dict(), "environment": env})
    spec = quick_spec(device="cuda")
    finished_race(store, spec, device_key="cuda:0", device_type="cuda", device_name="NVIDIA A100", cuda="12.4")
    assert recent_result(store, spec, caps, within_s=None) is not None
    assert recent_result(store, quick_spec(device="cpu"), caps, within_s=None) is None  # the CPU of that box
    run = finished_race(store, quick_spec(device="cpu"), device_name="Test CPU", cuda="12.4")  # the same torch build
    assert recent_result(store, quick_spec(device="cpu"), caps, within_s=None).id == run  # its cpu_name


def test_the_offer_says_how_long_ago_and_on_what():
    run = type("R", (), {"environment": {**HERE, "device_type": "cuda", "device_name": "NVIDIA A100"}})()
    run.finished_at, run.created_at, run.id = 1000.0, 900.0, 7
    assert shared_result_text(run, now=1000.0 + 12 * 60) == (
        "Measured 12 min ago on this GPU (NVIDIA A100, torch 2.x) as run 7"
    )


def test_reuse_is_automatic_only_when_the_hosts_queue_length_is_reached(store, sleepers):
    record_probe(store)
    run = store.get_run(finished_race(store))
    assert not reuse_automatically(store, run, HostLimits(auto_reuse_queue_length=None))
    for owner in ("a", "b", "c"):  # one runs, two wait
        queue.enqueue(store, quick_spec(), owner, limits=HostLimits(), caps=CPU)
    assert reuse_automatically(store, run, HostLimits(auto_reuse_queue_length=2))
    assert not reuse_automatically(store, run, HostLimits(auto_reuse_queue_length=3))


def small_race_form(at):
    at.selectbox(key="pick_zoo").set_value("mlp").run()
    at.number_input(key="form_steps_per_epoch").set_value(3).run()
    return at


def test_the_race_page_offers_a_recent_result_and_shows_it_at_once(store, sleepers):
    record_probe(store)
    at = small_race_form(app())
    spec_now = at.session_state["form_batch_size"]
    assert not any(b.label == "Show it" for b in at.button)
    spec = quick_spec(
        model="mlp", batch_size=spec_now, epochs=3, steps_per_epoch=3, device="cpu", backend="inductor", replicates=None
    )  # as the form launches it: its replicates too
    done = finished_race(store, spec, age_s=12 * 60)
    at.run()
    offers = [i.value for i in at.info if "Measured" in i.value]
    said = markdown_text(f"Measured 12 min ago on this CPU (Test CPU, torch 2.x) as run {done}")
    assert offers == [f"{said}: show it, or measure again with Launch."]
    [b for b in at.button if b.label == "Show it"][0].click().run()
    assert not at.exception and at.query_params["run"] == str(done)
    assert store.list_runs(kind="race", status=["queued"]) == []  # nothing measured again


def test_launch_still_measures_again_unless_the_queue_is_long(store, sleepers, monkeypatch):
    record_probe(store)
    at = small_race_form(app())
    spec = dict(model="mlp", batch_size=at.session_state["form_batch_size"], epochs=3, steps_per_epoch=3)
    done = finished_race(store, quick_spec(**spec, device="cpu", backend="inductor", replicates=None))
    at.run()
    [b for b in at.button if b.label == "Launch"][0].click().run()
    assert at.query_params["run"] != str(done) and len(store.list_runs(kind="race")) == 2  # measured again
    monkeypatch.setenv("COMPILE_LAB_AUTO_REUSE_QUEUE_LENGTH", "1")
    queue.enqueue(store, quick_spec(seed=5), "someone-else", limits=HostLimits(), caps=CPU)  # now one waits
    other = small_race_form(app())
    [b for b in other.button if b.label == "Launch"][0].click().run()
    assert other.query_params["run"] == str(done)
    assert any(i.value.startswith("The queue is long, so this host shows the same race") for i in other.info)
    assert len(store.list_runs(kind="race")) == 3  # nothing new queued for it


def test_a_compile_that_met_a_full_disk_is_never_a_shared_result(store):
    """An older release recorded a full disk during the compile as the race's finding ("done",
    compile failed): that says nothing about the model and is not offered to anyone."""
    record_probe(store)
    run_id = finished_race(store)
    offered = {
        **SUMMARY,
        "compile_failed": "torch.compile failed (InductorError: OSError: [Errno 28] No space left on device)",
    }
    store.update_run(run_id, summary=offered)
    assert recent_result(store, quick_spec(), CPU, within_s=None) is None
    found = {**SUMMARY, "compile_failed": "fullgraph=True but the model has a graph break (Unsupported: x)"}
    store.update_run(run_id, summary=found)  # a finding about the model is shared as before
    assert recent_result(store, quick_spec(), CPU, within_s=None).id == run_id
