"""Race on every GPU type's comparison (issue 27): its races side by side, named by their run ids,
with compile time, steady speedup and its interval, break-even (projected only from an interval
above 1: the one rule) and the published figures for that GPU and model; the same as a terminal
table (`status 12 13`, `submit --every-gpu-type --wait`). Stand-in agents and constructed runs."""

import time

import numpy as np
from support import AMPERE, quick_spec

from core.cli.jobs import follow_group
from core.cli.main import main
from core.engine import analysis, words
from core.runs import fleet, queue
from core.runs.limits import HostLimits
from core.view.device_comparison import (
    comparison,
    comparison_lines,
    comparison_rows,
    gpu_family,
    ids_from_text,
    published_figures,
)

SPEC = quick_spec(device="cuda", model="resnet50")


def clear_gain():
    """Compiled clearly faster per step (1.25x), still behind after its compile: a projection stands."""
    return analysis.summarize([0.1] * 60, [3.0] + [0.08] * 59, [6.0], [7.7], 16)


def gain_in_doubt():
    """A little faster per step but noisy: the interval spans 1, so no break-even is projected."""
    rng = np.random.default_rng(1)
    eager = [float(t) for t in 0.1 + rng.uniform(-0.04, 0.04, 60)]
    compiled = [3.0] + [float(t) for t in 0.097 + rng.uniform(-0.04, 0.04, 59)]
    return analysis.summarize(eager, compiled, [sum(eager)], [sum(compiled)], 16)


def done_race(store, device_name, summary, host="box", spec=SPEC):
    run_id = store.create_run("race", spec.to_dict(), "ann", "cuda:0", status="running", host=host)
    env = {"device_type": "cuda", "device_name": device_name, "torch": "2.14.1"}
    store.update_run(run_id, environment=env, started_at=time.time() - 30)
    store.finish_run(run_id, "done", summary=summary)
    return run_id


def test_a_group_is_its_run_ids():
    assert ids_from_text("12, 13,x,12,0,-4,²") == [12, 13]
    assert ids_from_text(None) == [] and ids_from_text(",".join(str(i) for i in range(1, 40))) == list(range(1, 17))


def test_published_figures_are_found_by_gpu_family_and_model():
    assert gpu_family("NVIDIA A100-SXM4-40GB") == gpu_family("NVIDIA A100 80GB PCIe") == "A100"
    assert gpu_family("NVIDIA GeForce RTX 4080") == "RTX4080" and gpu_family("NVIDIA H100 80GB HBM3") == "H100"
    assert gpu_family("CPU (x86_64, 16 cores)") is None
    a100 = published_figures("NVIDIA A100 80GB PCIe", "resnet50")
    assert [f.split(":")[0] for f in a100] == [
        "tutorial ResNet50 on NVIDIA A100-SXM4-40GB, torch 2.0",
        "PyTorch 2.0 release, 163 models on an A100",
    ]
    assert [f.split(":")[0] for f in published_figures("NVIDIA A100 80GB PCIe", "mlp")] == [
        "PyTorch 2.0 release, 163 models on an A100"  # the tutorial's figure is for ResNet50 only
    ]
    (rtx,) = published_figures("NVIDIA GeForce RTX 4080", "timm:resnet50")
    assert rtx.startswith("tutorial ResNet50 on NVIDIA GeForce RTX 4080")
    assert published_figures("NVIDIA H100 80GB HBM3", "resnet50") == []  # nothing published for it here


def test_the_comparison_shows_each_devices_figures_and_projects_only_from_a_clear_gain(store, sleepers):
    fleet.register(store, "h100-box", 1, "lab", "2.14.1", [{"lane": "cuda:0", "device_name": "NVIDIA H100\x1b[2J"}])
    a100 = done_race(store, "NVIDIA A100 80GB PCIe", clear_gain())
    h100 = done_race(store, "NVIDIA H100 80GB HBM3", gain_in_doubt())
    waiting = queue.enqueue(store, SPEC, "ann", limits=HostLimits(), caps=AMPERE, host="h100-box", lane="cuda:0")
    group = comparison(store, [a100, h100, waiting, 999])
    assert group.notes == ["There is no race 999 (deleted, or not a race): it is left out."]
    rows = {r["run"]: r for r in comparison_rows(group)}
    assert list(rows) == [f"run {a100}", f"run {h100}", f"run {waiting}"]
    clear, doubt = clear_gain(), gain_in_doubt()
    first = rows[f"run {a100}"]
    assert first["device"] == "NVIDIA A100 80GB PCIe" and first["status"] == "done"
    assert first["steady speedup"] == f"{clear['steady_state_speedup']:.2f}x"
    low, high = clear["speedup_ci95"]
    assert first["95% interval"] == f"{low:.2f}-{high:.2f}x" and low > 1
    assert first["break-even"] == words.break_even(clear) and "at the steady rates" in first["break-even"]
    assert first["compile time"].endswith(" s") and first["published"].startswith("tutorial ResNet50 on NVIDIA A100")
    second = rows[f"run {h100}"]
    assert doubt["speedup_ci95"][0] < 1 < doubt["speedup_ci95"][1]
    assert "steady rates" not in second["break-even"]  # a gain in doubt projects nothing
    assert second["published"] == "none for this GPU and model"
    third = rows[f"run {waiting}"]  # before it starts: its pinned lane's device, its state
    assert third["device"] == "NVIDIA H100[2J" and third["status"].startswith("queued")
    assert third["steady speedup"] == third["break-even"] == "-"
    assert group.label(store.get_run(waiting)) == f"run {waiting}: NVIDIA H100[2J"
    assert not group.finished
    store.finish_run(waiting, "cancelled")


def test_races_that_differ_in_more_than_their_device_are_said_to(store):
    one = done_race(store, "NVIDIA A100", clear_gain())
    other = done_race(
        store, "NVIDIA H100", clear_gain(), spec=quick_spec(device="cuda", model="resnet50", batch_size=64)
    )
    assert comparison(store, [one, other]).notes == [
        "These races differ in more than their device (batch): not one race on several devices."
    ]


def test_status_of_several_runs_prints_them_side_by_side_in_a_terminal(store, capsys):
    a100 = done_race(store, "NVIDIA A100 80GB PCIe\x1b[2J", clear_gain())
    h100 = done_race(store, "NVIDIA H100 80GB HBM3", gain_in_doubt())
    assert main(["status", str(a100), str(h100)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out
    lines = out.splitlines()
    assert lines[0].split() == [
        "run", "device", "status", "compile", "time", "steady", "speedup", "95%", "interval", "break-even"
    ]  # fmt: skip
    assert lines[1].startswith(f"run {a100}  NVIDIA A100 80GB PCIe[2J  done")
    assert lines[2].startswith(f"run {h100}  NVIDIA H100 80GB HBM3")
    assert "published, for scale" in out and "tutorial ResNet50 on NVIDIA A100-SXM4-40GB" in out
    assert out == "\n".join(comparison_lines(comparison(store, [a100, h100]))) + "\n"


def test_waiting_for_the_group_ends_with_the_comparison_and_says_a_failure(store, capsys):
    a100 = done_race(store, "NVIDIA A100", clear_gain())
    h100 = store.create_run("race", SPEC.to_dict(), "ann", "cuda:0", status="running", host="box")
    store.finish_run(h100, "failed", error="agent box stopped")
    assert follow_group(store, [a100, h100]) == 1  # EXIT_FAILED: one of them failed
    out = capsys.readouterr()
    assert f"run {h100} " in out.err and "failed: agent box stopped" in out.err
    (row,) = [line for line in out.out.splitlines() if line.startswith(f"run {h100} ")]
    assert row.split()[2:4] == ["box", "cuda:0"] and "failed: agent box stopped" in row  # its box and lane


def test_submit_on_every_gpu_type_says_how_to_see_its_races_side_by_side(store, capsys, sleepers):
    from test_fleet import QUICK_CLI_ON_ANY_DEVICE

    for name, box in (("NVIDIA A100", "a100-box"), ("NVIDIA H100", "h100-box")):
        lane = {"lane": "cuda:0", "device_name": name, "caps": AMPERE.to_dict()}
        fleet.register(store, box, 1, "lab", "2.14.1", [lane])
    assert main(["submit", "--every-gpu-type", *QUICK_CLI_ON_ANY_DEVICE]) == 0
    ids = [r.id for r in reversed(store.list_runs(kind="race"))]
    last = capsys.readouterr().out.splitlines()[-1]
    assert last == f"side by side: python -m core status {ids[0]} {ids[1]} (the Race page: ?compare={ids[0]},{ids[1]})"
    for run_id in ids:
        store.finish_run(run_id, "cancelled")
