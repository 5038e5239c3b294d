"""What models this host can race, known in the app's process without importing torch.

The app must show a timm or Hugging Face model's parameter count and input size before launch,
and offer timm's list of names to search, but it never imports torch, timm or transformers. So a
worker answers: a short `lookup` job (builds the model on the meta device, or lists timm's names)
whose answer is stored like any run and reused by every later visitor. The cache key is the
question and the installed library's version (read from package metadata, torch-free): a new
timm or transformers asks again. Lookups have a lane of their own (core.runs.fleet), so a question
about a model never waits behind a race; what a lookup asks, and its check, is core.runs.job_kinds.
Uploaded model files are kept here too, by content.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass, field
from typing import Any

from core.engine.models.sources import (
    default_file_model_name,
    library_problem,
    model_file_source_problem,
    source_of,
)
from core.engine.spec import SpecError, data_home
from core.runs.fleet import HOST
from core.runs.job_kinds import list_params, model_params
from core.runs.limits import HostLimits
from core.runs.queue import JobError, enqueue
from core.runs.store import Run, Store

LOOKUP_OWNER = "system"
LOOKUP_RETRY_S = 60.0  # a lookup whose worker died or timed out is asked again after this
MAX_UPLOAD_BYTES = 1_000_000


@dataclass(frozen=True)
class Lookup:
    """The answer to a question about models, as far as it is known now."""

    # "ready" | "pending" | "failed" | "unavailable" (its library is not installed) | "deferred"
    # (the asker already has job_kinds.MAX_QUEUED_LOOKUPS lookups waiting: asked again on a later visit)
    state: str
    facts: dict[str, Any] = field(default_factory=dict)  # a model's parameters, input, task
    names: list[str] = field(default_factory=list)  # a list's names
    message: str = ""  # why it failed or is unavailable; what it waits for
    run: Run | None = None  # pending: the lookup job it waits for (core.view.host_tables.describe says where it is)


def _find(store: Store, params: dict[str, Any]) -> Run | None:
    """The newest lookup of exactly this question on this host, unless it failed for a reason
    that says nothing about the model (its worker died or ran out of time) a while ago."""
    for run in store.list_runs(kind="lookup", limit=500):
        if run.params != params or run.host not in (None, HOST) or run.status == "cancelled":
            continue
        stale = run.status == "failed" and (run.finished_at or 0) < time.time() - LOOKUP_RETRY_S
        if stale and not (run.summary or {}).get("model_error"):
            return None
        return run
    return None


def _ask(
    store: Store, params: dict[str, Any], limits: HostLimits | None, asker: str, address: str | None
) -> Run | Lookup:
    """The stored answer to `params`, or a lookup queued for it in `asker`'s name (counted against
    their MAX_QUEUED_LOOKUPS, by `address` too where the host counts visitors by address). The
    answer is shared: whoever asked, every later visitor reads it."""
    run = _find(store, params)
    if run is not None:
        return run
    try:
        run_id = enqueue(store, params, asker, kind="lookup", limits=limits, address=address)
    except SpecError as exc:
        return Lookup("failed", message="; ".join(p.message for p in exc.problems))
    except JobError as exc:
        return Lookup("deferred", message=str(exc))
    except ValueError as exc:
        return Lookup("failed", message=str(exc))
    return store.get_run(run_id) or Lookup("pending", message="queued")


def _answer(run: Run | Lookup, what: str, asker: str) -> Lookup | Run:
    if isinstance(run, Lookup):
        return run
    if run.status == "failed" and run.owner != asker and (run.params or {}).get("model_file"):
        # A model file's code wrote this error (whatever it could read): it is its asker's alone. A
        # library's own error (no such timm model) is shared like its answers.
        return Lookup("failed", message="the lookup failed (its error is shown only to whoever asked it)")
    if run.status == "failed":
        return Lookup("failed", message=run.error or "the lookup failed")
    if run.status != "done":
        return Lookup("pending", message=what, run=run)
    return run


def lookup_model(
    store: Store,
    model: str,
    model_file: str | None = None,
    limits: HostLimits | None = None,
    asker: str = LOOKUP_OWNER,
    address: str | None = None,
) -> Lookup:
    """A timm, Hugging Face or file model's facts (parameters, input, task), asking a worker once.
    `asker` (and `address`): the visitor whose question it is, for the cap on waiting lookups."""
    missing = library_problem(source_of(model))
    if missing:
        return Lookup("unavailable", message=missing)
    question = _ask(store, model_params(model, model_file), limits, asker, address)
    answer = _answer(question, f"looking up {model}", asker)
    if isinstance(answer, Lookup):
        return answer
    facts = (answer.summary or {}).get("facts")
    return Lookup("ready", facts=facts) if isinstance(facts, dict) else Lookup("failed", message="no facts recorded")


def model_names(
    store: Store,
    source: str = "timm",
    limits: HostLimits | None = None,
    asker: str = LOOKUP_OWNER,
    address: str | None = None,
) -> Lookup:
    """Every model name of a library (timm), asking a worker once per installed version."""
    missing = library_problem(source)
    if missing:
        return Lookup("unavailable", message=missing)
    question = _ask(store, list_params(source), limits, asker, address)
    answer = _answer(question, f"reading {source}'s model list", asker)
    if isinstance(answer, Lookup):
        return answer
    names = (answer.summary or {}).get("names")
    if not isinstance(names, list):
        return Lookup("failed", message="no names recorded")
    return Lookup("ready", names=[f"{source}:{n}" for n in names if isinstance(n, str)])


def save_model_file(data: bytes, filename: str) -> tuple[str, str]:
    """Keep an uploaded model file under the data directory, named by its content (the same file
    uploaded twice is one file, and a run's file never changes under it). Returns (model, path).
    Raises ValueError with a sentence when the file is too large or not a model file."""
    if len(data) > MAX_UPLOAD_BYTES:
        raise ValueError(f"the file is larger than {MAX_UPLOAD_BYTES // 1000} kB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("the file is not UTF-8 text") from None
    problem = model_file_source_problem(text)
    if problem:
        raise ValueError(problem)
    model = default_file_model_name(filename)
    folder = os.path.join(data_home(), "model-files")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{hashlib.sha256(data).hexdigest()[:16]}-{model.removeprefix('file:')}")
    if not os.path.exists(path):
        with open(path + ".tmp", "wb") as fh:
            fh.write(data)
        os.replace(path + ".tmp", path)
    return model, path
