"""Shared results and estimates stay per device type and torch version (issue 27): a race measured
on one GPU type counts for a race on that type only, from any box of the fleet that has it with the
same torch; a CPU's only on its own box; on one box, only what its probe says this device and torch
are. The fleet's boxes are stand-in agent registrations; the stored races are constructed."""

import dataclasses
import time

import pytest
from support import AMPERE, CPU, quick_spec
from test_pages import record_probe

from core.engine import analysis
from core.runs import device_history, fleet, queue
from core.runs.device_history import recent_result
from core.runs.fleet import DeviceType, race_device_type
from core.runs.limits import HostLimits

BOTH_BACKENDS = True
SUMMARY = analysis.summarize([0.02] * 6, [0.5] + [0.01] * 5, [0.06, 0.06], [0.52, 0.03], 16)
TORCH = "2.14.1"
GPU_SPEC = quick_spec(device="cuda")
PROBED = {"device_type": "cpu", "device_name": "Test CPU", "cuda": None, "triton": None}  # record_probe's, torch 2.x


def gpu(index, name):
    return {"lane": f"cuda:{index}", "device_name": name, "memory_bytes": 80 * 2**30, "caps": AMPERE.to_dict()}


def cpu_lane():
    return {"lane": "cpu", "device_name": "CPU (x86_64, 16 cores)", "caps": CPU.to_dict()}


def a_fleet(store):
    """Two H100 boxes and an A100 box on one torch, an H100 box on an older torch."""
    fleet.register(store, "h100-a", 1, "lab-1", TORCH, [cpu_lane(), gpu(0, "H100"), gpu(1, "H100")])
    fleet.register(store, "h100-b", 2, "lab-2", TORCH, [cpu_lane(), gpu(0, "H100")])
    fleet.register(store, "a100", 3, "lab-3", TORCH, [gpu(0, "A100")])
    fleet.register(store, "h100-old", 4, "lab-4", "2.6.0", [gpu(0, "H100")])


def finished_race(store, spec, host, device_key, wall_s=108.0, **environment):
    now = time.time()
    run_id = store.create_run(
        "race", spec.to_dict(), "someone", device_key, status="done", host=host, started_at=now - 60 - wall_s
    )
    store.update_run(run_id, finished_at=now - 60, environment=environment, summary={**SUMMARY, "compile_time_s": 9.0})
    return run_id


def h100_race(store, spec=GPU_SPEC, host="h100-b", torch=TORCH):
    return finished_race(store, spec, host, "cuda:0", device_type="cuda", device_name="H100", torch=torch)


def offered(store, spec=GPU_SPEC, **pin):
    run = recent_result(store, spec, AMPERE, within_s=None, **pin)
    return run and run.id


def measured(store, spec=GPU_SPEC, caps=AMPERE, **pin):
    return [m.run_id for m in device_history.measured_here(store, spec, caps, **pin)]


def test_a_gpu_types_race_counts_for_that_type_on_every_box_with_its_torch(store):
    a_fleet(store)
    mine = h100_race(store)
    # Another GPU of this box, another box with the same GPU and torch: the same race's number.
    for pin in ({"host": "h100-b", "lane": "cuda:0"}, {"host": "h100-a", "lane": "cuda:1"}):
        assert offered(store, **pin) == mine
        assert measured(store, **pin) == [mine]
    # Another GPU type, or the same GPU with another torch: not this race's number.
    for pin in ({"host": "a100", "lane": "cuda:0"}, {"host": "h100-old", "lane": "cuda:0"}):
        assert offered(store, **pin) is None
        assert measured(store, **pin) == []
    # Not pinned, in a fleet of several GPU types: whichever agent claims it decides, so no type's number.
    assert offered(store) is None and measured(store) == []
    assert offered(store, host="gone-box", lane="cuda:0") is None  # a box whose agent is not live


def test_the_torch_version_of_a_race_is_what_its_run_recorded(store):
    a_fleet(store)
    old = h100_race(store, host="h100-old", torch="2.6.0")
    other_spec = h100_race(store, spec=dataclasses.replace(GPU_SPEC, seed=3))  # not this race: never offered
    assert offered(store, host="h100-old", lane="cuda:0") == old
    assert offered(store, host="h100-a", lane="cuda:0") is None
    # An estimate scales from any race of its type (another seed is the same race for its duration).
    assert measured(store, host="h100-a", lane="cuda:0") == [other_spec]
    assert measured(store, host="h100-old", lane="cuda:0") == [old]


def test_a_cpus_race_counts_only_on_its_own_box(store):
    a_fleet(store)
    spec = quick_spec(device="cpu")
    mine = finished_race(store, spec, "h100-a", "cpu", device_type="cpu", device_name="AMD EPYC", torch=TORCH)
    assert offered(store, spec, host="h100-a") == mine and measured(store, spec, CPU, host="h100-a") == [mine]
    assert offered(store, spec, host="h100-b") is None and measured(store, spec, CPU, host="h100-b") == []


def test_a_fleet_with_one_gpu_type_knows_an_unpinned_races_type(store):
    fleet.register(store, "h100-a", 1, "lab-1", TORCH, [gpu(0, "H100")])
    fleet.register(store, "h100-b", 2, "lab-2", TORCH, [gpu(0, "H100")])
    assert race_device_type(store, GPU_SPEC, AMPERE) == DeviceType("cuda", "H100", (("torch", TORCH),))
    mine = h100_race(store)
    assert offered(store) == mine and measured(store) == [mine]


@pytest.mark.parametrize("difference", [{"torch": "2.y"}, {"device_name": "Another CPU"}, {"cuda": "12.4"}])
def test_on_one_box_an_estimate_uses_only_races_of_its_device_and_torch(store, difference):
    record_probe(store)  # Test CPU, torch 2.x: no agents, the box's own device
    spec = quick_spec()
    mine = finished_race(store, spec, fleet.HOST, "cpu", **{**PROBED, "torch": "2.x"})
    other = finished_race(store, spec, fleet.HOST, "cpu", **{**PROBED, "torch": "2.x", **difference})
    assert measured(store, spec, CPU) == [mine]
    assert other not in measured(store, spec, CPU)
    assert offered(store, spec) == mine


def test_a_pinned_race_is_queued_with_the_estimate_of_its_own_type(store, sleepers):
    a_fleet(store)
    mine = h100_race(store)
    h100 = queue.enqueue(store, GPU_SPEC, "ann", limits=HostLimits(), caps=AMPERE, host="h100-a", lane="cuda:1")
    a100 = queue.enqueue(store, GPU_SPEC, "ann", limits=HostLimits(), caps=AMPERE, host="a100", lane="cuda:0")
    assert store.get_run(h100).details["estimate"]["based_on_run"] == mine
    assert store.get_run(h100).details["estimate"]["basis"] == "same race"
    assert store.get_run(a100).details["estimate"]["basis"] == "table"
    for run_id in (h100, a100):
        store.finish_run(run_id, "cancelled")
