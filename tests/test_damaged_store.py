"""A damaged page in the events table (a disk fault, a copy taken mid-write): the run it hits is a
clear message naming the run and what can still be read, and every other run reads as before."""

import os
import sqlite3

import pytest

from core.runs.bundle import BundleError, export_bundle
from core.runs.store import EVENT_CHUNK, DamagedEvents, Store
from core.view.compare import PAGE_SIZE

STEPS = 4 * EVENT_CHUNK


def steps(n: int) -> list[dict]:
    return [
        dict(kind="step", variant="eager", phase="train", epoch=1, step=i + 1, time_s=0.01, loss=1.0, samples=8)
        for i in range(n)
    ]


def damage_a_page_of_events(path: str, which: float = 0.5) -> None:
    """Overwrite one leaf page of the events table, part way through it, with garbage."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    pages = [p for (p,) in conn.execute("SELECT pageno FROM dbstat WHERE name = 'events' AND pagetype = 'leaf'")]
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    page = sorted(pages)[int(len(pages) * which)]
    with open(path, "r+b") as fh:
        fh.seek((page - 1) * size)
        fh.write(b"\xff" * size)


@pytest.fixture
def damaged(tmp_path):
    path = str(tmp_path / "store.sqlite3")
    store = Store(path)
    hit = store.create_run("race", {}, "someone", "cpu", status="done")
    store.append_events(hit, steps(STEPS))
    store.close()
    damage_a_page_of_events(path)
    return Store(path), hit


def test_a_damaged_page_names_the_run_and_keeps_what_lies_before_it(damaged):
    store, hit = damaged
    with pytest.raises(DamagedEvents) as caught:
        store.events_after(hit)
    readable = caught.value.readable
    assert 0 < len(readable) < STEPS
    assert [e["step"] for e in readable] == list(range(1, len(readable) + 1))  # oldest first, none skipped
    assert f"run {hit}'s events are damaged" in str(caught.value)
    assert f"the {len(readable):,} recorded before the damage can still be read" in str(caught.value)
    assert store.get_run(hit).status == "done"  # the run's row is still there


def test_export_of_a_damaged_run_is_a_message_not_a_traceback(damaged):
    store, hit = damaged
    with pytest.raises(BundleError, match=f"cannot export it whole: run {hit}'s events are damaged"):
        export_bundle(store, hit)


def test_reading_in_chunks_returns_every_event_of_a_sound_store(tmp_path):
    store = Store(str(tmp_path / "store.sqlite3"))
    run = store.create_run("race", {}, "someone", "cpu", status="done")
    store.append_events(run, steps(2 * EVENT_CHUNK + 7))
    events = store.events_after(run)
    assert [e["step"] for e in events] == list(range(1, 2 * EVENT_CHUNK + 8))
    assert len(store.events_after(run, events[EVENT_CHUNK]["id"])) == EVENT_CHUNK + 6
    assert len(store.events_after(run, limit=EVENT_CHUNK + 3)) == EVENT_CHUNK + 3


def test_a_locked_store_is_not_called_damaged(tmp_path, monkeypatch):
    store = Store(str(tmp_path / "store.sqlite3"))
    run = store.create_run("race", {}, "someone", "cpu", status="done")

    class Locked:
        def execute(self, *_):
            raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(store._db, "_conn", Locked())
    with pytest.raises(sqlite3.OperationalError):
        store.events_after(run)
    assert os.path.exists(store.path)


def test_the_race_page_shows_a_damaged_run_with_what_can_be_read(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest
    from test_pages import APP, record_probe, record_race

    path = str(tmp_path / "store.sqlite3")
    monkeypatch.setenv("COMPILE_LAB_STORE", path)
    store = Store(path)
    record_probe(store)
    run_id = record_race(store, "done", steps=STEPS // 2)
    store.close()
    damage_a_page_of_events(path)
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["run"] = str(run_id)
    at.run()
    assert not at.exception, at.exception
    warnings = [w.value for w in at.warning]
    assert any("events are damaged" in w and f"run {run_id}" in w for w in warnings)
    assert any("Part of this run cannot be read" in w for w in warnings)


def test_the_live_feed_of_a_damaged_run_serves_what_can_be_read(tmp_path, monkeypatch):
    from starlette.applications import Starlette
    from starlette.testclient import TestClient
    from test_pages import record_race

    from app_pages.run_screen import feed as feed_routes

    path = str(tmp_path / "store.sqlite3")
    monkeypatch.setenv("COMPILE_LAB_STORE", path)
    monkeypatch.setattr(feed_routes, "_served", type(feed_routes._served)())
    store = Store(path)
    run_id = record_race(store, "done", steps=STEPS // 2)
    store.close()
    damage_a_page_of_events(path)
    http = TestClient(Starlette(routes=feed_routes.routes()), raise_server_exceptions=True)
    response = http.get(f"/api/live/{run_id}")
    assert response.status_code == 200  # not a 500 (and no traceback in the log)
    assert response.json()["damaged"] is True  # the viewer's page says part of it cannot be read
    counts = response.json()["counts"]
    assert 0 < counts["eager"] + counts["compiled"] < 2 * (STEPS // 2)  # what lies before the damage


# -- a damaged page of the runs table (issue 35) ---------------------------------------------------


def damage_a_page_of_runs(path: str) -> None:
    """Overwrite one leaf page of the runs table, half way through it, with garbage."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    pages = sorted(p for (p,) in conn.execute("SELECT pageno FROM dbstat WHERE name = 'runs' AND pagetype = 'leaf'"))
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    with open(path, "r+b") as fh:
        fh.seek((pages[len(pages) // 2] - 1) * size)
        fh.write(b"\xff" * size)


@pytest.fixture
def damaged_runs(tmp_path, monkeypatch):
    """A store of 60 finished races (a row a page: each carries a long error), one page damaged."""
    from test_pages import record_probe, record_race

    path = str(tmp_path / "store.sqlite3")
    monkeypatch.setenv("COMPILE_LAB_STORE", path)
    store = Store(path)
    record_probe(store)
    ids = [record_race(store, "done") for _ in range(60)]
    for run_id in ids:
        store.update_run(run_id, error="x" * 2000)
    store.close()
    damage_a_page_of_runs(path)
    store = Store(path)
    lost = [run_id for run_id in ids if store.get_run(run_id) is None]
    assert len(lost) >= 1 and set(lost) == store.unreadable_runs
    return store, ids, lost


def test_a_damaged_page_of_runs_leaves_its_rows_out_and_every_other_run_reads(damaged_runs):
    store, ids, lost = damaged_runs
    listed = [r.id for r in store.list_runs(kind="race")]
    assert listed == sorted(set(ids) - set(lost), reverse=True)
    assert [r.id for r in store.list_runs(kind="race", limit=5)] == listed[:5]
    assert store.list_runs(kind="probe", status=["done"])  # what the sidebar asks for


def test_pages_the_feed_and_the_cli_read_around_a_damaged_page_of_runs(damaged_runs, capsys, monkeypatch):
    from starlette.applications import Starlette
    from starlette.testclient import TestClient
    from streamlit.testing.v1 import AppTest
    from test_pages import APP

    from app_pages.run_screen import feed as feed_routes
    from core.cli.main import main

    store, ids, lost = damaged_runs
    readable = next(i for i in ids if i not in lost)
    for query in ({}, {"run": readable}, {"run": lost[0]}):
        at = AppTest.from_file(APP, default_timeout=60)
        for key, value in query.items():
            at.query_params[key] = str(value)
        at.run()
        assert not at.exception, (query, at.exception)
    said = "\n".join(str(w.value) for w in at.warning).replace("\\", "")
    assert f"Run {lost[0]} cannot be read: its row is on a damaged page" in said.replace("\u2060", "")
    at.switch_page("app_pages/runs.py").run()
    assert not at.exception, at.exception
    readable_count = len(ids) - len(lost)  # every readable race, on pages of PAGE_SIZE
    assert len(at.dataframe[0].value) == min(PAGE_SIZE, readable_count)
    assert f"of {readable_count:,}, newest first" in "\n".join(c.value for c in at.caption)
    assert "cannot be read" in "\n".join(str(w.value) for w in at.warning)
    monkeypatch.setattr(feed_routes, "_served", type(feed_routes._served)())  # routes() marks the feed served
    response = TestClient(Starlette(routes=feed_routes.routes())).get(f"/api/live/{readable}")
    assert response.status_code == 200
    capsys.readouterr()
    assert main(["runs", "--store", store.path, "--limit", "100"]) == 0
    out, err = capsys.readouterr()
    assert err.startswith("warning: Run") and "damaged page" in err and "Traceback" not in err
    assert len(out.strip().splitlines()) == 1 + len(ids) - len(lost)


def test_a_store_cut_short_opens_read_only_with_what_it_still_holds(tmp_path, capsys):
    """A copy taken mid-write, a disk that filled while the file grew: SQLite refused all of the file
    ("database disk image is malformed", said as "not a Compile Lab store"). It opens read-only: the
    runs and their numbers read, a run whose events lay past the cut says so, nothing is written."""
    from support import CPU, quick_spec

    from core.cli.main import main
    from core.runs import queue

    path = str(tmp_path / "store.sqlite3")
    store = Store(path)
    ids = []
    for _ in range(3):
        ids.append(store.create_run("race", quick_spec().to_dict(), "someone", "cpu", status="done"))
        store.append_events(ids[-1], steps(STEPS // 2), {"summary": {"steady_state_speedup": 1.5}})
    store.close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    with open(path, "r+b") as fh:
        fh.truncate(os.path.getsize(path) // 2 // 4096 * 4096)
    cut = open(path, "rb").read()

    store = Store(path)
    assert store.damage.startswith(f"the store {path} is cut short (") and ".recover" in store.damage
    assert [(r.id, r.summary) for r in store.list_runs()] == [(i, {"steady_state_speedup": 1.5}) for i in ids[::-1]]
    with pytest.raises(DamagedEvents, match=f"run {ids[-1]}'s events are damaged"):
        store.events_after(ids[-1])
    assert queue.tick(store) == [] and queue.ensure_probe(store) is None
    with pytest.raises(queue.JobError, match="is cut short"):
        queue.enqueue(store, quick_spec(), "someone", caps=CPU)
    assert main(["runs", "--store", path]) == 0
    out, err = capsys.readouterr()
    assert err.startswith(f"warning: the store {path} is cut short") and len(out.strip().splitlines()) == 1 + 3
    assert open(path, "rb").read() == cut  # nothing was written to it
