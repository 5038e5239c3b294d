"""What a person sees around the numbers (issue 26, "cosmetic but on stage"): no empty axes before
the first step, an interval whose width shows, no Deploy button, the sidebar naming a starting
job, tables that fit their page."""

import tomllib

from support import ROOT, quick_spec
from test_pages import app, record_probe

from core.engine.words import duration_interval
from core.view.compare import shown_columns, table_row
from core.view.host_tables import lane_lines
from core.view.run_screen import layout
from core.view.run_screen.feed import feed_document
from core.view.run_screen.shared_board import LiveBoard


def test_before_the_first_step_the_page_says_it_is_waiting_instead_of_drawing_empty_axes(store, sleepers):
    record_probe(store)
    run_id = store.create_run("race", quick_spec().to_dict(), "someone", "cpu", status="running", phase="eager")
    snap = LiveBoard(store.path).snapshot(run_id)
    assert layout.chart_builders(snap.run, snap, snap.summary(), present=False) == {}
    doc = feed_document(snap, present=False, expected=lambda: (10.0, True))
    assert doc["charts"] == [] and doc["waiting"] == layout.WAITING_FOR_STEPS
    at = app(run=run_id)
    assert not at.exception
    assert layout.WAITING_FOR_STEPS in [c.value for c in at.caption]
    assert not at.get("arrow_vega_lite_chart")


def test_a_plan_interval_shows_its_width_or_says_it_is_too_narrow():
    hour = 3600.0
    assert duration_interval(1.58 * hour, 1.62 * hour, 1.6 * hour) == "95% interval 1.58-1.62 h"  # not "1.6-1.6"
    assert duration_interval(38, 44, 40) == "95% interval 38-44 s"
    assert duration_interval(-30, 20, 5) == "95% interval -30 to 20 s"
    assert (
        duration_interval(1.6 * hour, 1.6 * hour, 1.6 * hour) == "95% interval too narrow to show (both ends 1.6000 h)"
    )


def test_no_deploy_button_for_visitors():
    with open(f"{ROOT}/.streamlit/config.toml", "rb") as fh:
        config = tomllib.load(fh)
    assert config["client"]["toolbarMode"] == "viewer"  # hides Deploy, rerun and clear cache on every page


def test_the_runs_table_shows_a_setting_only_where_the_runs_differ(store):
    spec = quick_spec().to_dict()
    a = store.create_run("race", {**spec, "batch_size": 16}, "ann", "cpu", status="done")
    b = store.create_run("race", {**spec, "batch_size": 64}, "ann", "cpu", status="done")
    rows = [table_row(store.get_run(i)) for i in (a, b)]
    columns = shown_columns(rows)
    assert columns[:6] == ["id", "status", "speedup", "overhead_s", "compile", "break_even"]
    assert "batch_size" in columns and "model" in columns  # the model is always named
    assert not {"precision", "mode", "backend", "imported"} & set(columns)  # the same in both: left out
    assert shown_columns(rows[:1]) == columns[:6] + ["model", "compile_scope", "cache", "device", "created"]


def test_the_sidebar_never_calls_a_lane_idle_while_a_job_waits_to_start_there(store):
    first = store.create_run("race", {"model": "mlp"}, "ann", "cpu", status="queued")
    second = store.create_run("race", {"model": "cnn"}, "bob", "cpu", status="queued")
    queued = store.list_runs(status=("queued",))
    assert lane_lines(None, [], queued) == [f"cpu: run {first} mlp, starting (1 waiting)"]
    assert lane_lines(None, [], queued, paused=True) == [f"cpu: run {first} mlp, waiting (queue paused) (1 waiting)"]
    store.update_run(first, status="starting", phase="starting")
    active, queued = store.list_runs(status=("starting", "running")), store.list_runs(status=("queued",))
    assert lane_lines(None, active, queued) == [f"cpu: run {first} mlp, starting (1 waiting)"]
    assert second not in [r.id for r in active] and lane_lines(None, [], []) == ["cpu: idle"]
