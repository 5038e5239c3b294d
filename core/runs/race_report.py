"""A report that is ready to file: a finished race as a torch.compile issue, laid out as PyTorch's
own template asks (🐛 Describe the bug, Error logs, Minified repro, Versions), in one zip:

- `report.md`, the issue's body: what the race found in the project's words (core.engine.reading),
  the command that made it, the backend ladder to run as a sweep (eager, aot_eager, ... inductor: the
  rungs this version offers), its errors and compile findings, the script, the versions and machine;
- `race_<id>.py`, the race as one script (core.runs.race_script), to attach or paste;
- `torch_trace/`, the race's TORCH_TRACE where it was traced (what tlparse reads), when asked for.

A zip rather than one markdown file: the body is pasted into the issue, while the trace (often tens
of MB of text) and the script go as attachments, and one download keeps them together. Nothing in a
bundle runs: its free text stands in fenced blocks no backtick run in it can close. Torch-free.
"""

from __future__ import annotations

import io
import os
import re
import zipfile
from typing import Any

from core.engine import words
from core.engine.reading import reading
from core.engine.spec import OPTIONS, spec_flags
from core.engine.summary import Summary
from core.runs import race_script, run_files

LADDER = ("eager", "aot_eager", "aot_eager_decomp_partition", "inductor")  # PyTorch's guide's order
MAX_LOG = 4000  # characters of an error kept in the report


def ladder_rungs() -> tuple[str, ...]:
    """The rungs of PyTorch's backend ladder this version can race (its backend option's choices)."""
    return tuple(b for b in LADDER if b in (OPTIONS["backend"].choices or ()))


def ladder_command(spec: Any) -> str:
    """The sweep that races the ladder from the race's settings: every rung as a point, mode default
    (only Inductor takes a mode)."""
    flags = spec_flags(spec)
    kept: list[str] = []
    skip = {"--backend", "--mode"}
    i = 0
    while i < len(flags):
        if flags[i] in skip:
            i += 2
            continue
        kept.append(flags[i])
        i += 1
    axis = OPTIONS["backend"].axis_flag
    return "python -m core sweep " + " ".join([*kept, axis, ",".join(ladder_rungs())])


def fenced(text: str, language: str = "") -> str:
    """`text` in a fenced block that nothing inside it can close (a longer fence than any run of
    backticks it holds)."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text.rstrip()}\n{fence}"


def _line(value: Any) -> str:
    return race_script.header_text(value)


def report_markdown(run: Any, script: str | None, script_problem: str | None, trace: str) -> str:
    """The issue's body for a stored race (see the module's docstring); `trace` says where its
    TORCH_TRACE is (in the zip, not kept, or not offered)."""
    spec = race_script.checked_spec(run.params, scriptable=False)
    s = Summary.of(run.summary)
    env = run.environment if isinstance(run.environment, dict) else {}
    backend = f"backend={spec.backend!r}" + (f", mode={spec.mode!r}" if spec.backend == "inductor" else "")
    low, high = s.speedup_ci95 or (None, None)
    result = f"steady speedup {words.speedup(s.steady_state_speedup)}"
    if low is not None and high is not None:
        result += f" ({words.interval(s)})"
    errors = [
        text for text in (run.error, s.compile_failed, s.compile_skipped) if isinstance(text, str) and text.strip()
    ]
    findings = [
        f"graphs: {s.graphs}" if s.graphs is not None else "",
        f"graph breaks: {s.graph_breaks}" if s.graph_breaks is not None else "",
        f"recompiles: {s.recompiles}" if s.recompiles is not None else "",
    ]
    versions = [
        f"torch: {_line(env.get('torch'))}",
        f"CUDA: {_line(env.get('cuda'))}, cuDNN: {_line(env.get('cudnn'))}, Triton: {_line(env.get('triton'))}",
        f"Python: {_line(env.get('python'))}",
        f"OS: {_line(env.get('platform'))}",
        f"device: {_line(env.get('device_type'))}: {_line(env.get('device_name'))}",
        f"CPU: {_line(env.get('cpu_name'))}, {_line(env.get('cpu_count'))} cores, "
        f"{_line(env.get('torch_threads'))} torch threads",
        f"precision: {_line(env.get('precision'))}, Inductor cache: {_line(env.get('inductor_cache'))}",
    ]
    repro = (
        f"The race as one script (needs only torch; attached as race_{run.id}.py):\n\n" + fenced(script, "python")
        if script is not None
        else f"No script: {script_problem}. The race's command: `{race_script.race_command(spec)}`"
    )
    parts = [
        f"<!-- Title: torch.compile ({backend}) on {spec.model}: {result}; compile {words.compile_cost(s)} -->",
        "### 🐛 Describe the bug",
        f"Training {spec.model} (batch {spec.batch_size}, {spec.precision}) with `torch.compile({backend}, "
        f"dynamic={spec.dynamic!r}, fullgraph={spec.fullgraph!r})` against eager, from the same weights on the same "
        f"batches, taking turns ({spec.schedule} schedule): {result}; compile {words.compile_cost(s)}.",
        fenced(_line(reading(s)) if run.summary else "no result: the race recorded no summary"),
        f"Measured by Compile Lab's race {run.id}: `{race_script.race_command(spec)}`",
        "Where the cost or the change comes in: the backend ladder "
        + " → ".join(f"`{b}`" for b in ladder_rungs())
        + ", run as a sweep of the same race:",
        fenced(ladder_command(spec), "sh"),
        "### Error logs",
        fenced("\n\n".join(e[:MAX_LOG] for e in errors)) if errors else "None: the race finished without an error.",
        "Compile findings: " + (", ".join(f for f in findings if f) or "none recorded") + ".",
        f"TORCH_TRACE: {trace}",
        "### Minified repro",
        repro,
        "### Versions",
        "As the race recorded them (`python -m torch.utils.collect_env` gives the full list on the machine):",
        fenced("\n".join(versions)),
    ]
    return "\n\n".join(parts) + "\n"


def report_zip(store_path: str, run: Any, with_trace: bool = True) -> bytes:
    """The report of a stored race as zip bytes: report.md, the script where it can be written, and
    with `with_trace` the race's TORCH_TRACE files. ScriptError where its settings do not validate."""
    try:
        script, problem = race_script.script_for_run(run), None
    except race_script.ScriptError as exc:
        race_script.checked_spec(run.params, scriptable=False)  # settings that do not validate: no report
        script, problem = None, str(exc)
    folder = run_files.compile_trace_dir(store_path, run.id)
    traced = run_files.compile_trace_size(store_path, run.id)
    if traced and with_trace:
        trace = "in torch_trace/ beside this file (read it with tlparse: `tlparse torch_trace/<file>.log`)."
    elif traced:
        trace = "kept, and offered to whoever ran the race (it names the folders of the box it ran on)."
    else:
        trace = "not kept: race again with `--compile-trace` (the form's Compile trace) to have one."
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("report.md", report_markdown(run, script, problem, trace))
        if script is not None:
            archive.writestr(f"race_{run.id}.py", script)
        if traced and with_trace:
            for root, _, names in os.walk(folder):
                for name in sorted(names):
                    path = os.path.join(root, name)
                    archive.write(path, os.path.join("torch_trace", os.path.relpath(path, folder)))
    return buffer.getvalue()
