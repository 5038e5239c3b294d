"""The Runs page for people: each race by its run id, results first under plain headings, and runs in a
comparison named by what differs between them."""

import dataclasses
import time

import pytest

from core.runs.store import Store
from core.view.compare import TABLE_COLUMNS, column_headings, comparison_labels, differing_settings, table_row


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
    assert list(row) == [key for key, _ in TABLE_COLUMNS]
    assert list(row)[:6] == ["id", "status", "speedup", "overhead_s", "compile_s", "break_even"]
    assert (row["id"], row["speedup"], row["break_even"], row["steps"], row["device"]) == (
        run_id,
        1.16,
        1035,
        "3 x 500",
        "Intel Xeon",
    )
    assert row["compile_s"] == "11.3 s"
    small = {"steady_state_speedup": 1.0, "compile_time_s": None, "compile_time_under_s": 0.012}
    assert (
        table_row(dataclasses.replace(store.get_run(run_id), summary=small))["compile_s"]
        == "too small to measure here (under 12 ms)"
    )
    headings = column_headings()
    assert headings["batch_size"] == "Batch size" and headings["overhead_s"] == "First-epoch overhead (s)"
    assert all("_" not in heading for heading in headings.values())  # no raw names like device_name
