"""Plain-text rendering of a race for the terminal: header, progress lines, summary table, and the
flat row per run that `python -m core runs` lists.

Pure functions from dicts (and stored run rows) to strings, so the CLI stays a thin shell and tests
read the text.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

from core.engine import analysis
from core.engine.interval_words import looks_note
from core.engine.noise import BUSY_STEPS_SHARE
from core.engine.profile_reading import profile_reading
from core.engine.reading import COMPILE_TOO_SMALL, fmt_ms, span_words

if TYPE_CHECKING:
    from core.runs.store import Run

PROBE_NAMED_FROM_S = 0.05  # a CPU feature probe shorter than this was read from its cache: not worth a word


def probe_worth_naming(probe_s: Any) -> float | None:
    """Inductor's one-time CPU feature probe (core.engine.cpu_probe) as a race or demo recorded it,
    when it is worth telling the reader it is not counted (its first build, not a cache read)."""
    number = isinstance(probe_s, int | float) and not isinstance(probe_s, bool)
    return float(probe_s) if number and probe_s >= PROBE_NAMED_FROM_S else None  # NaN compares False


def fmt_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def fmt_seconds(s: float | None, signed: bool = False, ms_digits: int = 1, s_digits: int = 2) -> str:
    """Milliseconds below a second, seconds above; a value that would round to 1000 ms reads 1 s."""
    if s is None or math.isnan(s):
        return "-"
    sign = "+" if signed and s >= 0 else ""
    if abs(s) < 1 - 0.5 * 10 ** -(ms_digits + 3):
        return f"{sign}{s * 1000:.{ms_digits}f} ms"
    return f"{sign}{s:.{s_digits}f} s"


def fmt_about(s: float) -> str:
    """A rough duration for words like "~80 s": seconds, minutes past 10 min, hours past 2 h."""
    if s >= 7200:
        return f"~{s / 3600:.1f} h"
    if s >= 600:
        return f"~{s / 60:.0f} min"
    return f"~{s:.0f} s"


def fmt_speedup(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def process_line(process: dict[str, Any]) -> str:
    """A replicate process as the terminal says it when it lands: '[replicate 2] 1.31x (its own 95%
    interval 1.29-1.33x), 60 steps per variant, 14.2 s (4.1 s until its first timed step)'."""
    number = process.get("number")
    head = f"[replicate {number - 1 if isinstance(number, int) else '?'}]"
    if process.get("error"):
        return f"{head} {process['error']}"
    speedup, half, steps = process.get("speedup"), process.get("log_half"), process.get("steps")
    own = ""
    if isinstance(speedup, int | float) and isinstance(half, int | float):
        own = f" (its own 95% interval {speedup * math.exp(-half):.2f}-{speedup * math.exp(half):.2f}x)"
    took = f", {fmt_seconds(process.get('wall_s'))}" if process.get("wall_s") is not None else ""
    start = process.get("start_s")
    if start is not None:
        took += f" ({fmt_seconds(start)} until its first timed step)"
    busy = " - ran while the machine was busy: it does not count" if (process.get("busy_share") or 0) > 0.1 else ""
    return f"{head} {fmt_speedup(speedup)}{own}, {steps} steps per variant{took}{busy}"


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
    mem = fmt_bytes(env.get("device_memory_bytes"))
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


def _reserved_rows(s: dict[str, Any]) -> list[tuple[str, str, str]]:
    """CUDA: what each variant added to the caching allocator (the CUDA-graph pool shows in
    compiled's), and the reserved peak, which for compiled includes eager's leftover cache."""
    rows = []
    if s.get("eager_reserved_growth_bytes") is not None or s.get("compiled_reserved_growth_bytes") is not None:
        rows.append(
            (
                "CUDA cache added (reserved growth)",
                fmt_bytes(s.get("eager_reserved_growth_bytes")),
                fmt_bytes(s.get("compiled_reserved_growth_bytes")),
            )
        )
    if s.get("eager_peak_reserved_bytes") is not None or s.get("compiled_peak_reserved_bytes") is not None:
        rows.append(
            (
                "peak reserved (whole CUDA cache)",
                fmt_bytes(s.get("eager_peak_reserved_bytes")),
                fmt_bytes(s.get("compiled_peak_reserved_bytes")),
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


def break_even_text(summary: dict[str, Any]) -> str:
    if summary.get("break_even_step") is not None:
        return f"step {summary['break_even_step']} ({summary['break_even_wall_s']:.2f} s of compiled run)"
    reason = summary.get("break_even_reason") or "not within this run"
    extra = analysis.projected_position(summary)  # the one projection rule: only from a clear gain
    if not extra:
        return reason
    span = analysis.projected_range(summary)  # the steps the speedup's 95% interval allows
    within = f"; {span_words(span)} within its 95% interval" if span is not None else ""
    return f"{reason} (about step {math.floor(extra) + 1:,} at steady rates{within})"


def summary_table(result: dict[str, Any]) -> str:
    """The end-of-race table: per-epoch times side by side, then the headline numbers."""
    s, variants = result["summary"], result["variants"]
    eager_epochs, compiled_epochs = s["eager_epoch_times_s"], s["compiled_epoch_times_s"]
    rows: list[tuple[str, str, str]] = []
    for i in range(max(len(eager_epochs), len(compiled_epochs))):
        e = eager_epochs[i] if i < len(eager_epochs) else None
        c = compiled_epochs[i] if i < len(compiled_epochs) else None
        rows.append((f"epoch {i + 1} train", fmt_seconds(e), fmt_seconds(c)))
    ev_e, ev_c = s["eager_eval_epoch_times_s"], s["compiled_eval_epoch_times_s"]
    for i in range(max(len(ev_e), len(ev_c))):
        rows.append(
            (
                f"epoch {i + 1} eval",
                fmt_seconds(ev_e[i] if i < len(ev_e) else None),
                fmt_seconds(ev_c[i] if i < len(ev_c) else None),
            )
        )
    rows += [
        ("median step (steady)", fmt_seconds(s["eager_median_step_s"]), fmt_seconds(s["compiled_median_step_s"])),
        ("throughput (samples/s)", _num(s["eager_samples_per_s"]), _num(s["compiled_samples_per_s"])),
        (
            f"peak memory, {s.get('memory_kind') or '-'}",
            fmt_bytes(s.get("eager_peak_memory_bytes")),
            fmt_bytes(s.get("compiled_peak_memory_bytes")),
        ),
        *_reserved_rows(s),
        ("final loss", _num(variants["eager"]["final_loss"], 4), _num(variants["compiled"]["final_loss"], 4)),
    ]
    width = max(len(r[0]) for r in rows) + 2
    lines = [f"{'':<{width}}{'eager':>14}{'compiled':>14}"]
    lines += [f"{label:<{width}}{e:>14}{c:>14}" for label, e, c in rows]
    ci = s.get("speedup_ci95")
    interval = f"  95% interval [{ci[0]:.2f}, {ci[1]:.2f}]{looks_note(s)}  {s['verdict']}" if ci else ""
    compile_info = result.get("compile", {})
    headline = [
        ("compile time", _compile_text(s)),
        *(
            [("  not counted", f"CPU feature probe {fmt_seconds(probe_s)} (once per machine, before timing)")]
            if (probe_s := probe_worth_naming(s.get("cpu_isa_probe_s"))) is not None
            else []
        ),
        ("first-epoch overhead", fmt_seconds(s["first_epoch_overhead_s"], signed=True)),
        ("steady-state speedup", _speedup_text(s, interval)),
        *([("processes", processes_text(s))] if s.get("replicates") else []),
        ("break-even", break_even_text(s)),
        ("whole run, compile included", fmt_speedup(s["whole_run_speedup"])),
        (
            "graphs / breaks / recompiles",
            f"{_num(compile_info.get('graphs'))} / {_num(compile_info.get('graph_breaks'))} / {_num(compile_info.get('recompiles'))}",
        ),
    ]
    if s.get("eval_first_epoch_overhead_s") is not None:
        headline.insert(2, ("first eval-epoch overhead", fmt_seconds(s["eval_first_epoch_overhead_s"], signed=True)))
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
    lines += _profile_lines(s.get("profile"))
    events = s.get("compile_events") or []
    if events:
        lines.append("")
        lines.append(f"compiles during the run ({len(events)}):")
        lines += [f"  {e['variant']} {e['phase']} step {e['step']}: {e['note']}" for e in events[:20]]
        if len(events) > 20:
            lines.append(f"  ... and {len(events) - 20} more")
    lines += ["", s.get("reading", "")]
    return "\n".join(lines)


def _profile_lines(profile: dict[str, Any] | None) -> list[str]:
    """Per-step anatomy of both variants, side by side, with its reading."""
    if not profile or not (profile.get("eager") or profile.get("compiled")):
        return []
    e, c = profile.get("eager") or {}, profile.get("compiled") or {}
    counting = (c or e).get("kernel_counting", "kernels")
    rows = [
        ("operators", _num(e.get("operators_per_step"), 0), _num(c.get("operators_per_step"), 0)),
        ("kernels", _num(e.get("kernels_per_step"), 0), _num(c.get("kernels_per_step"), 0)),
        ("host time", fmt_seconds(e.get("host_s_per_step")), fmt_seconds(c.get("host_s_per_step"))),
        ("kernel time", fmt_seconds(e.get("device_s_per_step")), fmt_seconds(c.get("device_s_per_step"))),
    ]
    steps = (c or e).get("steps")
    lines = ["", f"{'per step, ' + str(steps) + ' steps profiled after timing':<44}{'eager':>14}{'compiled':>14}"]
    lines += [f"  {label:<42}{a:>14}{b:>14}" for label, a, b in rows]
    lines.append(f"  (kernels counted: {counting})")
    for name, part in (("eager", e), ("compiled", c)):
        top = ", ".join(f"{k['name']} {fmt_seconds(k['s_per_step'])}" for k in (part.get("top_kernels") or [])[:3])
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
        lines.append(f"{'  ' + name:<30}{fmt_seconds(f):>10}{fmt_seconds(b):>10}")
    lines.append(f"{'  total':<30}{fmt_seconds(forward.get('total_s')):>10}{fmt_seconds(backward.get('total_s')):>10}")
    lines.append(f"{'  forward + backward':<30}{fmt_seconds(breakdown.get('total_s')):>10}")
    return lines


def _compile_text(s: dict[str, Any]) -> str:
    """The compile time, or that it was too small to measure (reading.compile_words's words)."""
    window = f"  (first {s['warmup_steps']} compiled steps minus eager's)"
    if s.get("compile_time_s") is None and isinstance(s.get("compile_time_under_s"), int | float):
        return f"{COMPILE_TOO_SMALL} (under {fmt_ms(s['compile_time_under_s'])}){window}"
    return f"{fmt_seconds(s.get('compile_time_s'))}{window}"


def processes_text(s: dict[str, Any]) -> str:
    """Each process's steady speedup, the first first, those that do not count marked:
    '1.31x, 1.29x, 1.35x (busy: not counted)'."""
    shown = []
    for p in [s.get("first_process") or {}, *(s.get("replicates") or [])]:
        mark = " (busy: not counted)" if (p.get("busy_share") or 0) > BUSY_STEPS_SHARE else ""
        mark = " (failed)" if p.get("error") else mark
        shown.append(f"{fmt_speedup(p.get('speedup'))}{mark}")
    return f"{len(shown)}: " + ", ".join(shown)


def _speedup_text(s: dict[str, Any], interval: str) -> str:
    if s.get("compile_failed"):
        return f"none: compile failed on this model ({s['compile_failed']}); eager ran"
    if s.get("compile_skipped"):
        return f"not a compile speedup: compile did not happen ({s['compile_skipped']})"
    return f"{fmt_speedup(s['steady_state_speedup'])}{interval}"


def _num(x: float | int | None, digits: int = 0) -> str:
    if x is None:
        return "-"
    return f"{x:,.{digits}f}" if isinstance(x, float) else str(x)


def run_row(run: Run) -> dict[str, Any]:
    """The flat row the CLI's runs table shows (`python -m core runs`, also as JSON)."""
    p, s = run.params or {}, run.summary or {}
    env = run.environment or {}
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
        "scope": str(p.get("compile_scope", "whole")),
        "sweep": run.sweep_id,
        "first_epoch_overhead_s": s.get("first_epoch_overhead_s"),
        "steady_state_speedup": None
        if s.get("compile_skipped") or s.get("compile_failed")
        else s.get("steady_state_speedup"),
        "break_even_step": s.get("break_even_step"),
        "error": run.error,
    }


def duration_interval(low: float, high: float, like: float) -> str:
    """'95% interval 1.58-1.63 h': an interval in the unit fmt_duration picks for `like`, with as
    many more decimals (up to three) as it takes for its two ends to differ, so its width shows
    ('1.6-1.6 h' said nothing); narrower than that, it says so."""
    from core.engine.planning import fmt_duration

    shown = fmt_duration(like)
    number, name = shown.split()
    unit = {"s": 1.0, "min": 60.0, "h": 3600.0}.get(name, 1.0)
    start = len(number.partition(".")[2])
    for digits in range(start, start + 4):
        a, b = f"{low / unit:.{digits}f}", f"{high / unit:.{digits}f}"
        if a != b:
            return f"95% interval {a}{'-' if low >= 0 else ' to '}{b} {name}"
    return f"95% interval too narrow to show (both ends {a} {name})"
