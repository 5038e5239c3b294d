"""Mistakes at the command line end in one clear line and exit status 2, never a traceback: a store
that is a folder or not a database, a row limit SQLite cannot hold, an export to a folder, a reader
that stops early (`status | head -1`), a bundle event without `recorded_at`."""

import json
import os
import sqlite3
import subprocess
import sys

import pytest
from support import ROOT
from test_store_and_bundles import finished_run

from core.runs.bundle import BundleError, export_bundle, import_bundle
from core.runs.store import Store, StoreError


def cli(*args, stdin=None):
    return subprocess.run(
        [sys.executable, "-m", "core", *args], cwd=ROOT, capture_output=True, text=True, timeout=120, input=stdin
    )


def one_clear_line(done, *words):
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith("error: ")
    for word in words:
        assert word in done.stderr


@pytest.fixture
def not_a_store(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("these are my notes, not a database\n" * 100)
    return path


@pytest.mark.parametrize("command", [["runs"], ["status"], ["status", "1"], ["export", "1"], ["cancel", "1"]])
def test_a_store_that_is_a_folder_is_one_line(tmp_path, command):
    one_clear_line(cli(*command, "--store", str(tmp_path)), "is a folder")


@pytest.mark.parametrize("command", [["runs"], ["status"], ["delete", "3"]])
def test_a_store_that_is_not_a_database_is_one_line_and_the_file_is_untouched(not_a_store, command):
    before = not_a_store.read_bytes()
    one_clear_line(cli(*command, "--store", str(not_a_store)), "is not a Compile Lab store")
    assert not_a_store.read_bytes() == before


def test_importing_into_a_store_that_is_not_one_is_one_line(tmp_path, not_a_store):
    source = Store(str(tmp_path / "good.sqlite3"))
    bundle = tmp_path / "run.json"
    bundle.write_text(json.dumps(export_bundle(source, finished_run(source))))
    one_clear_line(cli("import", str(bundle), "--store", str(not_a_store)), "is not a Compile Lab store")
    one_clear_line(cli("import", str(bundle), "--store", str(tmp_path)), "is a folder")


def test_another_programs_sqlite_database_is_left_alone(tmp_path):
    path = tmp_path / "places.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE bookmarks (url TEXT)")
    conn.commit()
    conn.close()
    one_clear_line(cli("runs", "--store", str(path)), "is a SQLite database but not a Compile Lab store")
    tables = {r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == {"bookmarks"}
    with pytest.raises(StoreError):
        Store(str(path))


@pytest.mark.parametrize("limit", ["99999999999999999999", str(2**63), "0", "-1", "many"])
def test_a_runs_limit_sqlite_cannot_hold_is_one_line(tmp_path, limit):
    one_clear_line(cli("runs", "--limit", limit, "--store", str(tmp_path / "s.sqlite3")), "--limit")


def test_the_largest_runs_limit_sqlite_holds_works(tmp_path):
    done = cli("runs", "--limit", str(2**63 - 1), "--store", str(tmp_path / "s.sqlite3"))
    assert done.returncode == 0, done.stderr


def test_export_to_a_folder_or_a_missing_folder_is_one_line(tmp_path):
    store = Store(str(tmp_path / "s.sqlite3"))
    run_id = finished_run(store)
    for target, words in ((tmp_path, "Is a directory"), (tmp_path / "missing" / "run.json", "No such file")):
        one_clear_line(
            cli("export", str(run_id), "-o", str(target), "--store", store.path), f"cannot write {target}", words
        )
    assert cli("export", str(run_id), "-o", str(tmp_path / "run.json"), "--store", store.path).returncode == 0


@pytest.fixture
def busy_store(tmp_path):
    """A store with many queued runs, so `status` writes more than a pipe holds."""
    store = Store(str(tmp_path / "s.sqlite3"))
    with store.transaction() as c:
        for i in range(3000):
            store._insert_run(
                c,
                {"kind": "race", "params": {"model": "mlp"}, "owner": f"cli:user{i}", "device_key": "cpu"}
                | {"status": "queued", "phase": "queued", "created_at": 1.0},
            )
    # Paused: `status` moves the queue along, and 3,000 real races chained one after another would
    # outlive the test and load the machine for the rest of the suite.
    store.set_queue_paused(True)
    yield store
    with store.transaction() as c:
        c.execute("UPDATE runs SET status = 'cancelled' WHERE status = 'queued'")


def test_status_piped_into_head_stops_quietly(busy_store):
    done = subprocess.run(
        f"{sys.executable} -m core status --store {busy_store.path} | head -1",
        shell=True,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 1
    assert done.stderr == ""  # no BrokenPipeError, no "Exception ignored"


@pytest.mark.parametrize("command", [["status"], ["runs", "--limit", "10"]])
def test_a_reader_that_is_already_gone_gets_no_traceback(busy_store, command):
    proc = subprocess.Popen(
        [sys.executable, "-m", "core", *command, "--store", busy_store.path],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    proc.stdout.close()  # the reader leaves before the first line is written
    stderr = proc.stderr.read()
    assert proc.wait(timeout=300) == 141  # as a shell reports a program stopped by a closed pipe
    assert stderr == ""


def test_a_bundle_event_without_recorded_at_is_rejected_naming_the_field(tmp_path):
    store = Store(str(tmp_path / "s.sqlite3"))
    bundle = export_bundle(store, finished_run(store))
    del bundle["events"][2]["recorded_at"]
    with pytest.raises(BundleError, match=r"^events\[2\]\.recorded_at must be a number"):
        import_bundle(store, bundle, "ann")
    assert len(store.list_runs()) == 1  # nothing written
    path = tmp_path / "run.json"
    path.write_text(json.dumps(bundle))
    one_clear_line(cli("import", str(path), "--store", store.path), "events[2].recorded_at")


def test_an_insert_the_store_refuses_is_a_bundle_error_not_a_traceback(tmp_path, monkeypatch):
    store = Store(str(tmp_path / "s.sqlite3"))
    bundle = export_bundle(store, finished_run(store))

    def refuse(*args, **kwargs):
        raise sqlite3.IntegrityError("NOT NULL constraint failed: events.recorded_at")

    monkeypatch.setattr(store, "import_run", refuse)
    with pytest.raises(BundleError, match="nothing was imported"):
        import_bundle(store, bundle, "ann")


def test_the_store_error_names_the_path_in_the_app_process_too(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPILE_LAB_STORE", str(tmp_path))
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(os.path.join(ROOT, "streamlit_app.py"), default_timeout=60).run()
    assert not at.exception
    assert any("cannot open its store" in e.value and "is a folder" in e.value for e in at.error)


def test_the_runs_table_keeps_its_headings_apart_and_its_columns_aligned(tmp_path):
    path = str(tmp_path / "s.sqlite3")
    store = Store(path)
    finished_run(store)
    done = cli("runs", "--store", path)
    assert done.returncode == 0, done.stderr
    header, row = done.stdout.splitlines()[:2]
    assert "precision  mode" in header and "precisionmode" not in header
    for heading in ("status", "model", "precision", "mode"):  # each value starts under its heading
        assert row[header.index(heading) - 1] == " " and row[header.index(heading)] != " ", (header, row)
