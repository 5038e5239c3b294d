"""What a lookup job asks, and which questions the queue accepts: the job's parameters for one
model or for a library's list of names, and its check. No torch.

Apart from core.runs.model_catalog (which asks and reads the answers through the queue) because the
job-kinds table needs the check, and the queue needs the table: the catalog sits above both.
"""

from __future__ import annotations

import os
from typing import Any

from core.engine.models.sources import library_version, model_name_problem, source_of
from core.engine.spec import Problem
from core.runs.limits import HostLimits, model_allowed

LISTS = ("timm",)


def model_params(model: str, model_file: str | None = None) -> dict[str, Any]:
    """A lookup job's parameters for one model: the question and the library version answering it."""
    return {"model": model, "model_file": model_file, "library": library_version(source_of(model))}


def list_params(source: str = "timm") -> dict[str, Any]:
    return {"list": source, "library": library_version(source)}


def lookup_problems(params: dict[str, Any], limits: HostLimits) -> list[Problem]:
    """A lookup asks about a model this host allows, or for a list it knows; nothing else."""
    if "list" in params:
        if params["list"] not in LISTS:
            return [Problem("list", f"{params['list']!r} is not a list of models; known: {', '.join(LISTS)}")]
        return []
    model = params.get("model")
    problem = model_name_problem(model)
    if problem:
        return [Problem("model", problem)]
    if source_of(model) == "zoo":
        return [Problem("model", "zoo models need no lookup (core.engine.models.zoo describes them)")]
    if source_of(model) == "file":
        if limits.model_files_problem():
            return [Problem("model", limits.model_files_problem() or "")]
        path = params.get("model_file")
        if not isinstance(path, str) or not os.path.isfile(path):
            return [Problem("model_file", f"no such file: {path}")]
    elif not model_allowed(limits.allowed_models, model):
        return [Problem("model", f"this host allows only: {', '.join(limits.allowed_models or ())}")]
    return []
