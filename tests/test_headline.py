"""One number, one derivation, checked on many races: races of every kind (faster, slower, spanning
1x, busy, projected, reached, never, with replicates whose headline is not the first process's own
ratio) are summarised as the worker summarises them, and every surface's claims are checked against
the headline (core.engine.summary) and nothing else: the signs of the speedup, the throughput change
and the plan's saving; "never" only where the whole interval lies at or below 1x; "cannot tell"
where it spans 1x; a plan interval that is the headline interval applied; the break-even the cards,
the plan, the reading, the terminal's table and the runs list name; the labels a stored race gets.
The races are drawn from seeded generators (deterministic), so a failure names its seed."""

import math
import re
import time

import numpy as np
import pytest

from core.engine import analysis, words
from core.engine.intervals import ProcessResult
from core.engine.reading import reading
from core.engine.recommend import cost_words
from core.engine.summary import (
    BUSY,
    CANNOT_TELL,
    FASTER,
    NEVER,
    NEVER_PAYS,
    NO_CLEAR_DIFFERENCE,
    PAYOFFS,
    PAYS,
    PROJECTED,
    REACHED,
    SLOWER,
    Summary,
)
from core.view.replay import stored_race_label
from core.view.report import run_row, summary_table
from core.view.run_screen.layout import result_cards, verdict_line

KINDS = ("faster", "slower", "spanning", "busy", "projected", "reached", "replicated")
SEEDS = range(150)
BATCH = 32
PLAN_STEPS = (10, 2_000, 50_000, 2_000_000)
NEVER_WORDS = re.compile(r"\bnever\b|at any run length|does not pay off", re.IGNORECASE)


def race(seed: int) -> tuple[str, Summary]:
    """A race of one of KINDS, summarised by analysis.summarize as the worker does."""
    rng = np.random.default_rng(seed)
    kind = KINDS[seed % len(KINDS)]
    n = int(rng.integers(30, 160))
    eager_s = float(rng.uniform(0.005, 0.2))
    noise = float(rng.uniform(0.002, 0.04))
    x = {
        "faster": rng.uniform(1.1, 1.6),
        "slower": rng.uniform(0.6, 0.92),
        "spanning": rng.uniform(0.99, 1.01),
        "busy": rng.uniform(0.8, 1.4),
        "projected": rng.uniform(1.05, 1.3),
        "reached": rng.uniform(1.6, 2.5),
        "replicated": rng.uniform(0.95, 1.3),
    }[kind]
    if kind == "spanning":
        noise = 0.15
    compile_s = eager_s * float(rng.uniform(2, 30) if kind == "reached" else rng.uniform(50, 4_000))
    eager = [eager_s * (1 + noise * float(v)) for v in rng.standard_normal(n)]
    compiled = [eager_s / x * (1 + noise * float(v)) for v in rng.standard_normal(n)]
    compiled[0] += compile_s
    eager, compiled = [max(t, 1e-4) for t in eager], [max(t, 1e-4) for t in compiled]
    replicated, busy = [], None
    if kind == "replicated":  # the headline combines processes: not the first one's ratio of medians
        for number in (2, 3):
            rx = float(x * math.exp(rng.normal(0, 0.08)))
            replicated.append(ProcessResult(number, rx, 0.03, n, eager_s, eager_s / rx))
    if kind == "busy":
        busy = {"eager": list(range(1, n + 1)), "compiled": list(range(1, n + 1))}
    summary = analysis.summarize(
        eager, compiled, [sum(eager)], [sum(compiled)], BATCH, paired=True, replicated=replicated, busy=busy
    )
    return kind, Summary.from_dict(summary)


def applied(s: Summary, steps: int, at: float) -> float:
    """The saving over `steps` steps at speedup `at`, computed here from the summary's own fields:
    the race's steps as measured, then eager's steady step against compiled's at `at`."""
    n = min(len(s.eager_step_times_s), len(s.compiled_step_times_s))
    k = min(steps, n)
    e = s.eager_median_step_s
    return sum(s.eager_step_times_s[:k]) - sum(s.compiled_step_times_s[:k]) + (steps - k) * (e - e / at)


def card_of(cards, label):
    return next(c for c in cards if c.label == label)


def test_a_stored_verdict_reads_as_its_own_interval_says():
    """A summary stored without a verdict, or with one its interval does not bear out, reads as
    the interval says on every surface (a 0.75x race labelled "faster" came from one)."""
    base = {"steady_state_speedup": 0.75, "speedup_ci95": [0.70, 0.80], "speedup_ci95_within": [0.71, 0.79]}
    for stored in (None, FASTER, NO_CLEAR_DIFFERENCE):
        s = Summary.from_dict({**base, "verdict": stored})
        assert s.verdict == SLOWER and s.headline.payoff == NEVER_PAYS and s.break_even == NEVER
    busy = Summary.from_dict({**base, "verdict": BUSY})
    assert busy.verdict == BUSY  # the machine's, not the interval's: no verdict
    few = Summary.from_dict({"steady_state_speedup": 1.3, "speedup_ci95": [1.3, 1.3], "verdict": NO_CLEAR_DIFFERENCE})
    assert few.verdict == NO_CLEAR_DIFFERENCE  # too few blocks for an interval: its point twice decides nothing


def test_the_races_cover_every_verdict_payoff_and_break_even_state():
    races = [race(seed)[1] for seed in SEEDS]
    assert {s.verdict for s in races} >= {FASTER, SLOWER, NO_CLEAR_DIFFERENCE, BUSY}
    assert {s.headline.payoff for s in races} == set(PAYOFFS)
    assert {s.break_even for s in races} >= {REACHED, PROJECTED, NEVER}
    replicated = [s for s in races if s.replicates]
    assert any(
        s.steady_state_speedup != pytest.approx(s.eager_median_step_s / s.compiled_median_step_s) for s in replicated
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_every_surface_s_claims_agree_with_the_headline(seed):
    kind, s = race(seed)
    h = s.headline
    x, low, high = s.steady_state_speedup, *s.speedup_ci95
    cards = result_cards(s, total=h.steps)
    texts = {f"card {c.label}": f"{c.value} {c.help} {c.delta or ''}" for c in cards}
    texts["reading"] = reading(s)
    texts["verdict line"] = verdict_line(s)
    texts["cost"] = cost_words(s) or ""
    texts["table"] = summary_table({"summary": s, "variants": {v: {"final_loss": 1.0} for v in ("eager", "compiled")}})
    plans = {steps: h.plan(steps) for steps in PLAN_STEPS}
    for steps, plan in plans.items():
        texts[f"plan {steps}"] = words.plan_sentence(plan) if plan else ""

    # The verdict line the page leads with names the headline's verdict.
    lead = texts["verdict line"]
    expected = {FASTER: "faster", SLOWER: "slower", NO_CLEAR_DIFFERENCE: "No clear difference", BUSY: "busy"}
    assert expected[s.verdict] in lead and words.speedup(x) in lead, lead
    # The headline's interval decides the verdict and the payoff, nothing else.
    assert (s.verdict == FASTER) is (low > 1 and s.verdict != BUSY) or s.verdict == BUSY
    assert h.payoff == {FASTER: PAYS, SLOWER: NEVER_PAYS, NO_CLEAR_DIFFERENCE: CANNOT_TELL}.get(s.verdict, h.payoff)

    # Throughput: compiled's is eager's times the headline speedup, so its change has the speedup's sign.
    throughput = card_of(cards, "Throughput (compiled)")
    assert h.compiled_samples_per_s == pytest.approx(s.eager_samples_per_s * x)
    assert throughput.delta == words.change(s.eager_samples_per_s * x, s.eager_samples_per_s)
    if s.verdict == FASTER:
        assert throughput.delta.startswith("+") or throughput.delta == "same as eager"
    if s.verdict == SLOWER:
        assert throughput.delta.startswith("-") or throughput.delta == "same as eager"
    assert s.compiled_samples_per_s == pytest.approx(h.compiled_samples_per_s)  # what a bundle keeps: the same
    assert card_of(cards, "Steady-state speedup").delta == f"{s.verdict}, {words.speedup_range(low, high)}"

    # "Never" only where the whole interval lies at or below 1x; there, every surface says so.
    for name, text in texts.items():
        if h.payoff != NEVER_PAYS:
            assert not NEVER_WORDS.search(text), (seed, kind, name, text)
    if h.payoff == NEVER_PAYS:
        assert "does not pay off" in texts["reading"]
        if s.break_even != REACHED:
            assert card_of(cards, "Break-even").value == "never"
            assert "never pays off" in texts["plan 2000000"]
    if h.payoff == CANNOT_TELL and plans[2_000_000]:
        assert "cannot tell" in texts["plan 2000000"]
        assert not texts["cost"] or "cannot tell" in texts["cost"]

    # The plan is the headline applied: its saving's interval at the interval's ends, its point at the headline.
    for steps, plan in plans.items():
        if plan is None:
            continue
        assert plan.saved_s == pytest.approx(applied(s, steps, x), rel=1e-9, abs=1e-9)
        assert plan.saved_ci == pytest.approx((applied(s, steps, low), applied(s, steps, high)), rel=1e-9, abs=1e-9)
        assert plan.compiled_total_s == pytest.approx(plan.eager_total_s - plan.saved_s)
        sentence = texts[f"plan {steps}"]
        if "saves about" in sentence and "at the headline" not in sentence:
            assert plan.saved_ci[0] > 0 or plan.within_race, sentence
        if re.search(r"compile costs about .*: your run is shorter", sentence):
            assert plan.saved_s < 0
        if plan.saved_ci[0] > 0 and not plan.within_race and s.verdict == FASTER:
            assert "saves about" in sentence
        # The plan's break-even is the card's.
        if s.break_even == PROJECTED:
            assert plan.break_even_step == pytest.approx(s.projected_position)
            assert plan.break_even_range == pytest.approx(s.projected_range)
        elif s.break_even == REACHED:
            assert plan.break_even_step == s.break_even_step
        else:
            assert plan.break_even_step is None

    # The break-even: one state, its words on every surface; a projection inside its range.
    short, long = words.break_even(s, short=True), words.break_even(s)
    assert card_of(cards, "Break-even").value == short
    assert f"break-even                    {long}\n" in texts["table"]
    if s.break_even == PROJECTED:
        early, late = s.projected_range
        assert early <= s.projected_position <= late
        assert s.break_even_extrapolated_step == pytest.approx(s.projected_position)  # what a bundle keeps
        assert f"about step {words.step_at(s.projected_position):,}" in texts["reading"]
        live = card_of(result_cards(s, total=h.steps, live=True), "Break-even")
        assert live.delta == f"projected {words.steps_range(s.projected_range, h.steps, live=True, short=True)}"
    else:
        assert s.projected_range is None and s.projected_position is None


@pytest.mark.parametrize("seed", SEEDS[:28])
def test_a_stored_race_s_row_and_label_say_what_its_headline_says(store, seed):
    kind, s = race(seed)
    run_id = store.create_run("race", {"model": "mlp", "batch_size": BATCH}, "ann", "cpu", status="running")
    store.update_run(run_id, environment={"device_type": "cpu"}, started_at=time.time())
    store.finish_run(run_id, "done", summary=s.to_dict())
    run = store.get_run(run_id)
    row = run_row(run)
    assert row["break_even"] == words.break_even(s, short=True)
    assert row["steady_state_speedup"] == s.steady_state_speedup
    label = stored_race_label(run)
    if s.verdict != FASTER:
        assert "faster" not in label, label
    if s.headline.payoff != NEVER_PAYS:
        assert not NEVER_WORDS.search(label), label


def test_each_shipped_recording_says_what_its_own_headline_says():
    """A recording is chosen for what it shows: its description and its label may not call a race
    whose interval spans 1x one that never pays off."""
    import json

    from core.view.replay import RECORDINGS_DIR, SHIPPED, shows_words

    for shipped in SHIPPED:
        with open(f"{RECORDINGS_DIR}/{shipped.name}.json", encoding="utf-8") as f:
            data = json.load(f)
        s = Summary.of((data.get("runs") or [data.get("run")])[0]["summary"])
        for text in (shipped.shows, shows_words(s)):
            if s.headline.payoff != NEVER_PAYS:
                assert not NEVER_WORDS.search(text), (shipped.name, text)
            if s.verdict != FASTER:
                assert "faster," not in text, (shipped.name, text)
