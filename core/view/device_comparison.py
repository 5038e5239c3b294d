"""One race on several device types side by side, for people (Race on every GPU type:
core.runs.fleet_races): for each device its compile time, its steady speedup with the 95% interval,
its break-even (the one projection rule: a projected step only from an interval above 1, through
words.break_even) and the published figures for that GPU and model where the reference data
has one. A group of races is named by its run ids, the one number a person sees for each race:
`?compare=12,13,14` on the Race page, `python -m core status 12 13 14` in a terminal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from core.engine import words
from core.engine.summary import Summary
from core.runs import fleet
from core.runs.store import Run, Store, id_from_text
from core.view import answers
from core.view.compare import SETTING_WORDS, differing_settings, run_name
from core.view.host_tables import describe
from core.view.report import text_table
from core.view.safe_text import terminal_text

COMPARE_PARAM = "compare"  # the Race page's query parameter: the group's run ids, "12,13,14"
MAX_COMPARED = 16
# A GPU's family in its name: the published figures' "NVIDIA A100-SXM4-40GB" is an A100 as
# "NVIDIA A100 80GB PCIe" is. Published figures are for scale, never a prediction: the exact
# hardware is said beside each.
GPU_FAMILY = re.compile(r"\b(RTX\s?\d{4}(?:\s?Ti)?|[ABHLTV]\d{1,3}[A-Z]?)\b", re.IGNORECASE)
COLUMNS = ("run", "device", "status", "compile time", "steady speedup", "95% interval", "break-even", "published")


def ids_from_text(text: object) -> list[int]:
    """'12,13,14' -> [12, 13, 14]: what is not a run id is left out, a repeat counted once, at most
    MAX_COMPARED."""
    ids: list[int] = []
    for part in str(text or "").split(","):
        run_id = id_from_text(part.strip())
        if run_id is not None and run_id not in ids:
            ids.append(run_id)
    return ids[:MAX_COMPARED]


def compare_value(ids: list[int] | tuple[int, ...]) -> str:
    """The query value naming a group of races: '12,13,14'."""
    return ",".join(str(i) for i in ids)


def gpu_family(name: object) -> str | None:
    """'NVIDIA A100-SXM4-40GB' -> 'A100', 'NVIDIA GeForce RTX 4080' -> 'RTX4080'; None: not a GPU named."""
    found = GPU_FAMILY.search(str(name or "").replace("-", " "))
    return re.sub(r"\s", "", found.group(1)).upper() if found else None


def published_figures(device_name: object, model: object) -> list[str]:
    """The published figures for this GPU family and model (the tutorial's ResNet50 runs), and for
    the GPU alone (the PyTorch 2.0 release's average over its models); none for other hardware."""
    family = gpu_family(device_name)
    if family is None:
        return []
    figures = []
    if str(model or "").split(":")[-1] == "resnet50":
        for ref in answers.tutorial_runs():
            if gpu_family(ref.gpu) == family:
                x = ref.break_even_epochs
                be = f"break-even at {x:.1f} epochs" if ref.break_even_observed else f"break-even about {x:.1f} epochs"
                figures.append(
                    f"tutorial ResNet50 on {ref.gpu}, torch 2.0: {words.speedup(ref.steady_speedup)} steady, "
                    f"first epoch {words.seconds(ref.first_epoch_overhead_s, signed=True)}, {be}"
                )
    release = answers.PYTORCH2_RELEASE
    if gpu_family(release["source"]) == family:
        figures.append(
            f"PyTorch 2.0 release, {release['models']} models on an A100: "
            f"{words.speedup(release['training_speedup_weighted'])} training "
            f"(AMP {words.speedup(release['training_speedup_amp'])}, fp32 {words.speedup(release['training_speedup_fp32'])})"
        )
    return figures


@dataclass(frozen=True)
class Comparison:
    """The races of a group as found in the store, each with its device's name, and what a person
    must be told about the group (a run that is not there, settings that differ)."""

    runs: tuple[Run, ...]
    devices: dict[int, str]
    states: dict[int, str]
    notes: list[str] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return all(run.finished for run in self.runs)

    def label(self, run: Run) -> str:
        """'run 12: NVIDIA H100 80GB HBM3': the run in the charts' legends (one colour per device)."""
        return f"{run_name(run.id)}: {terminal_text(self.devices[run.id])}"


def device_of(run: Run, lanes: dict[tuple[str, str], str]) -> str:
    """The device a race ran on (its record), or the fleet lane it is pinned to before it starts."""
    env = run.environment or {}
    if env.get("device_name"):
        return str(env["device_name"])
    return lanes.get((run.host or "", run.device_key)) or " ".join(p for p in (run.host, run.device_key) if p)


def comparison(store: Store, ids: list[int]) -> Comparison:
    """The group of races `ids` names, in that order, with what is wrong with it said in `notes`."""
    lanes = {(lane.host, lane.lane): lane.device_name for host in fleet.hosts(store) for lane in host.lanes}
    runs, notes = [], []
    for run_id in ids:
        run = store.get_run(run_id)
        if run is None or run.kind != "race":
            notes.append(f"There is no race {run_id} (deleted, or not a race): it is left out.")
        else:
            runs.append(run)
    differ = [w for w in differing_settings([r.params for r in runs]) if w != "device"]
    if differ:
        words = ", ".join(SETTING_WORDS[w] or w for w in differ)
        notes.append(f"These races differ in more than their device ({words}): not one race on several devices.")
    states = {run.id: describe(store, run) for run in runs}
    return Comparison(tuple(runs), {r.id: device_of(r, lanes) for r in runs}, states, notes)


def _interval(s: Summary) -> str:
    if s.speedup_ci95 is None or not s.compiled:
        return "-"
    return words.speedup_range(*s.speedup_ci95)


def _speedup(s: Summary) -> str:
    if s.compile_failed:
        return "none: compile failed"
    if s.compile_skipped:
        return "none: compile did not happen"
    return words.speedup(s.steady_state_speedup)


def comparison_rows(group: Comparison) -> list[dict[str, str]]:
    """One row per race (keys: COLUMNS), its figures once it is done, its state until then. Every
    text from the store is made inert for a terminal (a page shows the rows as a table's cells)."""
    rows = []
    for run in group.runs:
        s = Summary.of(run.summary) if run.status == "done" and run.summary else None
        figures = published_figures(group.devices[run.id], (run.params or {}).get("model"))
        row = {
            "run": run_name(run.id),
            "device": group.devices[run.id],
            "status": group.states[run.id],
            "compile time": words.compile_cost(s) if s else "-",
            "steady speedup": _speedup(s) if s else "-",
            "95% interval": _interval(s) if s else "-",
            "break-even": words.break_even(s) if s else "-",
            "published": "; ".join(figures) if figures else "none for this GPU and model",
        }
        rows.append({k: terminal_text(v) for k, v in row.items()})
    return rows


def comparison_lines(group: Comparison) -> list[str]:
    """The comparison for a terminal: the table, then each device's published figures beneath it."""
    rows = comparison_rows(group)
    shown = [c for c in COLUMNS if c != "published"]
    lines = [*(terminal_text(n) for n in group.notes)]
    lines += text_table(list(shown), [[r[c] for c in shown] for r in rows], right={"compile time", "steady speedup"})
    published = [f"  {r['device']}: {r['published']}" for r in rows if not r["published"].startswith("none")]
    if published:
        lines += ["", "published, for scale (other hardware and software; never a prediction):", *published]
    return lines
