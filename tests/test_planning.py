"""The training planner's arithmetic and sentences, and the regime reading, on known inputs."""

import pytest

from core.engine import planning
from core.engine.planning import (
    CHANGES,
    OVERHEAD_BOUND,
    THROUGHPUT_BOUND,
    StepRates,
    plan_from_summary,
    plan_sentence,
    plan_training,
    regime,
    step_rates,
)

# 100 ms eager, 50 ms compiled per step, 20 s compile: break-even at 20 / 0.05 = step 400.
RATES = StepRates(0.100, 0.050, (0.095, 0.105), (0.048, 0.052), (0.046, 0.054))


def test_plan_arithmetic_on_known_rates():
    plan = plan_training(RATES, compile_s=20.0, steps=50_000)
    assert plan.eager_total_s == pytest.approx(5_000.0)
    assert plan.compiled_total_s == pytest.approx(20.0 + 2_500.0)
    assert plan.saved_s == pytest.approx(2_480.0)
    assert plan.eager_ci == pytest.approx((4_750.0, 5_250.0))
    assert plan.compiled_ci == pytest.approx((2_420.0, 2_620.0))
    assert plan.saved_ci == pytest.approx((50_000 * 0.046 - 20, 50_000 * 0.054 - 20))
    assert plan.break_even_step == pytest.approx(400.0) and not plan.shorter_than_break_even
    assert plan_sentence(plan) == "Over 50,000 steps compile saves about 41 min (38-45)."


def test_a_run_shorter_than_the_break_even_costs_the_compile_minus_what_it_saved():
    plan = plan_training(RATES, compile_s=20.0, steps=100)
    assert plan.saved_s == pytest.approx(100 * 0.05 - 20.0)  # -15 s
    assert plan.shorter_than_break_even
    assert plan_sentence(plan) == (
        "Over 100 steps compile costs about 15 s: your run is shorter than the break-even (about step 400)."
    )


def test_a_long_compile_costs_minutes_over_a_short_run():
    plan = plan_training(StepRates(0.02, 0.019, (0.019, 0.021), (0.018, 0.02), (0.0005, 0.0015)), 130.0, 1_000)
    assert plan.saved_s == pytest.approx(-129.0)
    assert plan_sentence(plan).startswith("Over 1,000 steps compile costs about 2.1 min: your run is shorter")


def test_when_compiled_steps_are_slower_compile_never_pays_off():
    slower = StepRates(0.050, 0.060, (0.049, 0.051), (0.059, 0.061), (-0.012, -0.008))
    plan = plan_training(slower, compile_s=10.0, steps=10_000)
    assert plan.break_even_step is None and plan.saved_s == pytest.approx(-110.0)
    assert plan_sentence(plan) == (  # what costs is the slower steps, not the 10 s compile
        "Over 10,000 steps compiled takes about 1.8 min longer: its slower steps (60 ms against 50 ms) "
        "cost about 1.7 min and the 10 s compile is paid once; it never pays off."
    )


def test_a_saving_whose_interval_reaches_a_loss_is_not_called_a_saving():
    noisy = StepRates(0.050, 0.049, (0.045, 0.055), (0.044, 0.054), (-0.004, 0.006))
    plan = plan_training(noisy, compile_s=5.0, steps=100_000)
    sentence = plan_sentence(plan)
    assert "no clear saving" in sentence and "saves about 1.6 min at the measured medians" in sentence


def test_steps_not_clearly_slower_are_not_said_to_never_pay_off():
    """Issue 34's walk-through: a sweep point whose verdict was "no clear difference" read "never
    pays off" in its plan because compiled's median step was a hair slower."""
    hair_slower = StepRates(0.050, 0.0502, (0.049, 0.051), (0.049, 0.051), (-0.0012, 0.0008))
    plan = plan_training(hair_slower, compile_s=10.0, steps=50_000)
    assert plan.verdict == "no clear difference" and plan.saved_s < 0
    sentence = plan_sentence(plan)
    assert "never pays off" not in sentence and "slower steps" not in sentence
    assert sentence == (
        "Over 50,000 steps compile costs about 20 s: the 10 s compile, plus about 10 s that compiled steps lose at "
        "the measured medians; they are not clearly faster or slower here, so there is no break-even to count on."
    )


def test_a_net_cost_below_the_compile_says_what_the_steps_won_back():
    """Issue 34's walk-through: "compile costs about 40 s: ... nothing earns the 1.8 min compile back"
    left a reader to wonder where the other minute went."""
    hair_faster = StepRates(0.050, 0.04986, (0.049, 0.051), (0.049, 0.051), (-0.0009, 0.0012))
    plan = plan_training(hair_faster, compile_s=108.0, steps=50_000)
    assert plan.break_even_step is None and -108 < plan.saved_s < 0
    assert plan_sentence(plan) == (
        "Over 50,000 steps compile costs about 1.7 min: the 1.8 min compile, less about 7 s that compiled steps win "
        "back at the measured medians; they are not clearly faster or slower here, so there is no break-even to "
        "count on."
    )


def test_a_run_has_at_least_one_step():
    with pytest.raises(ValueError):
        plan_training(RATES, 1.0, 0)


def test_step_rates_come_from_the_steady_steps_with_intervals_around_the_medians():
    eager = [0.5] + [0.10, 0.11, 0.09] * 20
    compiled = [9.0] + [0.05, 0.06, 0.04] * 20
    rates = step_rates(eager, compiled, warmup=1)
    assert rates.eager_s == pytest.approx(0.10) and rates.compiled_s == pytest.approx(0.05)
    assert rates.eager_ci[0] <= 0.10 <= rates.eager_ci[1]
    assert rates.saving_ci[0] <= 0.05 <= rates.saving_ci[1]
    assert step_rates([], compiled) is None


def test_plan_from_a_stored_summary_follows_the_race_s_own_steps_then_its_steady_rates():
    summary = {
        "eager_step_times_s": [0.1] * 50,
        "compiled_step_times_s": [10.0] + [0.05] * 49,
        "compile_time_s": 9.9,
        "warmup_steps": 1,
    }
    plan = plan_from_summary(summary, 1_000)
    # The race's 50 steps as measured (its 10 s first step included), then 950 more at 50 ms.
    assert plan.compiled_total_s == pytest.approx(10.0 + 999 * 0.05) and plan.eager_total_s == pytest.approx(100.0)
    assert plan_from_summary({**summary, "compile_skipped": "no graph was compiled"}, 1_000) is None
    assert plan_from_summary({**summary, "compile_time_s": None}, 1_000) is None


BATCHES = [64, 256, 1024, 4096]


def test_a_flat_step_time_reads_overhead_bound():
    reading = regime(BATCHES, [0.010, 0.0101, 0.0102, 0.0104])
    assert reading.kind == OVERHEAD_BOUND and planning.OVERHEAD_ADVICE in reading.text


def test_a_step_time_proportional_to_the_batch_reads_bandwidth_or_compute_bound():
    reading = regime(BATCHES, [1e-5 * b for b in BATCHES])
    assert reading.kind == THROUGHPUT_BOUND and planning.THROUGHPUT_ADVICE in reading.text
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
