"""The training planner's arithmetic and sentences, and the regime reading, on known inputs."""

import pytest

from core.engine import words
from core.engine.summary import FASTER, NO_CLEAR_DIFFERENCE, SLOWER, Headline
from core.engine.words import (
    CHANGES,
    OVERHEAD_BOUND,
    THROUGHPUT_BOUND,
    plan_from_summary,
    plan_sentence,
    regime,
)


def headline(
    eager_s: float, x: float, low: float, high: float, compile_s: float, verdict: str | None = None
) -> Headline:
    """A race's headline without its steps: the compile is the whole head start."""
    verdict = verdict or (FASTER if low > 1 else SLOWER if high < 1 else NO_CLEAR_DIFFERENCE)
    return Headline(x, low, high, verdict, compiled=True, eager_step_s=eager_s, compile_s=compile_s)


# 100 ms eager at 2x: 50 ms compiled per step, 20 s compile: break-even at 20 / 0.05 = step 400.
FAST = headline(0.100, 2.0, 1.8, 2.5, 20.0)


def test_plan_arithmetic_is_the_headline_applied():
    plan = FAST.plan(50_000)
    assert plan.eager_total_s == pytest.approx(5_000.0)
    assert plan.compiled_total_s == pytest.approx(20.0 + 2_500.0)
    assert plan.saved_s == pytest.approx(2_480.0)
    # The saving's interval is the headline interval applied to the eager step: e - e / x at its ends.
    assert plan.saved_ci == pytest.approx((50_000 * (0.1 - 0.1 / 1.8) - 20, 50_000 * (0.1 - 0.1 / 2.5) - 20))
    assert plan.compiled_ci == pytest.approx((5_000 - plan.saved_ci[1], 5_000 - plan.saved_ci[0]))
    assert plan.break_even_step == pytest.approx(400.0) and not plan.shorter_than_break_even
    assert plan.break_even_range == pytest.approx((20 / 0.06, 20 / (0.1 - 0.1 / 1.8)))
    assert plan_sentence(plan) == "Over 50,000 steps compile saves about 41 min (37-50)."


def test_a_run_shorter_than_the_whole_break_even_range_costs_the_compile_minus_what_it_saved():
    plan = FAST.plan(100)
    assert plan.saved_s == pytest.approx(100 * 0.05 - 20.0)  # -15 s
    assert plan.shorter_than_break_even
    assert plan_sentence(plan) == (
        "Over 100 steps compile costs about 15 s: your run is shorter than the break-even (between step 334 and 451)."
    )


def test_a_run_within_the_break_even_range_says_its_interval_reaches_both_sides():
    plan = FAST.plan(420)
    assert plan.saved_ci[0] < 0 < plan.saved_ci[1]
    assert plan_sentence(plan) == (
        "Over 420 steps compile saves about 1 s at the headline speedup, but your run ends near the break-even "
        "(between step 334 and 451): within the speedup's interval it ranges from -1 s to +5 s."
    )


def test_when_compiled_steps_are_slower_compile_never_pays_off():
    plan = headline(0.050, 0.050 / 0.060, 0.80, 0.86, 10.0).plan(10_000)
    assert plan.break_even_step is None and plan.saved_s == pytest.approx(-110.0)
    assert plan_sentence(plan) == (  # what costs is the slower steps, not the 10 s compile
        "Over 10,000 steps compiled takes about 1.8 min longer: its slower steps (60 ms against 50 ms) "
        "cost about 1.7 min and the 10 s compile is paid once; it never pays off."
    )


def test_a_slower_race_loses_what_its_headline_says_over_the_whole_run():
    """Issue 43: a race at 0.88x (0.80-0.98x) was planned to lose "about 2.9 min" over a 2.1 h run."""
    plan = headline(0.150, 0.88, 0.80, 0.98, 30.0).plan(50_000)  # 2.1 h of eager steps
    assert plan.saved_s == pytest.approx(-30 - 50_000 * (0.150 / 0.88 - 0.150))
    assert plan_sentence(plan).startswith("Over 50,000 steps compiled takes about 18 min longer")


def test_a_saving_whose_interval_reaches_a_loss_is_not_called_a_saving():
    plan = headline(0.050, 1.02, 0.95, 1.09, 5.0).plan(100_000)
    sentence = plan_sentence(plan)
    assert plan.saved_ci[0] < 0 < plan.saved_ci[1]
    assert "cannot tell whether it pays off" in sentence and "saves about 1.6 min at the headline speedup" in sentence


def test_steps_not_clearly_slower_are_not_said_to_never_pay_off():
    """Issue 34's walk-through: a sweep point whose verdict was "no clear difference" read "never
    pays off" in its plan because compiled's median step was a hair slower."""
    plan = headline(0.050, 0.996, 0.97, 1.02, 10.0).plan(50_000)
    assert plan.verdict == "no clear difference" and plan.saved_s < 0
    sentence = plan_sentence(plan)
    assert "never pays off" not in sentence and "slower steps" not in sentence
    assert sentence == (
        "Over 50,000 steps compile costs about 20 s at the headline speedup, but compiled steps are not clearly "
        "faster or slower here: within the speedup's interval it ranges from -87 s to +39 s, so the race cannot "
        "tell whether it pays off."
    )


def test_a_run_has_at_least_one_step():
    with pytest.raises(ValueError):
        FAST.plan(0)


def test_plan_from_a_stored_summary_follows_the_race_s_own_steps_then_its_headline():
    summary = {
        "eager_step_times_s": [0.1] * 50,
        "compiled_step_times_s": [10.0] + [0.05] * 49,
        "compile_time_s": 9.9,
        "warmup_steps": 1,
        "steady_state_speedup": 2.0,
        "speedup_ci95": [1.8, 2.2],
        "verdict": FASTER,
        "eager_median_step_s": 0.1,
    }
    plan = plan_from_summary(summary, 1_000)
    # The race's 50 steps as measured (its 10 s first step included), then 950 more at 0.1 / 2 s.
    assert plan.compiled_total_s == pytest.approx(10.0 + 999 * 0.05) and plan.eager_total_s == pytest.approx(100.0)
    assert plan_from_summary({**summary, "compile_skipped": "no graph was compiled"}, 1_000) is None
    assert plan_from_summary({**summary, "eager_median_step_s": None}, 1_000) is None


BATCHES = [64, 256, 1024, 4096]


def test_a_flat_step_time_reads_overhead_bound():
    reading = regime(BATCHES, [0.010, 0.0101, 0.0102, 0.0104])
    assert reading.kind == OVERHEAD_BOUND and words.OVERHEAD_ADVICE in reading.text


def test_a_step_time_proportional_to_the_batch_reads_bandwidth_or_compute_bound():
    reading = regime(BATCHES, [1e-5 * b for b in BATCHES])
    assert reading.kind == THROUGHPUT_BOUND and words.THROUGHPUT_ADVICE in reading.text
    assert reading.per_sample_s == pytest.approx(1e-5)


def test_overhead_then_linear_names_the_batch_size_where_it_changes():
    reading = regime(BATCHES, [0.005 + 1e-5 * b for b in BATCHES])  # equal at b = 500
    assert reading.kind == CHANGES
    assert reading.crossover_batch == pytest.approx(500, rel=1e-6)
    assert "below about batch 500" in reading.text


def test_the_reading_survives_a_little_noise():
    noisy = [t * f for t, f in zip([0.005 + 1e-5 * b for b in BATCHES], (1.05, 0.96, 1.03, 0.98))]
    reading = regime(BATCHES, noisy)
    assert reading.kind == CHANGES and 300 < reading.crossover_batch < 800


def test_no_reading_from_too_few_batch_sizes_or_times_no_model_fits():
    assert regime([64, 256], [0.01, 0.02]) is None
    assert regime([64, 64, 256], [0.01, 0.01, 0.02]) is None  # two distinct sizes
    assert regime(BATCHES, [0.05, 0.001, 0.08, 0.002]) is None  # up and down: no pattern


def test_the_regime_names_a_millisecond_cost_per_sample_in_milliseconds():
    """resnet18 on a 2-core CPU: 122 ms fixed and 3.56 ms per sample, not '3559.75 µs'."""
    reading = regime([16, 32, 64, 128], [0.122 + 0.00356 * b for b in (16, 32, 64, 128)])
    assert "3.56 ms per sample" in reading.text and "µs" not in reading.text
