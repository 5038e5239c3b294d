"""The Runs table one page at a time (issue 42, item 5): a view reads the full rows of one page of
races, never every run's, its filters still choose among all of them, and a finished race's
settings are read once per process, not on every view."""

import pytest

from core.runs.store import records
from core.view import compare as runs_table
from core.view.compare import PAGE_SIZE, runs_page

BOTH_BACKENDS = True
RACES = 2 * PAGE_SIZE + 20  # three pages
SUMMARY = {"steady_state_speedup": 1.2, "eager_step_times_s": [0.01] * 500, "compiled_step_times_s": [0.009] * 500}


def fill(store, races=RACES):
    """`races` finished races, oldest first; the 10 oldest on another model and device; a probe as
    run 1 (a gap in the race numbers). Returns the races' ids, oldest first."""
    ids = []
    with store.transaction() as c:
        store._insert_run(c, {"kind": "probe", "params": {}, "owner": "system", "device_key": "probe",
                              "status": "done", "created_at": 1.0})  # fmt: skip
        for i in range(races):
            old = i < 10
            row = {
                "kind": "race",
                "params": {"model": "small_cnn" if old else "mlp", "batch_size": 64, "epochs": 2, "steps_per_epoch": 6},
                "owner": "visitor:someone",
                "device_key": "cpu",
                "status": "failed" if i == 0 else "done",
                "created_at": 10.0 + i,
                "environment": {"device_type": "cpu", "device_name": "Old CPU" if old else "Test CPU"},
                "summary": SUMMARY,
            }
            ids.append(store._insert_run(c, row))
    return ids


@pytest.fixture
def decodes(monkeypatch):
    """How many times each JSON column of a run row is decoded (records._json_column)."""
    seen = {"params": 0, "environment": 0, "summary": 0, "details": 0}
    original = records._json_column

    def counting(key, text):
        seen[key] += 1
        return original(key, text)

    monkeypatch.setattr(records, "_json_column", counting)
    monkeypatch.setattr(runs_table, "_SETTINGS", {})  # a fresh process's
    return seen


def test_a_view_decodes_one_page_of_summaries_not_every_runs(store, decodes):
    ids = fill(store)
    page = runs_page(store)
    assert [r.id for r in page.runs] == ids[::-1][:PAGE_SIZE]  # newest first
    assert page.total == RACES and page.pages == 3 and page.page == 1
    assert decodes["summary"] == PAGE_SIZE  # the page's, not the store's 120
    for key in decodes:
        decodes[key] = 0
    again = runs_page(store, page=3)
    assert [r.id for r in again.runs] == ids[::-1][2 * PAGE_SIZE :]
    # A second view: only the page's own rows are decoded; every finished race's settings were kept.
    assert decodes == {"params": len(again.runs), "environment": len(again.runs), "summary": len(again.runs),
                       "details": 0}  # fmt: skip


def test_the_filters_choose_among_every_race_not_one_page(store, decodes):
    ids = fill(store)
    page = runs_page(store)
    assert page.options == {
        "status": ["done", "failed"],
        "model": ["mlp", "small_cnn"],  # small_cnn's races are all on the last page
        "device": ["Old CPU", "Test CPU"],
    }
    old = runs_page(store, {"model": ["small_cnn"]})
    assert [r.id for r in old.runs] == ids[:10][::-1] and old.total == 10 and old.pages == 1
    assert [r.id for r in runs_page(store, {"model": ["small_cnn"], "status": ["failed"]}).runs] == [ids[0]]
    none = runs_page(store, {"device": ["Old CPU"], "model": ["mlp"]})
    assert none.total == 0 and none.pages == 1 and none.line() == "No race has all of these."
    assert old.line().startswith("Runs 1-10 of 10, newest first (those the filters keep). Pick a row")
    gone = runs_page(store, {"status": ["running"]})  # a value no race has any more keeps them all
    assert gone.total == RACES and gone.wanted["status"] == []
    assert runs_page(store, page=99).page == 3  # past the last page: the last one


def test_a_deleted_race_leaves_the_pages_and_the_filters(store, decodes):
    ids = fill(store)
    runs_page(store)
    for run_id in ids[:10]:
        store.delete_run(run_id)
    page = runs_page(store, {"model": ["small_cnn"]})
    assert page.options["model"] == ["mlp"] and page.total == RACES - 10
    assert set(runs_table.settings_of(store).entries) == set(ids[10:])


def test_a_race_still_running_is_read_afresh_each_view(store, decodes):
    fill(store, races=3)
    run_id = store.create_run("race", {"model": "mlp"}, "visitor:someone", "cpu", status="running")
    assert runs_page(store, {"device": ["Test GPU"]}).options["device"] == ["Old CPU", "cpu"]
    store.update_run(run_id, environment={"device_type": "cuda", "device_name": "Test GPU"})
    page = runs_page(store, {"device": ["Test GPU"]})
    assert [r.id for r in page.runs] == [run_id] and page.options["device"] == ["Old CPU", "Test GPU"]
    assert run_id not in runs_table.settings_of(store).entries  # kept only once it has ended


def test_the_numbering_note_counts_every_race_not_one_page(store, decodes):
    ids = fill(store)
    store.delete_run(ids[-2])
    note = runs_page(store).numbering
    assert note.startswith(f"Run numbers skip 1, {ids[-2]}: ")  # older races, on later pages, are no gap
    assert "the device probe and a deleted run" in note


def test_a_race_ended_before_its_environment_was_stored_is_read_again(store, decodes):
    fill(store, races=3)
    run_id = store.create_run("race", {"model": "mlp"}, "visitor:someone", "cpu", status="running")
    store.finish_run(run_id, "failed", error="worker stopped unexpectedly")  # reconcile took its worker for lost
    assert runs_page(store).options["device"] == ["Old CPU", "cpu"]
    store.update_run(run_id, environment={"device_type": "cuda", "device_name": "Test GPU"})  # the worker's late record
    assert [r.id for r in runs_page(store, {"device": ["Test GPU"]}).runs] == [run_id]
    assert run_id in runs_table.settings_of(store).entries  # kept from now on
