"""What a sweep shows, without Streamlit: the points frame (only finished points are findings), the
charts' axes and counts, the terminal report and JSON, and text made safe for a terminal."""

import json
import random

import pytest
from test_sweep_page import measured_summary

from core.engine.spec import RunSpec
from core.runs.store import Run
from core.runs.sweeps import Axis, SweepSpec
from core.view import sweep_charts
from core.view.sweep import (
    break_even_note,
    chart_axes,
    default_sweep,
    estimate_sweep_seconds,
    form_sweep,
    point_line,
    points_table,
    regime_readings,
    sweep_frame,
    sweep_json,
    sweep_report,
    sweep_to_state,
)

BATCHES = (64, 256, 1024, 4096)


def fake_runs(sweep: SweepSpec, statuses) -> list[Run]:
    rng, runs = random.Random(0), []
    for i, (point, status) in enumerate(zip(sweep.points(), statuses), start=1):
        summary = measured_summary(point.batch_size, rng) if status == "done" else None
        runs.append(
            Run(
                i,
                "race",
                point.to_dict(),
                "ann",
                "cpu",
                status,
                status,
                1.0,
                0.0,
                None,
                None,
                None,
                None,
                None,
                None,
                0,
                None,
                summary,
                None,
                "boom\x1b[31m\x9b2J\u202e red" if status == "failed" else None,
                0,
                1,
            )  # fmt: skip
        )
    return runs


def batch_sweep(second: Axis | None = None) -> SweepSpec:
    axes = (Axis("batch_size", BATCHES),) + ((second,) if second else ())
    return SweepSpec(RunSpec(model="pointwise_mlp", device="cpu"), axes)


def test_only_finished_points_with_compiled_code_are_findings():
    sweep = batch_sweep()
    runs = fake_runs(sweep, ["done", "done", "running", "failed"])
    runs[1].summary["compile_skipped"] = "no graph was compiled (skipped)"
    frame = sweep_frame(sweep, runs)
    assert frame["measured"].tolist() == [True, False, False, False]
    assert frame["speedup"].notna().tolist() == [True, False, False, False]
    rows = points_table(frame)
    assert rows[1]["verdict"] == "compile did not happen: no graph was compiled (skipped)"
    assert rows[3]["steady speedup (95%)"] == "" and rows[3]["state"] == "failed"


def test_batch_size_goes_on_a_log_2_axis_and_a_second_axis_is_the_colour():
    sweep = batch_sweep(Axis("precision", ("fp32", "amp-bf16")))
    assert chart_axes(sweep) == ("batch_size", "precision")
    frame = sweep_frame(sweep, fake_runs(sweep, ["done"] * 8))
    spec = sweep_charts.speedup_chart(sweep, frame).to_dict()
    x = spec["layer"][1]["encoding"]["x"]
    assert x["scale"] == {"type": "log", "base": 2} and spec["layer"][1]["encoding"]["color"]["field"] == "series"
    assert spec["description"] == "Steady-state speedup: 8 points"
    marks = [layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"] for layer in spec["layer"]]
    assert marks == ["rule", "line", "rule", "point"]  # the line at 1, the curve, the 95% bars, the medians


def test_a_categorical_axis_keeps_the_order_it_was_given_in():
    sweep = SweepSpec(RunSpec(model="gpt", device="cpu"), (Axis("compile_scope", ("whole", "regional")),))
    assert chart_axes(sweep) == ("compile_scope", None)
    frame = sweep_frame(sweep, fake_runs(SweepSpec(sweep.base, sweep.axes), ["done", "done"]))
    for build in (sweep_charts.compile_time_chart, sweep_charts.throughput_chart):
        spec = build(sweep, frame).to_dict()
        assert spec["encoding"]["x"]["sort"] == ["whole", "regional"]


@pytest.mark.parametrize(
    "build",
    [
        sweep_charts.speedup_chart,
        sweep_charts.compile_time_chart,
        sweep_charts.break_even_chart,
        sweep_charts.throughput_chart,
    ],
)
def test_no_finished_point_gives_a_valid_empty_chart(build):
    sweep = batch_sweep(Axis("precision", ("fp32", "amp-bf16")))
    spec = build(sweep, sweep_frame(sweep, fake_runs(sweep, ["queued"] * 8))).to_dict()
    assert spec["title"].endswith("(waiting for data)") and spec["description"].endswith(": 0 points")


def test_points_that_never_break_even_are_named_not_drawn():
    sweep = batch_sweep()
    frame = sweep_frame(sweep, fake_runs(sweep, ["done"] * 4))
    assert break_even_note(frame) == (
        "No break-even to chart: batch size 64 (never: compiled steps are slower); "
        "batch size 256 (never: compiled steps are slower)."
    )
    assert sweep_charts.break_even_chart(sweep, frame).to_dict()["description"] == "Break-even step: 2 points"


def test_the_terminal_report_and_json_name_every_point_and_strip_control_characters():
    sweep = batch_sweep()
    runs = fake_runs(sweep, ["done", "done", "done", "failed"])
    frame = sweep_frame(sweep, runs)
    report = sweep_report(sweep, frame, "finished: 3 done, 1 failed", plan_steps=50_000, runs=runs)
    # ESC and C1 controls (CSI) and bidi overrides are all removed: the one cleaner everywhere
    assert "point 4/4 batch size 4096: failed: boom[31m2J red" in report
    assert not any(c in report for c in "\x1b\x9b\u202e")
    assert "Overhead-bound below about batch" in report and "plan for a run of 50,000 steps" in report
    data = json.loads(json.dumps(sweep_json(7, sweep, runs, frame, "finished"), default=float))
    assert [p["batch_size"] for p in data["points"]] == list(BATCHES)
    assert data["points"][3]["steady_state_speedup"] is None and data["points"][3]["error"].startswith("boom")
    assert data["points"][0]["measured"] and len(data["regime"]) == 1
    assert point_line(next(frame.itertuples()), 4).startswith("point 1/4 batch size 64: done, ")


def test_the_form_round_trips_a_sweep_and_the_cpu_default_is_four_batch_sizes():
    sweep = default_sweep(None)
    assert sweep.axes == (Axis("batch_size", BATCHES),) and sweep.base.model == "pointwise_mlp"
    assert form_sweep(sweep_to_state(sweep)) == sweep
    low, high = estimate_sweep_seconds(sweep, None)
    assert 0 < low < high


def test_chart_specs_are_rebuilt_only_when_what_they_draw_changes(monkeypatch):
    sweep = batch_sweep()
    runs = fake_runs(sweep, ["done", "done", "running", "queued"])
    built = []
    original = sweep_charts.speedup_chart
    monkeypatch.setattr(sweep_charts, "speedup_chart", lambda *a: built.append(1) or original(*a))
    sweep_charts._SPEC_CACHE.clear()
    first = sweep_charts.chart_specs(sweep, sweep_frame(sweep, runs))
    again = sweep_charts.chart_specs(sweep, sweep_frame(sweep, runs))  # the running point moved on: same drawing
    assert len(built) == 1 and again == first and again is not first
    assert first[0]["description"] == "Steady-state speedup: 2 points" and first[2] is None  # nothing to chart yet
    runs[2].status, runs[2].summary = "done", measured_summary(1024, random.Random(3))
    third = sweep_charts.chart_specs(sweep, sweep_frame(sweep, runs))
    assert len(built) == 2 and third[0]["description"] == "Steady-state speedup: 3 points"


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_the_default_sweep_respects_the_shipped_host_limits(device):
    from support import ROOT

    from core.engine.spec import DeviceCaps
    from core.runs.limits import load_host_limits
    from core.runs.sweeps import sweep_problems

    limits = load_host_limits({"COMPILE_LAB_CONFIG": f"{ROOT}/deploy/host-limits.toml"})
    caps = DeviceCaps(memory_bytes=2**34)
    if device == "gpu":
        caps = DeviceCaps(cuda=True, cuda_name="A100", compute_capability=(8, 0), cuda_bf16=True, triton=True,
                          gpu_count=1, cuda_memory_bytes=80 * 2**30, memory_bytes=2**36)  # fmt: skip
    sweep = default_sweep(caps, limits)
    assert sweep_problems(sweep, caps, limits) == []
    assert 2 <= len(sweep.points()) <= limits.max_queued_per_owner  # a sweep queues every point at once
    assert all(v <= limits.max_batch_size for v in sweep.axes[0].values)


def test_without_limits_the_default_sweep_is_the_devices_four_batch_sizes():
    from core.engine.spec import DeviceCaps
    from core.runs.limits import HostLimits

    assert default_sweep(DeviceCaps(), HostLimits()).axes == (Axis("batch_size", BATCHES),)


# Issue 43: the sweep's table showed 1.20x (1.11-1.29x), 1.12x (1.04-1.20x), 1.14x (1.04-1.25x)
# beside a verdict cut at "machine", its reading said "clearly faster at only 0 of 3 batch sizes
# ()", and the break-even chart was drawn empty: every point had been measured on a busy machine.
ISSUE_POINTS = ((1.20, 1.11, 1.29), (1.12, 1.04, 1.20), (1.14, 1.04, 1.25))


def issue_sweep(verdicts):
    sweep = SweepSpec(RunSpec(model="pointwise_mlp", device="cpu"), (Axis("batch_size", (64, 256, 1024)),))
    runs = fake_runs(sweep, ["done"] * 3)
    for run, (x, low, high), verdict in zip(runs, ISSUE_POINTS, verdicts):
        run.summary.update(steady_state_speedup=x, speedup_ci95=[low, high], verdict=verdict)
        run.summary.update(break_even_step=None)
    return sweep, runs


def test_a_sweep_measured_on_a_busy_machine_says_no_verdict_whole_and_draws_no_empty_chart():
    sweep, runs = issue_sweep(["machine busy"] * 3)
    frame = sweep_frame(sweep, runs)
    assert [r["verdict"] for r in points_table(frame)] == ["no verdict (busy)"] * 3
    (reading,) = regime_readings(sweep, frame)
    assert "clearly faster at only 0 of 3 batch sizes (3 no verdict, the machine busy)" in reading
    assert "()" not in reading
    specs = sweep_charts.chart_specs(sweep, frame)
    assert specs[2] is None and [s["description"].split(":")[0] for s in specs if s] == [
        "Steady-state speedup",
        "Compile time",
        "Throughput, eager vs compiled",
    ]
    assert break_even_note(frame).startswith("No break-even to chart: batch size 64 (no verdict: the machine was busy)")
    assert "no verdict: the machine was busy, compile" in point_line(next(frame.itertuples()), 3)


def test_a_sweeps_verdicts_and_reading_follow_each_points_headline_interval():
    # Stored verdicts that the intervals beside them do not bear out: the table, the reading and
    # the break-even chart read the interval, as every surface does.
    sweep, runs = issue_sweep(["no clear difference"] * 3)
    frame = sweep_frame(sweep, runs)
    assert [r["verdict"] for r in points_table(frame)] == ["faster"] * 3
    assert all(r["break-even"].startswith("≈ step ") for r in points_table(frame))  # projected, as for faster
    (reading,) = regime_readings(sweep, frame)
    assert "clearly faster at only" not in reading
    assert sweep_charts.chart_specs(sweep, frame)[2]["description"] == "Break-even step: 3 points"


def test_the_terminal_report_suggests_its_best_point_as_a_command_that_parses_into_that_race():
    import shlex

    from core.cli.main import build_parser
    from core.cli.races import RACE_COMMAND, race_command, spec_from_args
    from core.engine.spec import RunSpec

    sweep = batch_sweep()
    runs = fake_runs(sweep, ["done", "done", "done", "failed"])
    frame = sweep_frame(sweep, runs)
    assert "race batch size 1024 alone: /?model=" in sweep_report(sweep, frame, "finished", runs=runs)  # the page's
    report = sweep_report(sweep, frame, "finished", runs=runs, command=race_command)
    assert "/?" not in report
    command = next(line.strip() for line in report.splitlines() if line.strip().startswith(RACE_COMMAND))
    best = next(r for r in runs if r.params["batch_size"] == 1024)
    assert spec_from_args(build_parser().parse_args(shlex.split(command)[3:])) == RunSpec.from_dict(best.params)
