"""Why compiled is faster, slower or the same here: the cause, named from what the race measured.

A race's verdict (core.engine.analysis) says *whether* compile pays; this says *why*, from the
per-step anatomy the race profiled after its timed steps (core.engine.profiling: host time and
kernel time per step, kernels and operators per step, the kernels that took longest), the graphs
and graph breaks torch reported, the recompiles, the compile mode, and the threads and cores the
race had. The step's difference between the variants is split in two: the kernels' own time, and
the time outside them (Python, dispatch, guards, the compiled wrapper, launches, allocations).
The part that carries the difference is the cause; where both do, both are named.

The sentence never contradicts the numbers beside it: its direction is the timed verdict's, the
milliseconds it quotes are the anatomy table's, and where the profiled steps disagree with the
timed ones (a few profiled steps against hundreds timed) or no profile was kept, it says that the
data cannot say why instead of guessing. Torch-free: the pages and the CLI word a stored race.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from core.engine import words
from core.engine.profile_reading import counting_is_stale
from core.engine.spec import CUDA_GRAPH_MODES
from core.engine.summary import FASTER, NO_CLEAR_DIFFERENCE, SLOWER, Summary

# The kinds of cause, as data (the recommendation and the tests read these, not the words).
KERNELS = "kernels"  # the kernels' own time carries the difference
OUTSIDE = "outside kernels"  # the time outside the kernels carries it (overhead, launches, wrappers)
BOTH = "both"  # kernels and the time outside them, each a good part of it
SAME = "the same"  # no clear difference, and the profile agrees: neither part moved
DISAGREES = "profile disagrees"  # the profiled steps do not show what the timed steps do
UNKNOWN = "unknown"  # no profile (or one whose kernel figure cannot be read)

# A difference in the profile's host or kernel time under this share of eager's step is "about the
# same": a few profiled steps are not timed finely enough to name a smaller one as a cause.
SAME_SHARE = 0.03
# A part carries the difference when it is at least this share of it; below, both parts are named.
CARRIES = 2 / 3
# Kernels whose name says Inductor generated them (C++ on a CPU, Triton on a GPU); every other kernel
# in a compiled profile is a library call (a matmul, a convolution) that compile leaves as eager has it.
GENERATED_KERNEL = re.compile(r"cpp_fused|triton_|^graph_\d+_|kernel_cpp")
# Library kernels taking at least this share of compiled's kernel time: little is left to fuse.
LIBRARY_BOUND = 0.5
# The library kernels that carry a model's arithmetic, by what they compute (a generated kernel's
# name can hold "convolution_backward" too: those are told apart first). Other ATen kernels in a
# compiled profile (sqrt, copy_, the optimizer's lerp_) are neither, and are not counted as either.
MATMULS, CONVOLUTIONS = "matmuls", "convolutions"
LIBRARY_KINDS = {
    MATMULS: re.compile(r"(^|::|_)(mm|addmm|bmm|baddbmm|matmul|linear|addmv|mv)(_|$)|gemm|mkl_linear", re.I),
    CONVOLUTIONS: re.compile(r"conv|cudnn", re.I),
}


@dataclass(frozen=True)
class Cause:
    """Why compiled is faster, slower or the same in one race: the kind of cause, the verdict it
    explains, the figures it rests on, and the sentence that says it."""

    kind: str  # KERNELS | OUTSIDE | BOTH | SAME | DISAGREES | UNKNOWN
    verdict: str  # the timed verdict it explains: faster, no clear difference, slower
    sentence: str
    host_s: tuple[float, float] | None = None  # per profiled step, eager and compiled
    kernel_s: tuple[float, float] | None = None
    kernels_per_step: tuple[float, float] | None = None
    library_share: float | None = None  # at least this share of compiled's kernel time is library kernels
    library_kernels: tuple[str, ...] = ()  # those kernels (matmuls and convolutions), longest first
    library_kind: str | None = None  # what they mostly are: MATMULS or CONVOLUTIONS
    matmul_share: float | None = None  # at least this share of compiled's kernel time is library matmuls
    threads: int | None = None
    cores: int | None = None  # the cores the race's worker had to itself
    machine_cores: int | None = None
    graphs: int | None = None
    graph_breaks: int | None = None
    recompiles: int | None = None
    mode: str | None = None
    backend: str | None = None
    device_type: str | None = None

    @property
    def overhead_bound(self) -> bool:
        """The step's pace is set outside the kernels (what CUDA graphs or a bigger batch address)."""
        if self.kind not in (OUTSIDE, BOTH, SAME) or not self.host_s or not self.kernel_s:
            return False
        return self.kernel_s[1] < 0.5 * self.host_s[1]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Cause | None:
        if not isinstance(data, dict):
            return None
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        for name in ("host_s", "kernel_s", "kernels_per_step"):
            if values.get(name) is not None:
                values[name] = tuple(values[name])
        values["library_kernels"] = tuple(values.get("library_kernels") or ())
        try:
            return cls(**values)
        except TypeError:
            return None


def race_cause(
    summary: Summary | dict[str, Any] | None,
    params: dict[str, Any] | None = None,
    environment: dict[str, Any] | None = None,
) -> Cause | None:
    """The cause of a finished race's verdict, from its summary (profile, graphs, recompiles), its
    settings (the compile mode) and its environment (device, threads, cores); None where there is no
    verdict to explain (compile failed or did not happen, too few steps)."""
    s = Summary.of(summary)
    verdict, speedup = s.verdict, s.steady_state_speedup
    if s.compile_failed or s.compile_skipped or speedup is None:
        return None
    if verdict not in (FASTER, NO_CLEAR_DIFFERENCE, SLOWER):
        return None
    env = environment or {}
    facts = _facts(s, params or {}, env)
    profile = s.profile or {}
    eager, compiled = profile.get("eager") or {}, profile.get("compiled") or {}
    he, hc = _per_step(eager, "host_s_per_step"), _per_step(compiled, "host_s_per_step")
    if not he or not hc:
        return _cause(UNKNOWN, verdict, _cannot_say(verdict, "it profiled no steps (profiled steps 0)"), facts)
    if counting_is_stale(eager) or counting_is_stale(compiled):
        why = "its profile was recorded when the CPU kernel time left out convolutions and matmuls"
        return _cause(UNKNOWN, verdict, _cannot_say(verdict, why), facts)
    ke, kc = _per_step(eager, "device_s_per_step") or 0.0, _per_step(compiled, "device_s_per_step") or 0.0
    # Only Inductor generates kernels: with aot_eager or eager every compiled kernel is ATen's own.
    mix = _library(compiled, kc) if facts["backend"] in (None, "inductor") else {}
    facts |= {
        "host_s": (he, hc),
        "kernel_s": (ke, kc),
        "kernels_per_step": (
            _per_step(eager, "kernels_per_step") or 0.0,
            _per_step(compiled, "kernels_per_step") or 0.0,
        ),
        "library_share": mix.get("share"),
        "library_kernels": mix.get("names", ()),
        "library_kind": mix.get("kind"),
        "matmul_share": mix.get("matmul_share"),
    }
    if not _profile_agrees(verdict, he / hc, s.speedup_ci95):
        return _cause(DISAGREES, verdict, _disagrees(verdict, speedup, he, hc), facts)
    if verdict == NO_CLEAR_DIFFERENCE:
        return _cause(SAME, verdict, _same_words(he, hc, ke, kc, facts, s.speedup_ci95), facts)
    kind = _carrier(he, hc, ke, kc)
    sentence = _moved_words(kind, verdict, eager, compiled, facts) + _size_words(speedup, he / hc, s.speedup_ci95)
    return _cause(kind, verdict, sentence, facts)


def _size_words(speedup: float, ratio: float, interval: Any) -> str:
    """Where the profiled steps agree with the timed ones in direction but not in size: which is which."""
    if not (isinstance(interval, list | tuple) and len(interval) == 2):
        return ""
    if interval[0] * (1 - SAME_SHARE) <= ratio <= interval[1] * (1 + SAME_SHARE):
        return ""
    return (
        f" The few profiled steps put the gap at {words.speedup(ratio)}, the timed steps at {words.speedup(speedup)}: "
        "the profile names the cause, the timed steps its size."
    )


def _profile_agrees(verdict: str, ratio: float, interval: Any) -> bool:
    """Whether the profiled steps' ratio (eager's host time over compiled's) tells the timed verdict's
    story. For faster or slower that is its sign: compiled's profiled step shorter for faster, longer
    for slower, by any amount (a few profiled steps resolve a direction, not the timed steps' size:
    1.09x timed beside 1.4x profiled agrees). Only a profile on the other side of 1 contradicts them.
    No clear difference is contradicted only by a profile that is clearly on one side, past the
    timed interval (give or take what a few profiled steps can resolve) where there is one."""
    if verdict == FASTER:
        return ratio > 1
    if verdict == SLOWER:
        return ratio < 1
    if isinstance(interval, list | tuple) and len(interval) == 2 and all(isinstance(v, int | float) for v in interval):
        return interval[0] * (1 - SAME_SHARE) <= ratio <= interval[1] * (1 + SAME_SHARE)
    return abs(ratio - 1) <= SAME_SHARE


def _facts(s: Summary, params: dict[str, Any], env: dict[str, Any]) -> dict[str, Any]:
    cores = env.get("worker_cpus")
    recompiles = s.recompiles
    events = s.compile_events
    if events:  # counted from the compile events where the run has them (as the cards count)
        recompiles = sum(
            1 for e in events if e.get("variant") == "compiled" and str(e.get("note") or "").startswith("recompile")
        )
    return {
        "threads": _int(env.get("torch_threads")),
        "cores": len(cores) if isinstance(cores, list) and cores else None,
        "machine_cores": _int(env.get("cpu_count")),
        "graphs": _int(s.graphs),
        "graph_breaks": _int(s.graph_breaks),
        "recompiles": _int(recompiles),
        "mode": params.get("mode") if isinstance(params.get("mode"), str) else None,
        "backend": params.get("backend") if isinstance(params.get("backend"), str) else None,
        "device_type": env.get("device_type") if isinstance(env.get("device_type"), str) else None,
    }


def _cause(kind: str, verdict: str, sentence: str, facts: dict[str, Any]) -> Cause:
    return Cause(
        kind=kind, verdict=verdict, sentence=sentence + _structure_words(facts) + _machine_words(facts), **facts
    )


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _per_step(part: dict[str, Any], key: str) -> float | None:
    value = part.get(key)
    return float(value) if isinstance(value, int | float) and value > 0 else None


def library_kind_of(name: str) -> str | None:
    """MATMULS or CONVOLUTIONS for a library kernel that computes one, None for any other kernel
    (one Inductor generated, an elementwise ATen kernel such as sqrt or copy_)."""
    if GENERATED_KERNEL.search(name):
        return None
    return next((kind for kind, pattern in LIBRARY_KINDS.items() if pattern.search(name)), None)


def _library(compiled: dict[str, Any], kernel_s: float) -> dict[str, Any]:
    """What compiled's kernel time in library matmuls and convolutions is, from its top kernels (so
    at least that share: the kernels past the top ones are not listed): the share, the kernels'
    names longest first, which kind holds more of it, and the matmuls' own share. {} without a list."""
    top = [k for k in compiled.get("top_kernels") or [] if isinstance(k, dict) and isinstance(k.get("name"), str)]
    if not top or kernel_s <= 0:
        return {}
    by_kind: dict[str, float] = dict.fromkeys(LIBRARY_KINDS, 0.0)
    names = []
    for k in top:
        kind = library_kind_of(k["name"])
        if kind:
            by_kind[kind] += float(k.get("s_per_step") or 0.0)
            names.append(k["name"])
    seconds = sum(by_kind.values())
    return {
        "share": min(seconds / kernel_s, 1.0),
        "names": tuple(names),
        "kind": max(by_kind, key=by_kind.get) if seconds > 0 else None,
        "matmul_share": min(by_kind[MATMULS] / kernel_s, 1.0),
    }


def _carrier(he: float, hc: float, ke: float, kc: float) -> str:
    """Which part of the step carries its difference: the kernels, the time outside them, or both."""
    step = hc - he
    kernels = (kc - ke) / step if step else 0.0
    if kernels >= CARRIES:
        return KERNELS
    if 1 - kernels >= CARRIES:
        return OUTSIDE
    return BOTH


def _word(verdict: str) -> str:
    return {FASTER: "faster", SLOWER: "slower"}.get(verdict, "no faster or slower")


def _cannot_say(verdict: str, why: str) -> str:
    return f"This race cannot say why compiled is {_word(verdict)} here: {why}."


def _disagrees(verdict: str, speedup: float, he: float, hc: float) -> str:
    timed = f"{_word(verdict)} ({words.speedup(speedup)})" if verdict != NO_CLEAR_DIFFERENCE else "no clear difference"
    profiled = (
        "about the same"
        if abs(hc - he) <= SAME_SHARE * he
        else ("shorter" if hc < he else "longer") + f" by {words.seconds(abs(hc - he))}"
    )
    return (
        f"The timed steps say {timed}, but compiled's profiled steps are {profiled} "
        f"({words.seconds(hc)} against eager's {words.seconds(he)} per step): the few profiled steps do not show what the timed "
        "ones do, so this race cannot say why."
    )


def _same(a: float, b: float, step: float) -> bool:
    return abs(a - b) <= SAME_SHARE * step


def _kernels_note(facts: dict[str, Any]) -> str:
    """What compiled's kernels are: a backend that generates none runs eager's own; else how much of
    their time is library kernels compile leaves as they are."""
    backend = facts.get("backend")
    if backend not in (None, "inductor"):
        return (
            f"; the {backend} backend traces the model but generates no kernels, so compiled runs the same ATen "
            "kernels as eager"
        )
    return _library_words(facts.get("library_share"), facts.get("library_kernels") or (), facts.get("library_kind"))


def _library_words(share: float | None, names: tuple[str, ...], kind: str | None = None) -> str:
    if share is None or share < LIBRARY_BOUND or not names:
        return ""
    shown = ", ".join(names[:2])
    what = f"library {kind}" if kind else "library kernels"
    return (
        f"; at least {words.percent(share)} of compiled's kernel time is in {what} ({shown}) that compile calls just "
        "as eager does, so little is left for fusion to speed up"
    )


def _same_words(he: float, hc: float, ke: float, kc: float, facts: dict[str, Any], interval: Any = None) -> str:
    if _same(he, hc, he):
        step = f"its step takes about as long as eager's ({words.seconds(hc)} vs {words.seconds(he)} per step)"
    else:  # the profiled steps differ, by no more than the timed interval leaves open: say both
        within = f"; the timed steps' interval, {words.speedup_range(*interval)}, leaves that open" if interval else ""
        step = (
            f"its profiled step is {_change(he, hc, 'shorter', 'longer')} than eager's ({words.seconds(hc)} vs "
            f"{words.seconds(he)}{within})"
        )
    return (
        f"Compile gains nothing measurable here: {step}, and its kernels {_kernel_words(ke, kc, he)}"
        + _kernels_note(facts)
        + "."
    )


def _moved_words(kind: str, verdict: str, eager: dict[str, Any], compiled: dict[str, Any], facts) -> str:
    he, hc = facts["host_s"]
    ke, kc = facts["kernel_s"]
    oe, oc = max(he - ke, 0.0), max(hc - kc, 0.0)
    kernels = _kernel_words(ke, kc, he)
    head = f"Compiled is {_word(verdict)} here because"
    if kind == KERNELS:
        outside = "about the same" if _same(oe, oc, he) else _change(oe, oc, "shorter", "longer")
        why = _fusion_words(eager, compiled) if verdict == FASTER else ""
        if verdict == SLOWER:
            why = _generated_words(compiled) if facts.get("backend") in (None, "inductor") else _kernels_note(facts)
        return f"{head} its kernels {kernels} per step and the time outside them is {outside}{why}."
    if kind == OUTSIDE:
        host = _change(he, hc, "shorter", "longer")
        return (
            f"{head} its host time per step is {host} ({words.seconds(hc)} vs {words.seconds(he)}) while its kernels {kernels}"
            + _outside_cause(verdict, eager, compiled, facts)
            + "."
        )
    return (
        f"{head} both parts of its step moved: its kernels {kernels} and the time outside them is "
        f"{_change(oe, oc, 'shorter', 'longer')} ({words.seconds(oc)} vs {words.seconds(oe)})"
        + _outside_cause(verdict, eager, compiled, facts)
        + "."
    )


def _change(before: float, after: float, less: str, more: str) -> str:
    return f"{words.seconds(abs(after - before))} {less if after < before else more}"


def _kernel_words(ke: float, kc: float, step: float) -> str:
    if _same(ke, kc, step):
        return f"take about the same time ({words.seconds(kc)} vs {words.seconds(ke)})"
    return f"take {_change(ke, kc, 'less', 'more')} ({words.seconds(kc)} vs {words.seconds(ke)})"


def _generated_words(compiled: dict[str, Any]) -> str:
    """The longest kernel Inductor generated, where the profile lists one: where to look first."""
    for k in compiled.get("top_kernels") or []:
        if isinstance(k, dict) and isinstance(k.get("name"), str) and GENERATED_KERNEL.search(k["name"]):
            return f"; the longest kernel Inductor generated is {k['name']} ({words.seconds(float(k.get('s_per_step') or 0))} per step)"
    return ""


def _fusion_words(eager: dict[str, Any], compiled: dict[str, Any]) -> str:
    """Fewer kernels per step: what fusion did (the count only where it fell)."""
    ne, nc = _per_step(eager, "kernels_per_step"), _per_step(compiled, "kernels_per_step")
    if ne and nc and nc < ne:
        return f": Inductor fused the work into fewer kernels ({nc:.0f} per step against eager's {ne:.0f})"
    return ""


def _outside_cause(verdict: str, eager: dict[str, Any], compiled: dict[str, Any], facts: dict[str, Any]) -> str:
    """What the time outside the kernels is, from what the profile counted."""
    launches = _per_step(compiled, "graph_launches_per_step")
    if verdict == FASTER and launches and facts.get("mode") in CUDA_GRAPH_MODES:
        return f": CUDA graphs replay its kernels in {launches:.0f} launch{'es' if launches > 1 else ''} per step"
    oe, oc = _per_step(eager, "operators_per_step"), _per_step(compiled, "operators_per_step")
    if verdict == FASTER and oe and oc and oc < oe:
        return f": it calls fewer operators ({oc:.0f} per step against eager's {oe:.0f}), so less Python and dispatch"
    if verdict == SLOWER:
        return ": the extra time is outside the kernels (Python, guards, the compiled wrapper, launches, allocations)"
    return ""


def _structure_words(facts: dict[str, Any]) -> str:
    """Graph breaks and recompiles, where there were any: they shape what compile could fuse."""
    out = ""
    breaks, graphs = facts.get("graph_breaks"), facts.get("graphs")
    if breaks:
        into = f" into {graphs} graphs" if graphs and graphs > 1 else ""
        plural = "s" if breaks > 1 else ""
        out += (
            f" torch.compile split the model{into} at {breaks} graph break{plural}: work on either side of a break "
            "is not fused, and each break goes back to Python."
        )
    recompiles = facts.get("recompiles")
    if recompiles:
        times = "once" if recompiles == 1 else f"{words.number(recompiles)} times"
        out += f" It recompiled {times} (see the recompiles)."
    return out


def _machine_words(facts: dict[str, Any]) -> str:
    """The threads and cores it ran with, on a CPU (they shape both variants' kernels)."""
    if facts.get("device_type") != "cpu" or not facts.get("threads"):
        return ""
    threads = facts["threads"]
    where = ""
    if facts.get("cores") and facts.get("machine_cores"):
        where = f" on {facts['cores']} of the machine's {facts['machine_cores']} cores"
    elif facts.get("machine_cores"):
        where = f" on a {facts['machine_cores']}-core machine"
    return f" Measured with {threads} thread{'s' if threads > 1 else ''}{where}."
