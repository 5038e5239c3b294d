"""The Runs page for people: each race by its run id, results first under plain headings, and runs in a
comparison named by what differs between them."""

import dataclasses
import time

import pytest

from core.runs.store import Store
from core.view.compare import (
    CSV_ONLY,
    TABLE_COLUMNS,
    column_headings,
    comparison_labels,
    differing_settings,
    table_row,
)


@pytest.fixture
def store(tmp_path):
    s = Store(str(tmp_path / "s.sqlite3"))
    yield s
    s.close()


SPEC = {"model": "pointwise_mlp", "batch_size": 4096, "precision": "fp32", "mode": "default", "backend": "inductor"}


def test_labels_name_only_the_settings_that_differ(store):
    a = store.create_run("race", {**SPEC, "batch_size": 1024}, "ann", "cpu")
    b = store.create_run("race", SPEC, "ann", "cpu")
    runs = [store.get_run(a), store.get_run(b)]
    assert comparison_labels(runs) == {a: f"run {a}: batch 1,024", b: f"run {b}: batch 4,096"}
    assert differing_settings([r.params for r in runs]) == ["batch_size"]


def test_epochs_and_steps_read_as_one_setting(store):
    a = store.create_run("race", {**SPEC, "epochs": 3, "steps_per_epoch": 80}, "ann", "cpu")
    b = store.create_run("race", {**SPEC, "batch_size": 1024, "epochs": 2, "steps_per_epoch": 100}, "ann", "cpu")
    labels = comparison_labels([store.get_run(a), store.get_run(b)])
    assert labels == {a: f"run {a}: batch 4,096, 3 x 80 steps", b: f"run {b}: batch 1,024, 2 x 100 steps"}


def test_labels_of_runs_with_the_same_settings_fall_back_to_device_or_time(store):
    a = store.create_run("race", SPEC, "ann", "cpu", environment={"device_name": "Intel Xeon"})
    b = store.create_run("race", SPEC, "ann", "cuda:0", environment={"device_name": "NVIDIA H100"})
    labels = comparison_labels([store.get_run(a), store.get_run(b)])
    assert labels == {a: f"run {a}: Intel Xeon", b: f"run {b}: NVIDIA H100"}
    c = store.create_run("race", SPEC, "ann", "cpu", created_at=time.mktime((2026, 11, 30, 9, 5, 0, 0, 0, -1)))
    d = store.create_run("race", SPEC, "ann", "cpu", created_at=time.mktime((2026, 11, 30, 9, 7, 0, 0, 0, -1)))
    labels = comparison_labels([store.get_run(c), store.get_run(d)])
    assert labels == {c: f"run {c}: Nov 30 09:05", d: f"run {d}: Nov 30 09:07"}


def test_table_rows_put_results_first_under_plain_headings(store):
    run_id = store.create_run(
        "race",
        {**SPEC, "epochs": 3, "steps_per_epoch": 500},
        "ann",
        "cpu",
        status="done",
        environment={"device_name": "Intel Xeon"},
        summary={
            "steady_state_speedup": 1.16,
            "first_epoch_overhead_s": 5.8,
            "compile_time_s": 11.3,
            "break_even_step": 1035,
        },
    )
    row = table_row(store.get_run(run_id))
    assert list(row) == [key for key, _ in TABLE_COLUMNS] + list(CSV_ONLY)
    assert list(row)[:6] == ["id", "status", "speedup", "overhead_s", "compile", "break_even"]
    assert (row["id"], row["speedup"], row["break_even"], row["steps"], row["device"]) == (
        run_id,
        1.16,
        "step 1,035",
        "3 x 500",
        "Intel Xeon",
    )
    assert (row["compile"], row["compile_s"], row["break_even_step"]) == ("11.3 s", 11.3, 1035)
    small = {"steady_state_speedup": 1.0, "compile_time_s": None, "compile_time_under_s": 0.012}
    tiny = table_row(dataclasses.replace(store.get_run(run_id), summary=small))
    assert (tiny["compile"], tiny["compile_s"]) == ("too small to measure here (under 12 ms)", None)
    headings = column_headings()
    assert headings["batch_size"] == "Batch size" and headings["overhead_s"] == "First-epoch overhead (s)"
    assert all("_" not in heading for heading in headings.values())  # no raw names like device_name


# Issue 43: the Runs table's Break-even was "–" for every run where `python -m core runs` said
# "≈ step 2,974" and "never"; neither showed compile scope or cache; the CSV's compile_s held "16.6 s".
LISTED = {
    "projected": (
        {"compile_scope": "regional", "cache": "warm"},
        {"inductor_cache": "warm", "warm_cache": {"files": 12, "bytes": 1000}},
        {"steady_state_speedup": 1.09, "speedup_ci95": [1.04, 1.14], "verdict": "faster", "compile_time_s": 16.6,
         "eager_median_step_s": 0.0676},  # 16.6 s won back at 5.6 ms a step (core.engine.summary)
        "≈ step 2,975", "regional", "warm",
    ),
    "never": (
        {},
        {"inductor_cache": "cold"},
        {"steady_state_speedup": 0.75, "speedup_ci95": [0.70, 0.80], "verdict": "slower", "compile_time_s": 46.0},
        "never", "whole", "cold",
    ),
    "asked warm, found it empty": (
        {"cache": "warm"},
        {"inductor_cache": "warm", "warm_cache": {"files": 0}},
        {"steady_state_speedup": 1.01, "speedup_ci95": [0.95, 1.07], "verdict": "no clear difference",
         "compile_time_s": 35.0},
        "none", "whole", "warm but empty, so compiled cold",
    ),
}  # fmt: skip


def test_the_runs_table_its_csv_and_the_cli_list_the_same_break_even_scope_and_cache(store, tmp_path):
    import contextlib
    import csv
    import io

    from core.cli.main import main as cli
    from core.view.compare import csv_frame
    from core.view.report import run_row
    from core.view.safe_text import csv_text

    ids = {}
    for name, (params, env, summary, *_expected) in LISTED.items():
        ids[name] = store.create_run(
            "race", {**SPEC, **params}, "ann", "cpu", status="done", environment=env, summary=summary
        )
    rows = {name: table_row(store.get_run(i)) for name, i in ids.items()}
    cli_rows = {name: run_row(store.get_run(i)) for name, i in ids.items()}
    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert cli(["runs", "--store", store.path]) == 0
    lines = {line.split()[0]: line for line in out.getvalue().splitlines()[1:] if line.strip()}
    for name, (_p, _e, _s, break_even, scope, cache) in LISTED.items():
        row = rows[name]
        assert (row["break_even"], row["compile_scope"], row["cache"]) == (break_even, scope, cache), name
        assert (cli_rows[name]["break_even"], cli_rows[name]["scope"], cli_rows[name]["cache"]) == (
            break_even,
            scope,
            cache,
        )
        line = lines[str(ids[name])]
        assert line.rstrip().endswith(break_even) and f" {scope} " in line and cache in line
    # The CSV: its number columns hold numbers; the words stand beside them.
    text = csv_text(csv_frame(list(rows.values())))
    parsed = {int(r["id"]): r for r in csv.DictReader(io.StringIO(text))}
    projected = parsed[ids["projected"]]
    assert float(projected["compile_s"]) == 16.6 and projected["compile"] == "16.6 s"
    assert projected["break_even"] == "≈ step 2,975" and projected["break_even_step"] == ""
    assert {"compile_scope", "cache", "verdict"} <= set(projected)
    assert parsed[ids["never"]]["verdict"] == "slower"


def test_the_runs_page_shows_break_even_scope_and_cache_as_the_cli_does(store, monkeypatch, sleepers):
    # The page itself (AppTest): the break-even in words, not "–"; scope and cache always shown.
    from test_pages import app, record_probe

    monkeypatch.setenv("COMPILE_LAB_STORE", store.path)
    record_probe(store)
    for params, env, summary, *_ in LISTED.values():
        store.create_run("race", {**SPEC, **params}, "ann", "cpu", status="done", environment=env, summary=summary)
    at = app()
    at.switch_page("app_pages/runs.py").run()
    assert not at.exception, at.exception
    table = at.dataframe[0].value
    assert list(table["break_even"]) == [v[3] for v in reversed(LISTED.values())]  # newest first
    assert list(table["compile_scope"]) == [v[4] for v in reversed(LISTED.values())]
    assert list(table["cache"]) == [v[5] for v in reversed(LISTED.values())]
    assert {"break_even", "compile_scope", "cache"} <= set(at.dataframe[0].proto.column_order)
