"""Host limits: what one deployment lets its visitors queue (a hosted demo on a shared box).

A policy of the queue, not of a race: the engine validates whether a spec *can* run; these say
whether this host *allows* it. Read from the environment or a TOML file, checked at enqueue.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from core.engine.spec import Problem, RunSpec


@dataclass(frozen=True)
class HostLimits:
    """What one deployment allows, for a hosted demo on a shared box. None = no limit.

    Read from environment variables (COMPILE_LAB_MAX_BATCH_SIZE, ...) or a TOML file named by
    COMPILE_LAB_CONFIG with the same keys in lower case under [limits]; the environment wins.
    """

    allowed_models: tuple[str, ...] | None = None
    allowed_modes: tuple[str, ...] | None = None  # max-autotune can hold a GPU for many minutes
    max_batch_size: int | None = None
    max_steps: int | None = None  # epochs x steps_per_epoch, per variant
    max_epochs: int | None = None
    max_queued_per_owner: int | None = None
    max_queue_length: int | None = None
    max_sweep_points: int | None = None  # races one sweep may queue (each point is one race)
    job_time_limit_s: float | None = 3600.0

    def problems(self, spec: RunSpec) -> list[Problem]:
        """Every limit `spec` exceeds, each saying the limit."""
        p: list[Problem] = []
        if self.allowed_models is not None and spec.model not in self.allowed_models:
            p.append(Problem("model", f"this host allows only: {', '.join(self.allowed_models)}"))
        if self.allowed_modes is not None and spec.mode not in self.allowed_modes:
            p.append(Problem("mode", f"this host allows only: {', '.join(self.allowed_modes)}"))
        if (
            self.max_batch_size is not None
            and isinstance(spec.batch_size, int)
            and spec.batch_size > self.max_batch_size
        ):
            p.append(Problem("batch_size", f"this host allows at most {self.max_batch_size} (got {spec.batch_size})"))
        if self.max_epochs is not None and isinstance(spec.epochs, int) and spec.epochs > self.max_epochs:
            p.append(Problem("epochs", f"this host allows at most {self.max_epochs} (got {spec.epochs})"))
        steps = (
            spec.epochs * spec.steps_per_epoch
            if isinstance(spec.epochs, int) and isinstance(spec.steps_per_epoch, int)
            else 0
        )
        if self.max_steps is not None and steps > self.max_steps:
            p.append(
                Problem(
                    "steps_per_epoch",
                    f"this host allows at most {self.max_steps} steps per variant (epochs x steps per epoch = {steps})",
                )
            )
        return p


_LIMIT_PARSERS = {
    "allowed_models": lambda v: tuple(m.strip() for m in (v.split(",") if isinstance(v, str) else v) if m.strip()),
    "allowed_modes": lambda v: tuple(m.strip() for m in (v.split(",") if isinstance(v, str) else v) if m.strip()),
    "max_batch_size": int,
    "max_steps": int,
    "max_epochs": int,
    "max_queued_per_owner": int,
    "max_queue_length": int,
    "max_sweep_points": int,
    "job_time_limit_s": float,
}


def load_host_limits(environ: dict[str, str] | None = None) -> HostLimits:
    """Limits from COMPILE_LAB_CONFIG's [limits] table, overridden by COMPILE_LAB_<KEY> variables.

    A value that does not parse is an error naming the setting, not a silent default.
    """
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    config = env.get("COMPILE_LAB_CONFIG")
    if config:
        import tomllib

        with open(config, "rb") as fh:
            values.update(tomllib.load(fh).get("limits", {}))
    for key in _LIMIT_PARSERS:
        if f"COMPILE_LAB_{key.upper()}" in env:
            values[key] = env[f"COMPILE_LAB_{key.upper()}"]
    parsed: dict[str, Any] = {}
    for key, value in values.items():
        if key not in _LIMIT_PARSERS:
            raise ValueError(f"unknown limit {key!r} in configuration; known: {', '.join(_LIMIT_PARSERS)}")
        if value in ("", "none", None):
            parsed[key] = None
            continue
        try:
            parsed[key] = _LIMIT_PARSERS[key](value)
        except (TypeError, ValueError):
            raise ValueError(f"limit {key} must be a number (got {value!r})") from None
    return HostLimits(**parsed)
