"""A race's summary as one typed record: what analysis.summarize and the trainer found, read by
attribute, with the facts derived from it (whether compile ran, the break-even's state, the
projection the one rule allows) computed here and nowhere else. Torch-free.

The store and bundles keep it as JSON (`to_dict`); `from_dict` reads any stored summary back: a
run stored before a field existed gets the field's default, a key no field names (an old stored
`reading`, which is now derived) is dropped, and a value of the wrong type (a damaged or foreign
summary) reads as missing, so no view needs its own isinstance guard.

    s = Summary.from_dict(run.summary)      # or Summary.of(x): a Summary or a dict, either way
    s.steady_state_speedup, s.verdict, s.break_even  # attributes; break_even: one of BREAK_EVEN_STATES
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# The verdicts and the break-even's states are the one derivation's (core.engine.headline), named
# here too, where every reader has always found them.
from core.engine.headline import (  # noqa: F401
    BREAK_EVEN_STATES,
    BUSY,
    FASTER,
    NEVER,
    NEVER_NO_GAIN,
    NEVER_SLOWER,
    NO_CLEAR_DIFFERENCE,
    NO_COMPILE,
    NO_GAIN,
    NO_VERDICT,
    NO_VERDICT_BUSY,
    NOT_REACHED,
    NOT_WITHIN_RUN,
    PROJECTED,
    REACHED,
    SLOWER,
    Headline,
    interval_verdict,
)


@dataclass(frozen=True)
class Summary:
    """One race's headline numbers and what qualifies them (core.engine.analysis.summarize, plus
    the trainer's memory, losses and compile counters). Times in seconds, memory in bytes."""

    warmup_steps: int | None = None
    compile_time_s: float | None = None  # None where too small to measure: then compile_time_under_s
    compile_time_under_s: float | None = None  # the noise a compile too small to measure hides under
    first_epoch_overhead_s: float | None = None
    eval_first_epoch_overhead_s: float | None = None
    steady_state_speedup: float | None = None
    speedup_ci95: tuple[float, float] | None = None
    speedup_ci95_within: tuple[float, float] | None = None  # the race's own, before the run-to-run spread
    run_to_run: dict | None = None  # intervals.RunToRun.to_dict(): the prior of the processes' spread
    first_process: dict | None = None  # replicates.ProcessResult.to_dict() of the first process
    replicates: tuple[dict, ...] = ()  # each replicate process's, in order (core.engine.replicates)
    replicates_asked: int | None = None  # how many the race runs, or adds at most with a target interval
    processes_counted: int | None = None  # how many processes the headline rests on
    busy_steps: dict | None = None  # the first process's steps timed on a busy machine, per variant
    conditions: dict | None = None  # what the race's process ran under (core.runs.race_conditions)
    verdict: str | None = None  # FASTER | NO_CLEAR_DIFFERENCE | SLOWER | BUSY
    eager_median_step_s: float | None = None
    compiled_median_step_s: float | None = None
    eager_samples_per_s: float | None = None
    compiled_samples_per_s: float | None = None
    break_even_step: int | None = None
    break_even_wall_s: float | None = None
    break_even_reason: str | None = None
    break_even_extrapolated_step: float | None = None
    break_even_projected_wall_s: float | None = None
    break_even_projected_range: tuple[float, float | None] | None = None  # latest None: "maybe never"
    whole_run_speedup: float | None = None
    eager_step_times_s: tuple[float, ...] = ()
    compiled_step_times_s: tuple[float, ...] = ()
    eager_epoch_times_s: tuple[float, ...] = ()
    compiled_epoch_times_s: tuple[float, ...] = ()
    eager_eval_epoch_times_s: tuple[float, ...] = ()
    compiled_eval_epoch_times_s: tuple[float, ...] = ()
    eager_eval_step_times_s: tuple[float, ...] = ()
    compiled_eval_step_times_s: tuple[float, ...] = ()
    compile_events: tuple[dict, ...] = ()
    interval_paired: bool = False
    interval_alpha: float | None = None  # below 5%: a race that stopped on its interval
    noise_warnings: tuple[str, ...] = ()
    machine_load: tuple[dict, ...] = ()
    stop_reason: str | None = None
    eager_peak_memory_bytes: int | None = None
    compiled_peak_memory_bytes: int | None = None
    eager_peak_reserved_bytes: int | None = None
    compiled_peak_reserved_bytes: int | None = None
    eager_reserved_growth_bytes: int | None = None
    compiled_reserved_growth_bytes: int | None = None
    memory_kind: str | None = None
    eager_final_loss: float | None = None
    compiled_final_loss: float | None = None
    graphs: int | None = None
    graph_breaks: int | None = None
    recompiles: int | None = None
    compile_phases: dict | None = None
    compile_skipped: str | None = None  # why compile did not happen (compiled ran eager code)
    compile_failed: str | None = None  # why torch.compile could not handle the model (eager ran)
    profile: dict | None = None
    model_params: int | None = None
    cpu_isa_probe_s: float | None = None
    extra: dict = field(default_factory=dict, compare=False)  # keys a newer writer added: kept, not read

    # -- reading and writing ------------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Summary:
        """A stored, exported or live summary read back; see the module's docstring for what an old
        or damaged one gives."""
        if not isinstance(data, Mapping):
            return cls()
        values, extra = {}, {}
        for key, value in data.items():
            kind = _KINDS.get(key)
            if kind is None:
                if key not in _DERIVED and isinstance(key, str):
                    extra[key] = value
                continue
            value = _checked(value, kind)
            if value is not None:
                values[key] = value
        if values.get("steady_state_speedup") is not None:  # the verdict its interval gives (one rule)
            found = interval_verdict(
                values.get("verdict"), values.get("speedup_ci95"), values.get("speedup_ci95_within") is not None
            )
            if found is not None:
                values["verdict"] = found
        return cls(**values, extra=extra)

    @classmethod
    def of(cls, summary: Summary | Mapping[str, Any] | None) -> Summary:
        """`summary` as a Summary: itself, or read from a dict (from_dict)."""
        return summary if isinstance(summary, Summary) else cls.from_dict(summary)

    def to_dict(self) -> dict[str, Any]:
        """The JSON the store and bundles keep (tuples as lists; the derived reading is not kept)."""
        out = dict(self.extra)
        for f in _FIELDS:
            value = getattr(self, f.name)
            out[f.name] = [list(v) if isinstance(v, tuple) else v for v in value] if isinstance(value, tuple) else value
        return out

    def replace(self, **changes: Any) -> Summary:
        return dataclasses.replace(self, **changes)

    # -- derived facts, one place for each ------------------------------------------------------

    @property
    def compiled(self) -> bool:
        """Compiled code ran: compile neither failed nor was skipped."""
        return not self.compile_failed and not self.compile_skipped

    @property
    def interval(self) -> tuple[float, float] | None:
        """The speedup's 95% interval (the point twice where a race had too few blocks for one)."""
        if self.speedup_ci95 is not None:
            return self.speedup_ci95
        s = self.steady_state_speedup
        return None if s is None else (s, s)

    @property
    def projection_stands(self) -> bool:
        """The one rule for a projected break-even, which every view follows: only from a speedup
        whose interval lies above 1 (verdict "faster"), compiled code having run and compile not
        yet paid off. From a gain in doubt there is no crossing to name."""
        return self.verdict == FASTER and self.break_even_step is None and self.compiled

    @functools.cached_property
    def headline(self) -> Headline:
        """Every figure derived from the headline speedup, its interval and the race's end
        (core.engine.headline): the one derivation every surface reads."""
        return Headline.of(self)

    @property
    def projected_position(self) -> float | None:
        """The projected break-even (fractional steps) where the rule allows one, from the headline
        (a stored projection, which older versions computed otherwise, is not read)."""
        return self.headline.projected_position

    @property
    def projected_range(self) -> tuple[float, float | None] | None:
        """The projected break-even as the span its speedup's interval allows (earliest, latest),
        under the same rule, from the headline; None where there is none."""
        return self.headline.projected_range

    @property
    def break_even(self) -> str:
        """Where the break-even stands (one of BREAK_EVEN_STATES), from the verdict and the steps,
        never from a stored reason's wording: the same state on every surface."""
        return self.headline.state


_FIELDS = tuple(f for f in dataclasses.fields(Summary) if f.name != "extra")
_DERIVED = frozenset({"reading"})  # stored by older versions; derived now (core.engine.reading)


def _kind(annotation: Any) -> Any:
    """A field's annotation, resolved: what from_dict checks a stored value against."""
    hint = typing.get_type_hints(Summary)[annotation]
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        hint = args[0] if len(args) == 1 else hint
    return hint


_KINDS = {f.name: _kind(f.name) for f in _FIELDS}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value  # NaN is missing


def _checked(value: Any, kind: Any) -> Any:
    """`value` if it is of `kind` (ints read as floats where a float is declared), else None."""
    if value is None:
        return None
    if kind is float:
        return float(value) if _is_number(value) else None
    if kind is int:  # a whole number written as a float by another tool is still one
        return int(value) if _is_number(value) and float(value).is_integer() else None
    if kind is bool:
        return value if isinstance(value, bool) else None
    if kind is str:
        return value if isinstance(value, str) else None
    if kind is dict:
        return value if isinstance(value, dict) else None
    if typing.get_origin(kind) is tuple:
        return _checked_tuple(value, typing.get_args(kind))
    return None


def _checked_tuple(value: Any, args: tuple) -> tuple | None:
    if not isinstance(value, list | tuple):
        return None
    if len(args) == 2 and args[1] is Ellipsis:  # a series: its well-formed items
        item = args[0]
        if item is float:
            if all(type(v) is float and v == v for v in value):  # what this app writes (no NaN): kept whole
                return tuple(value)
            return tuple(float(v) for v in value if _is_number(v))
        return tuple(v for v in value if isinstance(v, item))
    if len(value) != len(args):  # a pair: both ends well formed, or none
        return None
    out = []
    for v, arg in zip(value, args):
        optional = typing.get_origin(arg) in (typing.Union, types.UnionType)
        if v is None and optional:
            out.append(None)
        elif _is_number(v):
            out.append(float(v))
        else:
            return None
    return tuple(out)
