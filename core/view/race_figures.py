"""A finished race's verdict as the lists and labels say it (the comparison, the sweep, the Runs
table, its CSV and `python -m core runs`): none where compiled code did not run or there is no
speedup, else the summary's own, which Summary.from_dict reads through headline.interval_verdict
(the one rule: a stored verdict its interval does not bear out reads as the interval says). Every
other figure these surfaces show comes from Summary.headline. Torch-free.
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


def verdict_words(summary: Summary | Mapping[str, Any] | None, short: bool = False) -> str:
    """'faster', 'no clear difference', 'slower', 'no verdict: the machine was busy'; '-' for none."""
    return words.verdict(verdict(summary), short=short)
