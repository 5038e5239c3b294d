"""What to try next on this device, after a race or a sweep: which mode, precision, scope, batch size
or shape setting, and why, from what the race measured (its cause, core.engine.cause; its
recompiles, core.engine.recompiles; its compile time against what compile saved).

Only what this device can run is offered: every suggestion is the race's own settings with one or
two options changed, and it is kept only if core.engine.spec.validate accepts it for the device the
race ran on (so a CPU is never told to try CUDA graphs). A suggestion carries the changes as data;
the pages turn them into a link to the Race form (the options table says which options travel in a
link). A compile that costs far more than it saves is said as such, whatever else is suggested.
Torch-free.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from core.engine import words
from core.engine.analysis import FASTER
from core.engine.cause import BOTH, LIBRARY_BOUND, OUTSIDE, SAME, Cause, race_cause
from core.engine.headline import CANNOT_TELL, NEVER_PAYS, PAYS
from core.engine.models.regions import REGIONAL_BLOCKS
from core.engine.options import MAX_BATCH_SIZE
from core.engine.recompiles import SIZE_GUARD, recompiles_of
from core.engine.spec import DeviceCaps, RunSpec, SpecError, validate
from core.engine.summary import Summary

MAX_SUGGESTIONS = 3
# A compile this many times what it saved over the race's own steps "costs far more than it saves".
FAR_MORE = 10
# A compile this long is worth shortening with regional compile.
LONG_COMPILE_S = 10.0
# A cold compile this long is worth seeing warm (what the second run of a training job pays).
WARM_WORTH_S = 2.0
BATCH_STEP = 4  # a bigger batch to try: this many times the race's


@dataclass(frozen=True)
class Suggestion:
    """One thing to try next: the options changed (as the Race form and its link take them), a short
    label for its button or link, and why."""

    changes: dict[str, Any] = field(default_factory=dict)
    label: str = ""
    why: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Advice:
    """What the app says to do after a race: whether compile paid (`cost`, when it costs far more than
    it saves), and what to try next on this device, best first."""

    cost: str | None
    suggestions: tuple[Suggestion, ...]

    def sentence(self) -> str | None:
        """The advice in words: the cost, then the first suggestion and why."""
        parts = [self.cost] if self.cost else []
        if self.suggestions:
            first = self.suggestions[0]
            parts.append(f"Try next: {first.label}. {first.why}")
        elif not self.cost:
            parts.append("Nothing this race measured points to a setting worth trying instead on this device.")
        return " ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {"cost": self.cost, "suggestions": [s.to_dict() for s in self.suggestions]}


def caps_of(environment: dict[str, Any] | None) -> DeviceCaps:
    """What the device a race ran on can do, from the environment it recorded (an imported race's
    device too, which is not this machine's)."""
    env = environment or {}
    if env.get("device_type") != "cuda":
        return DeviceCaps(mps=env.get("device_type") == "mps", cpu_count=int(env.get("cpu_count") or 1))
    cc = env.get("compute_capability")
    capability = tuple(int(v) for v in cc) if isinstance(cc, list | tuple) and len(cc) == 2 else None
    return DeviceCaps(
        cuda=True,
        cuda_name=str(env.get("device_name") or ""),
        compute_capability=capability,
        cuda_bf16=capability is not None and capability >= (8, 0),
        triton=bool(env.get("triton")) if "triton" in env else None,
        gpu_count=1,
        cpu_count=int(env.get("cpu_count") or 1),
    )


def advise(
    summary: dict[str, Any],
    params: dict[str, Any],
    environment: dict[str, Any] | None = None,
    cause: Cause | None = None,
) -> Advice | None:
    """What to do after this race on its device; None where there is no verdict to act on."""
    s = Summary.of(summary)
    if s.compile_failed or s.compile_skipped or s.steady_state_speedup is None:
        return None
    env = environment or {}
    cause = cause or race_cause(s, params, env)
    try:
        spec = RunSpec.from_dict(params)
    except (SpecError, TypeError):
        return Advice(cost_words(s, params), ())
    caps = caps_of(env)
    candidates = _candidates(s, spec, env, cause)
    offered: list[Suggestion] = []
    for suggestion in candidates:
        if suggestion.changes and not _runs_here(spec, suggestion.changes, caps):
            continue
        if any(s.changes == suggestion.changes for s in offered):
            continue
        offered.append(suggestion)
    return Advice(cost_words(s, params), tuple(offered[:MAX_SUGGESTIONS]))


def _runs_here(spec: RunSpec, changes: dict[str, Any], caps: DeviceCaps) -> bool:
    """The race with `changes` is different and valid on the device (so a CPU gets no CUDA advice)."""
    if all(getattr(spec, k, None) == v for k, v in changes.items()):
        return False
    try:
        candidate = dataclasses.replace(spec, **changes)
    except TypeError:
        return False
    return not validate(candidate, caps)


def cost_words(summary: Summary | dict[str, Any] | None, params: dict[str, Any] | None = None) -> str | None:
    """A compile that costs far more than it saves, said as such, from the headline's payoff
    (core.engine.headline): never where the whole interval lies at or below 1x; "cannot tell"
    where it spans 1x; a clear gain that earns back under a tenth of the compile over the race's own
    steps. None otherwise."""
    s = Summary.of(summary)
    compile_s, h = s.compile_time_s, s.headline
    if not isinstance(compile_s, int | float) or compile_s <= 0:
        return None
    cost = words.seconds(compile_s)
    mode = (params or {}).get("mode")
    named = f" (mode {mode})" if mode and mode != "default" else ""
    if h.payoff == NEVER_PAYS:
        return f"Compile{named} cost {cost} here and makes steps slower: it does not pay for itself at any run length."
    if h.payoff == CANNOT_TELL:
        return (
            f"Compile{named} cost {cost} here and gained nothing measurable per step: this race cannot tell "
            "whether any run length earns it back."
        )
    saving, steps = h.saving_s(), max(len(s.compiled_step_times_s) - (s.warmup_steps or 0), 0)
    if h.payoff != PAYS or not saving or not steps or h.reached_step:
        return None
    saved = saving * steps
    if saved <= 0 or compile_s < FAR_MORE * saved:
        return None
    return (
        f"Compile{named} cost {cost}, more than {FAR_MORE} times the {words.seconds(saved)} its faster steps saved "
        f"over this race's {steps:,} steps: it pays only over a much longer run."
    )


def _candidates(s: Summary, spec: RunSpec, env: dict[str, Any], cause: Cause | None) -> list[Suggestion]:
    """Every suggestion that fits what was measured, best first (validated afterwards)."""
    out: list[Suggestion] = []
    verdict = s.verdict
    gained = verdict == FASTER
    compile_s = float(s.compile_time_s or 0.0)
    cuda = env.get("device_type") == "cuda"
    if spec.backend != "inductor" and not gained:  # a backend that only traces: Inductor is the real thing
        out.append(
            Suggestion(
                {"backend": "inductor"},
                "backend inductor",
                f"The {spec.backend} backend traces the model but generates no kernels; Inductor generates fused ones.",
            )
        )
    out += _recompile_suggestions(s, spec)
    if spec.mode in ("max-autotune", "max-autotune-no-cudagraphs") and not gained:
        out.append(
            Suggestion(
                {"mode": "default"},
                "mode default",
                f"{spec.mode} spent {words.seconds(compile_s)} compiling and bought no clear gain per step; the "
                "default mode compiles much faster.",
            )
        )
    if cause is not None and (cause.overhead_bound or cause.kind in (OUTSIDE, BOTH) and verdict != FASTER):
        # On a CPU validation drops it (_runs_here: CUDA graphs need a CUDA GPU), the one rule for
        # every mode a device cannot run: a second guard here only hid that rule from the tests.
        if spec.mode == "default" and spec.backend == "inductor":
            out.append(
                Suggestion(
                    {"mode": "reduce-overhead"},
                    "mode reduce-overhead (CUDA graphs)",
                    "Much of the step is spent outside the kernels; CUDA graphs replay the whole step's kernels with "
                    "one launch, which removes most of that time.",
                )
            )
        out += _bigger_batch(spec, "the time outside the kernels is paid per step, not per sample")
    if cause is not None and cause.library_share is not None and cause.library_share >= LIBRARY_BOUND and not gained:
        out += _library_suggestions(spec, cuda, env)
    if cause is not None and cause.kind == SAME and not cuda and spec.backend == "inductor":
        out += _bigger_batch(spec, "more work per step gives fusion more to save")
    if cause is not None and cause.graph_breaks and not spec.fullgraph:
        out.append(
            Suggestion(
                {"fullgraph": True},
                "full graph",
                f"The model has {cause.graph_breaks} graph break(s): with fullgraph=True the compile stops at the "
                "first one and names it, so you can remove it and let compile see the whole model.",
            )
        )
    if compile_s >= LONG_COMPILE_S and spec.compile_scope == "whole" and spec.model in REGIONAL_BLOCKS:
        out.append(
            Suggestion(
                {"compile_scope": "regional"},
                "compile scope regional",
                f"The compile took {words.seconds(compile_s)}; regional compile compiles the repeated "
                f"{REGIONAL_BLOCKS[spec.model][1]} once and reuses it, a much shorter compile for a similar step.",
            )
        )
    if gained and compile_s >= WARM_WORTH_S and spec.cache == "cold":
        out.append(
            Suggestion(
                {"cache": "warm"},
                "a warm Inductor cache",
                f"This race paid a cold compile ({words.seconds(compile_s)}); the same race with a warm cache reuses "
                "the kernels cold races here compiled, as a second run of your training would.",
            )
        )
    return out


def _recompile_suggestions(s: Summary, spec: RunSpec) -> list[Suggestion]:
    found = recompiles_of(s)
    if not found:
        return []
    shapes = [r for r in found if SIZE_GUARD.search(r.guard)]
    if shapes and spec.dynamic is not True:
        cost = sum(r.cost_s or 0.0 for r in shapes)
        paid = f", costing about {words.seconds(cost)}" if cost else ""
        return [
            Suggestion(
                {"dynamic": True},
                "dynamic shapes",
                f"{words.count(len(shapes), 'recompile')} came from a new input size{paid}; with dynamic=True one graph serves "
                "every size (padding batches to one size avoids them too).",
            )
        ]
    return []


def _bigger_batch(spec: RunSpec, why: str) -> list[Suggestion]:
    size = min(spec.batch_size * BATCH_STEP, MAX_BATCH_SIZE)
    if size <= spec.batch_size:
        return []
    return [Suggestion({"batch_size": size}, f"batch size {words.number(size)}", f"A bigger batch: {why}.")]


def _library_suggestions(spec: RunSpec, cuda: bool, env: dict[str, Any]) -> list[Suggestion]:
    """Most of the kernel time is library matmuls or convolutions, which compile does not change."""
    if cuda and spec.precision in ("fp32", "tf32"):
        caps = caps_of(env)
        precision = "amp-bf16" if caps.cuda_bf16 else "amp-fp16"
        return [
            Suggestion(
                {"precision": precision},
                f"precision {precision}",
                "Most of the kernel time is matmuls or convolutions in library kernels; in mixed precision they run "
                "on tensor cores, for eager and compiled alike.",
            )
        ]
    if not cuda and spec.mode == "default" and spec.backend == "inductor":
        return [
            Suggestion(
                {"mode": "max-autotune-no-cudagraphs"},
                "mode max-autotune-no-cudagraphs",
                "Most of the kernel time is matmuls in library kernels, which the default mode leaves as they are; "
                "max-autotune lets Inductor time its own matmul kernels against them while compiling (a longer "
                "compile, a gain only where its own win).",
            )
        ]
    return []


def sweep_advice(points: list[dict[str, Any]]) -> str | None:
    """The sweep's best measured point in words, to try at that setting: `points` are dicts with
    'label', 'verdict', 'speedup', 'ci_low' and 'ci_high' (the sweep's frame rows). None where no
    point reads clearly faster."""
    faster = [p for p in points if p.get("verdict") == FASTER and isinstance(p.get("ci_low"), int | float)]
    if not faster:
        return None
    best = max(faster, key=lambda p: p["ci_low"])  # the surest gain, not the luckiest median
    return (
        f"The surest gain measured here is at {best['label']}: "
        f"{words.speedup_with_range(best['speedup'], best['ci_low'], best['ci_high'])}, the highest low end of the "
        "95% intervals."
    )
