"""The Runs page one page at a time, through AppTest (issue 42, item 5): a view of a store of many
races decodes one page of their summaries, the page control and the filters reach every race, and
a run's link still opens a race that is on no first page; a stored run reopened in one session
after another is read once, and its bundle built only when asked for."""

import json

from test_pages import app, record_probe, record_race
from test_runs_paging import RACES, fill

from core.runs.run_files import bundle_text
from core.runs.store import Store, records
from core.view import compare as runs_table
from core.view.compare import PAGE_SIZE


def ids_shown(at) -> list[int]:
    return [int(i) for i in at.dataframe[0].value["id"]]


def test_a_runs_page_view_decodes_one_page_of_summaries(store, sleepers, monkeypatch):
    ids = fill(store)
    at = app()
    decoded = []
    original = records._json_column
    monkeypatch.setattr(records, "_json_column", lambda key, text: decoded.append(key) or original(key, text))
    monkeypatch.setattr(runs_table, "_SETTINGS", {})
    at.switch_page("app_pages/runs.py").run()
    assert not at.exception, at.exception
    assert ids_shown(at) == ids[::-1][:PAGE_SIZE]
    # Every run's summary was decoded twice before (the table's 1,000 newest, then 5,000 runs of any kind
    # for the numbering note); now the page's only.
    assert decoded.count("summary") == PAGE_SIZE
    decoded.clear()
    at.run()  # the next view: the finished races' settings are not read again
    assert decoded.count("summary") == PAGE_SIZE
    assert decoded.count("params") < PAGE_SIZE + 10  # the page's rows and the sidebar's few jobs; not every race's


def test_the_page_control_and_the_filters_reach_every_race(store, sleepers):
    record_probe(store)
    first = record_race(store, "done")  # the oldest race: on the last page
    ids = fill(store)
    at = app()
    at.switch_page("app_pages/runs.py").run()
    pages = at.number_input(key="runs_page")
    assert pages.label == "Page (of 3)" and pages.value == 1
    assert f"Runs 1-{PAGE_SIZE} of {RACES + 1:,}, newest first." in [c.value for c in at.caption][0]
    pages.set_value(3).run()
    assert not at.exception, at.exception
    assert ids_shown(at) == [*ids[::-1][2 * PAGE_SIZE :], first]
    at.session_state["runs_table"] = {"selection": {"rows": [len(ids_shown(at)) - 1], "columns": [], "cells": []}}
    at.run()  # a run on the last page opens as any other
    assert [h.value for h in at.subheader if h.value.startswith(f"Run {first}: ")]
    at.multiselect(key="runs_filter_model").set_value(["small_cnn"]).run()  # only the oldest races have it
    assert not at.exception, at.exception
    assert ids_shown(at) == ids[:10][::-1]
    assert not [n for n in at.number_input if n.key == "runs_page"]  # one page: no page control
    assert not [h.value for h in at.subheader if h.value.startswith("Run ")]  # another view: no stale selection
    assert "Runs 1-10 of 10, newest first (those the filters keep)." in at.caption[0].value
    at = app(run=first)  # its link opens it on the Race page, wherever it is in the table
    assert not at.exception and at.metric and at.metric[2].value == "2.00x"


def test_a_stored_run_reopened_in_another_session_is_not_read_again(store, sleepers, monkeypatch):
    record_probe(store)
    run_id = record_race(store, "done", steps=400)
    read = []
    original = Store.events_after

    def counting(self, *args, **kwargs):
        rows = original(self, *args, **kwargs)
        read.append(len(rows))
        return rows

    monkeypatch.setattr(Store, "events_after", counting)
    for session in ("first", "second"):
        at = app()
        at.switch_page("app_pages/runs.py").run()
        at.session_state["runs_table"] = {"selection": {"rows": [0], "columns": [], "cells": []}}
        at.run()
        assert not at.exception, at.exception
        assert [h.value for h in at.subheader if h.value.startswith(f"Run {run_id}: ")]
        assert [b.label for b in at.get("download_button") if b.label.startswith("Bundle of")] == [
            f"Bundle of run {run_id} (JSON)"
        ]
        if session == "first":
            assert sum(read) >= 800  # its events, read once for this process (the live board's)
            read.clear()
    assert sum(read) == 0  # the second session drew the shared view and built no bundle it was not asked for


def test_a_bundle_is_built_when_asked_for_and_says_why_there_is_none(store):
    run_id = record_race(store, "done")
    bundle = json.loads(bundle_text(store.path, run_id)())
    assert bundle["run"]["status"] == "done" and len(bundle["events"]) == len(store.events_after(run_id))
    store.delete_run(run_id)  # deleted between the view and the click
    assert (
        json.loads(bundle_text(store.path, run_id)())["error"] == f"no bundle of run {run_id}: there is no run {run_id}"
    )
