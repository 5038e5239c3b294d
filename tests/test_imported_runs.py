"""An imported race was measured on another machine: it never feeds this device's estimates, even
when its bundle claims this device's name, and it is labelled imported wherever it is offered."""

import json
import os

from support import ROOT

from core.runs.bundle import import_bundle
from core.runs.store import Store
from core.view.replay import stored_race_label
from core.view.run_screen.layout import expected_compile

RECORDING = os.path.join(ROOT, "assets", "recordings", "cpu-compile-never-pays-off.json")


def bundle_claiming(device_name: str) -> dict:
    with open(RECORDING) as fh:
        data = json.load(fh)
    data["run"]["environment"]["device_name"] = device_name
    return data


def test_an_imported_race_never_feeds_this_devices_compile_estimate(tmp_path):
    store = Store(str(tmp_path / "store.sqlite3"))
    data = bundle_claiming("This Box CPU")
    params = data["run"]["params"]
    imported = import_bundle(store, data, "visitor:a")
    theirs = store.get_run(imported).summary["compile_time_s"]
    assert theirs > 0
    live = store.create_run("race", params, "visitor:b", "cpu", status="running")
    store.update_run(live, environment={"device_name": "This Box CPU"})
    expected, estimated = expected_compile(store, store.get_run(live))
    assert estimated, "with only an imported race to go by, the estimate is the rough one, marked so"
    assert expected != theirs
    measured = store.create_run("race", params, "visitor:b", "cpu", status="done")
    store.update_run(measured, environment={"device_name": "This Box CPU"}, summary={"compile_time_s": 12.5})
    assert expected_compile(store, store.get_run(live)) == (12.5, False)  # a race measured here counts


def test_the_replay_picker_labels_an_imported_race_as_imported(tmp_path):
    store = Store(str(tmp_path / "store.sqlite3"))
    imported = import_bundle(store, bundle_claiming("x"), "visitor:a")
    here = store.create_run("race", {"model": "mlp", "batch_size": 64}, "visitor:a", "cpu", status="done")
    assert stored_race_label(store.get_run(imported)).startswith(f"Run {imported} (imported): mlp, batch 64")
    assert stored_race_label(store.get_run(here)) == f"Run {here} here: mlp, batch 64"
