"""The Race form's model choice, as pure functions: which sources and names this host offers, how
a typed Hugging Face name becomes a model, and what to say about a model before launch.

Sources: the zoo, timm (type-ahead over its list of names, read by a lookup job), Hugging Face
(a text box: a hub id or model type, settings after a colon), and the visitor's own file (only
where the host allows it). The facts shown (parameters, input, task) come from
core.runs.model_catalog: a worker builds the model; this process never imports torch.
"""

from __future__ import annotations

from core.engine.models.sources import (
    KNOWN_HF_CONFIGS,
    describe_facts,
    library_problem,
    model_name_problem,
)
from core.engine.models.zoo import MODELS
from core.runs.limits import HostLimits, model_allowed
from core.runs.model_catalog import Lookup
from core.runs.store import Store
from core.view.job_status import describe

SOURCE_LABELS = {"zoo": "Zoo", "timm": "timm", "hf": "Hugging Face", "file": "Your file"}
DEFAULT_MODEL = {"timm": "timm:resnet18", "hf": "hf:gpt2", "file": "file:model.py"}
HF_EXAMPLES = ("gpt2", "bert-base-uncased", "t5-small", "facebook/opt-125m", "llama", "gpt2:n_layer=2")


def zoo_options(limits: HostLimits | None) -> list[str]:
    return [m for m in MODELS if limits is None or model_allowed(limits.allowed_models, m)]


def source_allowed(source: str, limits: HostLimits | None) -> bool:
    """Could any model of `source` pass the host's limits? (Files: only with allow_custom_models.)"""
    if source == "file":
        return limits is not None and bool(limits.allow_custom_models)
    if limits is None or limits.allowed_models is None:
        return True
    if source == "zoo":
        return bool(zoo_options(limits))
    prefix = f"{source}:"
    # "timm:convnext_*" names the source; "*" or "t*" may match its names: offer it, names are checked one by one
    return any(p.startswith(prefix) or any(c in p.split(":")[0] for c in "*?[") for p in limits.allowed_models)


def sources_offered(limits: HostLimits | None) -> list[str]:
    """The sources the form offers, in order; the zoo always comes first when allowed."""
    return [s for s in SOURCE_LABELS if source_allowed(s, limits)]


def source_note(source: str) -> str | None:
    """Why a source cannot be used here and how to fix it (its library is missing), or None."""
    problem = library_problem(source)
    return f"{SOURCE_LABELS[source]} {problem.split(': ', 1)[1]}; then restart the app." if problem else None


def zoo_label(name: str) -> str:
    return f"{name} ({MODELS[name].params / 1e6:.2f} M params)"


def library_options(names: list[str], limits: HostLimits | None) -> list[str]:
    """A library's names (timm:...) that this host allows."""
    return [n for n in names if limits is None or model_allowed(limits.allowed_models, n)]


def hf_model_from_text(text: str) -> tuple[str | None, str | None]:
    """A typed Hugging Face name (with or without 'hf:') as a model, or the reason it is not one."""
    text = (text or "").strip()
    if not text:
        return None, f"type a Hugging Face model: a hub id or model type, e.g. {', '.join(HF_EXAMPLES[:3])}"
    model = text if text.startswith("hf:") else f"hf:{text}"
    problem = model_name_problem(model)
    return (None, problem) if problem else (model, None)


def hf_help() -> str:
    known = ", ".join(k for k in KNOWN_HF_CONFIGS if "/" not in k)
    return (
        "Built from its configuration with random weights; nothing is downloaded. Known here without the "
        f"network: {known}; or any model type with its library defaults (llama, mistral, bert, t5, ...). "
        "Change sizes after a colon: gpt2:n_layer=2,n_embd=256."
    )


def default_model(source: str, limits: HostLimits | None, names: list[str] | None = None) -> str:
    """The model the form switches to when the visitor picks a source."""
    if source == "zoo":
        options = zoo_options(limits)
        return "pointwise_mlp" if "pointwise_mlp" in options else (options[0] if options else "pointwise_mlp")
    allowed = library_options(names or [], limits)
    preferred = DEFAULT_MODEL[source]
    if allowed and preferred not in allowed:
        return allowed[0]
    return preferred


def facts_line(lookup: Lookup, store: Store | None = None) -> tuple[str, str]:
    """(kind, text) to show under the model: kind is 'ok', 'wait', 'error' or 'info'. With the
    `store`, a pending lookup says where its job is ('queued (position 2)')."""
    if lookup.state == "ready":
        return "ok", describe_facts(lookup.facts) or "built"
    if lookup.state == "pending":
        where = f": {describe(store, lookup.run)}" if store is not None and lookup.run is not None else ""
        return (
            "wait",
            f"Finding its parameters and input ({lookup.message}{where}); a worker builds it on the meta device.",
        )
    if lookup.state == "unavailable":
        return "info", f"{lookup.message}."
    if lookup.state == "deferred":  # launch need not wait for it: the worker checks the model anyway
        return "info", f"Not looked up yet: {lookup.message}."
    return "error", lookup.message
