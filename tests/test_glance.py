"""A finished race at a glance (issue 43): the one verdict line it leads with, the short line each
answer is shown as (why, recompiles, cache, next), the four lead cards, and the order the screen
draws them in. Pure functions over summaries; the page itself is tests/test_glance_page.py and, in a
browser, tests/test_e2e_glance.py."""

from types import SimpleNamespace

import pytest

from core.engine import analysis, cause, words
from core.engine.reading import reading
from core.engine.summary import FASTER, NO_CLEAR_DIFFERENCE, SLOWER, Summary
from core.view.answers import Answers, NextRace
from core.view.run_screen import layout
from core.view.run_screen.layout import result_cards

# A verdict line is one line at 1280x720 (about 100 characters of bold type in the page's column).
ONE_LINE_CHARS = 110


def summary_of(eager: list[float], compiled: list[float], **fields) -> Summary:
    s = analysis.summarize(eager, compiled, [sum(eager)], [sum(compiled)], 64)
    return Summary.from_dict({**s, **fields})


def reached() -> Summary:
    return summary_of([1.0] * 12, [4.0] + [0.5] * 11)


def projected() -> Summary:
    return summary_of([1.0] * 10, [20.0] + [0.5] * 9)


def slower() -> Summary:
    return summary_of([1.0] * 12, [3.0] + [1.5] * 11)


def no_clear() -> Summary:
    return Summary.from_dict(
        {"steady_state_speedup": 1.01, "speedup_ci95": [0.95, 1.07], "verdict": NO_CLEAR_DIFFERENCE}
    )


SUMMARIES = {
    "reached": reached,
    "projected": projected,
    "slower": slower,
    "no clear difference": no_clear,
    "busy": lambda: Summary.from_dict(
        {"steady_state_speedup": 1.2, "speedup_ci95": [1.1, 1.3], "verdict": "machine busy"}
    ),
    "compile failed": lambda: reached().replace(compile_failed="fullgraph=True but the model has a graph break " * 4),
    "compile skipped": lambda: reached().replace(compile_skipped="the backend compiled no graph"),
    "too few steps": lambda: Summary.from_dict({}),
}


@pytest.mark.parametrize("kind", list(SUMMARIES))
def test_the_verdict_line_is_one_short_line_shorter_than_the_reading(kind):
    s = SUMMARIES[kind]()
    line = layout.verdict_line(s)
    assert len(line) <= ONE_LINE_CHARS and line.endswith("."), line
    assert len(line.split()) <= 20, line
    if s.steady_state_speedup is not None and s.compiled:  # the headline figure, as every surface writes it
        assert words.speedup(s.steady_state_speedup) in line
    assert len(line) < len(reading(s)) or kind == "too few steps"  # the reading in full is a click away


def test_a_race_that_broke_even_says_it_paid_off_and_where():
    s = reached()
    line = layout.verdict_line(s)
    assert line.startswith("Compile paid off:") and words.break_even(s) in line
    assert f"{words.speedup(s.steady_state_speedup)} faster" in line


def test_a_faster_race_that_did_not_break_even_says_so_with_the_projected_step():
    s = projected()
    line = layout.verdict_line(s)
    assert "did not pay off within this run" in line
    assert f"about step {words.step_at(s.projected_position):,}" in line
    assert "paid off:" not in line


def test_never_is_said_only_where_compiled_is_clearly_slower():
    assert "does not pay off here" in layout.verdict_line(slower())
    assert "slower" in layout.verdict_line(slower())
    line = layout.verdict_line(no_clear())  # an interval that spans 1x cannot tell: no "never", no "slower"
    assert line.startswith("No clear difference per step") and "never" not in line and "slower" not in line


def test_a_compile_that_failed_or_did_not_happen_reports_no_speedup_and_leaves_torchs_words_to_the_details():
    failed = layout.verdict_line(SUMMARIES["compile failed"]())
    assert failed.startswith("Compile failed") and "graph break" not in failed and "x" not in failed.split()[-1]
    skipped = layout.verdict_line(SUMMARIES["compile skipped"]())
    assert "did not happen" in skipped and "backend" not in skipped


def test_a_busy_race_gives_no_verdict():
    line = layout.verdict_line(SUMMARIES["busy"]())
    assert line.startswith("No verdict: the machine was busy") and "faster" not in line


def test_first_clause_stops_at_the_first_colon_or_semicolon_outside_parentheses_and_drops_them():
    text = "Warm: it found 3 files (1.0 MiB; two races) that run 2 compiled; 5 of its 7 graphs were read."
    assert layout.first_clause(text) == "Warm"
    text = "Asked to be warm, this race found the warm cache empty (no race here: none), so its compile was cold."
    assert (
        layout.first_clause(text) == "Asked to be warm, this race found the warm cache empty, so its compile was cold"
    )
    assert layout.first_clause("one two three four five", max_words=3) == "one two three…"
    assert layout.first_clause("version 2.14.1 is fine") == "version 2.14.1 is fine"  # a decimal point is no stop


def a_cause(kind: str, verdict: str = FASTER) -> cause.Cause:
    return cause.Cause(
        kind, verdict, "Compiled is faster here because its kernels take 8.99 ms less (14.9 ms vs 23.9 ms) per step "
        "and the time outside them is about the same: Inductor fused the work into fewer kernels.",
        host_s=(0.030, 0.021), kernel_s=(0.0239, 0.0149),
    )  # fmt: skip


def test_why_in_one_line_names_the_part_of_the_step_that_carries_the_difference():
    kernels = layout.why_short(a_cause(cause.KERNELS))
    assert kernels == "Compiled is faster in its kernels: 14.9 ms a step against eager's 23.9 ms."
    outside = layout.why_short(a_cause(cause.OUTSIDE, SLOWER))
    assert outside.startswith("Compiled is slower outside its kernels: ") and words.seconds(0.030 - 0.0239) in outside
    assert layout.why_short(a_cause(cause.BOTH)) == "Compiled is faster both in its kernels and outside them."
    assert layout.why_short(a_cause(cause.DISAGREES)).startswith("This race cannot say why")
    same = cause.Cause(cause.SAME, NO_CLEAR_DIFFERENCE, "Compile gains nothing measurable here: its step ...")
    assert layout.why_short(same) == "Compile gains nothing measurable here."
    assert layout.why_short(None) is None


def test_recompiles_in_one_line_say_how_many_where_and_the_guard_first_clause():
    events = [
        {"variant": "compiled", "note": "recompile: tensor 'x' size mismatch at index 0. expected 48, actual 24",
         "step": 15, "epoch": 1, "phase": "train"},
        {"variant": "compiled", "note": "recompile: tensor 'x' size mismatch at index 0. expected 24, actual 12",
         "step": 30, "epoch": 2, "phase": "train"},
    ]  # fmt: skip
    s = reached().replace(compile_events=events)
    assert (
        layout.recompiles_short(s)
        == "Compiled recompiled 2 times, first at step 15: tensor 'x' size mismatch at index 0."
    )
    assert layout.recompiles_short(reached()) is None


def test_every_short_line_is_one_line_and_next_carries_its_links():
    long_why = a_cause(cause.KERNELS)
    found = Answers(
        cause=long_why,
        recompiles="Compiled recompiled once: at step 15 (about 6.79 s), the guard that failed was tensor 'x' "
        "size mismatch at index 0. expected 48, actual 24. A new batch size failed the guard: compile with "
        "dynamic=True, or mark the dimension dynamic before the first call.",
        advice=None,
        next_races=(NextRace("dynamic shapes", "/?model=small_cnn&dynamic=true", "One graph for every size."),),
        warm_cache="Cold (a fresh cache, what a new user pays); what it compiled now fills the warm cache.",
    )
    from core.engine.recommend import Advice

    found = Answers(found.cause, found.recompiles, Advice(None, ()), found.next_races, found.warm_cache)
    lines = layout.short_lines(found, reached())
    assert [line.head for line in lines] == ["Why", "Recompiles", "Cache", "Next"]
    for line in lines:
        assert len(line.text.split()) <= layout.SHORT_WORDS + 1 and len(line.text) <= ONE_LINE_CHARS, line
    assert lines[2].text == "Cold."
    assert lines[3].links == (("dynamic shapes", "/?model=small_cnn&dynamic=true"),)
    assert [head for head, _ in layout.full_lines(found)] == ["Why", "Recompiles", "Cache"]  # in full, a click away
    assert layout.full_lines(found)[1][1] == found.recompiles


def test_a_finished_race_leads_with_the_four_cards_compile_overhead_speedup_break_even():
    cards = result_cards(reached().to_dict())
    lead, more = layout.split_cards(cards)
    assert [c.label for c in lead] == ["Compile time", "First-epoch overhead", "Steady-state speedup", "Break-even"]
    assert [c.label for c in more] == ["Throughput (compiled)", "Peak memory (compiled)"]
    speed = lead[2]
    low, high = reached().interval
    assert speed.delta == f"faster, {words.speedup_range(low, high)}"  # the speedup with its interval


def test_a_finished_race_draws_its_cards_before_the_chart_and_a_live_one_after():
    done, live = SimpleNamespace(finished=True), SimpleNamespace(finished=False)
    assert layout.cards_before_chart(done) and not layout.cards_before_chart(live)
