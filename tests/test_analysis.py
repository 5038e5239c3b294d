"""Analysis on data with known answers, including the published tutorial table."""

import csv
import os

import pytest

from core.engine import analysis
from core.engine.analysis import (
    break_even,
    compile_overhead,
    default_warmup,
    steady_state_speedup,
    summarize,
    whole_run_speedup,
)
from core.engine.reading import reading
from core.engine.summary import FASTER, NEVER_NO_GAIN, NEVER_SLOWER, NO_CLEAR_DIFFERENCE, NOT_WITHIN_RUN, SLOWER

REFERENCE = os.path.join(os.path.dirname(__file__), "..", "assets", "reference", "tutorial_resnet50_cifar10_epochs.csv")


def tutorial_epochs(gpu_prefix: str) -> tuple[list[float], list[float]]:
    with open(REFERENCE) as fh:
        rows = [r for r in csv.DictReader(line for line in fh if not line.startswith("#"))]
    pick = lambda variant: [  # noqa: E731
        float(r["train_epoch_time_s"]) for r in rows if r["gpu"].startswith(gpu_prefix) and r["variant"] == variant
    ]
    return pick("eager"), pick("compiled")


def test_a100_tutorial_run_first_epoch_overhead_is_41_6_s():
    eager, compiled = tutorial_epochs("NVIDIA A100")
    assert compile_overhead(eager, compiled, 1) == pytest.approx(41.6, abs=0.05)


def test_a100_tutorial_run_steady_speedup_is_1_12x_and_faster():
    eager, compiled = tutorial_epochs("NVIDIA A100")
    speed = steady_state_speedup(eager, compiled, warmup=1)
    assert speed.speedup == pytest.approx(1.12, abs=0.005)
    assert speed.ci_low <= speed.speedup <= speed.ci_high
    assert speed.verdict == FASTER


def test_a100_tutorial_run_does_not_break_even_within_5_epochs_but_would_at_about_6_5():
    eager, compiled = tutorial_epochs("NVIDIA A100")
    be = break_even(eager, compiled, warmup=1)
    assert be.step is None and be.reason == NOT_WITHIN_RUN
    assert be.extrapolated_position == pytest.approx(6.5, abs=0.1)


def test_a100_tutorial_whole_run_is_3_2_percent_slower():
    eager, compiled = tutorial_epochs("NVIDIA A100")
    speedup = whole_run_speedup(sum(eager), sum(compiled))
    assert 1 / speedup - 1 == pytest.approx(0.032, abs=0.0005)


def test_rtx4080_tutorial_run_breaks_even_during_epoch_3():
    eager, compiled = tutorial_epochs("NVIDIA GeForce RTX 4080")
    be = break_even(eager, compiled, warmup=1)
    assert be.step == 3
    assert be.position == pytest.approx(2.1, abs=0.01)
    assert sum(compiled[:2]) < be.wall_s < sum(compiled[:3])
    assert 1 - 1 / whole_run_speedup(sum(eager), sum(compiled)) == pytest.approx(0.062, abs=0.0005)
    assert compile_overhead(eager, compiled, 1) == pytest.approx(13.1, abs=0.05)


def test_break_even_at_a_constructed_step():
    # Compiled pays 4 s up front and then saves 0.5 s a step: even after step 9, exactly.
    eager = [1.0] * 12
    compiled = [5.0] + [0.5] * 11
    be = break_even(eager, compiled)
    assert be.step == 9
    assert be.position == pytest.approx(9.0)
    assert be.wall_s == pytest.approx(9.0)
    assert be.reason is None


def test_break_even_interpolates_inside_the_crossing_step():
    be = break_even([1.0, 1.0, 1.0], [2.0, 0.5, 0.2])
    # deficit after step 1: +1.0; after step 2: +0.5; after step 3: -0.3 -> 0.5/0.8 into step 3
    assert be.step == 3
    assert be.position == pytest.approx(2 + 0.5 / 0.8)
    assert be.wall_s == pytest.approx(2.5 + 0.625 * 0.2)


def test_break_even_is_the_last_crossing_when_compiled_falls_behind_again():
    be = break_even([1.0] * 5, [1.5, 0.2, 1.5, 0.2, 0.2])
    # deficit: .5, -.3, .2, -.6, -1.4: ahead for good only from step 4
    assert be.step == 4


def test_break_even_is_none_when_compiled_is_slower():
    be = break_even([1.0] * 10, [3.0] + [1.2] * 9)
    assert be.step is None and be.reason == NEVER_SLOWER and be.extrapolated_position is None


def test_break_even_is_step_one_when_compiled_is_never_behind():
    be = break_even([1.0] * 4, [0.5] * 4)
    assert be.step == 1 and be.position == pytest.approx(0.0)


def test_speedup_verdicts():
    eager = [1.0 + 0.01 * (i % 5) for i in range(40)]
    assert steady_state_speedup(eager, [t / 1.5 for t in eager]).verdict == FASTER
    assert steady_state_speedup(eager, [t * 1.5 for t in eager]).verdict == SLOWER
    noisy = [1.0 + 0.3 * ((i * 7) % 11 - 5) / 5 for i in range(40)]
    assert steady_state_speedup(noisy, list(reversed(noisy))).verdict == NO_CLEAR_DIFFERENCE


def test_speedup_excludes_warmup_steps():
    eager = [1.0] * 20
    compiled = [30.0, 30.0] + [0.5] * 18
    assert steady_state_speedup(eager, compiled, warmup=2).speedup == pytest.approx(2.0)


def test_speedup_is_none_without_data():
    assert steady_state_speedup([], [1.0]) is None


def test_default_warmup_leaves_steady_samples():
    assert default_warmup(1) == 0
    assert default_warmup(2) == 1
    assert default_warmup(3) == 1
    assert default_warmup(60) == 6
    assert default_warmup(10_000) == 10
    for n in range(3, 200):
        assert 1 <= default_warmup(n) <= n - 2


def test_summary_of_a_run_that_failed_before_compiled_started_has_no_comparison():
    s = summarize([0.1] * 6, [], [0.3, 0.3], [], batch_size=8)
    assert s["steady_state_speedup"] is None and s["compile_time_s"] is None
    assert s["whole_run_speedup"] is None and s["first_epoch_overhead_s"] is None
    assert "Not enough" in reading(s)


def test_summary_keys_and_values_on_a_constructed_race():
    eager_steps = [1.0] * 20
    compiled_steps = [6.0] + [0.5] * 19
    s = summarize(eager_steps, compiled_steps, [10.0, 10.0], [10.5, 5.0], batch_size=32)
    assert s["warmup_steps"] == 2
    assert s["compile_time_s"] == pytest.approx((6.0 + 0.5) - 2.0)
    assert s["first_epoch_overhead_s"] == pytest.approx(0.5)
    assert s["steady_state_speedup"] == pytest.approx(2.0)
    assert s["break_even_step"] == 11
    assert s["whole_run_speedup"] == pytest.approx(20 / 15.5)
    assert s["compiled_samples_per_s"] == pytest.approx(64.0)
    assert "2.00x faster" in reading(s)


def test_no_clear_difference_is_not_called_slower_in_break_even():
    noisy = [1.0 + 0.3 * ((i * 7) % 11 - 5) / 5 for i in range(40)]
    compiled = [5.0] + [t * 1.001 for t in reversed(noisy)][1:]
    s = summarize(noisy, compiled, [sum(noisy)], [sum(compiled)], batch_size=1)
    assert s["verdict"] == NO_CLEAR_DIFFERENCE
    assert s["break_even_reason"] in (NEVER_NO_GAIN, NOT_WITHIN_RUN)


@pytest.mark.parametrize(
    "eager, compiled, phrase",
    [
        ([1.0] * 20, [5.0] + [1.5] * 19, "slower"),
        ([1.0] * 20, [5.0] + [0.5] * 19, "paid for itself at step"),
        ([1.0] * 20, [50.0] + [0.9] * 19, "did not pay off within this run; at these rates it would at about step"),
    ],
)
def test_the_reading_says_what_happened(eager, compiled, phrase):
    s = summarize(eager, compiled, [sum(eager)], [sum(compiled)], batch_size=1)
    assert phrase in reading(s)


def test_cumulative():
    assert analysis.cumulative([1, 2, 3]) == [1, 3, 6]


# --- projected break-even --------------------------------------------------------------------


def test_projection_of_a_finished_run_matches_the_summarys_extrapolation():
    eager, compiled = [1.0] * 10, [20.0] + [0.5] * 9
    projection = analysis.projected_break_even(eager, compiled)
    assert projection.position == pytest.approx(39.0)  # 14.5 s behind at step 10, gaining 0.5 s a step
    assert projection.step == 40
    assert projection.wall_s == pytest.approx(24.5 + 29 * 0.5)
    summary = analysis.summarize(eager, compiled, [10.0], [24.5], 64)
    assert summary["break_even_extrapolated_step"] == pytest.approx(projection.position)
    assert summary["break_even_projected_wall_s"] == pytest.approx(projection.wall_s)


def test_projection_while_compiled_runs_uses_every_eager_step_so_it_does_not_jump():
    """Eager's first 100 steps were slower than the rest: projecting with only as many eager steps as
    compiled has done gave 496, then 661, then 892 as the compiled run went on. Crossing eager's
    whole measured line gives 892 throughout."""
    eager = [0.10] * 100 + [0.09] * 1400
    positions = []
    for done in (100, 200, 300):
        compiled = [10.0] + [0.08] * (done - 1)
        positions.append(analysis.projected_break_even(eager, compiled).position)
    # Behind by 10 - 0.1 - 99 * 0.02 = 7.92 s at step 100, then gaining 0.09 - 0.08 s a step.
    assert positions == pytest.approx([100 + 7.92 / 0.01] * 3)


def test_projection_beyond_the_last_eager_step_continues_eager_at_its_steady_rate():
    eager = [0.1] * 200
    compiled = [30.0] + [0.09] * 149
    projection = analysis.projected_break_even(eager, compiled)
    behind_at_200 = (30.0 + 199 * 0.09) - 20.0  # compiled extended to eager's last step
    assert projection.position == pytest.approx(200 + behind_at_200 / 0.01)


def test_no_projection_without_compiled_steps_when_compiled_is_ahead_or_slower():
    assert analysis.projected_break_even([0.1] * 10, []) is None
    assert analysis.projected_break_even([0.1] * 10, [0.05] * 10) is None  # ahead: that is a break-even
    assert analysis.projected_break_even([0.1] * 10, [1.0] + [0.2] * 9) is None  # never catches up
