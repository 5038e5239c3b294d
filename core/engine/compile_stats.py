"""What torch says about its own compilation: graphs, graph breaks, recompiles, skipped frames,
skipped CUDA graphs, phase times.

These come from private torch APIs (`torch._dynamo.utils`), so they are read in this one module,
defensively: a figure this torch version does not provide is None ("not available"), never 0 and
never a crash. The module imports no torch at import time: `compile_skipped_reason` is pure, and
the view uses it on stored runs.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from statistics import median
from typing import Any

from core.engine import words
from core.engine.spec import CUDA_GRAPH_MODES
from core.engine.summary import Summary


@dataclass
class CompileStats:
    """Counters and times for everything compiled since `reset_compile_state()`."""

    graphs: int | None = None
    graph_breaks: int | None = None
    break_reasons: list[str] = field(default_factory=list)
    recompiles: int | None = None
    recompile_reasons: list[str] = field(default_factory=list)
    frames_compiled: int | None = None
    frame_skips: list[str] = field(default_factory=list)  # frames Dynamo or a backend decided to skip
    cudagraph_skips: int | None = None
    cudagraph_skip_reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # what torch warned while compiling
    # Where compile time went, forward and backward apart, in phases that add up to each total
    # (compile_breakdown); {} when this torch does not report it.
    phases: dict[str, Any] = field(default_factory=dict)
    cache_hits: int | None = None
    cache_misses: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# How many compile records torch keeps for a race's totals (its default, 64, drops the oldest: a
# model with many graph breaks, or recompiles, fills it before the race ends).
COMPILATION_RECORDS_KEPT = 4096


def reset_compile_state() -> None:
    """Forget earlier compilations so counters describe only what comes next."""
    try:
        import torch._dynamo
        import torch._dynamo.utils as du

        torch._dynamo.reset()
        du.counters.clear()
        if hasattr(du, "_compilation_metrics"):
            du._compilation_metrics.clear()
        if hasattr(du, "set_compilation_metrics_limit"):  # 64 by default: a race's totals need them all
            du.set_compilation_metrics_limit(COMPILATION_RECORDS_KEPT)
    except Exception:  # noqa: BLE001 - a missing private API only costs us the counters
        pass
    try:  # start recording why frames are skipped (torch keeps no list until asked to)
        from torch._dynamo import eval_frame

        eval_frame.reset_skip_reasons()
    except Exception:  # noqa: BLE001
        pass


DYNAMO, AOT, LOWERING, CODEGEN, KERNELS = (
    "Dynamo tracing",
    "AOT autograd",
    "Inductor lowering",
    "Inductor code generation",
    "kernel compilation",
)
PHASE_ORDER = (DYNAMO, AOT, LOWERING, CODEGEN, KERNELS)
PHASE_MEANING = {
    DYNAMO: "Dynamo reads the Python bytecode and records the tensor operations into a graph",
    AOT: "AOT autograd traces the joint forward and backward graph and splits it in two",
    LOWERING: "Inductor lowers the graph to loops and decides what to fuse",
    CODEGEN: "Inductor writes the kernels' source code (C++ on a CPU, Triton on a GPU)",
    KERNELS: "the C++ compiler or Triton compiles those kernels (and autotuning benchmarks variants)",
}
# Skip reasons that mean "this frame was not compiled although it held tensor work"; torch also
# lists the frames it never meant to compile (its own library code), which say nothing.
_MEANINGFUL_SKIPS = ("decided to skip the frame", "error was suppressed", "compilation failed")


def read_compile_stats() -> CompileStats:
    """Collect torch's own counters for what has compiled since the last reset."""
    stats = CompileStats()
    try:
        import torch._dynamo.utils as du
    except Exception:  # noqa: BLE001
        return stats
    counters = du.counters
    breaks = counters.get("graph_break", {})
    stats.graph_breaks = int(sum(breaks.values()))
    stats.break_reasons = [_first_line(reason) for reason in breaks]
    # Dynamo counts a graph only once the backend compiled it: a frame the backend skipped
    # (Inductor's bf16 check on a pre-Ampere GPU) leaves this at 0 although a frame was traced.
    stats.graphs = int(counters.get("stats", {}).get("unique_graphs", 0))
    stats.frames_compiled = int(counters.get("frames", {}).get("ok", 0))
    stats.frame_skips = _frame_skip_reasons()
    inductor = counters.get("inductor", {})
    stats.cudagraph_skips = int(inductor.get("cudagraph_skips", 0))
    metrics, present = _compilation_metrics(du)
    if metrics is not None:
        if "recompile_reason" in present:
            reasons = [m.get("recompile_reason") for m in metrics if m.get("recompile_reason")]
            stats.recompiles = len(reasons)
            stats.recompile_reasons = [_first_line(r) for r in reasons]
        elif "compile_id" in present:  # older torch: recompiles counted from their ids, reasons unknown
            stats.recompiles = sum(is_recompile(m) for m in metrics)
        stats.phases = compile_breakdown(metrics)
        if "inductor_fx_local_cache_hit_count" in present:
            stats.cache_hits = int(sum(m.get("inductor_fx_local_cache_hit_count") or 0 for m in metrics))
            stats.cache_misses = int(sum(m.get("inductor_fx_local_cache_miss_count") or 0 for m in metrics))
        if "cudagraph_skip_reason" in present:
            stats.cudagraph_skip_reasons = list(
                dict.fromkeys(
                    _first_line(m["cudagraph_skip_reason"]) for m in metrics if m.get("cudagraph_skip_reason")
                )
            )
        fails = [
            f"{m.get('fail_type')}: {_first_line(m.get('fail_reason') or '')}" for m in metrics if m.get("fail_type")
        ]
        stats.frame_skips += [f for f in fails if f not in stats.frame_skips]
    return stats


def compile_breakdown(metrics: list[dict[str, Any]]) -> dict[str, Any]:
    """Compile time by phase, forward and backward apart, with totals that the phases add up to.

    Torch's per-compile records nest their times: a frame's Dynamo total contains AOT autograd,
    which contains Inductor, which contains code generation, which contains kernel compilation.
    The backward graph compiles later, at the first backward, in a record of its own whose total
    lies outside the frame's. So each phase here is its own time minus the next one nested in it
    (the differences add up to the outer total exactly), and the honest total is the forward
    totals plus the backward totals. {} when this torch reports none of it.
    """
    chains = {
        "forward": (
            (DYNAMO, "dynamo_cumulative_compile_time_us"),
            (AOT, "aot_autograd_cumulative_compile_time_us"),
            (LOWERING, "inductor_cumulative_compile_time_us"),
            (CODEGEN, "inductor_code_gen_cumulative_compile_time_us"),
            (KERNELS, "triton_compile_time_us"),
        ),
        "backward": (
            (AOT, "backward_cumulative_compile_time_us"),
            (LOWERING, "inductor_cumulative_compile_time_us"),
            (CODEGEN, "inductor_code_gen_cumulative_compile_time_us"),
            (KERNELS, "triton_compile_time_us"),
        ),
    }
    out: dict[str, Any] = {}
    for direction, chain in chains.items():
        phases = dict.fromkeys(PHASE_ORDER, 0.0)
        total = 0.0
        for m in metrics:
            is_forward = m.get("is_forward")
            if (direction == "forward") != (is_forward is None or bool(is_forward)):
                continue
            present = [(name, float(m[key])) for name, key in chain if m.get(key)]
            if not present or present[0][0] != chain[0][0]:
                continue  # no outer total: nothing honest to split
            outer = cap = present[0][1]
            for (name, value), (_, following) in zip(present, [*present[1:], (None, 0.0)]):
                value = min(value, cap)  # torch's timers can overlap a little: never count a second twice
                cap = min(following, value)
                phases[name] += (value - cap) / 1e6
            total += outer / 1e6
        if total:
            out[direction] = {"phases": {k: v for k, v in phases.items() if v > 0}, "total_s": total}
    if out:
        out["total_s"] = sum(part["total_s"] for part in out.values())
    return out


class CompileWatch:
    """Which compiles happened since it last looked, cheaply enough to ask after every step.

    Torch keeps its records in a deque of 64 (`DEFAULT_COMPILATION_METRICS_LIMIT`): once full, its
    length stops growing while records keep coming, so new records are told by identity, not by
    count. The watch holds the records it has seen, so their ids cannot be reused. Records torch
    marks `is_runtime` (CUDA-graph recording, Triton's runtime autotuning) are not compiles."""

    def __init__(self) -> None:
        self._held = self._records()
        self._seen = {id(r) for r in self._held}

    @staticmethod
    def _records() -> list[Any]:
        try:
            import torch._dynamo.utils as du

            return list(du.get_compilation_metrics())
        except Exception:  # noqa: BLE001 - this torch keeps no records: no compile events
            return []

    def new_compiles(self) -> list[str]:
        """One note per compile since the last call ('recompile: <the guard that failed>', ...)."""
        records = self._records()
        if len(records) == len(self._held) and (not records or records[-1] is self._held[-1]):
            return []  # the usual step: nothing new
        fresh = [r for r in records if id(r) not in self._seen]
        self._held, self._seen = records, {id(r) for r in records}
        dicts = (dataclasses.asdict(r) if dataclasses.is_dataclass(r) else dict(vars(r)) for r in fresh)
        return [compile_note(d) for d in dicts if not is_runtime_record(d)]


def is_runtime_record(record: dict[str, Any]) -> bool:
    """A record torch files beside compiles for work done at run time, not a compile."""
    return record.get("is_runtime") is True


_GENERIC_FRAMES = ("inner", "forward", "_fn", "_wrapped_call_impl", "_call_impl")


def is_recompile(record: dict[str, Any]) -> bool:
    """A frame's second or later compile: torch's compile id "frame/attempt" with attempt > 0
    (what older torch versions, which record no recompile reason, still tell)."""
    if record.get("recompile_reason"):
        return True
    match = re.match(r"^\[?(\d+)/(\d+)", str(record.get("compile_id") or ""))
    return bool(match) and int(match.group(2)) > 0 and record.get("is_forward") is not False


def compile_note(record: dict[str, Any]) -> str:
    """What one compile record says happened, in a line."""
    if record.get("recompile_reason"):
        reason = re.sub(r"^\d+/\d+: ", "", _first_line(record["recompile_reason"]))  # drop torch's "0/0: " frame id
        return f"recompile: {reason}"
    if is_recompile(record):
        return "recompile (this torch version does not record which guard failed)"
    if record.get("is_forward") is False:
        return "backward graph compiled (at the first backward)"
    name = record.get("co_name") or ""
    if "resume_in" in name:
        return f"forward graph compiled for the code after a graph break ({name})"
    return "forward graph compiled" + (f" ({name})" if name and name not in _GENERIC_FRAMES else "")


def _frame_skip_reasons() -> list[str]:
    try:
        from torch._dynamo import eval_frame

        reasons = eval_frame.get_skip_reasons()
    except Exception:  # noqa: BLE001 - older torch: no list of skips
        return []
    out = []
    for reason in reasons:
        if any(marker in reason for marker in _MEANINGFUL_SKIPS):
            text = reason.split("): ", 1)[-1]  # drop "name (file:line)"
            out.append(_first_line(text.replace("Dynamo decided to skip the frame while tracing: ", "")))
    return list(dict.fromkeys(out))


def _compilation_metrics(du) -> tuple[list[dict[str, Any]] | None, set[str]]:
    """Torch's per-compile records as dicts, and the field names this torch version has."""
    getter = getattr(du, "get_compilation_metrics", None)
    if getter is None:
        return None, set()
    present: set[str] = set()
    cls = getattr(du, "CompilationMetrics", None)
    if cls is not None and dataclasses.is_dataclass(cls):
        present = {f.name for f in dataclasses.fields(cls)}
    try:
        records = [dataclasses.asdict(m) if dataclasses.is_dataclass(m) else dict(vars(m)) for m in getter()]
    except Exception:  # noqa: BLE001
        return None, present
    records = [r for r in records if not is_runtime_record(r)]
    for record in records:
        present |= set(record)
    return records, present


def _first_line(text: str) -> str:
    """Torch's reasons run to many lines of hints; the first line says what happened."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[0] if lines else ""


def compile_skipped_reason(
    compile_info: dict[str, Any] | None, backend: str, mode: str, cache: str = "cold"
) -> str | None:
    """Why the compiled variant did not actually run compiled code, or None if it did (or if the
    record cannot tell). Pure: works on a CompileStats dict, stored or imported.

    - no graph compiled although frames were traced: Dynamo or the backend skipped them (Inductor
      skips a bf16 graph on a GPU without native bf16), so the "compiled" run ran eagerly;
    - a CUDA-graph mode whose CUDA graphs were skipped: the mode's point did not happen.
    """
    info = compile_info or {}
    if backend == "eager":  # Dynamo capture only, by request: nothing is meant to compile
        return None
    if cache == "precompiled":  # compiled ahead of time by another process: this one loads, it compiles no graph
        return None
    skips = [s for s in info.get("frame_skips") or [] if s]
    warned = [w for w in info.get("warnings") or [] if "skip" in w.lower()]
    if info.get("graphs") == 0:
        why = (skips or warned or ["Dynamo captured no graph, so the compiled variant ran eagerly"])[0]
        return f"no graph was compiled ({why})"
    if mode in CUDA_GRAPH_MODES and (info.get("cudagraph_skips") or 0) > 0:
        why = (info.get("cudagraph_skip_reasons") or ["torch did not say why"])[0]
        return f"CUDA graphs were skipped ({why}), so mode {mode!r} ran without them"
    return None


# ----------------------------------------------------------------------
# Which compile phase is running right now, told while it runs.
#
# torch's own timers (CompilationMetrics) report phases only when a compile has finished, and its
# event stack lives in the compiling thread's thread-local storage. So a watcher thread looks at
# the training thread's Python stack a few times a second and names the innermost compiler layer
# on it: torch/_dynamo is Dynamo tracing, torch/_functorch AOT autograd, torch/_inductor lowering
# and code generation, its kernel-compiling and autotuning modules the kernel compilation. Reading
# another thread's stack costs microseconds and never stops it; the watcher runs for both variants
# alike, so neither pays for it alone. The finished run's breakdown comes from torch's own timers
# (compile_stats.compile_breakdown); this is for the live "compiling: <phase>, 12 s" line.

SAMPLE_EVERY_S = 0.1
# (path fragment, phase), checked from the innermost frame outwards; the first match names it.
_LAYERS = (
    ("torch/_inductor/select_algorithm", KERNELS),
    ("torch/_inductor/autotune", KERNELS),
    ("torch/_inductor/async_compile", KERNELS),
    ("torch/_inductor/codecache", KERNELS),
    ("torch/_inductor/cpp_builder", KERNELS),
    ("torch/_inductor/runtime/triton_heuristics", KERNELS),
    ("torch/_inductor/codegen", CODEGEN),
    ("torch/_inductor/", LOWERING),
    ("torch/_functorch/", AOT),
    ("torch/_dynamo/symbolic_convert", DYNAMO),
    ("torch/_dynamo/variables/", DYNAMO),
    ("torch/_dynamo/guards", DYNAMO),
    ("torch/_dynamo/output_graph", DYNAMO),
    ("torch/_dynamo/bytecode", DYNAMO),
    ("torch/_dynamo/convert_frame", DYNAMO),
)  # not torch/_dynamo/utils: its timers wrap every other phase too
# A stack is compiling only when one of these is on it (file fragment, function); otherwise torch
# frames on it are compiled code running (Dynamo's guards, AOT's and Inductor's runtime wrappers).
_COMPILE_ENTRIES = (
    ("torch/_dynamo/convert_frame", "_compile"),
    ("torch/_dynamo/convert_frame", "compile_inner"),
    ("torch/_inductor/compile_fx", "compile_fx_inner"),
    ("torch/_inductor/compile_fx", "_compile_fx_inner"),
    ("torch/_inductor/compile_fx", "fx_codegen_and_compile"),
    ("torch/_functorch/", "aot_dispatch_autograd"),
    ("torch/_functorch/", "aot_dispatch_base"),
)


def phase_of(frames: list[tuple[str, str]]) -> str | None:
    """The compile phase a stack is in ((file, function) pairs, innermost first), or None when
    nothing on it is compiling."""
    frames = [(path.replace("\\", "/"), name) for path, name in frames]
    if not any(fragment in path and name == entry for path, name in frames for fragment, entry in _COMPILE_ENTRIES):
        return None
    for path, name in frames:
        if name == "<module>":
            continue  # a module being imported, not compiling
        for fragment, phase in _LAYERS:
            if fragment in path:
                return phase
    return None


def stack_of(thread_id: int) -> list[tuple[str, str]]:
    """(file, function) of each frame on a thread's Python stack, innermost first."""
    frame = sys._current_frames().get(thread_id)
    frames = []
    while frame is not None:
        frames.append((frame.f_code.co_filename, frame.f_code.co_name))
        frame = frame.f_back
    return frames


class PhaseWatcher:
    """Samples one thread's stack and reports each change of compile phase (None: not compiling).

    `on_change(phase, since)` is called from the watcher thread; `transitions` keeps
    (phase, start, end) for every phase seen, in wall-clock seconds.
    """

    def __init__(self, on_change: Callable[[str | None, float], Any], thread_id: int | None = None):
        self.on_change = on_change
        self.thread_id = threading.get_ident() if thread_id is None else thread_id
        self.transitions: list[tuple[str, float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="compile-phase-watcher", daemon=True)
        self._current: str | None = None
        self._since = 0.0

    def __enter__(self) -> PhaseWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._switch(None, time.time())

    def _loop(self) -> None:
        seen: str | None = None
        while not self._stop.wait(SAMPLE_EVERY_S):
            try:
                phase = phase_of(stack_of(self.thread_id))
            except Exception:  # noqa: BLE001 - a stack that changes under us: look again next time
                continue
            if phase != self._current and phase == seen:  # two samples in a row: not a passing frame
                self._switch(phase, time.time() - SAMPLE_EVERY_S)
            seen = phase

    def _switch(self, phase: str | None, now: float) -> None:
        if phase == self._current:
            return
        if self._current is not None:
            self.transitions.append((self._current, self._since, now))
        self._current, self._since = phase, now
        self.on_change(phase, now)


# ----------------------------------------------------------------------
# Recompiles in the story: each recompile of a race, the guard that failed (in full), what it cost,
# and what would avoid it.
#
# A recompile happens when a guard torch.compile put on its graph fails for a new input: a tensor of
# another size (the last, shorter batch; a new sequence length), another dtype or layout, a Python
# value the graph baked in. The race records one compile event per compile with torch's own words for
# the failed guard ("recompile: tensor 'x' size mismatch at index 0. expected 48, actual 24",
# core.engine.compile_stats.compile_note) at the step that paid for it; this reads them back, prices
# each from that step against a steady compiled step, and says what avoids that kind of guard.
# Torch-free: the pages and the CLI word a stored race.

RECOMPILE = "recompile"
SIZE_GUARD = re.compile(r"size mismatch at index (\d+)")
# The tensor a guard names, as torch spells it: 'x', "L['x']", or a module's own state reached
# through it, "self._modules['bn1']._buffers['running_var']" (older torch: "L['self'].bn1.running_var").
GUARDED_TENSOR = re.compile(r"tensor '(.+)' (?:size|stride|dtype|requires_grad|device|dispatch key set) mismatch")
STATE_STEP = re.compile(r"_(?:modules|parameters|buffers)\['([^']+)'\]|\.([A-Za-z]\w*)")
EXPECTED = re.compile(r"expected (\S+?),? actual (\S+)")
# What changed when a size guard failed (the recommendation reads these, not the words).
INPUT_SIZE = "input size"  # an input tensor arrived with another size: a batch, a sequence length
STATE_SIZE = "parameter or buffer size"  # the module's own weights or buffers differ: another block
BLOCK_SIZE = "another block's width"  # a regional race's first call: a block of another width
# How many different guards a reading names before it counts the rest.
NAMED = 3


@dataclass(frozen=True)
class Recompile:
    """One recompile: where it happened, the guard that failed (torch's words, whole), and what the
    step that paid for it cost beyond a steady compiled step (None where the step is not known)."""

    epoch: int | None
    step: int | None
    phase: str
    guard: str
    cost_s: float | None
    # A regional race's recompile in the very call that compiled first: every block saw the same
    # batch, so a size that failed there is another block's width, whichever tensor the guard names.
    across_blocks: bool = False

    @property
    def cause(self) -> str | None:
        """What changed, for a size guard (INPUT_SIZE, STATE_SIZE or BLOCK_SIZE); None for others."""
        found = size_cause(self.guard)
        return BLOCK_SIZE if found == INPUT_SIZE and self.across_blocks else found

    def to_dict(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "step": self.step,
            "phase": self.phase,
            "guard": self.guard,
            "cost_s": self.cost_s,
            "across_blocks": self.across_blocks,
        }


def guard_of(note: str) -> str:
    """The failed guard in a compile event's note, whole ('' for a torch that does not say)."""
    text = note[len(RECOMPILE) :].lstrip()
    return text[1:].strip() if text.startswith(":") else ""


def guarded_tensor(guard: str) -> str | None:
    """The tensor a failed guard names, as torch spells it; None where it names none."""
    found = GUARDED_TENSOR.search(guard)
    return found.group(1) if found else None


def state_name(tensor: str) -> str | None:
    """'bn1.running_var' for a parameter or buffer reached through a module ("self._modules['bn1']
    ._buffers['running_var']"); None for an input tensor ('x', "L['x']", "L['args'][0]")."""
    if not any(key in tensor for key in ("_parameters[", "_buffers[", "_modules[")) and "." not in tensor:
        return None
    steps = [a or b for a, b in STATE_STEP.findall(tensor)]
    return ".".join(steps) or tensor


def size_cause(guard: str) -> str | None:
    """What a failed size guard says changed: an input's size (INPUT_SIZE), or a parameter's or
    buffer's (STATE_SIZE: blocks that share compiled code but not widths); None for other guards."""
    if not SIZE_GUARD.search(guard):
        return None
    tensor = guarded_tensor(guard)
    return STATE_SIZE if tensor and state_name(tensor) else INPUT_SIZE


def recompiles_of(summary: Summary | dict[str, Any] | None, params: dict[str, Any] | None = None) -> list[Recompile]:
    """The compiled variant's recompiles, in order, each priced from the step that paid for it (and,
    for a regional race, `params` saying so, whether it came in the call that compiled first)."""
    s = Summary.of(summary)
    compiled = [e for e in s.compile_events or [] if isinstance(e, dict) and e.get("variant") == "compiled"]
    events = [e for e in compiled if str(e.get("note") or "").startswith(RECOMPILE)]
    train_steps = [e["step"] for e in compiled if e.get("phase", "train") == "train" and isinstance(e.get("step"), int)]
    first = min(train_steps) if train_steps and (params or {}).get("compile_scope") == "regional" else None
    times = [float(t) for t in s.compiled_step_times_s or [] if isinstance(t, int | float)]
    steady = s.compiled_median_step_s
    steady = float(steady) if isinstance(steady, int | float) else (median(times) if times else None)
    out, priced = [], set()
    for e in events:
        step = e.get("step") if isinstance(e.get("step"), int) else None
        cost = None
        # One step pays once however many graphs it recompiled (forward and backward are two events).
        if e.get("phase", "train") == "train" and step and 0 < step <= len(times) and steady is not None:
            cost = 0.0 if step in priced else max(times[step - 1] - steady, 0.0)
            priced.add(step)
        phase = str(e.get("phase") or "train")
        across = first is not None and phase == "train" and step == first
        out.append(Recompile(e.get("epoch"), step, phase, guard_of(str(e["note"])), cost, across))
    return out


def avoid_words(guard: str, params: dict[str, Any] | None = None, across_blocks: bool = False) -> str:
    """What would avoid a recompile on this guard, in a sentence (`across_blocks`: it failed in a
    regional race's first call, where only the blocks' widths differ)."""
    params = params or {}
    size = SIZE_GUARD.search(guard)
    if size and (across_blocks or size_cause(guard) == STATE_SIZE):
        return _state_words(guard, params)
    if size:
        index = int(size.group(1))
        what = "batch size" if index == 0 else f"size of dimension {index}"
        asked = " (this race asked for dynamic=False: one graph per shape)" if params.get("dynamic") is False else ""
        pad = (
            "pad the short last batch to the full size or drop it (drop_last=True)"
            if index == 0
            else "pad inputs to a few fixed lengths (buckets)"
        )
        return (
            f"A new {what} failed the guard{asked}: compile with dynamic=True, or mark the dimension dynamic before the "
            f"first call (torch._dynamo.mark_dynamic(x, {index})), so one graph serves every size; or {pad} so the "
            "shape never changes."
        )
    if "stride mismatch" in guard:
        return (
            "A tensor arrived with another memory layout: make the input contiguous (x.contiguous()) before the call."
        )
    if "dtype mismatch" in guard:
        return "A tensor arrived with another dtype: cast inputs to one dtype before the call."
    if "requires_grad mismatch" in guard:
        return "A tensor's requires_grad changed between calls: keep it the same for every call."
    if "training" in guard:
        return "The model switched between train() and eval(): each mode compiles its own graph once; that is expected."
    return (
        "A Python value the graph depends on changed: keep it fixed between calls, or pass it as a tensor so the "
        "graph does not bake it in."
    )


def _state_words(guard: str, params: dict[str, Any]) -> str:
    """A parameter or buffer of another size, or a block's input of another width: not a batch, so
    nothing about the data helps."""
    tensor = guarded_tensor(guard) or ""
    state = state_name(tensor)
    name = f"the module's own {state}" if state else f"the block's input {tensor}" if tensor else "a tensor"
    sizes = EXPECTED.search(guard)
    was = f" (size {sizes.group(2)} where the compiled code expected {sizes.group(1)})" if sizes else ""
    if params.get("compile_scope") == "regional":
        return (
            f"{name[0].upper()}{name[1:]}{was} differs in size between the repeated blocks, which share one "
            "compiled region: each block of another width compiles a graph of its own. The batch kept its size, "
            "so dynamic shapes or padding would not help; compile the whole model, or compile regionally only a "
            "model whose repeated blocks are all alike."
        )
    return (
        f"{name[0].upper()}{name[1:]}{was} changed size between calls: the inputs kept theirs, so dynamic shapes "
        "or padding would not help; keep the model's parameters and buffers the same size between calls."
    )


def recompile_words(summary: Summary | dict[str, Any] | None, params: dict[str, Any] | None = None) -> str | None:
    """The recompiles in words for the reading: how many and what they cost, each different guard
    in full with the steps it failed at, and what would avoid it; None for a race without any."""
    found = recompiles_of(summary, params)
    if not found:
        return None
    by_guard: dict[str, list[Recompile]] = {}
    for r in found:
        by_guard.setdefault(r.guard, []).append(r)
    times = "once" if len(found) == 1 else f"{len(found)} times"
    named = list(by_guard.items())[:NAMED]
    clauses = []
    for guard, group in named:
        said = f"the guard that failed was {guard}" if guard else "this torch does not record which guard failed"
        clauses.append(f"{_where(group)}{_cost(group, len(by_guard) > 1 or len(group) > 1)}, {said}")
    sentence = f"Compiled recompiled {times}{_cost(found, True) if len(by_guard) > 1 else ''}: " + "; ".join(clauses)
    if len(by_guard) > NAMED:
        rest = sum(len(g) for _, g in list(by_guard.items())[NAMED:])
        sentence += f"; {rest} more on {len(by_guard) - NAMED} other guards (listed with the compiles)"
    avoid = dict.fromkeys(avoid_words(guard, params, all(r.across_blocks for r in group)) for guard, group in named)
    return sentence.rstrip(".") + ". " + " ".join(avoid)


def _cost(group: list[Recompile], in_all: bool) -> str:
    costs = [r.cost_s for r in group if r.cost_s is not None]
    if not costs:
        return ""
    return f" (about {words.seconds(sum(costs))}{' in all' if in_all and len(group) > 1 else ''})"


def _where(group: list[Recompile]) -> str:
    steps = list(dict.fromkeys(r.step for r in group if r.step is not None))  # a step that recompiled often, once
    if not steps:
        return f"{len(group)} time{'s' if len(group) > 1 else ''}"
    shown = ", ".join(words.number(s) for s in steps[:4]) + (f" and {len(steps) - 4} more" if len(steps) > 4 else "")
    return f"at step{'s' if len(steps) > 1 else ''} {shown}"
