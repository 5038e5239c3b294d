"""Host limits: what one deployment lets its visitors queue (a hosted demo on a shared box).

A policy of the queue, not of a race: the engine validates whether a spec *can* run; these say
whether this host *allows* it. Read from the environment or a TOML file, checked at enqueue.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from typing import Any

from core.engine.model_sources import source_of
from core.engine.spec import Problem, RunSpec

CUSTOM_MODELS_OFF = (
    "this host does not run uploaded model files: a model file is Python code that runs in the worker, "
    "so the host must turn on allow_custom_models"
)


def model_allowed(patterns: tuple[str, ...] | None, model: str) -> bool:
    """Is `model` allowed by `allowed_models`? Entries are names or shell-style patterns: "resnet50",
    "timm:*", "timm:convnext_*", "hf:gpt2*" ("*" alone allows every model)."""
    if patterns is None:
        return True
    return any(model == p or fnmatch.fnmatchcase(model, p) for p in patterns)


@dataclass(frozen=True)
class HostLimits:
    """What one deployment allows, for a hosted demo on a shared box. None = no limit.

    Read from environment variables (COMPILE_LAB_MAX_BATCH_SIZE, ...) or a TOML file named by
    COMPILE_LAB_CONFIG with the same keys in lower case under [limits]; the environment wins.
    """

    allowed_models: tuple[str, ...] | None = None  # names or patterns: "timm:*", "hf:gpt2*"
    allow_custom_models: bool = False  # a model file runs its own code in the worker: off unless the host says so
    allowed_modes: tuple[str, ...] | None = None  # max-autotune can hold a GPU for many minutes
    max_batch_size: int | None = None
    max_steps: int | None = None  # epochs x steps_per_epoch, per variant
    max_epochs: int | None = None
    max_queued_per_owner: int | None = None
    max_queue_length: int | None = None
    job_time_limit_s: float | None = 3600.0

    def problems(self, spec: RunSpec) -> list[Problem]:
        """Every limit `spec` exceeds, each saying the limit."""
        p: list[Problem] = []
        if isinstance(spec.model, str) and source_of(spec.model) == "file" and not self.allow_custom_models:
            p.append(Problem("model", CUSTOM_MODELS_OFF))
        elif not model_allowed(self.allowed_models, spec.model):
            p.append(Problem("model", f"this host allows only: {', '.join(self.allowed_models or ())}"))
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
    "allow_custom_models": lambda v: _boolean(v),
    "max_batch_size": int,
    "max_steps": int,
    "max_epochs": int,
    "max_queued_per_owner": int,
    "max_queue_length": int,
    "job_time_limit_s": float,
}


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise ValueError(value)


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
            kind = "true or false" if key == "allow_custom_models" else "a number"
            raise ValueError(f"limit {key} must be {kind} (got {value!r})") from None
    return HostLimits(**parsed)
