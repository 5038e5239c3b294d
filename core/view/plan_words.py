"""What qualifies a plan (Plan your training): a plan extrapolates one race's step times over the
user's run, and on a busy or noisy machine another race of the same configuration extrapolates to
a very different total (the walk-through saw 87 min, 3.0 h and 52 min for one configuration's 50,000
eager steps). So the plan names the totals the other races of its configuration on this device
predict for the same steps, or, where there are none, says that it rests on one race."""

from __future__ import annotations

from collections.abc import Sequence

from core.engine import words
from core.engine.planning import plan_from_summary
from core.runs.run_to_run import configuration
from core.runs.store import Run
from core.view.comparison_words import device_of


def plan_caveat(run: Run, others: Sequence[Run], steps: int) -> str | None:
    """The caveat beside `run`'s plan over `steps` steps, from `others` (done races here, any)."""
    plan = plan_from_summary(run.summary or {}, steps)
    if plan is None:
        return None
    mine = configuration(run.params or {})
    same = [
        r
        for r in others
        if r.id != run.id and r.status == "done" and device_of(r) == device_of(run) and not r.imported
        and configuration(r.params or {}) == mine
    ]  # fmt: skip
    plans = [(r.id, p) for r in same if (p := plan_from_summary(r.summary or {}, steps)) is not None]
    if not plans:
        return (
            "This plan rests on this one race: another race of the same configuration here can land elsewhere, as "
            "its eager step time does from race to race. Race it again to see how far."
        )
    totals = [plan.eager_total_s] + [p.eager_total_s for _, p in plans]
    low, high = min(totals), max(totals)
    ids = ", ".join(str(i) for i, _ in plans[:5])
    wider = low < plan.eager_ci[0] or high > plan.eager_ci[1]
    spread = (
        ", more than this plan's own interval allows: read its totals as one race's among several"
        if wider
        else ", within this plan's own interval"
    )
    return (
        f"Races of this configuration here (run{'s' if len(plans) > 1 else ''} {ids} and this one) predict "
        f"{words.duration(low)} to {words.duration(high)} of eager training for the same {words.count(steps, 'step')}"
        f"{spread}."
    )
