"""Every kind of event a race records round-trips through its codec (core.engine.events): the
worker's row, written to the store and read back, carried in a bundle's JSON and imported, reads
back as the event it stores; it exports, imports and replays, and a real race with a replicate
process does so through the CLI."""

import json
import os
import subprocess
import sys
import time

import pytest
from support import QUICK_CLI, ROOT, quick_spec
from test_pages import app, record_probe

from core.engine import events
from core.engine.events import (
    BusyEvent,
    CompileEvent,
    EpochEvent,
    ReplicateEvent,
    StartEvent,
    StatusEvent,
    StepEvent,
)
from core.engine.intervals import ProcessResult
from core.runs.bundle import BundleError, export_bundle, import_bundle, summary_from_events, validate_bundle
from core.runs.store import Store
from core.view.replay import events_until, recording_from_bundle, recording_from_run, replay_state

SPEC = quick_spec(epochs=2, steps_per_epoch=4, replicates=1)
PROCESS = ProcessResult(
    number=2,
    speedup=1.08,
    log_half=0.02,
    eager_median_s=0.011,
    compiled_median_s=0.0102,
    steps=12,
    started="warm",
    wall_s=3.5,
)
# One event of each kind, as the trainer emits it, beside a race's ordinary steps and epochs.
SAMPLES = {
    "step": StepEvent("eager", "eval", 1, 1, 0.004, 2.1, 16),
    "epoch": None,  # every race below holds its epoch events
    "compile": CompileEvent("compiled", "train", 1, 1, "compiled forward"),
    "busy": BusyEvent("eager", 2, 1, 3, 0.4),
    "replicate": ReplicateEvent(PROCESS.to_dict()),
}


def race_rows(extra) -> list[dict]:
    """A finished 2 x 4-step race's rows written as the worker writes them, with `extra` at its end."""
    made = [
        event
        for epoch in (1, 2)
        for variant in ("eager", "compiled")
        for event in (
            *(StepEvent(variant, "train", epoch, (epoch - 1) * 4 + n, 0.01, 2.0, 16) for n in range(1, 5)),
            EpochEvent(variant, epoch, 0.04, None),
        )
    ]
    now = time.time()
    return [events.to_row(e, now + i * 0.01) for i, e in enumerate([*made, *([extra] if extra else [])])]


def test_every_stored_kind_has_a_sample_here():
    assert set(SAMPLES) == set(events.KINDS)
    for kind, event in SAMPLES.items():
        assert event is None or events.ROW_KINDS[kind] is type(event)


@pytest.mark.parametrize("kind", events.KINDS)
def test_each_kind_s_row_reads_back_as_the_event_it_stores(kind):
    event = SAMPLES[kind] or EpochEvent("compiled", 2, 0.04, 0.01)
    row = events.to_row(event, 1.0)
    assert row["kind"] == kind and events.from_row(row) == event
    assert events.from_row(json.loads(json.dumps(row))) == event  # as the store and a bundle keep it


@pytest.mark.parametrize("kind", events.KINDS)
def test_each_kind_s_event_comes_back_equal_from_the_store_and_from_an_imported_bundle(store, kind):
    """event -> row -> the store -> a bundle's JSON -> imported -> the store -> event, for every kind
    (a replicate's row at epoch 0 among them)."""
    event = SAMPLES[kind] or EpochEvent("compiled", 2, 0.04, None)  # the race's own last epoch
    run_id = store.create_run("race", SPEC.to_dict(), "ann", "cpu", status="done", started_at=time.time())
    store.append_events(run_id, race_rows(SAMPLES[kind]))
    (stored,) = [r for r in store.events_after(run_id) if r["kind"] == kind][-1:]
    assert events.from_row(stored) == event
    new_id = import_bundle(store, json.loads(json.dumps(export_bundle(store, run_id))), owner="bob")
    (imported,) = [r for r in store.events_after(new_id) if r["kind"] == kind][-1:]
    assert events.from_row(imported) == event
    assert type(event).from_row(imported) == event  # the class's own codec, as the module's dispatches


def test_no_event_that_is_not_stored_has_a_row():
    assert events.to_row(StatusEvent("eager", "training", 1, 2), 1.0) is None
    assert events.to_row(StartEvent({"device": "cpu"}), 1.0) is None
    assert all(issubclass(c, events.Stored) and c.kind == k for k, c in events.ROW_KINDS.items())


def test_a_row_this_app_did_not_write_reads_as_nothing():
    assert events.from_row({"kind": "replicate", "note": "not json"}) is None
    assert events.from_row({"kind": "busy", "variant": "eager", "epoch": 1}) is None  # no step
    assert events.from_row({"kind": "status"}) is None
    busy = events.to_row(SAMPLES["busy"], 1.0)
    for note in ("3.5", "\u0663", None):  # its last step is digits, as this app writes it
        assert events.from_row({**busy, "note": note}) is None
    first = events.to_row(ReplicateEvent({**PROCESS.to_dict(), "number": 1}), 1.0)
    assert events.from_row(first) is None  # the first process is the race's own, never a replicate


@pytest.mark.parametrize("kind", events.KINDS)
def test_each_kind_of_event_exports_imports_and_replays(store, kind):
    run_id = store.create_run("race", SPEC.to_dict(), "ann", "cpu", status="done", started_at=time.time())
    rows = race_rows(SAMPLES[kind])
    assert any(r["kind"] == kind for r in rows)
    store.append_events(run_id, rows)
    bundle = json.loads(json.dumps(export_bundle(store, run_id)))  # as a file carries it

    new_id = import_bundle(store, bundle, owner="bob")
    strip = lambda events: [{k: v for k, v in e.items() if k not in ("id", "run_id")} for e in events]  # noqa: E731
    assert strip(store.events_after(new_id)) == strip(store.events_after(run_id))

    recording = recording_from_bundle(bundle, "test")
    assert [e["kind"] for e in recording.events] == [r["kind"] for r in rows]
    assert replay_state(recording, events_until(recording, recording.duration_s))[0] == "done"
    if kind == "replicate":  # the imported race counts the replicate process as the trainer's did
        assert [p["number"] for p in store.get_run(new_id).summary["replicates"]] == [2]


def test_a_replicate_row_belongs_to_the_race_and_a_bundle_cannot_move_it_into_an_epoch(store):
    run_id = store.create_run("race", SPEC.to_dict(), "ann", "cpu", status="done", started_at=time.time())
    store.append_events(run_id, race_rows(SAMPLES["replicate"]))
    bundle = export_bundle(store, run_id)
    validate_bundle(bundle)
    moved = json.loads(json.dumps(bundle))
    moved["events"][-1]["epoch"] = 1
    with pytest.raises(BundleError, match=r"events\[20\]\.epoch of a replicate process's result must be 0"):
        validate_bundle(moved)
    stepped = json.loads(json.dumps(bundle))
    stepped["events"][0]["epoch"] = 0
    with pytest.raises(BundleError, match=r"events\[0\]\.epoch of a timed step must be from 1 to the race's 2"):
        validate_bundle(stepped)


def test_a_replicate_process_counts_once_in_a_bundle(store):
    run_id = store.create_run("race", SPEC.to_dict(), "ann", "cpu", status="done", started_at=time.time())
    store.append_events(run_id, race_rows(SAMPLES["replicate"]))
    bundle = export_bundle(store, run_id)
    twice = json.loads(json.dumps(bundle))
    twice["events"].append({**twice["events"][-1], "recorded_at": twice["events"][-1]["recorded_at"] + 1})
    with pytest.raises(BundleError, match="one replicate event per process"):
        validate_bundle(twice)
    renumbered = json.loads(json.dumps(bundle))
    renumbered["events"][-1]["step"] = 3  # its number says 2
    with pytest.raises(BundleError, match="one replicate event per process"):
        validate_bundle(renumbered)


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "core", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_a_real_race_with_a_replicate_exports_imports_and_replays(tmp_path):
    """The issue's own steps: a 2 x 12-step race with `--replicates 1`, `export`, then `import`."""
    path = str(tmp_path / "store.sqlite3")
    flags = [*QUICK_CLI[:-2], "--steps-per-epoch", "12", "--replicates", "1"]
    done = cli("submit", "--store", path, *flags, "--wait", "--json")
    assert done.returncode == 0, done.stderr
    store = Store(path)
    (run,) = store.list_runs(kind="race")
    assert run.status == "done", run.error
    assert len(run.summary["replicates"]) == 1 and any(e["kind"] == "replicate" for e in store.events_after(run.id))
    bundle = os.path.join(tmp_path, "run.json")
    exported = cli("export", str(run.id), "--store", path, "-o", bundle)
    assert exported.returncode == 0, exported.stderr
    imported = cli("import", bundle, "--store", path)
    assert imported.returncode == 0, imported.stderr + imported.stdout
    new = next(r for r in store.list_runs(kind="race") if r.imported)
    assert new.summary["steady_state_speedup"] == pytest.approx(run.summary["steady_state_speedup"])
    assert new.summary["replicates"] == run.summary["replicates"]
    recording = recording_from_run(store, run.id)  # "Run N here ..." on the Race page
    assert any(e["kind"] == "replicate" for e in recording.events)


def test_the_race_page_replays_a_race_with_a_replicate(store, sleepers):
    """Race page -> Replay a recorded run -> "Run N here ..." -> Play, as the issue found it failing."""
    record_probe(store)
    run_id = store.create_run("race", SPEC.to_dict(), "ann", "cpu", status="done", started_at=time.time())
    store.append_events(run_id, race_rows(SAMPLES["replicate"]))
    store.update_run(run_id, summary=summary_from_events(store.events_after(run_id), SPEC, {}))
    at = app(replay=f"run:{run_id}", speed="instant")
    assert not at.exception, at.exception
    assert not [e.value for e in at.error], [e.value for e in at.error]
    assert any(i.value.startswith("Replay at instant of a race") for i in at.info)
    assert {m.label for m in at.metric} >= {"Compile time", "Steady-state speedup", "Break-even"}
