"""The figures the lists and labels read about a finished race, in one place: its verdict from its
headline interval, its break-even state and the words for each, all from the one derivation
(core.engine.headline, `Summary.headline`). The comparison, the sweep, the replay and recording
labels, the Runs table, its CSV and the CLI's runs list read these, never a stored verdict on its
own or a first process's medians. The one step taken here: a stored verdict that its own interval
does not bear out (a summary stored by an older version, or without a verdict) is read as the
interval says, before the headline derives the rest from it. Torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.engine import words
from core.engine.summary import BUSY, FASTER, NO_CLEAR_DIFFERENCE, SLOWER, Summary


def verdict(summary: Summary | Mapping[str, Any] | None) -> str | None:
    """The verdict the headline interval gives: faster only where the whole interval is above 1x,
    slower only where it is below, else no clear difference; a busy machine's race keeps its "no
    verdict"; None where compiled code did not run or there is no speedup."""
    s = Summary.of(summary)
    if s.steady_state_speedup is None or not s.compiled:
        return None
    if s.verdict == BUSY:
        return BUSY
    low, high = s.interval
    return FASTER if low > 1 else SLOWER if high < 1 else NO_CLEAR_DIFFERENCE


def headline(summary: Summary | Mapping[str, Any] | None) -> Summary:
    """The summary with its verdict as its headline interval gives it, so every figure its
    `headline` derives (break-even state, projection, payoff) follows the interval shown beside it."""
    s = Summary.of(summary)
    found = verdict(s)
    return s if found is None or found == s.verdict else s.replace(verdict=found)


def break_even_state(summary: Summary | Mapping[str, Any] | None) -> str:
    """Where the break-even stands (core.engine.headline.BREAK_EVEN_STATES), from the headline."""
    return headline(summary).headline.state


def break_even_words(summary: Summary | Mapping[str, Any] | None, short: bool = False) -> str:
    """The break-even in the words every surface uses (words.break_even), from the headline."""
    return words.break_even(headline(summary), short=short)


def verdict_words(summary: Summary | Mapping[str, Any] | None, short: bool = False) -> str:
    """'faster', 'no clear difference', 'slower', 'no verdict: the machine was busy'; '-' for none."""
    return words.verdict(verdict(summary), short=short)
