"""The speedup's interval holds across runs, and stopping once it is narrow enough keeps it holding.

Simulated races (numpy only, no timing): step times with a known true ratio and noise like a small
shared box's (log-normal jitter, slow drift, bursts of load lasting tens of steps), laid out in time
as the schedule runs them. Over 400 races each, the reported interval must cover the true ratio at
least 95% of the time, and the old way (eager's whole run, then compiled's, single steps resampled
as if independent) is shown to fail that same check on the same kind of races.
"""

import math

import numpy as np
import pytest

from core.engine import analysis, intervals, reading
from core.engine.analysis import StopRule, race_alpha, stop_reading
from core.engine.spec import RunSpec

RACES = 400
RATIOS = (0.9, 1.1, 1.3)
BLOCK = intervals.BLOCK_STEPS


def box_noise(rng: np.random.Generator, n: int) -> np.ndarray:
    """Multiplicative noise over n consecutive steps: jitter, a slow random drift and ramp (up to
    ±15%), and load bursts (1% of steps start one: 10-60 steps, 1.3-2x slower)."""
    walk = np.cumsum(rng.normal(0, 1, n))
    log = walk / (np.abs(walk).max() + 1e-9) * 0.15 * rng.uniform(0.3, 1)
    log += rng.uniform(-0.15, 0.15) * np.arange(n) / n + rng.normal(0, 0.07, n)
    for start in np.flatnonzero(rng.random(n) < 0.01):
        log[start : start + rng.integers(10, 60)] += math.log(rng.uniform(1.3, 2.0))
    return np.exp(log)


def simulated_race(rng, ratio: float, steps: int, schedule: str) -> tuple[list[float], list[float]]:
    """Eager and compiled step times (compiled's first pays a 2 s compile), in the schedule's order."""
    noise = box_noise(rng, 2 * steps)
    if schedule == "blocks":  # eager's block, compiled's block, in turns
        turns = np.arange(2 * steps).reshape(-1, 2, BLOCK)
        e_noise, c_noise = noise[turns[:, 0].ravel()], noise[turns[:, 1].ravel()]
    else:  # sequential: eager's whole run, then compiled's
        e_noise, c_noise = noise[:steps], noise[steps:]
    eager, compiled = 0.1 * e_noise, 0.1 / ratio * c_noise
    compiled[0] += 2.0
    return list(eager), list(compiled)


def covers(low: float, high: float, truth: float) -> bool:
    return low <= truth <= high


def test_t_quantiles_match_the_tables():
    for df, table in ((1, 12.7062), (2, 4.3027), (3, 3.1824), (10, 2.2281), (30, 2.0423)):
        assert intervals.t_quantile(0.975, df) == pytest.approx(table, abs=1e-4)
    assert intervals.t_quantile(1 - 0.005 / 2, 3) == pytest.approx(7.4533, abs=1e-4)
    assert intervals.t_quantile(0.025, 10) == pytest.approx(-2.2281, abs=1e-4)


def test_the_looks_are_fixed_whole_blocks_from_the_minimum_to_the_maximum():
    looks = intervals.looks(600)
    assert looks[0] == intervals.ADAPTIVE_MIN_STEPS and looks[-1] == 600
    assert all(n % BLOCK == 0 and a < n for a, n in zip(looks, looks[1:]))
    assert intervals.looks(30) == (30,)
    assert race_alpha(RunSpec(epochs=3, steps_per_epoch=200, target_interval=0.03)) == 0.05 / len(looks)
    assert race_alpha(RunSpec()) == 0.05


def test_the_fixed_length_interval_covers_the_true_ratio_when_the_variants_take_turns():
    rng = np.random.default_rng(1)
    hits = 0
    for ratio in rng.choice(RATIOS, RACES):
        eager, compiled = simulated_race(rng, ratio, 300, "blocks")
        speed = analysis.steady_state_speedup(eager, compiled, warmup=analysis.default_warmup(300), paired=True)
        hits += covers(speed.ci_low, speed.ci_high, ratio)
    assert hits / RACES >= 0.95


def adaptive_race(rng, ratio: float, max_steps: int, target: float) -> tuple[bool, int, float]:
    """A race under the stopping rule, looked at after every pair of blocks as the trainer does:
    (its reported interval covers the truth, the steps it took, the ± it reached)."""
    eager, compiled = simulated_race(rng, ratio, max_steps, "blocks")
    rule, n = StopRule(target, max_steps, "blocks"), max_steps
    for k in range(BLOCK, max_steps + 1, BLOCK):
        if rule.ratio_known(eager[:k], compiled[:k]):
            n = k
            break
    w = analysis.default_warmup(n)
    speed = analysis.steady_state_speedup(eager[:n], compiled[:n], warmup=w, paired=True, alpha=rule.alpha)
    return covers(speed.ci_low, speed.ci_high, ratio), n, speed.ci_high / speed.speedup - 1


def test_stopping_once_the_speedup_is_known_keeps_the_interval_covering_the_truth():
    rng = np.random.default_rng(2)
    runs = [adaptive_race(rng, ratio, 600, 0.05) for ratio in rng.choice(RATIOS, RACES)]
    assert sum(hit for hit, _, _ in runs) / RACES >= 0.95
    stopped = [(n, reached) for _, n, reached in runs if n < 600]
    assert len(stopped) > RACES / 4  # the rule did stop early, at several looks, within its target
    assert len({n for n, _ in stopped}) >= 3 and all(reached <= 0.05 + 1e-9 for _, reached in stopped)


def test_one_after_the_other_the_interval_misses_the_drift_that_taking_turns_covers():
    """Why a race's variants take turns by default: with eager's whole run before compiled's, the
    same drift and load bursts land on one side of the ratio, and this app's own interval for that
    schedule (unpaired) misses the truth in over a fifth of races, where taking turns covers it in
    95% (test_the_fixed_length_interval_covers_the_true_ratio_when_the_variants_take_turns)."""
    assert RunSpec().schedule == "blocks"
    rng = np.random.default_rng(3)
    hits = 0
    for ratio in rng.choice(RATIOS, RACES):
        eager, compiled = simulated_race(rng, ratio, 300, "sequential")
        speed = analysis.steady_state_speedup(eager, compiled, warmup=analysis.default_warmup(300), paired=False)
        hits += covers(speed.ci_low, speed.ci_high, ratio)
    assert hits / RACES < 0.8


def test_the_reading_says_why_the_race_stopped():
    summary = {"eager_step_times_s": [0.1] * 240, "compiled_step_times_s": [0.1] * 240}
    known = {**summary, "steady_state_speedup": 1.2, "speedup_ci95": [1.17, 1.23]}
    assert stop_reading(known, 0.03, 600) == "Known to ±3% after 240 steps per variant (the race stopped there)."
    wide = {**summary, "steady_state_speedup": 1.2, "speedup_ci95": [1.1, 1.26]}
    assert stop_reading(wide, 0.03, 240) == "Stopped at the maximum of 240 steps per variant: known to ±5%."
    assert stop_reading(known, None, 600) is None
    assert "Known to ±3%" in reading.reading(
        {**known, "verdict": "faster", "stop_reason": stop_reading(known, 0.03, 600)}
    )


def test_no_look_is_taken_twice_whatever_the_race_length():
    """Each look is a step count of its own, the last the race's end (issue 35: a schedule that
    repeated its last look when the growth landed on the maximum was not caught)."""
    assert intervals.looks(600) == (40, 60, 90, 135, 205, 305, 460, 600)  # 40, then x1.5 in whole blocks of 5
    assert intervals.looks(60) == (40, 60) and intervals.looks(90) == (40, 60, 90)  # the growth lands on the end
    for max_steps in range(1, 3001):
        looks = intervals.looks(max_steps)
        assert looks[-1] == max_steps and all(a < b for a, b in zip(looks, looks[1:])), (max_steps, looks)


def test_a_sequential_race_spends_its_error_rate_over_the_looks_of_both_variants():
    """Eager's looks and compiled's are each a chance to stop: one after the other they are twice
    the looks of a race whose variants take turns (8 looks in 600 steps, written out above)."""
    from core.engine.analysis import alpha_of

    assert alpha_of(0.03, 600, "blocks") == alpha_of(0.03, 600, "alternating") == pytest.approx(0.05 / 8)
    assert alpha_of(0.03, 600, "sequential") == pytest.approx(0.05 / 16)
    assert alpha_of(None, 600, "sequential") == 0.05
