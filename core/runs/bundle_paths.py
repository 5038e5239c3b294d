"""A bundle names no path of the server it was exported from: a visitor who downloads a run learns
nothing of where the host keeps its data, its checkout or its Python. No torch."""

from __future__ import annotations

import os
import re
from typing import Any

from core import PROJECT_ROOT
from core.engine.spec import data_home
from core.runs.store.records import store_files_dir


def without_server_paths(bundle: dict[str, Any], store_path: str) -> dict[str, Any]:
    """The bundle with no path of this server in it: a visitor who exports a run learns nothing of
    where the host keeps its data. The fields that hold a path keep its file's name (the profiler's
    trace, a model file) or nothing (a dataset folder); any other text names a file under the data
    folder or the checkout by its name alone."""
    roots = (store_files_dir(store_path), data_home(), PROJECT_ROOT)
    run = bundle["run"]
    if isinstance(run.get("params"), dict):
        run["params"] = params_without_paths(run["params"])
    profile = (run.get("summary") or {}).get("profile") if isinstance(run.get("summary"), dict) else None
    for part in (profile or {}).values() if isinstance(profile, dict) else ():
        if isinstance(part, dict) and isinstance(part.get("trace"), str):
            part["trace"] = os.path.basename(part["trace"])
    pattern = re.compile("|".join(re.escape(os.path.abspath(r)) + r"(?:/[^\s'\",;]*)?" for r in roots if r))
    return _each_text(bundle, lambda text: pattern.sub(lambda m: os.path.basename(m.group(0)), text))


def params_without_paths(params: dict[str, Any]) -> dict[str, Any]:
    """A race's settings with no path: no dataset folder (another machine's means nothing here), a
    model file by its file's name."""
    model_file = params.get("model_file")
    return {
        **params,
        "data_dir": None,
        "model_file": os.path.basename(model_file) if isinstance(model_file, str) else None,
    }


def _each_text(value: Any, change: Any) -> Any:
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {k: _each_text(v, change) for k, v in value.items()}
    if isinstance(value, list):
        return [_each_text(v, change) for v in value]
    return value
