"""What the Race page's form needs, as pure functions: defaults for the device, which options the
device can run (and why not), a rough duration, and the configuration as URL query parameters.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

from core.engine import words
from core.engine.models.sources import (
    KNOWN_HF_CONFIGS,
    MODELS,
    default_batch_size,
    describe_facts,
    library_problem,
    model_name_problem,
    region_description,
    source_of,
)
from core.engine.race_estimates import RaceEstimate, estimate_race
from core.engine.spec import OPTIONS, DeviceCaps, Option, RunSpec, in_link, on_form, validate
from core.runs.limits import HostLimits, model_allowed
from core.runs.model_catalog import Lookup
from core.runs.store import Run, Store
from core.view.compare import run_name
from core.view.host_tables import describe
from core.view.run_screen.sentences import schedule_words

# What the form offers for each select box (the model: the zoo), in the order the form shows them;
# the options table says which options are on the form, where, and how each choice is worded.
CHOICES: dict[str, tuple] = {
    "model": tuple(MODELS),
    **{o.name: o.offered for o in on_form() if o.offered is not None},
}
# The break-even demo for a CPU: small enough to finish in a few minutes on a small CPU with the
# race on one core, long enough to show the compile, the steady gain and where compile would pay
# for itself (often past the run on a CPU: the page projects it). Its sizing and the races behind
# it: docs/app.md#the-cpu-break-even-demo. With a target its first process is one epoch of each
# (core.engine.analysis). Eager and compiled take turns, so both lines grow together, as a race looks.
CPU_BREAK_EVEN_PRESET = {
    "model": "small_cnn",
    "batch_size": 128,
    "epochs": 3,
    "steps_per_epoch": 100,
    "schedule": "alternating",
}
CPU_BREAK_EVEN_LABEL = "CPU break-even demo (3 min)"  # about 3 minutes on a small CPU, the page open
CPU_BREAK_EVEN_HELP = (
    "Launches small_cnn, batch 128, 3 x 100 steps, eager and compiled taking turns epoch by epoch: a few "
    "minutes on a small CPU. It shows the compile in compiled's slow first epoch, compiled's steady steps, "
    "and where compile pays for itself: on a CPU with the race on one core that is often past the run, "
    "and the page projects the step where it would."
)


def default_spec(caps: DeviceCaps | None) -> RunSpec:
    """A sensible first race: small and quick on a CPU, the tutorial's setup on a modern GPU."""
    if caps is not None and caps.cuda:
        modern = caps.compute_capability is not None and caps.compute_capability >= (8, 0) and caps.cuda_bf16
        return RunSpec(
            model="resnet50",
            batch_size=128,
            precision="amp-bf16" if modern else "amp-fp16",
            epochs=3,
            steps_per_epoch=50,
            device="cuda",
        )
    return RunSpec(model="pointwise_mlp", batch_size=4096, epochs=3, steps_per_epoch=100, device="cpu")


def within_limits(spec: RunSpec, limits: HostLimits | None) -> RunSpec:
    """`spec` moved within the host's limits: the first race a visitor is offered is one this host
    runs (its first allowed zoo model where the default is not allowed, each size at most the
    host's), not a form that greets every first visit with an error."""
    if limits is None:
        return spec
    changes: dict[str, Any] = {}
    if not model_allowed(limits.allowed_models, spec.model):
        zoo = [m for m in limits.allowed_models or () if m in MODELS]
        if zoo:
            changes.update(model=zoo[0], batch_size=MODELS[zoo[0]].default_batch_size)
    spec = dataclasses.replace(spec, **changes)
    sizes = {"batch_size": limits.max_batch_size, "epochs": limits.max_epochs, "image_size": limits.max_input_size}
    changes = {k: high for k, high in sizes.items() if high is not None and (getattr(spec, k) or 0) > high}
    spec = dataclasses.replace(spec, **changes)
    if limits.max_steps is not None and spec.epochs * (spec.steps_per_epoch + spec.eval_steps) > limits.max_steps:
        per_epoch = max(1, limits.max_steps // spec.epochs - spec.eval_steps)
        spec = dataclasses.replace(
            spec, steps_per_epoch=per_epoch, eval_steps=max(0, limits.max_steps // spec.epochs - per_epoch)
        )
    return spec


def unavailable_options(
    spec: RunSpec, field: str, caps: DeviceCaps | None, limits: HostLimits | None = None
) -> dict[Any, str]:
    """Options of `field` this device cannot run with the rest of `spec` (or this host does not
    allow), each with the reason."""
    out: dict[Any, str] = {}
    for option in CHOICES.get(field, ()):
        candidate = dataclasses.replace(spec, **{field: option})
        problems = validate(candidate, caps) + (limits.problems(candidate) if limits is not None else [])
        problems = [p for p in problems if p.field == field]
        if problems:
            out[option] = problems[0].message
    return out


def describe_duration(low: float, high: float) -> str:
    if high <= 0:  # a timm, Hugging Face or file model: no measured step time to scale from
        return "unknown for this model"
    return f"roughly {words.duration(low)} to {words.duration(high)}"


def estimate_text(spec: RunSpec, estimate: RaceEstimate | None) -> str:
    """How long the race will take here, and what that rests on. The same race measured here is
    said as the measurement ('measured: 1.8 min as run 2'), never as an estimate beside
    it; a scaled one names the race it comes from; the zoo's figures say nothing was measured yet.
    Where past estimates of that kind were kept, how far they missed."""
    if estimate is None:
        return "how long is unknown for this model until it has run here once"
    base = estimate.based_on
    if base is not None and estimate.basis == "same race":
        name = run_name(base.run_id)
        same_steps = _steps_of(base.params) == _steps_of(spec.to_dict())
        if same_steps:
            return f"measured: {words.duration(base.wall_s)} as {name}"
        text = (
            f"about {words.duration(estimate.total_s)} ({words.duration(estimate.low_s)} to {words.duration(estimate.high_s)}), from {name}: "
            f"the same race with {(RunSpec.stored(base.params) or spec).recorded_steps:,} steps took {words.duration(base.wall_s)}"
        )
    elif base is not None:
        text = (
            f"about {words.duration(estimate.total_s)} ({words.duration(estimate.low_s)} to {words.duration(estimate.high_s)}), scaled "
            f"from {run_name(base.run_id)} ({base.params.get('model')}, batch "
            f"{int(base.params.get('batch_size') or 0):,}: {words.duration(base.wall_s)})"
        )
    elif estimate.corrected and estimate.factor is not None:
        races = words.count(estimate.factor_races, "race")
        text = (
            f"{describe_duration(estimate.low_s, estimate.high_s)} (the zoo's figures for a 2-core CPU times "
            f"{words.ratio(estimate.factor)}, what {races} of other models took here against them: "
            f"{spec.model} is not yet measured here)"
        )
    else:
        text = (
            f"{describe_duration(estimate.low_s, estimate.high_s)} (the zoo's figures for a 2-core CPU: "
            "not yet measured here)"
        )
    accuracy = past_accuracy(estimate)
    return f"{text}. {accuracy}" if accuracy else text


def past_accuracy(estimate: RaceEstimate) -> str | None:
    """How the estimates of this kind did here, newest first: 'The last race here took 3.2x its
    estimate, outside the range it was given'; 'The last 3 races here took 0.8x to 1.3x their
    estimates'. None where no race here kept one."""
    history = estimate.history
    if not history:
        return None
    outside = sum(1 for race in history if race.outside)
    if len(history) == 1:
        where = ", outside the range it was given" if outside else ""
        return f"The last race here took {words.ratio(history[0].ratio)} its estimate{where}"
    ratios = [race.ratio for race in history]
    low, high = min(ratios), max(ratios)
    took = words.ratio(low) if f"{low:.1f}" == f"{high:.1f}" else f"{words.ratio(low)} to {words.ratio(high)}"
    where = ""
    if outside:
        where = f", {outside} of them outside the range {'it was' if outside == 1 else 'they were'} given"
    return f"The last {len(history)} races here took {took} their estimates{where}"


def _steps_of(params: dict) -> tuple:
    return tuple(params.get(k) for k in ("epochs", "steps_per_epoch", "eval_steps"))


def race_promise(spec: RunSpec, caps: DeviceCaps | None, estimate: RaceEstimate | None = None) -> str:
    """The line above Launch: what a race gives you, and about how long it takes here (`estimate`:
    from this device's races, core.runs.device_history; without one, the zoo's rough figures)."""
    steps = spec.total_steps
    if estimate is None:
        estimate = estimate_race(spec, caps)
    return (
        f"You get the compile cost, the steady speedup and when compile pays off: "
        f"{schedule_words(spec.schedule, steps)}, {estimate_text(spec, estimate)}."
    )


def time_limit_note(estimate: RaceEstimate | None, limits: HostLimits | None) -> str | None:
    """What a queued race past this host's time limit meets, said beside its estimate (the form,
    `submit`): where even the estimate's low end is beyond the limit, the job will be stopped there.
    None within it, or where there is no estimate or no limit."""
    limit = limits.job_time_limit_s if limits is not None else None
    if estimate is None or limit is None or estimate.low_s <= limit:
        return None
    return (
        f"Past this host's time limit: this race would take at least {words.duration(estimate.low_s)} here "
        f"(about {words.duration(estimate.total_s)}), and a job is stopped after {words.duration(limit)}, "
        "ending failed with what it measured by then. Fewer steps or a smaller batch would finish within it."
    )


def unavailable_summary(blocked: dict[str, dict[Any, str]]) -> str | None:
    """Options this device cannot run, said once: those needing CUDA together, the rest with their
    reason ("Not offered here: tf32, amp-fp16, reduce-overhead and max-autotune need a CUDA GPU.")."""
    blocked, capped = _counts_over_a_limit(blocked)
    cuda = [str(o) for why in blocked.values() for o, reason in why.items() if "CUDA" in reason]
    other = [_with_option(o, r.split(";")[0]) for why in blocked.values() for o, r in why.items() if "CUDA" not in r]
    other += capped
    parts = []
    if cuda:
        names = ", ".join(cuda[:-1]) + (f" and {cuda[-1]}" if len(cuda) > 1 else cuda[-1])
        parts.append(f"{names} {'need' if len(cuda) > 1 else 'needs'} a CUDA GPU")
    parts += other
    return f"Not offered here: {'; '.join(parts)}." if parts else None


_QUERY_FIELDS = in_link()
# The fields the form shows that travel in its link, in the order a person decides them.
FORM_FIELDS = tuple(o.name for o in on_form() if o.link)


def spec_to_query(spec: RunSpec) -> dict[str, str]:
    """The configuration as URL query parameters (never the visitor's identity)."""
    out = {}
    for name in _QUERY_FIELDS:
        value = getattr(spec, name)
        if value is None or (name == "model" and source_of(value) == "file"):  # an upload cannot travel in a link
            continue
        out[name] = str(value).lower() if isinstance(value, bool) else str(value)
    return out


def link_base(query: dict, linked: Run | None, default: RunSpec) -> RunSpec:
    """The configuration a first render's form starts from, before the link's own fields: the race a
    link names (?run=N) with its own configuration, so that Launch races that configuration again and
    the link's fields say what the page shows; else `default` (the device's, within the host's limits)."""
    if "run" in query and linked is not None and linked.kind == "race":
        spec = RunSpec.stored(linked.params)
        if spec is not None:
            return spec
    return default


def link_configures(query: dict) -> bool:
    """Whether a link carries a race's configuration but no run to show: someone meant to launch
    it, so the Race page opens with its form unfolded even where the visitor has runs."""
    return "run" not in query and any(name in query for name in _QUERY_FIELDS)


# The whole numbers a link may set, and the range the form accepts for each.
NUMBER_RANGES: dict[str, tuple[int, int]] = {
    name: (int(OPTIONS[name].min), int(OPTIONS[name].max)) for name in _QUERY_FIELDS if OPTIONS[name].type is int
}


@dataclass(frozen=True)
class LinkNote:
    """What the page did with one value of a link it could not take as it was: `field` was set to
    `value` instead. The page keeps showing it while the field still holds that value."""

    field: str
    value: Any
    text: str


def number_range(name: str, limits: HostLimits | None = None) -> tuple[int, int, bool]:
    """(lowest, highest, whether the highest is the host's limit) for a whole-number field."""
    low, high = NUMBER_RANGES[name]
    host = {"batch_size": "max_batch_size", "epochs": "max_epochs", "image_size": "max_input_size"}.get(name)
    host_max = getattr(limits, host) if limits is not None and host else None
    if host_max is not None and host_max < high:
        return low, max(low, host_max), True
    return low, high, False


def number_help(option: Any, low: int, high: int, by_host: bool) -> str:
    """A whole-number field's help: its own help, and the range the page accepts ("1 to 64 (this
    host's limit)"); a value outside it is said under the form and keeps Launch disabled."""
    limit = " (this host's limit)" if by_host else ""
    return " ".join(p for p in (option.form_help, f"From {low} to {high}{limit}.") if p)


def spec_from_query(
    query: dict[str, str], base: RunSpec, limits: HostLimits | None = None
) -> tuple[RunSpec, list[LinkNote]]:
    """Apply query parameters over `base`. A value that does not parse is skipped, and a number out
    of range (the form's, or this host's limit) is moved to the nearest one allowed: each with a note."""
    values: dict[str, Any] = {}
    notes: list[LinkNote] = []
    for name in _QUERY_FIELDS:
        if name not in query:
            continue
        raw, option = str(query[name]), OPTIONS[name]
        try:
            if option.type is bool:
                words = {"true": True, "false": False, **({"none": None} if option.optional else {})}
                values[name] = words[raw.lower()]
            elif name in NUMBER_RANGES:
                number = int(raw)
                low, high, by_host = number_range(name, limits)
                values[name] = min(max(number, low), high)
                if values[name] != number:
                    limit = "this host's limit" if by_host else "the largest allowed"
                    side = f"above {limit}" if number > high else "below the smallest allowed"
                    text = f"{name}={raw} from the link is {side} ({values[name]}): using {values[name]}"
                    notes.append(LinkNote(name, values[name], text))
            elif option.type is float:
                values[name] = float(raw)
            elif name == "model" and (model_name_problem(raw) or source_of(raw) == "file"):
                raise ValueError(raw)  # a zoo, timm or Hugging Face name; a file cannot come from a link
            elif name != "model" and option.offered is not None and raw not in option.offered:
                raise ValueError(raw)
            else:
                values[name] = raw
        except (KeyError, ValueError):
            notes.append(LinkNote(name, getattr(base, name), f"ignored {name}={raw!r} from the link"))
    if "model" in values and "batch_size" not in query:  # the model's own batch, as the form's picker gives it
        low, high, _ = number_range("batch_size", limits)
        values["batch_size"] = min(max(default_batch_size(values["model"]), low), high)
    return dataclasses.replace(base, **values), notes


def fit_to_device(
    spec: RunSpec, caps: DeviceCaps | None, limits: HostLimits | None = None
) -> tuple[dict[str, Any], list[LinkNote]]:
    """The form's choices this device cannot run (or this host does not allow), each moved to the
    first one it can, with a note: `?mode=reduce-overhead` on a CPU is said, not silently dropped."""
    changed: dict[str, Any] = {}
    notes: list[LinkNote] = []
    for field in (f for f in CHOICES if f != "model"):  # the model picker says its own problems
        blocked = unavailable_options(spec, field, caps, limits)
        value = getattr(spec, field)
        allowed = [o for o in CHOICES[field] if o not in blocked]
        if value not in blocked or not allowed:
            continue
        spec = dataclasses.replace(spec, **{field: allowed[0]})
        changed[field] = allowed[0]
        label = OPTIONS[field].label
        text = f"{label} {value} is not offered here, so the form uses {allowed[0]}: {blocked[value].split(';')[0]}"
        notes.append(LinkNote(field, allowed[0], text))
    return changed, notes


def missing_run_text(raw: str, run_id: int | None) -> str:
    """What the page says for a link's `run` it cannot show: not a run number, or no such run here."""
    if run_id is None:
        return f"ignored run={raw!r} from the link: not a run number"
    return f"There is no run {run_id} here (deleted, or recorded in another store): nothing to show for run={raw}."


def notes_still_true(notes: list[LinkNote], state: Any) -> list[LinkNote]:
    """The link notes whose field still holds the value the note reports (form_<field> in the
    page's session state): a note stays across reruns until the visitor changes that field."""
    return [n for n in notes if f"form_{n.field}" in state and state[f"form_{n.field}"] == n.value]


def field_values(state: Any, prefix: str) -> dict[str, Any]:
    """The RunSpec fields a form holds: its `<prefix><field>` entries of a mapping (the page's
    session state), a whole float an int field's widget returned as the int it is."""
    values = {}
    for f in dataclasses.fields(RunSpec):
        key = f"{prefix}{f.name}"
        if key in state:
            values[f.name] = state[key]
    for name in (o.name for o in OPTIONS.values() if o.type is int):
        if isinstance(values.get(name), float) and values[name].is_integer():
            values[name] = int(values[name])
    return values


def form_spec(state: Any) -> RunSpec:
    """The spec the form currently describes: `form_<field>` entries of a mapping (the page's
    session state) over the RunSpec defaults."""
    return RunSpec(**field_values(state, "form_"))


def _counts_over_a_limit(blocked: dict[str, dict[Any, str]]) -> tuple[dict[str, dict[Any, str]], list[str]]:
    """Counts a host caps (replicates over max_replicates) said once per field, not once per count:
    (what else is blocked, ["replicate processes over 3 (this host's limit)"])."""
    rest, capped = {}, []
    for field, why in blocked.items():
        over = [o for o, r in why.items() if isinstance(o, int) and r.startswith("this host allows at most")]
        if over:
            capped.append(f"{OPTIONS[field].label.lower()} over {min(over) - 1} (this host's limit)")
        rest[field] = {o: r for o, r in why.items() if o not in over}
    return rest, capped


def _with_option(option: Any, reason: str) -> str:
    reason = reason.replace(f"'{option}'", str(option))
    return reason if str(option) in reason else f"{option}: {reason}"


def shared_result_text(run: Run, now: float | None = None) -> str:
    """'Measured 12 min ago on this GPU (NVIDIA A100, torch 2.4.1)': a recent run offered instead
    of a new measurement (core.runs.device_history)."""
    env = run.environment or {}
    kind = {"cuda": "GPU", "cpu": "CPU", "mps": "Mac GPU"}.get(str(env.get("device_type")), "device")
    finished = run.finished_at or run.created_at
    age = words.ago((time.time() if now is None else now) - finished)
    return (
        f"Measured {age} on this {kind} ({env.get('device_name', '?')}, torch {env.get('torch', '?')}) as run {run.id}"
    )


def scope_label(scope: str, model: str) -> str:
    """'each transformer block' or 'whole model': what a compile scope compiles for this model, short
    enough for the form's select box (the option's help says the rest)."""
    if scope == "regional":
        return region_description(model) or scope
    if scope == "nested":
        block = region_description(model)
        return f"whole model, {block} traced once" if block else scope
    return "whole model" if scope == "whole" else scope


# ----------------------------------------------------------------------
# How the Race form is laid out for someone who has never seen it: the story in one line, the demo
# as the first thing to press (on a CPU), the few choices that decide a race (the first row of the
# options table's form places) with Launch, all above the fold at 1280x720; every other option under
# "More settings". Every control carries help from its row in core/engine/spec.py.
#
# Pure: the page (app_pages/race.py) draws what this says.

# The one line a first-time visitor reads before anything else.
STORY = "torch.compile compiles up front so every step runs faster. A race shows when that has paid off."
DEMO_LEAD = "New here? Watch compile pay for itself on this CPU, or race your own model below:"
MORE_SETTINGS = "More settings"
FIRST_ROW = 1  # the options table's form row that is on the first screen; the rest are More settings
# Column widths per row: the model picker needs room for its source and its facts line, the compile
# mode for its longest choice ("max-autotune-no-cudagraphs" was cut at 1280x720), batch size and
# precision little (a number, "amp-bf16"). More settings' rows have three places each, so a choice's
# words fit its box at 1280x720.
ROW_WIDTHS = {FIRST_ROW: [3, 1.7, 3.2, 1.7]}
MORE_SETTINGS_COLUMNS = 3


def first_screen() -> list[Option]:
    """The options on the first screen, left to right: the few that decide a race."""
    return [o for o in on_form() if o.form[0] == FIRST_ROW]


def more_settings() -> list[Option]:
    """Every other form option, row by row, under More settings."""
    return [o for o in on_form() if o.form[0] != FIRST_ROW]


def rows(options: list[Option]) -> dict[int, list[Option]]:
    """The options grouped by their form row, in column order."""
    out: dict[int, list[Option]] = {}
    for option in options:
        out.setdefault(option.form[0], []).append(option)
    return out


def row_widths(row: int, options: list[Option]) -> list[float]:
    """The columns of one form row: as wide as ROW_WIDTHS says, else one per place, evenly."""
    return ROW_WIDTHS.get(row) or [1] * max(MORE_SETTINGS_COLUMNS, max(o.form[1] for o in options) + 1)


def split_unavailable(blocked: dict[str, dict]) -> tuple[dict[str, dict], dict[str, dict]]:
    """What this device cannot run, split into the first screen's options and More settings', so
    each reason is said beside the controls it is about."""
    first = {o.name for o in first_screen()}
    return ({k: v for k, v in blocked.items() if k in first}, {k: v for k, v in blocked.items() if k not in first})


def form_help(option: Option) -> str:
    """A control's help: its row's words for the form, else its command-line help made a sentence."""
    text = option.form_help or option.text(option.help) or option.label
    return text[0].upper() + text[1:] if text else text


# ----------------------------------------------------------------------
# The Race form's model choice, as pure functions: which sources and names this host offers, how
# a typed Hugging Face name becomes a model, and what to say about a model before launch.
#
# Sources: the zoo, timm (type-ahead over its list of names, read by a lookup job), Hugging Face
# (a text box: a hub id or model type, settings after a colon), and the visitor's own file (only
# where the host allows it). The facts shown (parameters, input, task) come from
# core.runs.model_catalog: a worker builds the model; this process never imports torch.

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
