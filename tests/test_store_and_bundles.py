"""The store under concurrent use, schema versioning, and run bundles (export, hostile import)."""

import json
import multiprocessing
import os
import sqlite3
import time

import pytest
from support import ROOT, quick_spec

from core.engine.reading import reading
from core.engine.spec import data_home
from core.runs.bundle import MAX_NOTE, BundleError, export_bundle, import_bundle, load_bundle_file, parse_bundle
from core.runs.run_files import run_files_dir
from core.runs.store import SCHEMA_VERSION, Store

BOTH_BACKENDS = True  # each test using `store` runs on SQLite and on PostgreSQL (tests/conftest.py)


def step(variant="eager", n=1, time_s=0.01, **extra):
    return {
        "kind": "step",
        "variant": variant,
        "phase": "train",
        "epoch": 1,
        "step": n,
        "time_s": time_s,
        "loss": 2.3,
        "samples": 8,
        **extra,
    }


def finished_run(store):
    run_id = store.create_run("race", quick_spec().to_dict(), "ann", "cpu", status="done", started_at=time.time())
    store.append_events(run_id, [step("eager", i) for i in range(1, 4)] + [step("compiled", i) for i in range(1, 4)])
    store.append_events(
        run_id,
        [
            {
                "kind": "epoch",
                "variant": "eager",
                "phase": "train",
                "epoch": 1,
                "step": 0,
                "time_s": 0.03,
                "eval_time_s": None,
            }
        ],
    )
    store.update_run(
        run_id,
        summary={"steady_state_speedup": 1.1, "speedup_ci95": [1.0, 1.2], "nested": {"a": [1, 2]}},
        environment={"device_type": "cpu", "torch": "2.x"},
        details={"compile": {"graphs": 1}},
    )
    return run_id


def test_the_store_records_its_schema_version_and_refuses_a_newer_one(tmp_path):
    path = str(tmp_path / "s.sqlite3")
    assert Store(path).schema_version() == SCHEMA_VERSION
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    conn.commit()
    conn.close()
    with pytest.raises(RuntimeError, match="newer than this Compile Lab"):
        Store(path)


@pytest.mark.sqlite_only  # SQLite's file itself
def test_the_store_uses_wal_so_readers_do_not_block_writers(store):
    assert store._db._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_events_after_returns_only_new_events_in_order(store):
    run_id = finished_run(store)
    events = store.events_after(run_id)
    assert [e["step"] for e in events[:3]] == [1, 2, 3]
    assert store.events_after(run_id, events[4]["id"]) == events[5:]
    assert store.events_after(run_id, events[-1]["id"]) == []
    assert len(store.events_after(run_id, 0, limit=2)) == 2


def test_delete_removes_a_run_and_its_events(store):
    run_id = finished_run(store)
    store.delete_run(run_id)
    assert store.get_run(run_id) is None and store.events_after(run_id) == []


def _writer(path, run_id, batches):
    s = Store(path)
    for b in range(batches):
        s.append_events(run_id, [step("eager", b * 10 + i) for i in range(10)], {"progress": b / batches})


def test_a_reader_and_a_writer_at_once_never_see_database_is_locked(store):
    run_id = store.create_run("race", {}, "ann", "cpu", status="running")
    writers = [
        multiprocessing.get_context("spawn").Process(target=_writer, args=(store.path, run_id, 300)) for _ in range(2)
    ]
    for w in writers:
        w.start()
    reader, last, seen = Store(store.path), 0, 0
    while any(w.is_alive() for w in writers):
        new = reader.events_after(run_id, last)  # raises if the store were locked
        reader.get_run(run_id)
        if new:
            last, seen = new[-1]["id"], seen + len(new)
    for w in writers:
        w.join()
        assert w.exitcode == 0
    seen += len(reader.events_after(run_id, last))
    assert seen == 2 * 300 * 10


def test_export_then_import_gives_an_ordinary_run_marked_imported(store, tmp_path):
    run_id = finished_run(store)
    bundle = export_bundle(store, run_id)
    path = tmp_path / "bundle.json"
    path.write_text(json.dumps(bundle))
    new_id = import_bundle(store, load_bundle_file(str(path)), owner="bob")
    new, old = store.get_run(new_id), store.get_run(run_id)
    assert new.imported == 1 and new.owner == "bob" and new.status == "done"
    assert new.environment == old.environment and new.params["model"] == "mlp"
    # The bundle's own numbers are not trusted: the summary is recomputed from its events.
    assert old.summary["steady_state_speedup"] == 1.1 and new.summary["steady_state_speedup"] == pytest.approx(1.0)
    assert "nested" not in new.summary and reading(new.summary)
    strip = lambda events: [{k: v for k, v in e.items() if k not in ("id", "run_id")} for e in events]  # noqa: E731
    assert strip(store.events_after(new_id)) == strip(store.events_after(run_id))
    assert "owner" not in json.dumps(bundle["run"])


def test_export_turns_a_diverged_nan_loss_into_null(store):
    run_id = store.create_run("race", quick_spec().to_dict(), "ann", "cpu", status="done")
    store.append_events(run_id, [step(loss=float("nan"))])
    bundle = export_bundle(store, run_id)
    assert bundle["events"][0]["loss"] is None
    import_bundle(store, json.loads(json.dumps(bundle, allow_nan=False)), "ann")


def good_bundle(store):
    return export_bundle(store, finished_run(store))


def mutate(path, value):
    def apply(bundle):
        target = bundle
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        return bundle

    return apply


def test_a_summary_missing_keys_or_with_wrong_types_is_replaced_not_trusted(store):
    bundle = good_bundle(store)
    bundle["run"]["summary"] = {"steady_state_speedup": "fast", "eager_peak_memory_bytes": "lots"}
    run = store.get_run(import_bundle(store, bundle, "bob"))
    assert run.summary["steady_state_speedup"] == pytest.approx(1.0)
    assert run.summary["eager_peak_memory_bytes"] is None and "speedup_ci95" in run.summary


def test_a_cifar10_run_from_another_machine_imports_without_its_dataset_folder(store):
    bundle = good_bundle(store)
    bundle["run"]["params"].update(model="resnet18", data="cifar10", data_dir="/mnt/gpu-box/cifar")
    run = store.get_run(import_bundle(store, bundle, "bob"))
    assert run.params["data"] == "cifar10" and run.params["data_dir"] is None


HOSTILE = {
    "wrong format": mutate(["format"], "something-else"),
    "future version": mutate(["version"], 99),
    "run not an object": mutate(["run"], [1, 2]),
    "not a race": mutate(["run", "kind"], "probe"),
    "path-like model name": mutate(["run", "params", "model"], "../../etc/passwd"),
    "unknown spec field": mutate(["run", "params", "shell"], "rm -rf /"),
    "batch size as text": mutate(["run", "params", "batch_size"], "64"),
    "huge batch size": mutate(["run", "params", "batch_size"], 10**12),
    "still running": mutate(["run", "status"], "running"),
    "timestamp far in the future": mutate(["run", "created_at"], 1e12),
    # Of a bundle's summary only what events do not carry is read (bundle.CLAIMED_SUMMARY), and checked.
    "summary too deep": mutate(
        ["run", "summary", "run_to_run"], {"b": {"c": {"d": {"e": {"f": {"g": {"h": {"i": {}}}}}}}}}
    ),
    "huge number in summary": mutate(["run", "summary", "eager_peak_memory_bytes"], 1e300),
    "events not a list": mutate(["events"], {"0": {}}),
    "path-like variant": mutate(["events", 0, "variant"], "../compiled"),
    "step time as text": mutate(["events", 0, "time_s"], "fast"),
    "negative step time": mutate(["events", 0, "time_s"], -1.0),
    "boolean epoch": mutate(["events", 0, "epoch"], True),
    "huge step number": mutate(["events", 0, "step"], 10**18),
    "event not an object": mutate(["events", 1], "x"),
    "device type not text": mutate(["run", "environment", "device_type"], 5),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_malformed_or_hostile_bundle_is_rejected_and_writes_nothing(store, name):
    bundle = HOSTILE[name](good_bundle(store))
    runs_before = len(store.list_runs())
    events_before = store._one("SELECT COUNT(*) FROM events")[0]
    with pytest.raises(BundleError) as info:
        import_bundle(store, bundle, "mallory")
    assert str(info.value)  # a message a person can read
    assert len(store.list_runs()) == runs_before
    assert store._one("SELECT COUNT(*) FROM events")[0] == events_before


@pytest.mark.sqlite_only  # SQLite's file itself
def test_an_event_note_is_kept_up_to_its_cap_and_a_longer_one_refuses_the_bundle(store):
    bundle = good_bundle(store)
    bundle["events"][0]["note"] = "n" * MAX_NOTE
    run_id = import_bundle(store, bundle, "bob")
    assert store.events_after(run_id)[0]["note"] == "n" * MAX_NOTE
    runs_before = len(store.list_runs())
    bundle["events"][0]["note"] = "n" * (MAX_NOTE + 1)
    with pytest.raises(BundleError, match=rf"events\[0\]\.note must be text of at most {MAX_NOTE} characters"):
        import_bundle(store, bundle, "mallory")
    assert len(store.list_runs()) == runs_before


@pytest.mark.sqlite_only  # a SQLite trigger stands in for the refusal
def test_a_bundle_the_store_refuses_midway_lands_not_at_all(store):
    """One transaction or nothing: a store that refuses the third event (here a trigger; in life a
    full disk, a constraint) keeps neither the run nor its first two events."""
    bundle = good_bundle(store)
    runs_before, events_before = (
        len(store.list_runs()),
        store._one("SELECT COUNT(*) FROM events")[0],
    )
    store._db._conn.execute(
        f"CREATE TRIGGER refuse_third BEFORE INSERT ON events WHEN (SELECT COUNT(*) FROM events) >= {events_before + 2} "
        "BEGIN SELECT RAISE(ABORT, 'refused'); END"
    )
    with pytest.raises(BundleError, match="nothing was imported"):
        import_bundle(store, bundle, "bob")
    assert len(store.list_runs()) == runs_before
    assert store._one("SELECT COUNT(*) FROM events")[0] == events_before


@pytest.mark.parametrize(
    "raw", [b"not json", b"[1, 2]", b'{"format": "compile-lab/run-bundle", "version": 1, "x": NaN}']
)
def test_unparseable_bundles_are_rejected(raw):
    with pytest.raises(BundleError):
        parse_bundle(raw)


def test_a_missing_or_oversized_file_is_a_clear_error(tmp_path, monkeypatch):
    with pytest.raises(BundleError, match="cannot read"):
        load_bundle_file(str(tmp_path / "missing.json"))
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 2048)
    monkeypatch.setattr("core.runs.bundle.MAX_BUNDLE_BYTES", 1024)
    with pytest.raises(BundleError, match="larger than"):
        load_bundle_file(str(big))


VERSION_4_RUNS = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta VALUES ('schema_version', '4');
CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, params TEXT NOT NULL,
  owner TEXT NOT NULL, device_key TEXT NOT NULL, status TEXT NOT NULL, phase TEXT NOT NULL DEFAULT '',
  progress REAL NOT NULL DEFAULT 0, created_at REAL NOT NULL, started_at REAL, finished_at REAL,
  heartbeat_at REAL, pid INTEGER, host TEXT, time_limit_s REAL, cancel_requested INTEGER NOT NULL DEFAULT 0,
  environment TEXT, summary TEXT, details TEXT, error TEXT, imported INTEGER NOT NULL DEFAULT 0,
  client TEXT, sweep_id INTEGER);
"""


def test_a_version_4_store_opens_with_its_runs_and_goes_on_from_their_ids(tmp_path):
    path = str(tmp_path / "old.sqlite3")
    conn = sqlite3.connect(path)
    conn.executescript(VERSION_4_RUNS)
    for kind in ("probe", "race", "demo", "race", "race", "probe"):  # ids 1..6
        conn.execute(
            "INSERT INTO runs (kind, params, owner, device_key, status, created_at) VALUES (?, '{}', 'a', 'cpu', 'done', 1)",
            (kind,),
        )
    conn.execute("DELETE FROM runs WHERE id = 5")
    conn.commit()
    conn.close()
    store = Store(path)
    assert store.schema_version() == SCHEMA_VERSION == 6
    assert [r.id for r in store.list_runs(kind="race")] == [4, 2]
    new = store.create_run("race", {}, "a", "cpu")
    assert new == 7 and store.get_run(new).race_number is None  # the run id is the one number; 5 is not reused
    assert [r.id for r in Store(path).list_runs(kind="race")] == [7, 4, 2]  # opening again changes nothing


def test_an_exported_bundle_names_no_path_of_this_server(store):
    run_id = finished_run(store)
    trace = os.path.join(run_files_dir(store.path, run_id), "eager.trace.json")
    profile = {"steps": 3, "host_s_per_step": 0.01, "device_s_per_step": 0.0, "trace": trace}
    kept = os.path.join(store.files_dir, "kept-events", f"run-{run_id}.json")
    store.update_run(
        run_id,
        params={**quick_spec().to_dict(), "data_dir": os.path.join(data_home(), "datasets")},
        summary={"steady_state_speedup": 1.1, "profile": {"eager": profile, "compiled": None}},
        environment={"device_type": "cpu", "torch": "2.x", "python": os.path.join(ROOT, ".venv", "bin", "python")},
        error=f"the store was away: kept in {kept}, delivered later",
    )
    bundle = export_bundle(store, run_id)
    text = json.dumps(bundle)
    for folder in (store.files_dir, data_home(), ROOT):
        assert folder not in text
    assert bundle["run"]["summary"]["profile"]["eager"]["trace"] == "eager.trace.json"
    assert bundle["run"]["params"]["data_dir"] is None
    assert bundle["run"]["error"] == f"the store was away: kept in run-{run_id}.json, delivered later"
    assert store.get_run(import_bundle(store, bundle, "bob")).summary["profile"]["eager"]["steps"] == 3


def test_an_imported_bundle_keeps_no_path_it_names(store):
    bundle = export_bundle(store, finished_run(store))
    bundle["run"]["params"].update(model="file:mine.py", model_file="/srv/secret/models/mine.py", data_dir="/srv/x")
    profile = {"steps": 3, "host_s_per_step": 0.01, "device_s_per_step": 0.0, "trace": "/srv/secret/eager.json"}
    bundle["run"]["summary"] = {"profile": {"eager": profile}}
    run = store.get_run(import_bundle(store, bundle, "bob"))
    assert run.params["model_file"] == "mine.py" and run.params["data_dir"] is None
    assert "/srv" not in json.dumps([run.params, run.summary, run.environment, run.details])
