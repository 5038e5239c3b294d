"""The words a race's speedup interval is said in, on every surface (the live words and card, the
reading, the terminal's table): its ends, and for a race that stopped when its speedup was known,
that its looks widened it. The error rate is the stopping rule's (core.engine.stopping.alpha_of),
so what a person reads is the interval the rule decided on. Torch-free.
"""

from __future__ import annotations

from typing import Any

from core.engine.intervals import ALPHA


def interval_words(summary: dict[str, Any]) -> str:
    """'95% interval 1.10-1.20x', with the looks it was widened for where a race stopped on it
    ('95% interval 1.08-1.22x, widened for the stopping rule's 6 looks')."""
    low, high = summary.get("speedup_ci95") or (summary.get("steady_state_speedup"),) * 2
    return f"95% interval {low:.2f}-{high:.2f}x{looks_note(summary)}"


def looks_note(summary: dict[str, Any]) -> str:
    """', widened for the stopping rule's 6 looks' where the interval's error rate was spread over
    looks (interval_alpha below 5%, Bonferroni) and they, not the run-to-run spread, set its width
    (analysis.spread_note says when the spread did); else ''."""
    alpha = summary.get("interval_alpha")
    if not isinstance(alpha, float) or not 0 < alpha < ALPHA:
        return ""
    within, ci = summary.get("speedup_ci95_within"), summary.get("speedup_ci95")
    if within and ci and ci[1] > within[1] * (1 + 1e-9):
        return ""
    return f", widened for the stopping rule's {round(ALPHA / alpha)} looks"
