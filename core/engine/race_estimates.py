"""How long a race takes here, said before it runs. Pure functions only.

- `estimate_race`: from this device type's own measured races where there are any (the races
  core.runs.device_history picks: the same device name and torch; the same race, else
  the same model, scaled by the steps and the work per step), with a likely range from how far past
  estimates of that kind missed what their races then took (each race keeps the estimate it was
  launched with: core.runs.device_history); else the zoo's figures scaled by what races of other models
  took here against them. No range leaves out what a race here took.
- `estimate_seconds`, `expected_compile_estimate`: the zoo rows' rough CPU figures
  (core.engine.models.sources) or one rough GPU figure, where nothing was measured yet.
- `duration_note`: what an estimate cannot know (autotuning).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median

from core.engine.intervals import REPLICATE_SECONDS, replicates_asked
from core.engine.models.sources import MODELS
from core.engine.spec import COMPILE, STEP_TIME, DeviceCaps, RunSpec, resolve_device

# Before a race: rough figures, only for "about how long". A zoo row carries its CPU figures
# (measured on a 2-core x86 CPU for the small models); the rest are order-of-magnitude guesses.
UNMEASURED_CPU_STEP_S = 2.0
UNMEASURED_CPU_COMPILE_S = 60
GPU_STEP_S = 0.05
GPU_COMPILE_S = 60
AUTOTUNE_MODES = ("max-autotune", "max-autotune-no-cudagraphs")
AUTOTUNE_COMPILE_FACTOR = 10  # autotuning benchmarks candidate kernels: compiles of several times, often more
NON_INDUCTOR_COMPILE_DIVISOR = 5  # aot_eager and eager trace but generate no kernels
WORKER_START_S = 5


def _compile_estimate(model: str, backend: str, mode: str | None, on_gpu: bool) -> float:
    info = MODELS.get(model)
    cpu = info.cpu_compile_s if info is not None and info.cpu_compile_s is not None else UNMEASURED_CPU_COMPILE_S
    compile_s = float(GPU_COMPILE_S if on_gpu else cpu)
    if backend != "inductor":
        return compile_s / NON_INDUCTOR_COMPILE_DIVISOR
    return compile_s * (AUTOTUNE_COMPILE_FACTOR if mode in AUTOTUNE_MODES else 1)


def _size_scale(spec: RunSpec, batch_size: int, input_size: int | None) -> float:
    """How much more work one step of `spec` is than one at (batch_size, input_size) of its model:
    linear in the batch, and in the pixels for an image model."""
    info = MODELS.get(spec.model)
    scale = spec.batch_size / max(batch_size, 1)
    if info is not None and info.input_kind == "image" and input_size:
        scale *= (spec.input_size / input_size) ** 2
    return scale


def _table_total(spec: RunSpec, caps: DeviceCaps | None) -> tuple[float, float] | None:
    """(whole race, compile) from the zoo rows' rough figures; None for a model that is not the zoo's."""
    info = MODELS.get(spec.model)
    if info is None:
        return None
    scale = _size_scale(spec, info.default_batch_size, info.default_size)
    on_gpu = caps is not None and resolve_device(spec.device, caps) == "cuda"
    cpu_step = info.cpu_step_s if info.cpu_step_s is not None else UNMEASURED_CPU_STEP_S
    step = (GPU_STEP_S if on_gpu else cpu_step) * scale
    compile_s = _compile_estimate(spec.model, spec.backend, spec.mode, on_gpu)
    return spec.recorded_steps * step + compile_s + WORKER_START_S + replicates_seconds(spec, compile_s), compile_s


WARM_COMPILE_SHARE = 0.3  # a replicate's compile from the first process's cache, as a share of the cold one


def replicates_seconds(spec: RunSpec, compile_s: float) -> float:
    """What the race's replicate processes add (core.engine.intervals): each a process start, a warm
    compile and about REPLICATE_SECONDS of steps; with a target interval, half its most (it stops
    once known)."""
    asked = replicates_asked(spec.replicates, spec.target_interval)
    count = asked / 2 if spec.target_interval else asked
    return count * (WORKER_START_S + WARM_COMPILE_SHARE * compile_s + REPLICATE_SECONDS)


def estimate_seconds(spec: RunSpec, caps: DeviceCaps | None) -> tuple[float, float]:
    """A rough (low, high) wall time for the whole race: both variants plus the compile; (0, 0)
    for a model that is not the zoo's (no step time to scale from)."""
    table = _table_total(spec, caps)
    if table is None:
        return (0.0, 0.0)
    return (table[0] * TABLE_SPREAD[0], table[0] * TABLE_SPREAD[1])


# Before a race, from this device's own measured races where there are any (estimate_race).
TABLE_SPREAD = (0.5, 2.0)  # the zoo rows' figures are for one 2-core CPU: another box can be 2x either way
# How far a scaled measurement is trusted before its own record says more (MIN_PAST_ESTIMATES of them).
MEASURED_SPREAD = {"same race": (0.8, 1.25), "same model": (0.6, 1.6)}
MIN_PAST_ESTIMATES = 3
# Two races are the same race for its duration when they share what changes the step's time and the
# compile (spec.same_race); the rest (epochs and steps) it is scaled by.
SAME_RACE = (STEP_TIME, COMPILE)


@dataclass(frozen=True)
class MeasuredRace:
    """A finished race measured on this device: its settings, its wall time (dispatch to end),
    its compile, and the estimate it was launched with (details['estimate'], or None)."""

    run_id: int
    params: dict
    wall_s: float
    compile_s: float | None
    estimate: dict | None = None


@dataclass(frozen=True)
class PastRace:
    """One earlier race here with the estimate it was launched with: what it took over that estimate
    (3.2: three times as long) and whether it fell outside the range it was promised."""

    run_id: int
    ratio: float
    outside: bool


@dataclass(frozen=True)
class RaceEstimate:
    """About how long a race takes here: a central figure, a likely range, the compile's share,
    what it is based on ('table', 'same race', 'same model') and, for a measurement, which race."""

    total_s: float
    low_s: float
    high_s: float
    compile_s: float
    basis: str
    based_on: MeasuredRace | None = None
    past: tuple[float, float, int] | None = None  # past estimates' errors (lowest, highest, how many)
    corrected: bool = False  # the zoo's figures scaled by what races here took against them
    factor: float | None = None  # races here over the zoo's figures for them (median), where corrected
    factor_races: int = 0  # how many races that factor rests on
    history: tuple[PastRace, ...] = ()  # earlier races' estimates of this kind against what they took, newest first

    def record(self) -> dict:
        """What the run keeps (details['estimate']), so later races can say how good estimates were."""
        return {
            "total_s": round(self.total_s, 2),
            "low_s": round(self.low_s, 2),
            "high_s": round(self.high_s, 2),
            "compile_s": round(self.compile_s, 2),
            "basis": self.basis,
            "based_on_run": self.based_on.run_id if self.based_on else None,
        }


def _basis_kind(basis: str) -> str:
    return "table" if basis == "table" else "measured"


def past_errors(measured: Sequence[MeasuredRace], basis: str) -> list[float]:
    """How far each earlier estimate of this kind (table, or from measured races) was from what
    its race then took: estimate / measured - 1 (-0.2: 20% under)."""
    return [race.estimate["total_s"] / race.wall_s - 1.0 for race in _estimated(measured, basis)]


def _estimated(measured: Sequence[MeasuredRace], basis: str) -> list[MeasuredRace]:
    """The races, newest first, launched with an estimate of this kind (table, or from measured races)."""
    out = []
    for race in measured:
        est = race.estimate or {}
        total = est.get("total_s")
        if not isinstance(total, (int, float)) or race.wall_s <= 0 or total <= 0:
            continue
        if _basis_kind(str(est.get("basis"))) == _basis_kind(basis):
            out.append(race)
    return out


def past_races(measured: Sequence[MeasuredRace], basis: str) -> tuple[PastRace, ...]:
    """Earlier races with an estimate of this kind, newest first: what each took over its estimate,
    and whether it fell outside the range it was given (where that range was kept)."""
    out = []
    for race in _estimated(measured, basis):
        est = race.estimate or {}
        low, high = est.get("low_s"), est.get("high_s")
        outside = isinstance(low, (int, float)) and isinstance(high, (int, float)) and not low <= race.wall_s <= high
        out.append(PastRace(race.run_id, race.wall_s / float(est["total_s"]), bool(outside)))
    return tuple(out)


def zoo_factors(measured: Sequence[MeasuredRace], caps: DeviceCaps | None) -> list[tuple[float, float | None]]:
    """For each zoo race measured here: (what the whole race took, what its compile took), each over
    what the zoo's figures give for that race now. The figures are recomputed, never the estimate the
    race was launched with, so a correction does not feed on itself."""
    out = []
    for race in measured:
        theirs = RunSpec.stored(race.params)
        table = _table_total(theirs, caps) if theirs is not None else None
        if table is None or table[0] <= 0 or race.wall_s <= 0:
            continue
        compile_factor = race.compile_s / table[1] if race.compile_s and table[1] > 0 else None
        out.append((race.wall_s / table[0], compile_factor))
    return out


def _from_measured(spec: RunSpec, caps: DeviceCaps | None, race: MeasuredRace) -> tuple[float, float]:
    """(whole race, compile) for `spec` scaled from one measured race of the same model: its step
    time by the steps and the work per step, its compile by the table's ratio between the two
    settings (mode, backend), the worker's start as measured in it."""
    p, theirs = race.params, RunSpec.stored(race.params) or spec
    on_gpu = caps is not None and resolve_device(spec.device, caps) == "cuda"
    table_compile = _compile_estimate(spec.model, spec.backend, spec.mode, on_gpu)
    their_table = _compile_estimate(str(p.get("model")), p.get("backend", "inductor"), p.get("mode"), on_gpu)
    compile_s = table_compile if race.compile_s is None else race.compile_s * table_compile / their_table
    measured_compile = race.compile_s if race.compile_s is not None else their_table
    step = max(race.wall_s - measured_compile - WORKER_START_S, 0.0) / theirs.recorded_steps
    step *= _size_scale(spec, theirs.batch_size, theirs.input_size)
    return spec.recorded_steps * step + compile_s + WORKER_START_S, compile_s


def estimate_race(spec: RunSpec, caps: DeviceCaps | None, measured: Sequence[MeasuredRace] = ()) -> RaceEstimate | None:
    """About how long `spec` takes here. From this device's measured races (newest first) where
    there are any: the same race first (same model, batch, mode, backend, precision, scope, cache,
    input size: only epochs and steps may differ), then the same model scaled by the work per step;
    else the zoo's rough figures, scaled by what the races measured here took against them. The
    range is what past estimates of that kind missed by, once there are MIN_PAST_ESTIMATES of them,
    else a fixed spread widened to hold every race here. None: nothing to estimate from (a library
    model never measured here)."""
    wanted = spec.same_race(*SAME_RACE)
    same = same_model = None
    for race in measured:
        theirs = RunSpec.stored(race.params)
        if theirs is None or theirs.model != spec.model or race.wall_s <= 0:
            continue
        if theirs.same_race(*SAME_RACE) == wanted and same is None:
            same = race
        same_model = same_model or race
    based_on = same or same_model
    if based_on is not None:
        basis = "same race" if same is not None else "same model"
        total, compile_s = _from_measured(spec, caps, based_on)
    else:
        table = _table_total(spec, caps)
        if table is None:
            return None
        basis, (total, compile_s) = "table", table
    history = past_races(measured, basis)
    if basis == "table":
        return _corrected_table(total, compile_s, zoo_factors(measured, caps), history)
    errors = past_errors(measured, basis)
    spread = MEASURED_SPREAD[basis]
    low, high, past = total * spread[0], total * spread[1], None
    if errors:  # estimate = measured x (1 + error), so what this race takes lies at total / (1 + error)
        implied = (total / (1 + max(errors)), total / (1 + min(errors)))
        past = (min(errors), max(errors), len(errors))
        if len(errors) >= MIN_PAST_ESTIMATES:
            low, high = implied
        else:  # never a range that the races here fell outside
            low, high = min(low, implied[0]), max(high, implied[1])
    return RaceEstimate(total, low, high, compile_s, basis, based_on, past, history=history)


def _corrected_table(
    total: float, compile_s: float, factors: list[tuple[float, float | None]], history: tuple[PastRace, ...]
) -> RaceEstimate:
    """The zoo's figures, scaled by what races here took against them (their median) where any were
    measured here; the range covers every one of those races, so none fell outside it."""
    if not factors:
        low, high = total * TABLE_SPREAD[0], total * TABLE_SPREAD[1]
        return RaceEstimate(total, low, high, compile_s, "table", history=history)
    whole = [f for f, _ in factors]
    compiles = [c for _, c in factors if c is not None]
    factor = median(whole)
    scaled = total * factor
    scaled_compile = min(compile_s * (median(compiles) if compiles else factor), scaled)
    spread = TABLE_SPREAD if len(whole) < MIN_PAST_ESTIMATES else MEASURED_SPREAD["same model"]
    low = min(scaled * spread[0], total * min(whole))
    high = max(scaled * spread[1], total * max(whole))
    return RaceEstimate(scaled, low, high, scaled_compile, "table", None, None, True, factor, len(whole), history)


def expected_compile_estimate(params: dict, on_gpu: bool) -> float:
    """The rough compile time estimate_seconds assumes for a race with these settings (a run's params)."""
    return _compile_estimate(str(params.get("model")), params.get("backend", "inductor"), params.get("mode"), on_gpu)


def duration_note(spec: RunSpec) -> str | None:
    """What the estimate cannot know, said beside it: autotuning's cost depends on the model."""
    if spec.backend == "inductor" and spec.mode in AUTOTUNE_MODES:
        return (
            f"{spec.mode} benchmarks many kernel variants for every matrix multiply and convolution while it "
            "compiles: the compile alone can take many minutes (the estimate assumes ten times the default mode's)."
        )
    return None
