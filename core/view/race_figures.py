"""The figures the lists and labels read about a finished race, in one place: its verdict from its
headline interval, its break-even state and the words for each, all from the one derivation
(core.engine.headline, `Summary.headline`). The comparison, the sweep, the replay and recording
labels, the Runs table, its CSV and the CLI's runs list read these, never a stored verdict on its
own or a first process's medians. A stored verdict that its own interval does not bear out (a
summary stored by an older version, or without a verdict) is read as the interval says by
Summary.from_dict itself (headline.interval_verdict), so the cards and the reading agree too.
Torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.engine import words
from core.engine.summary import Summary


def verdict(summary: Summary | Mapping[str, Any] | None) -> str | None:
    """The verdict its headline interval gives (Summary.from_dict reads every stored verdict through
    headline.interval_verdict); None where compiled code did not run or there is no speedup."""
    s = Summary.of(summary)
    if s.steady_state_speedup is None or not s.compiled:
        return None
    return s.verdict


def headline(summary: Summary | Mapping[str, Any] | None) -> Summary:
    """The summary as every surface reads it (its verdict already its interval's)."""
    return Summary.of(summary)


def break_even_state(summary: Summary | Mapping[str, Any] | None) -> str:
    """Where the break-even stands (core.engine.headline.BREAK_EVEN_STATES), from the headline."""
    return headline(summary).headline.state


def break_even_words(summary: Summary | Mapping[str, Any] | None, short: bool = False) -> str:
    """The break-even in the words every surface uses (words.break_even), from the headline."""
    return words.break_even(headline(summary), short=short)


def verdict_words(summary: Summary | Mapping[str, Any] | None, short: bool = False) -> str:
    """'faster', 'no clear difference', 'slower', 'no verdict: the machine was busy'; '-' for none."""
    return words.verdict(verdict(summary), short=short)
