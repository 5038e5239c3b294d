"""One voice: each unit's formatter (core.engine.words) and the typed summary they read
(core.engine.summary): one set of duration cut-offs, one way to say a speedup, one word per
break-even state, and a summary that any stored run, recording or bundle reads back."""

import json
import math
import os
import re
from pathlib import Path

import pytest
from support import ROOT

from core.engine import analysis, words
from core.engine.reading import reading
from core.engine.summary import (
    BREAK_EVEN_STATES,
    BUSY,
    FASTER,
    NEVER,
    NEVER_NO_GAIN,
    NO_CLEAR_DIFFERENCE,
    NO_COMPILE,
    NO_GAIN,
    NO_VERDICT,
    NOT_REACHED,
    NOT_WITHIN_RUN,
    PROJECTED,
    REACHED,
    SLOWER,
    Summary,
)


def test_a_speedup_and_its_interval_read_one_way():
    assert words.speedup(1.234) == "1.23x" and words.speedup(None) == "-" and words.speedup(math.nan) == "-"
    assert words.speedup_range(1.1, 1.2) == "1.10-1.20x"
    assert words.speedup_with_range(1.12, 1.05, 1.2) == "1.12x (1.05-1.20x)"
    assert words.ratio(3.24) == "3.2x" and words.ratio(256, digits=0) == "256x"


# A number printed with an 'x' after it: f"{x:.2f}x", "%.2fx" (words.SPEEDUP_FORMAT's own shape).
BY_HAND = re.compile(r"\.\d+f\}x|%[,.\d]*fx")


def test_no_page_or_core_module_formats_a_speedup_by_hand():
    """Speedups and ratios are written by words only: anywhere else, an f-string or printf format
    ending in 'x' is a second voice (the surfaces test catches the ones it reads; this, the rest)."""
    assert BY_HAND.search('f"{s:.2f}x"') and BY_HAND.search('"%.2fx" % s')  # the check sees both shapes
    root = Path(ROOT)
    found = [
        f"{path.relative_to(root)}:{n}: {line.strip()}"
        for folder in ("core", "app_pages")
        for path in sorted((root / folder).rglob("*.py"))
        if path != root / "core" / "engine" / "words.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if BY_HAND.search(line)
    ]
    assert not found, "format these through core.engine.words:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "seconds, text",
    [
        (0.000_85, "850 µs"),
        (0.012_34, "12.3 ms"),
        (0.999_6, "1 s"),  # rounded before the unit is chosen: never "1000 ms"
        (1.254, "1.25 s"),
        (12.34, "12.3 s"),
        (108.4, "108 s"),
        (1234.5, "1,234 s"),  # a measured figure keeps its unit
        (0.0, "0 s"),
        (None, "-"),
    ],
)
def test_a_measured_time_has_three_significant_figures(seconds, text):
    assert words.seconds(seconds) == text


def test_a_signed_time_says_its_sign():
    assert words.seconds(2.5, signed=True) == "+2.5 s" and words.seconds(-0.2, signed=True) == "-200 ms"


@pytest.mark.parametrize(
    "seconds, text",
    [(40, "40 s"), (89.4, "89 s"), (90, "1.5 min"), (150, "2.5 min"), (2_480, "41 min"), (-900, "15 min"),
     (89 * 60, "89 min"), (90 * 60, "1.5 h"), (4 * 3600, "4.0 h")],
)  # fmt: skip
def test_durations_switch_units_at_one_set_of_cut_offs(seconds, text):
    assert words.duration(seconds) == text
    assert words.about(seconds) == "~" + text


def test_a_duration_s_interval_is_said_in_its_figure_s_unit():
    assert words.duration_range(2_300, 2_660, 2_480) == "38-44"
    assert words.duration_range(-30, 60, 20) == "-30 to 60"
    assert words.signed_duration(-150) == "-2.5 min" and words.signed_duration(40) == "+40 s"


def test_ago_uses_the_same_cut_offs_as_durations():
    assert [words.ago(s) for s in (3, 40, 700, 3 * 3600, 3 * 86400)] == [
        "just now",
        "40 s ago",
        "12 min ago",
        "3 h ago",
        "3 days ago",
    ]
    assert words.ago(89) == "89 s ago" and words.ago(90) == "2 min ago"


def test_sizes_counts_and_rates():
    assert words.bytes_(512) == "512 B" and words.bytes_(3 * 2**30) == "3.0 GiB" and words.bytes_(None) == "-"
    assert words.count(1, "recompile") == "1 recompile" and words.count(1200, "step") == "1,200 steps"
    assert words.number(12345) == "12,345" and words.number(0.12345, 4) == "0.1235"
    assert words.rate(1250.4) == "1,250 samples/s" and words.rate(62_900) == "62.9k samples/s"
    assert words.change(90, 100) == "-10% vs eager" and words.change(100.2, 100) == "same as eager"


def summary_with(**fields) -> dict:
    base = {"steady_state_speedup": 1.2, "speedup_ci95": [1.1, 1.3], "verdict": FASTER, "compile_time_s": 9.0}
    return {**base, **fields}


STATES = {
    REACHED: summary_with(break_even_step=1037, break_even_wall_s=12.34),
    PROJECTED: summary_with(eager_median_step_s=0.1),  # 9 s to earn back at 0.1 - 0.1 / 1.2 s a step
    NOT_REACHED: summary_with(break_even_reason=NOT_WITHIN_RUN),
    NO_GAIN: summary_with(verdict=NO_CLEAR_DIFFERENCE, speedup_ci95=[0.97, 1.05], steady_state_speedup=1.01),
    NEVER: summary_with(verdict=SLOWER, speedup_ci95=[0.8, 0.9], steady_state_speedup=0.85),
    NO_COMPILE: summary_with(compile_skipped="no graph was compiled"),
    NO_VERDICT: summary_with(verdict=BUSY, speedup_ci95=[0.6, 0.9], steady_state_speedup=0.7),
}


def test_each_break_even_state_has_its_words_short_and_long():
    assert set(STATES) == set(BREAK_EVEN_STATES)
    said = {state: (words.break_even(s, short=True), words.break_even(s)) for state, s in STATES.items()}
    assert said == {
        REACHED: ("step 1,037", "step 1,037 (12.3 s in)"),
        PROJECTED: (
            "≈ step 541",
            "not within this run: about step 541 at the steady rates (between step 391 and 990 within its 95% interval)",
        ),
        NOT_REACHED: ("not reached", "not within this run"),
        NO_GAIN: ("none", "none to count on: no clear per-step gain"),
        NEVER: ("never", "never: compiled steps are slower"),
        NO_COMPILE: ("-", "-"),
        NO_VERDICT: ("no verdict", "no verdict: the machine was busy"),
    }


def test_the_state_follows_the_verdict_not_a_stored_reason():
    """A run whose interval spans 1 but whose stored reason says 'not within this run' (compiled's
    median was a hair faster) has no break-even to count on, in every surface's words."""
    doubtful = summary_with(
        verdict=NO_CLEAR_DIFFERENCE,
        speedup_ci95=[0.97, 1.05],
        break_even_reason=NOT_WITHIN_RUN,
        break_even_extrapolated_step=5e4,
    )
    assert Summary.of(doubtful).break_even == NO_GAIN
    assert Summary.of({**doubtful, "break_even_reason": NEVER_NO_GAIN}).break_even == NO_GAIN


def test_a_summary_round_trips_and_drops_the_derived_reading():
    s = summary_with(break_even_step=10, reading="an old stored sentence", eager_step_times_s=[0.1, 0.2])
    typed = Summary.from_dict(s)
    assert typed.eager_step_times_s == (0.1, 0.2) and typed.speedup_ci95 == (1.1, 1.3)
    out = typed.to_dict()
    assert "reading" not in out and out["eager_step_times_s"] == [0.1, 0.2] and out["speedup_ci95"] == [1.1, 1.3]
    assert Summary.from_dict(out) == typed


def test_a_damaged_summary_reads_its_bad_fields_as_missing():
    typed = Summary.from_dict(
        {"steady_state_speedup": "fast", "speedup_ci95": [1.0], "break_even_step": True, "graphs": 3.0,
         "compiled_step_times_s": [0.1, "x", None, 0.2], "verdict": 7, "break_even_projected_range": [300, None]}
    )  # fmt: skip
    assert typed.steady_state_speedup is None and typed.speedup_ci95 is None and typed.break_even_step is None
    assert typed.graphs == 3 and typed.compiled_step_times_s == (0.1, 0.2) and typed.verdict is None
    assert typed.break_even_projected_range == (300.0, None)
    assert Summary.from_dict(None) == Summary() and Summary.from_dict("text") == Summary()


def test_a_newer_writer_s_keys_are_kept_but_not_read():
    typed = Summary.from_dict({"steady_state_speedup": 1.0, "a_later_field": [1, 2]})
    assert typed.extra == {"a_later_field": [1, 2]} and typed.to_dict()["a_later_field"] == [1, 2]


@pytest.mark.parametrize("name", sorted(os.listdir(os.path.join(ROOT, "assets", "recordings"))))
def test_every_shipped_recording_s_summary_loads_and_reads(name):
    with open(os.path.join(ROOT, "assets", "recordings", name)) as fh:
        stored = json.load(fh)["run"]["summary"]
    typed = Summary.from_dict(stored)
    assert typed.steady_state_speedup == stored["steady_state_speedup"] and typed.verdict == stored["verdict"]
    assert not typed.extra  # every key a recording holds is a field (or the derived reading)
    assert {k: v for k, v in typed.to_dict().items() if k in stored} == {
        k: v for k, v in stored.items() if k != "reading"
    }
    assert reading(typed).startswith(("Compiled steps", "No clear difference"))


def test_a_summary_from_analysis_is_one_the_record_reads_whole():
    summary = analysis.summarize([0.1] * 40, [1.0] + [0.08] * 39, [4.0], [3.9], 32)
    typed = Summary.from_dict(summary)
    assert not typed.extra and typed.to_dict() == {**Summary().to_dict(), **summary}
