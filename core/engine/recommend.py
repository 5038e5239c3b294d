"""What to try next on this device, after a race or a sweep: which mode, precision, scope, batch size
or shape setting, and why, from what the race measured (its cause, core.engine.cause; its
recompiles, core.engine.compile_stats; its compile time against what compile saved).

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
from core.engine.cause import BOTH, CONVOLUTIONS, LIBRARY_BOUND, MATMULS, OUTSIDE, SAME, Cause, race_cause
from core.engine.compile_stats import BLOCK_SIZE, INPUT_SIZE, STATE_SIZE, guarded_tensor, recompiles_of, state_name
from core.engine.models.sources import MODELS, REGIONAL_BLOCKS, blocks_share_shapes
from core.engine.spec import MAX_BATCH_SIZE, DeviceCaps, RunSpec, SpecError, validate
from core.engine.summary import CANNOT_TELL, FASTER, NEVER_PAYS, NO_CLEAR_DIFFERENCE, PAYS, SLOWER, Summary

MAX_SUGGESTIONS = 3
# A compile this many times what it saved over the race's own steps "costs far more than it saves".
FAR_MORE = 10
# A compile this long is worth shortening with regional compile.
LONG_COMPILE_S = 10.0
# A cold compile this long is worth seeing warm (what the second run of a training job pays).
WARM_WORTH_S = 2.0
BATCH_STEP = 4  # a bigger batch to try: this many times the race's

# What a suggestion expects to change, the figure a race with it is judged on (the advice
# bench, bench.advice, reads these): every suggestion names one, and says it in these words.
COMPILE_DOWN = "compile time down"
STEP_FASTER = "steady step faster"
RECOMPILES_GONE = "fewer recompiles"
EXPECTS = (COMPILE_DOWN, STEP_FASTER, RECOMPILES_GONE)


def expect_words(expects: str) -> str:
    """A suggestion's promise, as every surface says it: 'Expect: compile time down.'"""
    return f"Expect: {expects}."


@dataclass(frozen=True)
class Suggestion:
    """One thing to try next: the options changed (as the Race form and its link take them), a short
    label for its button or link, why, and what it expects to change (one of EXPECTS; `why` ends
    with it in words, so every surface that shows the why shows the promise)."""

    changes: dict[str, Any] = field(default_factory=dict)
    label: str = ""
    why: str = ""
    expects: str = ""

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
    (core.engine.summary): never where the whole interval lies at or below 1x; "cannot tell"
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


def headline_verdict(summary: Summary | dict[str, Any] | None) -> str | None:
    """What the race's headline says of the steady step, the one reading every suggestion rests on
    (core.engine.summary.interval_verdict, as every surface reads it): FASTER where its interval
    (speedup_ci95) lies above 1x, SLOWER where below, NO_CLEAR_DIFFERENCE where it spans 1x; None
    where it gives no verdict (a busy machine: no suggestion rests on a verdict it did not give)."""
    verdict = Summary.of(summary).verdict  # as Summary.from_dict read it (interval_verdict): one rule
    return verdict if verdict in (FASTER, SLOWER, NO_CLEAR_DIFFERENCE) else None


@dataclass(frozen=True)
class ModeAnswer:
    """'Which mode should I use?' on one device: the mode, why, and what it expects to change."""

    mode: str
    why: str
    expects: str


def which_mode(device_type: str | None, cause: Cause | None = None, compile_s: float | None = None) -> ModeAnswer:
    """'Which mode should I use?', answered in this one place for every surface, per device (a CUDA
    GPU, or not: a CPU or MPS has no CUDA graphs), from what a race measured where there is one
    (its cause: where the step's time goes, which library kernels hold it), else in general.

    - Time outside the kernels (launches, Python): on a CUDA GPU reduce-overhead, whose CUDA graphs
      replay the step's kernels in one launch; elsewhere nothing a mode changes.
    - Library matmuls holding most kernel time: max-autotune-no-cudagraphs, which times Inductor's
      own matmul kernels against the library's (a longer compile). On a CUDA GPU convolutions too
      (Triton templates); on a CPU convolutions stay oneDNN calls in every mode.
    - Otherwise default: the shortest compile, and what the other modes are measured against."""
    cuda = device_type == "cuda"
    if cause is not None and cause.overhead_bound:
        if cuda:
            return ModeAnswer(
                "reduce-overhead",
                "Much of the step is spent outside the kernels; CUDA graphs replay the whole step's kernels with one "
                "launch, which removes most of that time.",
                STEP_FASTER,
            )
        return ModeAnswer(
            "default",
            "Much of the step is spent outside the kernels: CUDA graphs, which cut that time, need a CUDA GPU, and "
            "max-autotune tunes kernels, not the time between them.",
            COMPILE_DOWN,
        )
    matmuls = cause.matmul_share if cause is not None else None
    library = cause.library_share if cause is not None else None
    tunable = (matmuls or 0.0) >= LIBRARY_BOUND or (
        cuda and cause is not None and cause.library_kind == CONVOLUTIONS and (library or 0.0) >= LIBRARY_BOUND
    )
    if tunable:
        kind = MATMULS if (matmuls or 0.0) >= LIBRARY_BOUND else CONVOLUTIONS
        return ModeAnswer(
            "max-autotune-no-cudagraphs",
            f"Most of compiled's kernel time is in library {kind}, which the default mode calls as they are; "
            f"max-autotune-no-cudagraphs times Inductor's own {kind[:-1]} kernels against them while compiling and keeps "
            "the faster (a longer compile).",
            STEP_FASTER,
        )
    took = f" (this one took {words.seconds(compile_s)})" if compile_s else ""
    if cause is None:
        why = (
            "The default mode compiles fastest; on a CUDA GPU reduce-overhead pays where the step is spent "
            "outside the kernels, and max-autotune-no-cudagraphs where library matmuls or convolutions take most "
            "kernel time."
            if cuda
            else "The default mode compiles fastest; reduce-overhead and max-autotune capture CUDA graphs, which need "
            "a CUDA GPU, and max-autotune-no-cudagraphs pays a longer compile only where library matmuls take most "
            "kernel time."
        )
    else:
        why = (
            "Nothing this race measured is what another mode changes: the default mode compiles much faster"
            f"{took} for the same kernels."
        )
    return ModeAnswer("default", why, COMPILE_DOWN)


def _suggest(changes: dict[str, Any], label: str, why: str, expects: str) -> Suggestion:
    return Suggestion(changes, label, f"{why} {expect_words(expects)}", expects)


def _candidates(s: Summary, spec: RunSpec, env: dict[str, Any], cause: Cause | None) -> list[Suggestion]:
    """Every suggestion that fits what was measured, best first (validated afterwards). Each rests on
    the race's headline (its interval, not a median) and on the cause it addresses."""
    out: list[Suggestion] = []
    verdict = headline_verdict(s)
    gained = verdict == FASTER
    unclear = verdict in (NO_CLEAR_DIFFERENCE, SLOWER)  # the interval reaches 1x or lies below it
    compile_s = float(s.compile_time_s or 0.0)
    device = env.get("device_type")
    if spec.backend != "inductor" and unclear:  # a backend that only traces: Inductor is the real thing
        out.append(
            _suggest(
                {"backend": "inductor"},
                "backend inductor",
                f"The {spec.backend} backend traces the model but generates no kernels; Inductor generates fused ones.",
                STEP_FASTER,
            )
        )
    out += _recompile_suggestions(s, spec)
    if spec.backend == "inductor" and cause is not None and not gained:
        mode = which_mode(device, cause, compile_s)
        # A mode that tuned kernels and bought nothing the interval can tell: back to the default one.
        if spec.mode in ("max-autotune", "max-autotune-no-cudagraphs") and unclear and mode.mode == "default":
            gain = "made steps slower" if verdict == SLOWER else "bought no clear gain per step"
            out.append(
                _suggest(
                    {"mode": "default"},
                    "mode default",
                    f"{spec.mode} spent {words.seconds(compile_s)} compiling and {gain}; the default mode compiles "
                    "much faster.",
                    COMPILE_DOWN,
                )
            )
        elif mode.mode != spec.mode and mode.mode != "default":
            label = "mode reduce-overhead (CUDA graphs)" if mode.mode == "reduce-overhead" else f"mode {mode.mode}"
            out.append(_suggest({"mode": mode.mode}, label, mode.why, mode.expects))
    if cause is not None and (cause.overhead_bound or cause.kind in (OUTSIDE, BOTH) and not gained):
        out += _bigger_batch(spec, "the time outside the kernels is paid per step, not per sample")
    if cause is not None and (cause.library_share or 0.0) >= LIBRARY_BOUND and not gained:
        out += _precision_suggestions(spec, device == "cuda", env, cause)
    if cause is not None and cause.kind == SAME and device != "cuda" and spec.backend == "inductor":
        out += _bigger_batch(spec, "more work per step gives fusion more to save")
    if cause is not None and cause.graph_breaks and not spec.fullgraph:
        out.append(
            _suggest(
                {"fullgraph": True},
                "full graph",
                f"The model has {cause.graph_breaks} graph break(s): with fullgraph=True the compile stops at the "
                "first one and names it, so you can remove it and let compile see the whole model.",
                STEP_FASTER,
            )
        )
    if compile_s >= LONG_COMPILE_S and spec.compile_scope == "whole" and blocks_share_shapes(spec.model):
        count = MODELS[spec.model].block_kinds
        out.append(
            _suggest(
                {"compile_scope": "regional"},
                "compile scope regional",
                f"The compile took {words.seconds(compile_s)}; {spec.model}'s repeated {REGIONAL_BLOCKS[spec.model][1]}s "
                f"are all alike ({words.count(count, 'kind')}), so regional compile compiles one once and reuses it "
                "for every block, a shorter compile for a similar step.",
                COMPILE_DOWN,
            )
        )
    if gained and compile_s >= WARM_WORTH_S and spec.cache == "cold":
        out.append(
            _suggest(
                {"cache": "warm"},
                "a warm Inductor cache",
                f"This race paid a cold compile ({words.seconds(compile_s)}); the same race with a warm cache reuses "
                "the kernels cold races here compiled, as a second run of your training would.",
                COMPILE_DOWN,
            )
        )
    return out


def _recompile_suggestions(s: Summary, spec: RunSpec) -> list[Suggestion]:
    """What the recompiles' own guards point to: a new input size, dynamic shapes; a parameter or
    buffer of another size in a regional race (blocks of other widths), the whole model at once.
    Never dynamic shapes for a guard on a parameter or buffer: the batch did not change."""
    found = recompiles_of(s, spec.to_dict())
    inputs = [r for r in found if r.cause == INPUT_SIZE]
    states = [r for r in found if r.cause in (STATE_SIZE, BLOCK_SIZE)]
    out = []
    if states and spec.compile_scope == "regional":
        out.append(
            _suggest(
                {"compile_scope": "whole"},
                "compile scope whole",
                f"{words.count(len(states), 'recompile')} came from repeated blocks of other widths (the guard on "
                f"{_first_state(states)}): the blocks are not alike, so each kind compiled its own region; the whole "
                "model compiles as one graph.",
                RECOMPILES_GONE,
            )
        )
    if inputs and spec.dynamic is not True:
        cost = sum(r.cost_s or 0.0 for r in inputs)
        paid = f", costing about {words.seconds(cost)}" if cost else ""
        out.append(
            _suggest(
                {"dynamic": True},
                "dynamic shapes",
                f"{words.count(len(inputs), 'recompile')} came from a new input size{paid}; with dynamic=True one graph "
                "serves every size (padding batches to one size avoids them too).",
                RECOMPILES_GONE,
            )
        )
    return out


def _first_state(found: list[Any]) -> str:
    tensor = guarded_tensor(found[0].guard) or ""
    return state_name(tensor) or tensor or "a tensor"


def _bigger_batch(spec: RunSpec, why: str) -> list[Suggestion]:
    size = min(spec.batch_size * BATCH_STEP, MAX_BATCH_SIZE)
    if size <= spec.batch_size:
        return []
    return [_suggest({"batch_size": size}, f"batch size {words.number(size)}", f"A bigger batch: {why}.", STEP_FASTER)]


def _precision_suggestions(spec: RunSpec, cuda: bool, env: dict[str, Any], cause: Cause) -> list[Suggestion]:
    """Most of the kernel time is library matmuls or convolutions, which compile does not change: on
    a CUDA GPU mixed precision runs them on tensor cores (the mode's part is which_mode's)."""
    if cuda and spec.precision in ("fp32", "tf32"):
        caps = caps_of(env)
        precision = "amp-bf16" if caps.cuda_bf16 else "amp-fp16"
        return [
            _suggest(
                {"precision": precision},
                f"precision {precision}",
                f"Most of the kernel time is {cause.library_kind or 'matmuls or convolutions'} in library kernels; in "
                "mixed precision they run on tensor cores, for eager and compiled alike.",
                STEP_FASTER,
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
