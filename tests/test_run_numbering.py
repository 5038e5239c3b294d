"""One number a person sees for a run: its run id, in the progress line, the link, the Runs table,
the bundle's name, the replay picker, the sidebar and the sweep table (issue 26: "Race 1" was run 2,
"Bundle of race 2" downloaded compile_lab_run_3.json)."""

from test_pages import app, record_probe, record_race

from core.engine.spec import RunSpec
from core.runs.store import Run
from core.runs.sweeps import Axis, SweepSpec
from core.view.compare import comparison_labels, table_row
from core.view.host_tables import lane_lines
from core.view.replay import stored_race_label
from core.view.run_screen.layout import progress_line
from core.view.run_screen.shared_board import LiveBoard
from core.view.sweep import points_table, sweep_frame


def test_every_surface_names_a_run_by_its_id(store, sleepers):
    record_probe(store)  # run 1: a probe, and a demo as run 2, so the race is not "the first" anything
    store.create_run("demo", {"demo": "graphs", "params": {}}, "someone", "cpu", status="done")
    run_id = record_race(store, "done")
    assert run_id == 3
    run = store.get_run(run_id)

    assert progress_line(LiveBoard(store.path).snapshot(run_id)).startswith("Run 3: ")
    assert stored_race_label(run).startswith("Run 3 here: ")
    assert table_row(run)["id"] == 3
    assert comparison_labels([run, store.get_run(1)])[run_id].startswith("run 3: ")
    running = Run(**{**run.__dict__, "status": "running", "phase": "eager epoch 1/2"})
    assert lane_lines(None, [running], []) == ["cpu: run 3 mlp, eager epoch 1/2"]

    at = app()
    at.switch_page("app_pages/runs.py").run()
    at.session_state["runs_table"] = {"selection": {"rows": [0], "columns": [], "cells": []}}
    at.run()
    assert not at.exception
    assert any(h.value.startswith("Run 3: ") for h in at.subheader)
    bundles = [b.proto for b in at.get("download_button") if b.proto.label.startswith("Bundle of")]
    assert [b.label for b in bundles] == ["Bundle of run 3 (JSON)"]
    assert not any("race 1" in b.proto.label.lower() for b in at.get("download_button"))


def test_the_sweep_table_names_each_point_by_its_run_id():
    sweep = SweepSpec(RunSpec(model="pointwise_mlp", device="cpu"), (Axis("batch_size", (64, 256)),))
    runs = [
        Run(id=i, kind="race", params=p.to_dict(), owner="a", device_key="cpu", status="queued", phase="queued",
            progress=0.0, created_at=0.0, started_at=None, finished_at=None, heartbeat_at=None, pid=None, host=None,
            time_limit_s=None, cancel_requested=0, environment=None, summary=None, details=None, error=None,
            imported=0, sweep_id=1)
        for i, p in zip((14, 17), sweep.points())
    ]  # fmt: skip
    assert [row["run"] for row in points_table(sweep_frame(sweep, runs))] == ["14", "17"]


def test_the_runs_page_says_why_race_numbers_skip(store, sleepers):
    from core.view.compare import numbering_note

    record_probe(store)  # run 1
    store.create_run("demo", {"demo": "graphs", "params": {}}, "someone", "cpu", status="done")  # run 2
    first = record_race(store, "done")  # run 3
    gone = record_race(store, "done")  # run 4, deleted below
    last = record_race(store, "done")  # run 5
    store.delete_run(gone)
    races = store.list_runs(kind="race")
    note = numbering_note([r.id for r in races], {r.id: r.kind for r in store.list_runs()})
    assert note == (
        "Run numbers skip 1, 2, 4: every job here takes the next number, and those went to the device probe and "
        "Under the hood demos and a deleted run. A run's number is the one in its link and its bundle."
    )
    assert [r.id for r in races] == [last, first]
    assert numbering_note([last], {last: "race"}) is not None  # 1-4 not races
