"""Sweeps: points are ordinary races grouped under a sweep id; queued whole or not at all, checked
against host limits, cancelled whole; the store migrates to hold them; one small real sweep."""

import json
import sqlite3
import subprocess
import sys

import pytest
from support import CPU, QUICK_CLI, ROOT, quick_spec

from core.engine.spec import RunSpec, SpecError
from core.runs import queue, sweeps
from core.runs.limits import HostLimits
from core.runs.store import SCHEMA_VERSION, Store
from core.runs.sweeps import Axis, SweepSpec
from core.view.sweep import sweep_state

NO_LIMITS = HostLimits(job_time_limit_s=None)


BOTH_BACKENDS = True  # each test using `store` runs on SQLite and on PostgreSQL (tests/conftest.py)


def batch_sweep(*sizes, **base) -> SweepSpec:
    return SweepSpec(quick_spec(**base), (Axis("batch_size", sizes or (8, 16)),))


def test_points_are_the_product_of_the_axes_first_axis_outermost():
    sweep = SweepSpec(quick_spec(), (Axis("batch_size", (8, 16)), Axis("precision", ("fp32", "amp-bf16"))))
    points = [(p.batch_size, p.precision) for p in sweep.points()]
    assert points == [(8, "fp32"), (8, "amp-bf16"), (16, "fp32"), (16, "amp-bf16")]
    assert all(p.model == "mlp" and p.backend == "aot_eager" for p in sweep.points())
    assert SweepSpec.from_dict(json.loads(json.dumps(sweep.to_dict()))) == sweep


def test_a_sweep_with_a_bad_shape_says_each_problem():
    three = SweepSpec(quick_spec(), (Axis("batch_size", (8, 16)), Axis("precision", ("fp32",)), Axis("seed", (1, 2))))
    messages = [str(p) for p in sweeps.sweep_problems(three, CPU, NO_LIMITS)]
    assert "axes: choose 1 or 2 axes to sweep (got 3)" in messages
    assert "axes: 'seed' cannot be swept; allowed: batch_size, precision, mode, backend, compile_scope" in messages
    assert "precision: give at least 2 precision values to sweep (one value is a race)" in messages
    twice = SweepSpec(quick_spec(), (Axis("batch_size", (8, 8)), Axis("batch_size", (4, 2))))
    messages = [str(p) for p in sweeps.sweep_problems(twice, CPU, NO_LIMITS)]
    assert "axes: batch_size is chosen twice; choose each axis once" in messages
    assert "batch_size: batch size 8 is given twice" in messages


def test_each_point_is_checked_like_a_race_and_names_its_point(store):
    sweep = SweepSpec(quick_spec(), (Axis("batch_size", (8, 0)), Axis("precision", ("fp32", "amp-fp16"))))
    problems = [str(p) for p in sweeps.sweep_problems(sweep, CPU, NO_LIMITS)]
    assert "batch_size: must be from 1 to 65536 (got 0)" in problems
    assert any(p.startswith("precision: amp-fp16 needs a CUDA GPU") for p in problems)
    assert len(problems) == 2  # said once, not once per point
    mode_needs_cuda = SweepSpec(quick_spec(backend="inductor"), (Axis("mode", ("default", "reduce-overhead")),))
    assert [p.field for p in sweeps.sweep_problems(mode_needs_cuda, CPU, NO_LIMITS)] == ["mode"]
    regional = SweepSpec(quick_spec(model="mlp"), (Axis("compile_scope", ("whole", "regional")),))
    assert [p.field for p in sweeps.sweep_problems(regional, CPU, NO_LIMITS)] == ["compile_scope"]


def test_host_limits_cap_each_point_and_the_number_of_points(store, sleepers):
    limited = HostLimits(max_batch_size=12, max_sweep_points=3, job_time_limit_s=None)
    problems = [str(p) for p in sweeps.sweep_problems(batch_sweep(8, 16), CPU, limited)]
    assert problems == ["batch_size: this host allows at most 12 (got 16)"]
    four = [str(p) for p in sweeps.sweep_problems(batch_sweep(2, 4, 6, 8), CPU, limited)]
    assert four == ["points: this host allows at most 3 points (got 4: fewer values, or one axis)"]
    many = SweepSpec(quick_spec(), (Axis("batch_size", tuple(range(1, 9))), Axis("mode", sweeps.AXES["mode"][1])))
    assert [str(p) for p in sweeps.sweep_problems(many, CPU, NO_LIMITS)] == [
        "points: a sweep has at most 24 points (got 32: fewer values, or one axis)"
    ]
    big = SweepSpec(quick_spec(), (Axis("batch_size", tuple(range(1, 9))), Axis("precision", ("fp32", "amp-bf16"))))
    assert [str(p) for p in sweeps.sweep_problems(big, CPU, NO_LIMITS)] == []  # 16 points
    with pytest.raises(SpecError):
        sweeps.enqueue_sweep(store, batch_sweep(8, 16), "ann", limits=limited, caps=CPU)
    assert store.list_runs() == [] and store.list_sweeps() == []


def test_a_sweep_is_queued_whole_or_not_at_all(store, sleepers):
    per_owner = HostLimits(max_queued_per_owner=3, job_time_limit_s=None)
    queue.enqueue(store, quick_spec(), "ann", limits=per_owner, caps=CPU)
    with pytest.raises(queue.JobError, match="this sweep's 3 points and your 1 jobs queued or running"):
        sweeps.enqueue_sweep(store, batch_sweep(8, 16, 32), "ann", limits=per_owner, caps=CPU)
    assert len(store.list_runs()) == 1 and store.list_sweeps() == []
    sweep_id = sweeps.enqueue_sweep(store, batch_sweep(8, 16), "ann", limits=per_owner, caps=CPU)
    points = store.sweep_runs(sweep_id)
    assert [p.params["batch_size"] for p in points] == [8, 16]
    assert all(p.kind == "race" and p.owner == "ann" and p.sweep_id == sweep_id for p in points)


def test_points_wait_their_turn_on_the_lane_and_cancel_stops_the_whole_sweep(store, sleepers):
    other = queue.enqueue(store, quick_spec(), "bob", limits=NO_LIMITS, caps=CPU)
    sweep_id = sweeps.enqueue_sweep(store, batch_sweep(8, 16, 32), "ann", limits=NO_LIMITS, caps=CPU)
    assert store.get_run(other).status == "starting"  # one job per lane: the points queue behind it
    assert [r.status for r in store.sweep_runs(sweep_id)] == ["queued"] * 3
    assert sweep_state(store, store.sweep_runs(sweep_id)) == ("0 of 3 points finished; point 1 is queued (position 1)")
    with pytest.raises(queue.JobError, match="belongs to someone else"):
        sweeps.cancel_sweep(store, sweep_id, "bob")
    queue.cancel(store, other, "bob")
    first = store.sweep_runs(sweep_id)[0]
    assert first.status == "starting"  # the lane is free: the sweep's first point starts
    assert sweep_state(store, store.sweep_runs(sweep_id)).startswith("point 1 of 3 running")
    assert sweeps.cancel_sweep(store, sweep_id, "ann") == 3
    runs = store.sweep_runs(sweep_id)
    assert [r.status for r in runs] == ["cancelled"] * 3 and sweeps.sweep_finished(runs)
    assert sweep_state(store, runs) == "finished: 3 cancelled"
    assert store.list_runs(status=("queued", "starting", "running")) == []  # nothing started after the cancel


def test_delete_a_sweep_removes_its_points_and_their_events_only_for_its_owner(store, sleepers):
    sweep_id = sweeps.enqueue_sweep(store, batch_sweep(8, 16), "ann", limits=NO_LIMITS, caps=CPU)
    lone = queue.enqueue(store, quick_spec(), "ann", limits=NO_LIMITS, caps=CPU)
    store.append_events(store.sweep_runs(sweep_id)[0].id, [{"kind": "step", "variant": "eager", "phase": "train",
                                                            "epoch": 1, "step": 1, "time_s": 0.1}])  # fmt: skip
    with pytest.raises(queue.JobError, match="belongs to someone else"):
        sweeps.delete_sweep(store, sweep_id, "bob")
    sweeps.delete_sweep(store, sweep_id, "ann")
    assert store.get_sweep(sweep_id) is None and store.sweep_runs(sweep_id) == []
    assert [r.id for r in store.list_runs()] == [lone]
    assert store._one("SELECT COUNT(*) FROM events")[0] == 0
    with pytest.raises(queue.JobError, match="there is no sweep"):
        sweeps.cancel_sweep(store, sweep_id, "ann")


VERSION_2 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta VALUES ('schema_version', '2');
CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, params TEXT NOT NULL,
  owner TEXT NOT NULL, device_key TEXT NOT NULL, status TEXT NOT NULL, phase TEXT NOT NULL DEFAULT '',
  progress REAL NOT NULL DEFAULT 0, created_at REAL NOT NULL, started_at REAL, finished_at REAL,
  heartbeat_at REAL, pid INTEGER, host TEXT, time_limit_s REAL, cancel_requested INTEGER NOT NULL DEFAULT 0,
  environment TEXT, summary TEXT, details TEXT, error TEXT, imported INTEGER NOT NULL DEFAULT 0);
CREATE INDEX runs_queue ON runs (status, device_key, id);
CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, run_id INTEGER NOT NULL, kind TEXT NOT NULL,
  variant TEXT NOT NULL, phase TEXT NOT NULL, epoch INTEGER NOT NULL, step INTEGER NOT NULL,
  time_s REAL NOT NULL, eval_time_s REAL, loss REAL, samples INTEGER, recorded_at REAL NOT NULL, note TEXT);
"""


def test_a_version_2_store_gains_sweeps_and_keeps_its_runs(tmp_path, sleepers):
    path = str(tmp_path / "old.sqlite3")
    conn = sqlite3.connect(path)
    conn.executescript(VERSION_2)
    conn.execute(
        "INSERT INTO runs (kind, params, owner, device_key, status, created_at) VALUES ('race', ?, 'ann', 'cpu', 'done', 1)",
        (json.dumps(quick_spec().to_dict()),),
    )
    conn.commit()
    conn.close()
    store = Store(path)
    assert store.schema_version() == SCHEMA_VERSION
    old = store.list_runs()[0]
    assert old.sweep_id is None and RunSpec.from_dict(old.params).compile_scope == "whole"
    assert Store(path).schema_version() == SCHEMA_VERSION  # opening again changes nothing
    assert sweeps.enqueue_sweep(store, batch_sweep(8, 16), "ann", limits=NO_LIMITS, caps=CPU) == 1
    assert [r.sweep_id for r in store.list_runs()] == [1, 1, None]
    indexes = {row[1] for row in store._db._conn.execute("PRAGMA index_list(runs)")}
    assert "runs_by_sweep" in indexes


@pytest.mark.sqlite_only  # asks SQLite's own index list
def test_a_new_store_has_the_sweeps_index_too(store):
    assert "runs_by_sweep" in {row[1] for row in store._db._conn.execute("PRAGMA index_list(runs)")}


def test_a_sweep_whose_stored_definition_is_damaged_reads_as_none(store):
    with store.transaction() as c:
        c.execute("INSERT INTO sweeps (owner, params, created_at) VALUES ('ann', 'not json', 0)")
    assert sweeps.stored_sweep(store, 1) is None


def test_batch_sizes_from_text():
    assert sweeps.axis_from_text("batch_size", "64, 256,1024,") == Axis("batch_size", (64, 256, 1024))
    assert sweeps.axis_from_text("precision", "fp32, amp-bf16") == Axis("precision", ("fp32", "amp-bf16"))
    with pytest.raises(SpecError, match="'6x4' is not a whole number"):
        sweeps.axis_from_text("batch_size", "64, 6x4")


# -- the real thing: two points through the queue and worker processes ------------------------


def cli(store_path, *args, timeout=600):
    return subprocess.run(
        [sys.executable, "-m", "core", *args, "--store", store_path],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_a_small_real_sweep_runs_both_points_and_reports_them(tmp_path):
    path = str(tmp_path / "store.sqlite3")
    done = cli(path, "sweep", *QUICK_CLI, "--batch-sizes", "8,16", "--json", "--plan-steps", "10000")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert [p["batch_size"] for p in data["points"]] == [8, 16]
    assert all(p["status"] == "done" and p["steady_state_speedup"] > 0 for p in data["points"])
    assert all(len(p["speedup_ci95"]) == 2 and p["compile_time_s"] is not None for p in data["points"])
    assert data["state"] == "finished: 2 done" and data["axes"] == [{"name": "batch_size", "values": [8, 16]}]
    assert len(data["plan"]["points"]) == sum(p["measured"] for p in data["points"])
    assert "point 1/2 batch size 8: done" in done.stderr and "point 2/2 batch size 16: done" in done.stderr
    # The points are ordinary races: listed, exported, each with its own events.
    store = Store(path)
    runs = store.sweep_runs(data["sweep_id"])
    assert [r.id for r in runs] == [p["run_id"] for p in data["points"]]
    assert all(len([e for e in store.events_after(r.id) if e["kind"] == "step"]) == 2 * 6 for r in runs)
    assert cli(path, "export", str(runs[0].id)).returncode == 0
    listing = cli(path, "sweeps")
    assert listing.returncode == 0 and f"sweep {data['sweep_id']:>4}" in listing.stdout and "2 done" in listing.stdout
    report = cli(path, "sweeps", str(data["sweep_id"]))
    assert "point 2/2 batch size 16: done" in report.stdout and "needs eager step times at 3" in report.stdout
    plan = cli(path, "plan", str(runs[0].id), "--epochs", "10", "--steps-per-epoch", "1000")
    assert plan.returncode == 0 and "Over 10,000 steps compile" in plan.stdout


def test_the_sweep_command_refuses_bad_input_with_one_line_per_problem(tmp_path):
    path = str(tmp_path / "store.sqlite3")
    bad = cli(path, "sweep", *QUICK_CLI, "--batch-sizes", "8,x")
    assert bad.returncode == 2 and bad.stderr.strip().endswith(
        "'x' is not a whole number (batch sizes: e.g. 64,256,1024)"
    )
    none = cli(path, "sweep", *QUICK_CLI)
    assert none.returncode == 2 and "choose 1 or 2 axes to sweep (got 0)" in none.stderr
    fp16 = cli(path, "sweep", *QUICK_CLI, "--precisions", "fp32,amp-fp16")
    assert fp16.returncode == 2 and "precision: amp-fp16 needs a CUDA GPU" in fp16.stderr
    assert cli(path, "sweeps", "7").returncode == 2 and cli(path, "plan", "3", "--steps", "10").returncode == 2
    assert cli(path, "plan", "--steps", "0").returncode == 2


# -- the CLI's follow and listing ---------------------------------------------------------------


def follow_args(owner="ann", as_json=False):
    import argparse

    return argparse.Namespace(owner=owner, json=as_json, plan_steps=None)


@pytest.mark.parametrize(
    "remove, said",
    [
        (lambda store, sweep_id: store.delete_sweep(sweep_id), "no longer exists (it was deleted)"),
        (
            lambda store, sweep_id: [store.delete_run(r.id) for r in store.sweep_runs(sweep_id)],
            "has no points left (they were deleted)",
        ),
    ],
)
def test_a_sweep_deleted_while_followed_ends_the_follow_with_one_line(store, sleepers, monkeypatch, capsys, remove,
                                                                      said):  # fmt: skip
    from core.cli import common
    from core.cli import sweeps as cli_sweeps

    sweep_id = sweeps.enqueue_sweep(store, batch_sweep(8, 16), "ann", limits=NO_LIMITS, caps=CPU)
    polls = []

    def deleted_meanwhile(seconds):  # the sweep is deleted elsewhere while this follow waits
        polls.append(seconds)
        remove(store, sweep_id)

    monkeypatch.setattr(cli_sweeps.time, "sleep", deleted_meanwhile)
    code = cli_sweeps.follow_sweep(store, sweep_id, follow_args())
    err = capsys.readouterr().err
    assert code == common.EXIT_FAILED and len(polls) == 1  # it stops, and does not poll forever
    assert err.strip().splitlines()[-1] == f"error: sweep {sweep_id} {said}"
    assert "Traceback" not in err


def test_the_sweeps_listing_shows_a_visitors_owner_masked_like_status(tmp_path, sleepers):
    from core.runs.limits import shown_owner

    path = str(tmp_path / "store.sqlite3")
    token = "0123456789abcdef0123456789abcdef"
    sweeps.enqueue_sweep(Store(path), batch_sweep(8, 16), f"visitor:{token}", limits=NO_LIMITS, caps=CPU)
    listing = cli(path, "sweeps", "--json")
    assert listing.returncode == 0, listing.stderr
    (row,) = json.loads(listing.stdout)
    assert row["owner"] == shown_owner(f"visitor:{token}") and token not in listing.stdout
    assert token[:4] in row["owner"]  # still recognisable to its owner
