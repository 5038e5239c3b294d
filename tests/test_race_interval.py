"""One interval, the race's, on every surface: a race that stops when its speedup is known decides on
an interval widened for its looks (core.engine.analysis.alpha_of), and the live screen, the final
reading, the plan of a user's run and an imported bundle show that interval, and say so; an
imported bundle keeps the warnings that the machine was busy. Before, the live screen showed the
plain 95% interval while the rule used the widened one, "Plan your training" had a bootstrap of its
own, and a bundle lost its busy-machine warning on import."""

import json
import math
import time

import numpy as np
import pytest

from core.engine import analysis, intervals, reading
from core.engine.analysis import StopRule, race_alpha, stored_alpha
from core.engine.spec import RunSpec
from core.engine.summary import FASTER, NO_CLEAR_DIFFERENCE
from core.engine.words import plan_from_summary
from core.runs.bundle import export_bundle, import_bundle
from core.runs.store import Store
from core.view.report import summary_table
from core.view.run_screen.feed import feed_document
from core.view.run_screen.shared_board import LiveBoard, RunView, run_summary

ADAPTIVE = RunSpec(model="mlp", batch_size=16, epochs=3, steps_per_epoch=100, target_interval=0.03, device="cpu")
FIXED = RunSpec(model="mlp", batch_size=16, epochs=3, steps_per_epoch=100, device="cpu")
# ADAPTIVE's looks, counted by hand (not by intervals.looks, which they check): 300 steps per
# variant, from 40 growing by half in whole blocks of 5: 40, 60, 90, 135, 205, then the last, 300.
ADAPTIVE_LOOKS = 6


def paired_race(n: int = 120, seed: int = 5) -> tuple[list[float], list[float]]:
    """Eager 1.2x slower than compiled, both drifting 30% over the race and noisy, compiled's first
    step paying a 3 s compile."""
    rng = np.random.default_rng(seed)
    drift = np.linspace(1.0, 1.3, n)
    compiled = 0.010 * drift * np.exp(0.05 * rng.standard_normal(n))
    eager = 1.2 * 0.010 * drift * np.exp(0.05 * rng.standard_normal(n))
    compiled[0] += 3.0
    return [float(t) for t in eager], [float(t) for t in compiled]


def interleaved(eager: list[float], compiled: list[float], per_epoch: int = 100) -> list[dict]:
    """The step events of a blocks race: eager and compiled taking turns every BLOCK_STEPS steps."""
    rows, size = [], intervals.BLOCK_STEPS
    for start in range(0, len(eager), size):
        for variant, times in (("eager", eager), ("compiled", compiled)):
            for i in range(start, min(start + size, len(times))):
                epoch = i // per_epoch + 1
                rows.append(
                    {"kind": "step", "variant": variant, "phase": "train", "epoch": epoch, "step": i + 1,
                     "time_s": times[i], "loss": 1.0, "samples": 16, "recorded_at": time.time()}
                )  # fmt: skip
    return rows


@pytest.fixture
def store(tmp_path):
    return Store(str(tmp_path / "store.sqlite3"))


def running_race(store: Store, spec: RunSpec, eager, compiled) -> int:
    run_id = store.create_run("race", spec.to_dict(), "ann", "cpu", status="running", phase="compiled epoch 2/3")
    store.append_events(run_id, interleaved(eager, compiled))
    return run_id


def test_the_live_interval_of_an_adaptive_race_is_the_one_its_stopping_rule_decides_on(store):
    rule = StopRule(ADAPTIVE.target_interval, ADAPTIVE.total_steps, ADAPTIVE.schedule)
    assert stored_alpha(ADAPTIVE.to_dict()) == rule.alpha == race_alpha(ADAPTIVE)
    assert rule.alpha == pytest.approx(intervals.ALPHA / ADAPTIVE_LOOKS)
    eager, compiled = paired_race()
    run_id = running_race(store, ADAPTIVE, eager, compiled)
    snap = LiveBoard(store.path).snapshot(run_id)
    live = snap.summary()  # what the live feed draws from
    view = RunView(run_id)
    view.poll(store)
    assert run_summary(store.get_run(run_id), view).speedup_ci95 == live.speedup_ci95  # the Streamlit path
    w = live.warmup_steps
    ruled = analysis.steady_state_speedup(eager, compiled, warmup=w, paired=True, alpha=rule.alpha)
    plain = analysis.steady_state_speedup(eager, compiled, warmup=w, paired=True)
    assert live.interval_paired and live.speedup_ci95 == pytest.approx((ruled.ci_low, ruled.ci_high))
    assert ruled.ci_low < plain.ci_low and plain.ci_high < ruled.ci_high  # wider than the plain 95%
    text = feed_document(snap, False, lambda: (None, False))["words"]["text"]
    looks = ADAPTIVE_LOOKS
    assert (
        f"95% interval {ruled.ci_low:.2f}-{ruled.ci_high:.2f}x, widened for the stopping rule's {looks} looks" in text
    )
    cards = feed_document(snap, False, lambda: (None, False))["cards"]
    speed_card = next(c for c in cards if c["label"] == "Steady-state speedup")
    assert f"widened for the stopping rule's {looks} looks" in speed_card["help"]


def test_a_fixed_length_race_shows_the_plain_95_percent_interval_and_says_nothing_of_looks(store):
    eager, compiled = paired_race()
    snap = LiveBoard(store.path).snapshot(running_race(store, FIXED, eager, compiled))
    live = snap.summary()
    plain = analysis.steady_state_speedup(eager, compiled, warmup=live.warmup_steps, paired=True)
    assert live.speedup_ci95 == pytest.approx((plain.ci_low, plain.ci_high))
    assert "widened" not in feed_document(snap, False, lambda: (None, False))["words"]["text"]


def test_the_final_reading_and_the_table_say_the_interval_was_widened_for_the_looks():
    eager, compiled = paired_race()
    words = f"widened for the stopping rule's {ADAPTIVE_LOOKS} looks"
    for spec, widened in ((ADAPTIVE, True), (FIXED, False)):
        summary = analysis.summarize(eager, compiled, [sum(eager)], [sum(compiled)], 16, paired=True,
                                     alpha=race_alpha(spec))  # fmt: skip
        low, high = summary["speedup_ci95"]
        words_read = reading.reading(summary)
        assert f"95% interval {low:.2f}-{high:.2f}x" in words_read
        assert (words in words_read) is widened
        table = summary_table({"summary": summary, "variants": {v: {"final_loss": 1.0} for v in ("eager", "compiled")}})
        assert (words in table) is widened


def test_where_the_run_to_run_spread_sets_the_interval_the_reading_says_that_and_not_the_looks():
    eager, compiled = paired_race()
    summary = analysis.summarize(eager, compiled, [sum(eager)], [sum(compiled)], 16, paired=True,
                                 alpha=race_alpha(ADAPTIVE), spread=WIDE)  # fmt: skip
    words_read = reading.reading(summary)
    assert "widened for the stopping rule's" not in words_read and "run to run" in words_read


def borderline_race() -> tuple[list[float], list[float]]:
    """A race whose plain 95% interval lies just above 1 and whose interval widened for ADAPTIVE's
    looks reaches below it: scaling eager moves every pair's log ratio alike and leaves the
    half-widths as they are, so the point is put between the two."""
    rng = np.random.default_rng(11)
    n = 120
    compiled = 0.010 * np.exp(0.08 * rng.standard_normal(n))
    unit = compiled * np.exp(0.08 * rng.standard_normal(n))
    compiled[0] += 3.0
    w = analysis.default_warmup(n)
    e, c = analysis.steady(list(unit), w), analysis.steady(list(compiled), w)
    narrow = intervals.log_half_width(e, c, True)
    wide = intervals.log_half_width(e, c, True, race_alpha(ADAPTIVE))
    point = float(np.median(e) / np.median(c))
    unit *= math.exp((narrow + wide) / 2) / point
    return [float(t) for t in unit], [float(t) for t in compiled]


WIDE = intervals.RunToRun(0.06, 10, 4)  # races here land ±13% apart: wider than either race's own


@pytest.mark.parametrize("spread", [None, WIDE])
@pytest.mark.parametrize("race", [paired_race, borderline_race])
@pytest.mark.parametrize("spec", [FIXED, ADAPTIVE])
def test_the_plan_s_range_is_the_race_s_interval(race, spec, spread):
    eager, compiled = race()
    summary = analysis.summarize(eager, compiled, [sum(eager)], [sum(compiled)], 16, paired=True,
                                 alpha=race_alpha(spec), spread=spread)  # fmt: skip
    if spread is not None:  # the headline was widened to the spread: the plan's range with it
        assert summary["speedup_ci95"][1] > summary["speedup_ci95_within"][1]
    steps = 50_000
    plan = plan_from_summary(summary, steps)
    assert not plan.break_even_measured
    rest = steps - len(eager)
    e, c = plan.eager_step_s, plan.compiled_step_s
    # The saving's interval over the rest of the run, read back as a speedup (eager's step over
    # compiled's at that end): the race's interval.
    implied = [e / (c - (plan.saved_ci[i] - plan.saved_s) / rest) for i in (0, 1)]
    assert implied == pytest.approx(summary["speedup_ci95"])
    # So the plan names a break-even exactly where the race calls compiled faster.
    assert (plan.break_even_step is not None) is (summary["verdict"] == FASTER)


def test_on_the_borderline_race_the_looks_decide_whether_the_plan_names_a_break_even():
    eager, compiled = borderline_race()
    verdicts = {}
    for spec in (FIXED, ADAPTIVE):
        summary = analysis.summarize(eager, compiled, [sum(eager)], [sum(compiled)], 16, paired=True,
                                     alpha=race_alpha(spec))  # fmt: skip
        plan = plan_from_summary(summary, 50_000)
        verdicts[spec.target_interval] = (summary["verdict"], plan.break_even_step is not None)
    assert verdicts == {None: (FASTER, True), 0.03: (NO_CLEAR_DIFFERENCE, False)}


def test_too_few_steps_for_an_interval_give_no_plan():
    def plan(eager, compiled):
        return plan_from_summary(analysis.summarize(eager, compiled, [sum(eager)], [sum(compiled)], 16), 100)

    assert plan([0.1, 0.1], [0.05, 0.05]) is None  # one steady step each: one block
    assert plan([0.1, 0.1, 0.1], [0.05, 0.05, 0.05]) is not None  # two blocks of one


BUSY = "the machine was busy during eager's epoch 2 (load up to 3.4 on 2 cores): this interval may be too narrow"


def finished_race_with_load(store: Store) -> int:
    spec = RunSpec(model="mlp", batch_size=16, epochs=2, steps_per_epoch=60, backend="aot_eager", device="cpu")
    eager, compiled = paired_race(120)
    run_id = store.create_run("race", spec.to_dict(), "ann", "cpu", status="done", started_at=time.time())
    store.append_events(run_id, interleaved(eager, compiled, per_epoch=60))
    samples = [  # core.engine.intervals.load_sample, one per variant and epoch, as the trainer stores them
        {"variant": v, "epoch": e, "load": 3.4 if (v, e) == ("eager", 2) else 1.1, "cores": 2, "cpu_share": 0.9}
        for v in ("eager", "compiled")
        for e in (1, 2)
    ]
    summary = analysis.summarize(eager, compiled, [sum(eager)], [sum(compiled)], 16, paired=True)
    summary.update(machine_load=samples, noise_warnings=[BUSY])
    store.update_run(run_id, summary=summary, environment={"device_type": "cpu", "torch": "2.x"})
    return run_id


def test_an_imported_bundle_keeps_its_busy_machine_warning_said_again_from_its_load_samples(store):
    bundle = json.loads(json.dumps(export_bundle(store, finished_race_with_load(store))))
    run = store.get_run(import_bundle(store, bundle, "bob"))
    assert run.imported == 1
    assert run.summary["noise_warnings"] == [BUSY]
    assert f"Note: {BUSY}." in reading.reading(run.summary)
    assert len(run.summary["machine_load"]) == 4


def test_an_imported_bundle_s_warning_words_are_not_trusted_and_bad_samples_are_dropped(store):
    bundle = json.loads(json.dumps(export_bundle(store, finished_race_with_load(store))))
    summary = bundle["run"]["summary"]
    summary["noise_warnings"] = ["visit example.com"]  # a bundle's words are never the app's
    summary["machine_load"] = [
        {"variant": "eager", "epoch": 2, "load": "3.4", "cores": 2},  # a load that is not a number
        {"variant": "eager", "epoch": 9, "load": 3.4, "cores": 2},  # an epoch the race did not have
        {"variant": "other", "epoch": 1, "load": 3.4, "cores": 2},
        {"variant": "compiled", "epoch": 1, "load": 0.5, "cores": 2, "cpu_share": 1.0},
    ]
    run = store.get_run(import_bundle(store, bundle, "bob"))
    assert run.summary["noise_warnings"] == []
    assert run.summary["machine_load"] == [
        {"variant": "compiled", "epoch": 1, "load": 0.5, "cores": 2, "cpu_share": 1.0}
    ]
    assert "example.com" not in reading.reading(run.summary) and "busy" not in reading.reading(run.summary)
