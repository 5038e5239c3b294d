"""A race's interval says what a second race would give: it is widened to this device's run-to-run
spread, learnt from the store's earlier races of each configuration (core.runs.device_history), and a
race stopping on its interval stops once more steps could not narrow it further.

Simulated races (numpy only, no timing) give each race a process effect of its own: the ratio a
race's process runs at differs from the device's by a few percent, which no interval built from
one race's steps can see. The truth is the device's ratio.
"""

import math

import numpy as np
import pytest
from support import quick_spec
from test_intervals import BLOCK, covers, simulated_race

from core.engine import analysis, intervals, reading
from core.engine.analysis import StopRule, stop_reading
from core.engine.intervals import ASSUMED, RunToRun
from core.runs import device_history, processes
from core.runs import race_conditions as worker_cores
from core.runs.job_kinds import run_race_job
from core.runs.race_conditions import MALLOC_SETTING, STEADY_MALLOC

BOTH_BACKENDS = True
DEVICES = 100  # simulated devices, each racing one configuration this many times:
RACES_EACH = 12


def device_races(
    rng, ratio: float, process_sd: float, races: int = RACES_EACH
) -> list[tuple[float, float, float, float]]:
    """One device's races of one configuration, in order: (point, own low, own high, log point).
    Each race's process runs the device's ratio times exp(N(0, process_sd))."""
    out = []
    for _ in range(races):
        process_ratio = ratio * math.exp(rng.normal(0, process_sd))
        eager, compiled = simulated_race(rng, process_ratio, 300, "blocks")
        speed = analysis.steady_state_speedup(eager, compiled, warmup=analysis.default_warmup(300), paired=True)
        out.append((speed.speedup, speed.ci_low, speed.ci_high, math.log(speed.speedup)))
    return out


def coverage_by_race(process_sd: float, seed: int, races: int = RACES_EACH) -> tuple[np.ndarray, np.ndarray]:
    """Per race in each device's order: how often its own interval, and the headline one widened to
    the spread learnt from the device's earlier races (as the worker does), cover the device's ratio."""
    rng = np.random.default_rng(seed)
    own, widened = np.zeros(races), np.zeros(races)
    for ratio in rng.choice((0.9, 1.1, 1.3), DEVICES):
        done = device_races(rng, ratio, process_sd, races)
        for k, (point, low, high, _) in enumerate(done):
            spread = intervals.run_to_run([[r[3] for r in done[:k]]])
            half = intervals.headline_half_width(math.log(high / point), spread)
            own[k] += covers(low, high, ratio)
            widened[k] += covers(*intervals.interval(point, half), ratio)
    return own / DEVICES, widened / DEVICES


def test_the_race_alone_misses_a_second_race_and_the_widened_interval_covers_it():
    own, widened = coverage_by_race(ASSUMED.log_sd, seed=7)  # races spread as much as assumed
    assert own.mean() < 0.8  # an interval from one race's steps is far too narrow across races
    assert widened.mean() >= 0.95


def test_a_device_spreading_more_than_assumed_is_learnt_race_by_race():
    _, widened = coverage_by_race(2 * ASSUMED.log_sd, seed=8, races=20)
    assert widened[-4:].mean() >= 0.9  # its repeated races have taught the spread
    assert widened[-4:].mean() > widened[:3].mean()  # the first races, on the assumption, miss more


def test_the_spread_pools_configurations_raced_twice_and_shrinks_towards_the_prior():
    assert intervals.run_to_run([]) == ASSUMED
    assert intervals.run_to_run([[0.2], [0.5]]) == ASSUMED  # one race of a configuration: no spread
    two = intervals.run_to_run([[0.1, 0.14], [0.3, 0.3, 0.33]], prior=RunToRun(0.03, 4))
    squares = 2 * 0.02**2 + (0.01**2 + 0.01**2 + 0.02**2)
    assert two.df == 4 + 1 + 2 and two.races == 5
    assert two.log_sd == pytest.approx(math.sqrt((4 * 0.03**2 + squares) / 7))
    many = intervals.run_to_run([[0.2 + 0.001 * (i % 2) for i in range(200)]])
    assert many.log_sd < ASSUMED.log_sd / 5  # enough races here outweigh the assumption
    assert intervals.headline_half_width(0.5, two) == 0.5  # a noisy race keeps its own, wider interval
    assert intervals.headline_half_width(0.001, two) == two.log_half_width()
    assert intervals.headline_half_width(0.01, None) == 0.01  # a run stored before the spread: its own
    assert RunToRun.from_dict(two.to_dict()) == two
    assert RunToRun.from_dict({"log_sd": "x"}) is None and RunToRun.from_dict(None) is None


def done_race(store, spec, speedup, device_name="Test CPU", torch="2.x", imported=0, **summary):
    run_id = store.create_run("race", spec.to_dict(), "someone", "cpu", status="done", imported=imported)
    store.update_run(
        run_id,
        environment={"device_type": "cpu", "device_name": device_name, "torch": torch},
        summary={"steady_state_speedup": speedup, **summary},
    )
    return run_id


def test_the_store_learns_the_spread_from_this_devices_races_of_each_configuration(store):
    base, other = quick_spec(), quick_spec(batch_size=32)
    for speedup in (1.10, 1.20):  # one configuration twice, differing only in length and seed
        done_race(store, base, speedup)
    done_race(store, quick_spec(epochs=3, seed=5), 1.30)
    done_race(store, other, 0.9)  # another configuration once: no spread of its own
    done_race(store, other, 3.0, device_name="Another CPU")  # none of these count
    done_race(store, other, 3.0, torch="2.y")
    done_race(store, other, 3.0, imported=1)
    done_race(store, other, 3.0, compile_skipped="the backend compiled nothing")
    logs = [math.log(1.1), math.log(1.2), math.log(1.3)]
    device = intervals.run_to_run([logs])  # the device's, from its one configuration raced twice
    start = RunToRun(device.log_sd, intervals.PRIOR_RACES, device.races)
    assert device_history.spread_here(store, other.to_dict(), "Test CPU", "2.x") == start  # raced here once only
    mine = device_history.spread_here(store, base.to_dict(), "Test CPU", "2.x")
    assert mine.races == 3 and mine.log_sd == pytest.approx(intervals.run_to_run([logs], prior=start).log_sd)
    assert device_history.spread_here(store, base.to_dict(), "A CPU never used", "2.x") == ASSUMED
    assert device_history.spread_here(store, base.to_dict(), None, "2.x") == ASSUMED


def test_a_stopping_race_stops_once_its_own_interval_is_inside_the_spread():
    rng = np.random.default_rng(4)
    eager, compiled = simulated_race(rng, 1.2, 600, "blocks")
    wide = RunToRun(0.05, 20, 21)  # races here differ by about ±10%: a ±2% target cannot be met
    plain, spread = StopRule(0.02, 600, "blocks"), StopRule(0.02, 600, "blocks", spread=wide)
    stops = {}
    for name, rule in (("plain", plain), ("spread", spread)):
        stops[name] = next((k for k in range(BLOCK, 601, BLOCK) if rule.ratio_known(eager[:k], compiled[:k])), 600)
    assert stops["spread"] < stops["plain"]
    n = stops["spread"]
    summary = analysis.summarize(eager[:n], compiled[:n], [], [], 16, paired=True, alpha=spread.alpha, spread=wide)
    reading = stop_reading(summary, 0.02, 600)
    assert "as close as races here agree from run to run" in reading and "more steps would not narrow it" in reading


def test_the_reading_says_the_interval_was_widened_and_what_the_race_alone_gives():
    rng = np.random.default_rng(5)
    eager, compiled = simulated_race(rng, 1.3, 300, "blocks")
    alone = analysis.summarize(eager, compiled, [1.0], [1.0], 16, paired=True)
    widened = analysis.summarize(eager, compiled, [1.0], [1.0], 16, paired=True, spread=ASSUMED)
    assert widened["speedup_ci95_within"] == alone["speedup_ci95"]
    assert (
        widened["speedup_ci95"][0] < alone["speedup_ci95"][0] and widened["speedup_ci95"][1] > alone["speedup_ci95"][1]
    )
    assert "from run to run here (assumed until a configuration has run twice)" in reading.reading(widened)
    assert "run to run" not in reading.reading(alone)


class _Sink:
    """The worker's event sink, as far as a race job uses it."""

    def __init__(self, store_path, run_id):
        self.store_path, self.run_id, self.events = store_path, run_id, []

    def __call__(self, event):
        self.events.append(event)


def test_a_race_job_runs_with_the_spread_its_device_has_shown(store, store_location, monkeypatch):
    # In this test's own process: not pinned, its torch threads left alone (the tests after it run here).
    monkeypatch.setattr(worker_cores, "this_host", lambda: worker_cores.CoreShare(None, None, None))
    spec = quick_spec()
    for speedup in (1.0, 1.5, 2.0):  # a wildly spread configuration on this very machine
        run_id = done_race(store, spec, speedup)
    import torch

    from core.engine.environment import cpu_name

    for run in store.list_runs():
        store.update_run(
            run.id, environment={"device_type": "cpu", "device_name": cpu_name(), "torch": torch.__version__}
        )
    status, fields = run_race_job(spec.to_dict(), _Sink(store_location, run_id + 1))
    assert status == "done"
    spread = RunToRun.from_dict(fields["environment"]["run_to_run"])
    assert spread.races == 3 and spread.log_sd > ASSUMED.log_sd
    summary = fields["summary"]
    assert summary["run_to_run"] == spread.to_dict()
    low, high = summary["speedup_ci95"]
    assert math.log(high / summary["steady_state_speedup"]) >= spread.log_half_width() - 1e-9


def test_workers_get_fixed_malloc_thresholds_unless_the_host_sets_its_own():
    offline = processes.OFFLINE
    assert processes.worker_environment("cpu", {"PATH": "/bin"}) == {
        "PATH": "/bin",
        **STEADY_MALLOC,
        **offline,
    }
    own = {"MALLOC_MMAP_THRESHOLD_": "65536"}
    assert processes.worker_environment("cpu", own) == {**own, **offline}  # the host's malloc settings win
    plain = processes.worker_environment("cuda:0", {MALLOC_SETTING: "glibc"})
    assert not any(k.startswith("MALLOC_") for k in plain)


def test_where_the_race_alone_is_wider_than_the_spread_the_reading_says_nothing_of_run_to_run():
    """The spread note says the interval was widened; a noisy race's own interval, wider than the
    device's spread, is the headline as it is (issue 35: the note was also shown then)."""
    rng = np.random.default_rng(5)
    eager, compiled = simulated_race(rng, 1.3, 40, "blocks")  # few steps: a wide interval of its own
    narrow = RunToRun(0.001, 50, 40)  # races here agree to about ±0.2%
    summary = analysis.summarize(eager, compiled, [1.0], [1.0], 16, paired=True, spread=narrow)
    assert summary["speedup_ci95"] == summary["speedup_ci95_within"]  # its own interval set the width
    assert "run to run" not in reading.reading(summary)
    assert reading.spread_note(summary) == ""
