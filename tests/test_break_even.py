"""One break-even, computed one way: the plan of a user's run breaks even where the race's card says
(the step the race crossed at, or its projection), and names what costs (the compile, or slower
steps). Before, the card said step 344 and the plan "about step 221" from compile time / saving."""

import math

import numpy as np
import pytest

from core.engine import analysis, words
from core.engine.summary import NO_CLEAR_DIFFERENCE, Summary
from core.view.run_screen.layout import result_cards


def summary_of(eager, compiled) -> dict:
    return {
        **analysis.summarize(eager, compiled, [sum(eager)], [sum(compiled)], 16),
        "compile_time_s": compiled[0] - eager[0],
    }


def card_value(summary: dict) -> str:
    return next(
        c for c in result_cards(summary, total=len(summary["eager_step_times_s"])) if c.label == "Break-even"
    ).value


def slow_start_race(n: int = 600) -> tuple[list[float], list[float]]:
    """A 3 s compile, then 20 compiled steps still slow (a second recompile, allocator growth), then
    steady 80 ms against eager's 100 ms: compile_time / saving says step 150, the race crosses later."""
    rng = np.random.default_rng(3)
    eager = [float(t) for t in 0.1 + rng.uniform(-0.002, 0.002, n)]
    compiled = [3.1] + [0.2] * 20 + [float(t) for t in 0.08 + rng.uniform(-0.002, 0.002, n - 21)]
    return eager, compiled


def test_the_plan_breaks_even_at_the_step_the_race_crossed_at():
    summary = summary_of(*slow_start_race())
    assert summary["break_even_step"] is not None
    naive = summary["compile_time_s"] / (summary["eager_median_step_s"] - summary["compiled_median_step_s"])
    assert abs(naive - summary["break_even_step"]) > 50  # the two computations the page used to show
    plan = words.plan_from_summary(summary, 50_000)
    assert (
        words.break_even_step(plan.break_even_step, plan.break_even_measured) == f"step {summary['break_even_step']:,}"
    )
    assert card_value(summary) == f"step {summary['break_even_step']:,}"
    short = words.plan_from_summary(summary, summary["break_even_step"] - 5)
    assert short.saved_s < 0 and f"(step {summary['break_even_step']:,})" in words.plan_sentence(short)
    assert words.plan_from_summary(summary, summary["break_even_step"]).saved_s >= 0


def test_the_plan_breaks_even_where_the_card_projects_it():
    summary = summary_of(*slow_start_race(100))
    assert summary["break_even_step"] is None and Summary.of(summary).projected_position is not None
    plan = words.plan_from_summary(summary, 50_000)
    projected = math.floor(Summary.of(summary).projected_position) + 1
    assert plan.break_even_step == pytest.approx(Summary.of(summary).projected_position)
    assert words.break_even_step(plan.break_even_step, plan.break_even_measured) == f"about step {projected:,}"
    assert card_value(summary) == f"≈ step {projected:,}"
    early, late = (words.step_at(end) for end in Summary.of(summary).projected_range)
    near = words.plan_sentence(words.plan_from_summary(summary, projected - 2))
    assert f"near the break-even (between step {early:,} and {late:,})" in near
    shorter = words.plan_sentence(words.plan_from_summary(summary, early - 2))
    assert f"shorter than the break-even (between step {early:,} and {late:,})" in shorter


def test_a_gain_in_doubt_gives_the_plan_no_break_even():
    rng = np.random.default_rng(1)
    eager = [float(t) for t in 0.1 + rng.uniform(-0.04, 0.04, 60)]
    compiled = [3.0] + [float(t) for t in 0.097 + rng.uniform(-0.04, 0.04, 59)]
    summary = summary_of(eager, compiled)
    assert summary["verdict"] == NO_CLEAR_DIFFERENCE and summary["steady_state_speedup"] > 1
    short, long = (words.plan_from_summary(summary, steps) for steps in (20, 1_000))
    assert short.break_even_step is None and long.break_even_step is None
    assert "break-even" not in words.plan_sentence(short) and "as this race measured" in words.plan_sentence(short)
    assert "break-even" not in words.plan_sentence(long) and "cannot tell whether it pays off" in (
        words.plan_sentence(long)
    )


def test_slower_steps_are_named_as_what_costs_not_the_compile():
    eager = [0.010] * 200
    compiled = [16.4] + [0.022] * 199
    plan = words.plan_from_summary(summary_of(eager, compiled), 50_000)
    sentence = words.plan_sentence(plan)
    assert "compile costs" not in sentence and "its slower steps" in sentence
    assert "the 16 s compile is paid once" in sentence and "it never pays off" in sentence
