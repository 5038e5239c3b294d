"""Plain-text rendering of a race for the terminal: header, progress lines, summary table, and the
flat row per run that `python -m core runs` lists.

Pure functions from dicts (and stored run rows) to strings, so the CLI stays a thin shell and tests
read the text.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

from core.engine import words
from core.engine.intervals import BUSY_STEPS_SHARE
from core.engine.profile_reading import profile_reading
from core.engine.reading import reading
from core.engine.summary import Summary
from core.view.answers import finished_answers
from core.view.compare import listed_figures

if TYPE_CHECKING:
    from collections.abc import Callable

    from core.engine.spec import RunSpec
    from core.runs.store import Run

PROBE_NAMED_FROM_S = 0.05  # a CPU feature probe shorter than this was read from its cache: not worth a word


def probe_worth_naming(probe_s: Any) -> float | None:
    """Inductor's one-time CPU feature probe (core.engine.device_state) as a race or demo recorded it,
    when it is worth telling the reader it is not counted (its first build, not a cache read)."""
    number = isinstance(probe_s, int | float) and not isinstance(probe_s, bool)
    return float(probe_s) if number and probe_s >= PROBE_NAMED_FROM_S else None  # NaN compares False


def text_table(headers: list[str], rows: list[list[str]], right: set[str] = frozenset()) -> list[str]:
    """Lines of a plain-text table: every column as wide as its widest cell, two spaces between
    columns (so no two headings run together), `right` columns aligned right."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        parts = [c.rjust(w) if h in right else c.ljust(w) for c, w, h in zip(cells, widths, headers)]
        return "  ".join(parts).rstrip()

    return [line(headers), *(line(r) for r in rows)]


def environment_header(env: dict[str, Any]) -> str:
    """Two or three lines naming the device and the software a result was measured with."""
    mem = words.bytes_(env.get("device_memory_bytes"))
    device = f"{env.get('device_type', '?')}: {env.get('device_name', '?')} ({mem}"
    if env.get("compute_capability"):
        device += f", compute capability {env['compute_capability']}"
    device += f", {env.get('cpu_count')} CPU cores)"
    versions = f"torch {env.get('torch')}"
    if env.get("cuda"):
        versions += f", CUDA {env['cuda']}"
    if env.get("triton"):
        versions += f", Triton {env['triton']}"
    versions += f", Python {env.get('python')}"
    precision = (
        f"precision {env.get('precision', '?')}: {tf32_in_force(env.get('precision_flags', {}))}; "
        f"Inductor cache {env.get('inductor_cache', '?')}"
    )
    return "\n".join([device, versions, precision])


def _reserved_rows(s: Summary) -> list[tuple[str, str, str]]:
    """CUDA: what each variant added to the caching allocator (the CUDA-graph pool shows in
    compiled's), and the reserved peak, which for compiled includes eager's leftover cache."""
    rows = []
    if s.eager_reserved_growth_bytes is not None or s.compiled_reserved_growth_bytes is not None:
        rows.append(
            (
                "CUDA cache added (reserved growth)",
                words.bytes_(s.eager_reserved_growth_bytes),
                words.bytes_(s.compiled_reserved_growth_bytes),
            )
        )
    if s.eager_peak_reserved_bytes is not None or s.compiled_peak_reserved_bytes is not None:
        rows.append(
            (
                "peak reserved (whole CUDA cache)",
                words.bytes_(s.eager_peak_reserved_bytes),
                words.bytes_(s.compiled_peak_reserved_bytes),
            )
        )
    return rows


def tf32_in_force(flags: dict[str, Any]) -> str:
    """What float32 math ran as, from the recorded flags: the new per-backend API where the run's
    torch has it (what Inductor reads), else the legacy flags."""
    matmul = flags.get("cuda_matmul_fp32_precision")
    conv = flags.get("cudnn_conv_fp32_precision") or flags.get("cudnn_fp32_precision")
    if matmul not in (None, "none") or conv not in (None, "none"):
        return f"matmul fp32 precision {matmul or '?'}, cudnn conv {conv or '?'}"
    cudnn = "on" if flags.get("cudnn_allow_tf32") else "off"
    return f"matmul {flags.get('float32_matmul_precision')}, cudnn tf32 {cudnn}"


def summary_table(result: dict[str, Any], command: Callable[[RunSpec], str] | None = None) -> str:
    """The end-of-race table: per-epoch times side by side, then the headline numbers, the reading
    and the answers. `command`: what runs a suggested race in the terminal printing it (the CLI's
    core.cli.races.race_command), in place of the page's link."""
    s, variants = Summary.of(result["summary"]), result["variants"]
    eager_epochs, compiled_epochs = s.eager_epoch_times_s, s.compiled_epoch_times_s
    rows: list[tuple[str, str, str]] = []
    for i in range(max(len(eager_epochs), len(compiled_epochs))):
        e = eager_epochs[i] if i < len(eager_epochs) else None
        c = compiled_epochs[i] if i < len(compiled_epochs) else None
        rows.append((f"epoch {i + 1} train", words.seconds(e), words.seconds(c)))
    ev_e, ev_c = s.eager_eval_epoch_times_s, s.compiled_eval_epoch_times_s
    for i in range(max(len(ev_e), len(ev_c))):
        rows.append(
            (
                f"epoch {i + 1} eval",
                words.seconds(ev_e[i] if i < len(ev_e) else None),
                words.seconds(ev_c[i] if i < len(ev_c) else None),
            )
        )
    rows += [
        (
            "median step (first process)" if s.replicates else "median step (steady)",
            words.seconds(s.eager_median_step_s),
            words.seconds(s.compiled_median_step_s),
        ),
        (  # compiled's is eager's times the headline speedup (core.engine.summary): the card's
            "throughput (samples/s)",
            words.number(s.eager_samples_per_s),
            words.number(s.headline.compiled_samples_per_s),
        ),
        (
            f"peak memory, {s.memory_kind or '-'}",
            words.bytes_(s.eager_peak_memory_bytes),
            words.bytes_(s.compiled_peak_memory_bytes),
        ),
        *_reserved_rows(s),
        (
            "final loss",
            words.number(variants["eager"]["final_loss"], 4),
            words.number(variants["compiled"]["final_loss"], 4),
        ),
    ]
    width = max(len(r[0]) for r in rows) + 2
    lines = [f"{'':<{width}}{'eager':>14}{'compiled':>14}"]
    lines += [f"{label:<{width}}{e:>14}{c:>14}" for label, e, c in rows]
    interval = f"  ({words.interval(s)})  {s.verdict}" if s.speedup_ci95 else ""
    compile_info = result.get("compile", {})
    headline = [
        ("compile time", f"{words.compile_cost(s)}  (first {s.warmup_steps} compiled steps minus eager's)"),
        *(
            [("  not counted", f"CPU feature probe {words.seconds(probe_s)} (once per machine, before timing)")]
            if (probe_s := probe_worth_naming(s.cpu_isa_probe_s)) is not None
            else []
        ),
        ("first-epoch overhead", words.seconds(s.first_epoch_overhead_s, signed=True)),
        ("steady-state speedup", _speedup_text(s, interval)),
        *([("processes", processes_text(s))] if s.replicates else []),
        ("break-even", words.break_even(s)),
        ("whole run, compile included", words.speedup(s.whole_run_speedup)),
        (
            "graphs / breaks / recompiles",
            " / ".join(words.number(compile_info.get(k)) for k in ("graphs", "graph_breaks", "recompiles")),
        ),
    ]
    if s.eval_first_epoch_overhead_s is not None:
        headline.insert(2, ("first eval-epoch overhead", words.seconds(s.eval_first_epoch_overhead_s, signed=True)))
    lines.append("")
    lines += [f"{label:<30}{value}" for label, value in headline]
    for reason in compile_info.get("break_reasons", []):
        lines.append(f"{'':<30}break: {reason}")
    for reason in compile_info.get("recompile_reasons", []):
        lines.append(f"{'':<30}recompile: {reason}")
    for reason in compile_info.get("frame_skips") or []:
        lines.append(f"{'':<30}frame skipped: {reason}")
    if compile_info.get("cudagraph_skips"):
        reasons = "; ".join(compile_info.get("cudagraph_skip_reasons") or []) or "torch did not say why"
        lines.append(f"{'CUDA graphs skipped':<30}{compile_info['cudagraph_skips']}: {reasons}")
    breakdown = compile_info.get("phases") or {}
    if breakdown:
        lines.append(f"{'compile time by phase':<30}{'forward':>10}{'backward':>10}")
        for graph_phase in _phase_rows(breakdown):
            lines.append(graph_phase)
    lines += _profile_lines(s.profile)
    events = s.compile_events
    if events:
        lines.append("")
        lines.append(f"compiles during the run ({len(events)}):")
        lines += [f"  {e['variant']} {e['phase']} step {e['step']}: {e['note']}" for e in events[:20]]
        if len(events) > 20:
            lines.append(f"  ... and {len(events) - 20} more")
    lines += ["", reading(s)]
    lines += finished_answers(s, result.get("spec"), result.get("environment"), compile_info).lines(command)
    return "\n".join(lines)


def _profile_lines(profile: dict[str, Any] | None) -> list[str]:
    """Per-step anatomy of both variants, side by side, with its reading."""
    if not profile or not (profile.get("eager") or profile.get("compiled")):
        return []
    e, c = profile.get("eager") or {}, profile.get("compiled") or {}
    counting = (c or e).get("kernel_counting", "kernels")
    rows = [
        ("operators", words.number(e.get("operators_per_step"), 0), words.number(c.get("operators_per_step"), 0)),
        ("kernels", words.number(e.get("kernels_per_step"), 0), words.number(c.get("kernels_per_step"), 0)),
        ("host time", words.seconds(e.get("host_s_per_step")), words.seconds(c.get("host_s_per_step"))),
        ("kernel time", words.seconds(e.get("device_s_per_step")), words.seconds(c.get("device_s_per_step"))),
    ]
    steps = (c or e).get("steps")
    lines = ["", f"{'per step, ' + str(steps) + ' steps profiled after timing':<44}{'eager':>14}{'compiled':>14}"]
    lines += [f"  {label:<42}{a:>14}{b:>14}" for label, a, b in rows]
    lines.append(f"  (kernels counted: {counting})")
    for name, part in (("eager", e), ("compiled", c)):
        top = ", ".join(f"{k['name']} {words.seconds(k['s_per_step'])}" for k in (part.get("top_kernels") or [])[:3])
        if top:
            lines.append(f"  top kernels, {name}: {top}")
    reading = profile_reading(e or None, c or None) or profile.get("reading")
    if reading:
        lines.append(reading)
    return lines


def _phase_rows(breakdown: dict[str, Any]) -> list[str]:
    """Forward and backward compile time by phase; each column adds up to its total."""
    forward, backward = breakdown.get("forward") or {}, breakdown.get("backward") or {}
    names = list(dict.fromkeys([*forward.get("phases", {}), *backward.get("phases", {})]))
    lines = []
    for name in names:
        f, b = forward.get("phases", {}).get(name), backward.get("phases", {}).get(name)
        lines.append(f"{'  ' + name:<30}{words.seconds(f):>10}{words.seconds(b):>10}")
    lines.append(
        f"{'  total':<30}{words.seconds(forward.get('total_s')):>10}{words.seconds(backward.get('total_s')):>10}"
    )
    lines.append(f"{'  forward + backward':<30}{words.seconds(breakdown.get('total_s')):>10}")
    return lines


def processes_text(s: Summary) -> str:
    """Each process's steady speedup, the first first, those that do not count marked:
    '3: 1.31x, 1.29x, 1.35x (busy: not counted)'."""
    shown = []
    for p in [s.first_process or {}, *s.replicates]:
        mark = " (busy: not counted)" if (p.get("busy_share") or 0) > BUSY_STEPS_SHARE else ""
        mark = " (failed)" if p.get("error") else mark
        shown.append(f"{words.speedup(p.get('speedup'))}{mark}")
    return f"{len(shown)}: " + ", ".join(shown)


def process_line(process: dict[str, Any]) -> str:
    """A replicate process as the terminal says it when it lands: '[replicate 2] 1.31x (its own 95%
    interval 1.29-1.33x), 60 steps per variant, 14.2 s (4.1 s until its first timed step, warm start)'."""
    number = process.get("number")
    head = f"[replicate {number - 1 if isinstance(number, int) else '?'}]"
    if process.get("error"):
        return f"{head} {process['error']}"
    speedup, half, steps = process.get("speedup"), process.get("log_half"), process.get("steps")
    own = ""
    if isinstance(speedup, int | float) and isinstance(half, int | float):
        own = f" (its own 95% interval {words.speedup_range(speedup * math.exp(-half), speedup * math.exp(half))})"
    took = f", {words.seconds(process.get('wall_s'))}" if process.get("wall_s") is not None else ""
    start = (
        [f"{words.seconds(process['start_s'])} until its first timed step"]
        if process.get("start_s") is not None
        else []
    )
    if process.get("started") in ("warm", "cold"):
        start.append(f"{process['started']} start")  # warm: forked from a warm server (core.runs.warm_start)
    took += f" ({', '.join(start)})" if start else ""
    busy = (
        " - ran while the machine was busy: it does not count"
        if (process.get("busy_share") or 0) > BUSY_STEPS_SHARE
        else ""
    )
    return f"{head} {words.speedup(speedup)}{own}, {words.count(steps or 0, 'step')} per variant{took}{busy}"


def _speedup_text(s: Summary, interval: str) -> str:
    if s.compile_failed:
        return f"none: compile failed on this model ({s.compile_failed}); eager ran"
    if s.compile_skipped:
        return f"not a compile speedup: compile did not happen ({s.compile_skipped})"
    return f"{words.speedup(s.steady_state_speedup)}{interval}"


def run_row(run: Run) -> dict[str, Any]:
    """The flat row the CLI's runs table shows (`python -m core runs`, also as JSON)."""
    p, s = run.params or {}, Summary.of(run.summary)
    env = run.environment or {}
    listed = listed_figures(run)  # what the Runs table and its CSV say, read once
    return {
        "id": run.id,
        "status": run.status,
        "imported": bool(run.imported),
        "created": time.strftime("%Y-%m-%d %H:%M", time.localtime(run.created_at)),
        "device": str(env.get("device_type") or run.device_key),
        "device_name": None if env.get("device_name") is None else str(env["device_name"]),
        "model": str(p.get("model", "?")),
        "batch_size": p.get("batch_size", 0),
        "precision": str(p.get("precision", "?")),
        "mode": str(p.get("mode", "?")),
        "scope": listed["compile_scope"],
        "cache": listed["cache"],
        "sweep": run.sweep_id,
        "first_epoch_overhead_s": s.first_epoch_overhead_s,
        "steady_state_speedup": s.steady_state_speedup if s.compiled else None,
        "verdict": listed["verdict"],
        "compile": listed["compile"],
        "compile_s": listed["compile_s"],
        "break_even_step": listed["break_even_step"],
        "break_even": listed["break_even"] or words.break_even(s, short=True),
        "error": run.error,
    }
