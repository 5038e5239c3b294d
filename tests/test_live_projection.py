"""The live projection holds to what the data supports (issue 26, point 8). A single projected step
wandered (about step 250, 370, 250, 340 on the demo; final 344) and moved while only eager had new
steps. Now, on synthetic races in each schedule, read as a live page reads them look after look:
- while the speedup's 95% interval is not clear of 1, no break-even is named;
- once it is, the break-even is the range the interval allows (core.engine.summary: compiled's
  steady rate at the interval's two ends), the same range in the words, the card and the
  chart's label, and the projection at the medians lies inside it;
- a look where only eager got new steps (its next turn, before compiled steps meet it) moves neither
  the speedup nor the range, and the words say what waits;
- each range overlaps the one before it: it narrows and shifts as data comes, never jumps clear of
  what the interval supported a look earlier."""

import itertools
import math
import re

import numpy as np
import pytest

from core.engine import analysis, words
from core.engine.reading import reading
from core.engine.summary import FASTER, NO_CLEAR_DIFFERENCE, Summary
from core.view.run_screen.layout import result_cards
from core.view.run_screen.shared_board import RunView

EPOCHS, PER_EPOCH = 3, 200  # the CPU break-even demo's shape: 3 x 200 steps
TOTAL = EPOCHS * PER_EPOCH
BATCH = 128


def demo_times(seed: int = 3) -> tuple[list[float], list[float]]:
    """Eager ~0.10 s a step, compiled ~0.072 s (about 1.4x) after an 8 s compile in its first step,
    each step +-10% noise: compile pays for itself around step 290 of 600."""
    rng = np.random.default_rng(seed)
    eager = [float(t) for t in 0.10 * rng.lognormal(0.0, 0.1, TOTAL)]
    compiled = [8.0] + [float(t) for t in 0.072 * rng.lognormal(0.0, 0.1, TOTAL - 1)]
    return eager, compiled


def stream(schedule: str, eager: list[float], compiled: list[float]) -> list[dict]:
    """The step events in the order a race of that schedule stores them."""
    ids = itertools.count(1)

    def rows(variant, times, first):
        return [
            {"id": next(ids), "kind": "step", "variant": variant, "phase": "train",
             "epoch": (first + i) // PER_EPOCH + 1, "step": first + i + 1, "time_s": t, "loss": 1.0}
            for i, t in enumerate(times)
        ]  # fmt: skip

    if schedule == "sequential":
        return rows("eager", eager, 0) + rows("compiled", compiled, 0)
    turn = PER_EPOCH if schedule == "alternating" else 5  # epoch by epoch, or the blocks' 5 steps
    out: list[dict] = []
    for start in range(0, TOTAL, turn):
        out += rows("eager", eager[start : start + turn], start)
        out += rows("compiled", compiled[start : start + turn], start)
    return out


def looks(events: list[dict], every: int = 7):
    """A live page's reads: the view after each `every` events (7: some looks end inside a turn)."""
    view = RunView(1)
    for start in range(0, len(events), every):
        view.feed(events[start : start + every])
        summary = view.summary(BATCH)
        yield view, summary, reading(summary, True, TOTAL, view.counts())


def overlap(a: tuple[float, float | None], b: tuple[float, float | None]) -> bool:
    late_a, late_b = (math.inf if x is None else x for x in (a[1], b[1]))
    return a[0] <= late_b and b[0] <= late_a


@pytest.mark.parametrize("schedule", ["blocks", "alternating", "sequential"])
def test_the_live_break_even_is_the_range_the_interval_allows_and_does_not_jump(schedule):
    spans, held, named = [], None, 0
    for view, summary, said in looks(stream(schedule, *demo_times())):
        counts = view.counts()
        if summary["verdict"] != FASTER:
            assert "breaks even" not in said and "projected" not in said, said
            assert Summary.of(summary).projected_range is None
            card = next(c for c in result_cards(summary, total=TOTAL, live=True) if c.label == "Break-even")
            assert not (card.delta or "").startswith("projected"), card
        elif summary["break_even_step"] is None:
            span = Summary.of(summary).projected_range
            point = Summary.of(summary).projected_position
            assert span is not None and span[0] <= point <= (math.inf if span[1] is None else span[1])
            low, high = summary["speedup_ci95"]
            assert low > 1  # only an interval clear of 1 names a break-even
            shown = words.steps_range(span, TOTAL, live=True)
            assert f"at these rates it breaks even {shown}." in said, said
            short = words.steps_range(span, TOTAL, live=True, short=True)
            card = next(c for c in result_cards(summary, total=TOTAL, live=True) if c.label == "Break-even")
            assert card.delta == f"projected {short}"  # the card says the words' range
            label = words.projection_label(point, span, None, live=True)
            assert label.startswith(words.steps_range(span, None, live=True, short=True))
            spans.append(span)
            named += 1
        if counts["compiled"] and held is not None and held[0] == counts["compiled"]:
            # No new compiled step since the last look: nothing the live numbers stand on moved.
            assert (summary["steady_state_speedup"], Summary.of(summary).projected_range) == held[1:], schedule
        if counts["compiled"]:
            held = (counts["compiled"], summary["steady_state_speedup"], Summary.of(summary).projected_range)
    assert named >= 5, named  # the race did name a break-even before reaching it
    # What the words show (two digits) overlaps from look to look. (The unrounded span can narrow to
    # a fraction of a step just before the crossing, finer than one step's noise moves it.)
    shown = [shown_steps(span) for span in spans]
    assert all(overlap(a, b) for a, b in zip(shown, shown[1:])), shown
    final = summary["break_even_step"]
    assert final is not None  # it paid off within the run
    inside = sum(early <= final <= late for early, late in shown)
    assert inside >= 0.8 * len(shown), (final, shown)  # where it paid off lay within what the words said


def shown_steps(span: tuple[float, float | None]) -> tuple[int, float]:
    """The steps a running range's words name (words.steps_range: widened to two digits)."""
    said = words.steps_range(span, None, live=True)
    numbers = [int(n.replace(",", "")) for n in re.findall(r"[\d,]+\d|\d", said)]
    return numbers[0], numbers[1] if len(numbers) > 1 else math.inf


def test_during_eager_s_epoch_of_the_demo_the_words_hold_and_say_what_waits():
    """The demo's case: after compiled's epoch 1 (200 of 600), eager's epoch 2 runs alone; the words
    stayed at "After 200 of 600 compiled steps" while the speedup they quoted moved 1.28x -> 1.39x."""
    eager, compiled = demo_times()
    events = stream("alternating", eager, compiled)
    view = RunView(1)
    view.feed(events[: 2 * PER_EPOCH])  # eager's epoch 1, then compiled's
    before = view.summary(BATCH)
    words_before = reading(before, True, TOTAL, view.counts())
    assert words_before.startswith("After 200 of 600 compiled steps and 200 eager: ")
    for k, event in enumerate(events[2 * PER_EPOCH : 3 * PER_EPOCH], start=1):  # eager's epoch 2, step by step
        event = {**event, "time_s": event["time_s"] * 1.3}  # slower: it would move the speedup if it counted
        view.feed([event])
        during = view.summary(BATCH)
        said = reading(during, True, TOTAL, view.counts())
        assert during["steady_state_speedup"] == before["steady_state_speedup"]
        assert Summary.of(during).projected_range == Summary.of(before).projected_range
        waits = (
            f" Eager's {k} newer steps count once compiled steps meet them."
            if k > 1
            else " Eager's 1 newer step counts once compiled steps meet it."
        )
        assert said == words_before + waits
    view.feed(events[3 * PER_EPOCH : 3 * PER_EPOCH + 1])  # compiled's epoch 2 begins: eager's steps count now
    after = view.summary(BATCH)
    assert len(after["eager_step_times_s"]) == 3 * PER_EPOCH - PER_EPOCH
    assert reading(after, True, TOTAL, view.counts()).startswith("After 201 of 600 compiled steps and 400 eager: ")


def test_the_span_lies_on_the_interval_s_ends_and_holds_the_headline_projection():
    eager, compiled = demo_times()
    s = Summary.of(analysis.summarize(eager[:120], compiled[:120], [], [], BATCH))
    h = s.headline
    assert s.verdict == FASTER
    early, late = h.projected_range
    assert early < h.projected_position < late
    # Each end is where the lines meet at compiled's steady step for that end of the interval.
    low, high = s.speedup_ci95
    for end, bound in ((early, high), (late, low)):
        compiled_there = h.compiled_total_s + (end - h.steps) * h.eager_step_s / bound
        eager_there = h.eager_total_s + (end - h.steps) * h.eager_step_s
        assert compiled_there == pytest.approx(eager_there, rel=1e-9)


def test_no_span_without_an_interval_clear_of_1_and_a_far_end_where_its_slow_end_barely_gains():
    eager, compiled = demo_times()
    measured = Summary.of(analysis.summarize(eager[:50], compiled[:50], [], [], BATCH))
    doubtful = measured.replace(steady_state_speedup=1.05, speedup_ci95=(0.97, 1.12), verdict=NO_CLEAR_DIFFERENCE)
    assert doubtful.projected_range is None and doubtful.projected_position is None
    barely = measured.replace(steady_state_speedup=1.39, speedup_ci95=(1.0001, 1.5), verdict=FASTER)
    early, late = barely.projected_range
    assert early > 50 and late > 10 * early
    assert words.steps_range((330.0, None), None, live=True) == "from step 330 on, or never"
    assert words.steps_range((330.0, None), TOTAL, live=True) == "from step 330 on, or never (this run has 600 steps)"


def test_the_words_widen_a_running_range_to_two_digits_and_say_where_it_ends():
    assert words.steps_range((303.2, 372.5), 600, live=True) == "between step 300 and 380 of 600"
    assert words.steps_range((303.2, 372.5), 600, live=False) == "between step 304 and 373 of 600"
    assert words.steps_range((480.0, 910.0), 600, live=True) == "between step 480 and 920 (this run has 600 steps)"
    assert words.steps_range((1234.0, 2500.0), 600, live=True) == (
        "between step 1,200 and 2,600, past this run's 600 steps"
    )
    assert words.steps_range((303.2, 372.5), 600, live=True, short=True) == "step 300-380 of 600"


def test_a_doubtful_gain_says_there_is_no_break_even_to_project():
    summary = {"steady_state_speedup": 1.05, "speedup_ci95": [0.97, 1.12], "verdict": NO_CLEAR_DIFFERENCE,
               "eager_step_times_s": [0.1] * 200, "compiled_step_times_s": [0.1] * 150}  # fmt: skip
    said = reading(summary, True, TOTAL, {"eager": 200, "compiled": 150})
    assert said == (
        "After 150 of 600 compiled steps and 200 eager: no clear difference per step yet (1.05x, 95% interval "
        "0.97-1.12x), so no break-even to project."
    )


def test_the_command_line_gives_the_interval_s_range_beside_the_medians_projection():
    eager, compiled = demo_times()
    summary = analysis.summarize(eager[:300], compiled[:120], [], [], BATCH)
    span = Summary.of(summary).projected_range
    text = words.break_even(summary)
    assert f"between step {math.floor(span[0]) + 1:,} and " in text and "within its 95% interval" in text
