"""The Race page across a fleet (issue 27): the form's device-type chooser ("NVIDIA H100: 1 free,
1 busy") whose choice reaches the job (pinned to an idle lane of that type), Race on every GPU type
and the comparison it opens (?compare=12,13: a table, the race charts one colour per device, each
race opened by its id); on one box without agents the form is as it was. The fleet's boxes are
stand-in agent registrations: nothing here runs on a GPU."""

from support import AMPERE, quick_spec
from test_pages import app, chart_specs, record_probe

from app_pages.device_races import ANY_GPU_LABEL, CHOOSER_KEY
from core.engine import analysis
from core.runs import fleet

EVERY_TYPE = "Race on every GPU type (2)"


def gpu(index, name):
    return {"lane": f"cuda:{index}", "device_name": name, "memory_bytes": 80 * 2**30, "caps": AMPERE.to_dict()}


def gpu_fleet(store):
    fleet.register(store, "a100-box", 1, "lab-1", "2.14.1", [gpu(0, "NVIDIA A100")])
    fleet.register(store, "h100-box", 2, "lab-2", "2.14.1", [gpu(0, "NVIDIA H100"), gpu(1, "NVIDIA H100")])


def button(at, label):
    return next(b for b in at.button if b.label == label)


def measured(store, run_id, device_name):
    """A finished race of a few steps on `device_name`, as its agent's worker would leave it."""
    eager, compiled = [0.02] * 8, [0.5] + [0.01] * 7
    store.append_events(
        run_id,
        [
            {"kind": "step", "variant": v, "phase": "train", "epoch": 1, "step": i, "time_s": t, "loss": 1.0}
            for v, times in (("eager", eager), ("compiled", compiled))
            for i, t in enumerate(times, start=1)
        ],
    )
    store.update_run(run_id, environment={"device_type": "cuda", "device_name": device_name, "torch": "2.14.1"})
    store.finish_run(run_id, "done", summary=analysis.summarize(eager, compiled, [0.16], [0.57], 16))


def test_on_one_box_without_agents_the_race_form_is_as_it_was(store, sleepers):
    record_probe(store)
    at = app()
    assert not at.exception
    assert CHOOSER_KEY not in [s.key for s in at.selectbox]
    assert not [b for b in at.button if b.label.startswith("Race on every GPU type")]


def test_the_forms_device_type_reaches_the_job_on_an_idle_lane_of_that_type(store, sleepers):
    gpu_fleet(store)
    busy = store.create_run(
        "race", quick_spec(device="cuda").to_dict(), "bob", "cuda:0", status="running", host="h100-box"
    )
    at = app()
    assert not at.exception, at.exception
    chooser = at.selectbox(key=CHOOSER_KEY)
    assert chooser.options == [ANY_GPU_LABEL, "NVIDIA A100: 1 free, 0 busy", "NVIDIA H100: 1 free, 1 busy"]
    chooser.set_value("NVIDIA H100").run()
    # Its words change with the counts: the choice stays the type it named.
    other = store.create_run(
        "race", quick_spec(device="cuda").to_dict(), "cy", "cuda:1", status="running", host="h100-box"
    )
    at.run()
    assert at.selectbox(key=CHOOSER_KEY).value == "NVIDIA H100"
    assert "NVIDIA H100: 0 free, 2 busy" in at.selectbox(key=CHOOSER_KEY).options
    store.finish_run(other, "cancelled")
    at.run()
    assert at.selectbox(key=CHOOSER_KEY).value == "NVIDIA H100"
    button(at, "Launch").click().run()
    assert not at.exception, at.exception
    run = store.get_run(int(at.query_params["run"]))
    assert (run.host, run.device_key, run.status) == ("h100-box", "cuda:1", "queued")  # only that box's agent takes it
    for run_id in (busy, run.id):
        store.finish_run(run_id, "cancelled")


def test_race_on_every_gpu_type_opens_its_races_side_by_side(store, sleepers):
    gpu_fleet(store)
    at = app()
    button(at, EVERY_TYPE).click().run()
    assert not at.exception, at.exception
    ids = [int(i) for i in at.query_params["compare"].split(",")]
    runs = [store.get_run(i) for i in ids]
    assert [(r.host, r.device_key, r.status) for r in runs] == [
        ("a100-box", "cuda:0", "queued"),
        ("h100-box", "cuda:0", "queued"),
    ]
    assert "run" not in at.query_params
    assert "The same race on every GPU type" in [s.value for s in at.main.subheader]
    table = at.dataframe[-1].value
    assert list(table["device"]) == ["NVIDIA A100", "NVIDIA H100"] and all(table["status"].str.startswith("queued"))
    assert any("The charts appear once the races start measuring" in i.value for i in at.info)

    for run_id, name in zip(ids, ("NVIDIA A100 80GB PCIe", "NVIDIA H100 80GB HBM3")):
        measured(store, run_id, name)
    at = app(compare=",".join(map(str, ids)))
    assert not at.exception, at.exception
    table = at.dataframe[-1].value
    assert list(table["status"]) == ["done", "done"] and all(table["steady speedup"].str.endswith("x"))
    assert table["published"][0].startswith("tutorial ResNet50 on NVIDIA A100-SXM4-40GB")  # the form's resnet50
    assert table["published"][1] == "none for this GPU and model"
    overlays = [c for c in chart_specs(at) if c.get("encoding", {}).get("color", {}).get("field") == "run"]
    labels = [f"run {ids[0]}: NVIDIA A100 80GB PCIe", f"run {ids[1]}: NVIDIA H100 80GB HBM3"]
    assert len(overlays) == 2, "the race charts: cumulative time and step time"
    assert all(c["encoding"]["color"]["scale"]["domain"] == labels for c in overlays)  # one colour per device
    button(at, f"Open run {ids[1]}").click().run()
    assert not at.exception and at.query_params["run"] == str(ids[1]) and "compare" not in at.query_params


def test_a_link_to_races_that_are_not_there_says_so(store, sleepers):
    record_probe(store)
    at = app(compare="99999")
    assert not at.exception
    assert [w.value for w in at.warning if "There is no race 99999" in w.value]
