"""A break-even is projected only from a speedup whose 95% interval lies above 1 (verdict "faster"):
from a gain in doubt the app draws no dashed crossing and names no projected step, on every surface
that shows one (the run's charts, its cards, its words, the command line, a sweep). The rule lives in
one place, core.engine.summary.Summary.projection_stands; a sweep's regime advice follows the same verdicts."""

import json
import re

import numpy as np
import pandas as pd
import pytest

from core.engine import analysis, reading, words
from core.engine.spec import RunSpec
from core.engine.summary import NO_CLEAR_DIFFERENCE, Summary
from core.runs.store import Run, Store
from core.runs.sweeps import Axis, SweepSpec
from core.view.run_screen import layout as live_layout
from core.view.run_screen.layout import result_cards
from core.view.run_screen.shared_board import LiveBoard
from core.view.sweep import EXTRAPOLATED, regime_readings, sweep_frame

PROJECTED = "projected break-even"  # the tooltip of the dashed crossing on the race and lead charts


def doubtful_times() -> tuple[list[float], list[float]]:
    """Compiled a little faster per step (1.13x) but noisy: the interval spans 1, still behind."""
    rng = np.random.default_rng(1)
    eager = [float(t) for t in 0.1 + rng.uniform(-0.04, 0.04, 60)]
    compiled = [3.0] + [float(t) for t in 0.097 + rng.uniform(-0.04, 0.04, 59)]
    return eager, compiled


def clear_times() -> tuple[list[float], list[float]]:
    """Compiled clearly faster per step (1.25x), still behind after its compile."""
    return [0.1] * 60, [3.0] + [0.08] * 59


def summary_of(eager, compiled) -> dict:
    return analysis.summarize(eager, compiled, [sum(eager)], [sum(compiled)], 16)


def stored_run(store: Store, eager, compiled) -> int:
    run_id = store.create_run(
        "race", {"model": "mlp", "batch_size": 16, "epochs": 1, "steps_per_epoch": 60}, "x", "cpu"
    )
    rows = [
        {"kind": "step", "variant": variant, "phase": "train", "epoch": 1, "step": i, "time_s": t, "loss": 1.0}
        for variant, times in (("eager", eager), ("compiled", compiled))
        for i, t in enumerate(times, start=1)
    ]
    store.append_events(run_id, rows)
    store.finish_run(run_id, "done", summary=summary_of(eager, compiled))
    return run_id


def chart_texts(store: Store, run_id: int, present: bool) -> dict:
    snap = LiveBoard(store.path).snapshot(run_id)
    built = live_layout.chart_builders(snap.run, snap, snap.summary(), present)
    return {key: json.dumps(build().to_dict(validate=False)) for key, build in built.items()}


@pytest.fixture
def store(tmp_path):
    return Store(str(tmp_path / "store.sqlite3"))


def test_the_doubtful_race_is_one_a_projection_could_be_drawn_from():
    eager, compiled = doubtful_times()
    summary = summary_of(eager, compiled)
    assert summary["verdict"] == NO_CLEAR_DIFFERENCE and summary["steady_state_speedup"] > 1
    assert summary["speedup_ci95"][0] < 1 < summary["speedup_ci95"][1]
    assert summary["break_even_step"] is None
    assert analysis.projected_break_even(eager, compiled) is not None  # the steady rates do cross


@pytest.mark.parametrize("present", [False, True])
def test_the_charts_draw_no_projected_crossing_from_a_gain_the_interval_does_not_stand_behind(store, present):
    doubtful = chart_texts(store, stored_run(store, *doubtful_times()), present)
    clear = chart_texts(store, stored_run(store, *clear_times()), present)
    race = "present_cumulative" if present else "cumulative"
    assert PROJECTED in clear[race]  # the same charts do draw one from a clear gain
    assert not [key for key, text in doubtful.items() if PROJECTED in text or '"strokeDash": [5, 4]' in text]


def test_the_break_even_card_projects_no_step_from_a_gain_in_doubt():
    summary = summary_of(*doubtful_times())
    card = next(c for c in result_cards(summary, total=60, live=False) if c.label == "Break-even")
    assert card.value == "none" and not card.delta and not re.search(r"step \d", card.help), card
    clear = next(c for c in result_cards(summary_of(*clear_times()), total=60) if c.label == "Break-even")
    assert clear.value.startswith("≈ step")


def test_the_command_line_projects_no_step_from_a_gain_in_doubt():
    assert "about step" in words.break_even(summary_of(*clear_times()))
    assert "about step" not in words.break_even(summary_of(*doubtful_times()))


def sweep_run(run_id: int, spec: RunSpec, summary: dict) -> Run:
    return Run(run_id, "race", spec.to_dict(), "ann", "cpu", "done", "done", 1.0, 0.0, None, None, None, None,
               None, None, 0, None, summary, None, None, 0, 1)  # fmt: skip


def test_a_sweep_plots_no_projected_break_even_from_a_gain_in_doubt():
    sweep = SweepSpec(RunSpec(model="mlp", device="cpu"), (Axis("batch_size", (16, 32)),))
    clear, doubtful = (summary_of(*clear_times()), summary_of(*doubtful_times()))
    runs = [sweep_run(i, point, s) for i, (point, s) in enumerate(zip(sweep.points(), (clear, doubtful)), start=1)]
    frame = sweep_frame(sweep, runs)
    assert frame["break_even_kind"].tolist()[0] == EXTRAPOLATED
    assert pd.isna(frame["break_even_kind"].tolist()[1]) and np.isnan(frame["break_even_at"].tolist()[1])


def test_a_summary_records_no_projection_from_a_gain_in_doubt():
    doubtful, clear = summary_of(*doubtful_times()), summary_of(*clear_times())
    assert doubtful["break_even_extrapolated_step"] is None and doubtful["break_even_projected_wall_s"] is None
    assert Summary.of(doubtful).projected_position is None
    assert Summary.of(clear).projected_position == pytest.approx(clear["break_even_extrapolated_step"])


def test_a_summary_stored_before_the_rule_still_shows_no_projection_from_a_gain_in_doubt():
    old = {**summary_of(*doubtful_times()), "break_even_extrapolated_step": 662.0, "break_even_projected_wall_s": 60.0}
    assert Summary.of(old).projected_position is None
    assert "about step" not in words.break_even(old)
    assert "step 662" not in reading.reading(old)
    card = next(c for c in result_cards(old, total=60, live=True) if c.label == "Break-even")
    assert "662" not in card.help and not card.delta
    assert "projected" not in reading.reading(old, live=True, total=60, counts={"compiled": 60})


def test_the_words_project_only_from_a_clear_gain():
    clear = summary_of(*clear_times())
    assert "breaks even between step" in reading.reading(clear, live=True, total=60, counts={"compiled": 60})
    assert "about step" in reading.reading(clear)
    span = Summary.of(clear).projected_range
    said = words.steps_range(
        span, None, live=False
    )  # the finished reading gives the range the live words and the card give
    assert f"({said} within its 95% interval)" in reading.reading(clear)
    assert f"{said} within its 95% interval" in words.break_even(clear)


BATCHES = [64, 128, 256]
LINEAR = [1e-5 * b for b in BATCHES]


def test_the_regime_reading_does_not_say_fusion_helps_when_most_points_read_no_clear_difference():
    reading = words.regime(BATCHES, LINEAR, ["faster", "no clear difference", "no clear difference"])
    assert words.THROUGHPUT_ADVICE not in reading.text and "fusion helps" not in reading.text
    assert "clearly faster at only 1 of 3 batch sizes (2 no clear difference)" in reading.text
    firm = words.regime(BATCHES, LINEAR, ["faster", "faster", "no clear difference"])
    assert words.THROUGHPUT_ADVICE in firm.text and "only" not in firm.text


def test_the_sweep_regime_reading_reads_the_points_verdicts():
    sweep = SweepSpec(RunSpec(model="mlp", device="cpu"), (Axis("batch_size", tuple(BATCHES)),))
    runs = []
    for i, (point, step_s) in enumerate(zip(sweep.points(), LINEAR), start=1):
        summary = {**summary_of(*doubtful_times()), "eager_median_step_s": step_s}
        runs.append(sweep_run(i, point, summary))
    (reading,) = regime_readings(sweep, sweep_frame(sweep, runs))
    assert "fusion helps" not in reading and "clearly faster at only 0 of 3" in reading
