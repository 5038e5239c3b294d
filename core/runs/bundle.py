"""Run bundles: one JSON file with a run's spec, environment, events and summary.

Export lets a result travel (a GPU box's race shown on a laptop, a talk's recorded run); import
makes it an ordinary, read-only run marked `imported`. Import trusts nothing: every field is
checked for type and range before anything is written, and the whole bundle lands in one
transaction or not at all.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
import sqlite3
import time
from typing import Any, BinaryIO

from core import PROJECT_ROOT
from core.engine import analysis, events
from core.engine.analysis import race_alpha, stop_reading
from core.engine.compile_stats import compile_skipped_reason
from core.engine.events import KINDS, ROW_KINDS, VARIANTS, EpochEvent, ReplicateEvent, StepEvent, from_row
from core.engine.intervals import MAX_REPLICATES, RunToRun, load_warnings, replicates_asked
from core.engine.spec import MAX_EPOCHS, MAX_STEPS_PER_EPOCH, RunSpec, SpecError, data_home, validate
from core.engine.summary import Summary
from core.runs.store import FINAL_STATES, DamagedEvents, Store
from core.runs.store.records import store_files_dir, utf8_json, utf8_text

# ----------------------------------------------------------------------
# An imported event's note, checked for what its kind keeps there (core.runs.bundle checks the rest
# of the event first): text of bounded length, and where the kind packs a field into it (a busy
# stretch's last step, a replicate process's result), a row its kind's codec reads back
# (core.engine.events), kept as this app writes it. Apart from bundle.py so that each stays one
# screenful of checks. No torch.

MAX_NOTE = 2000


def event_note(row: dict[str, Any], where: str, error: type[Exception]) -> str | None:
    """The note of an imported row (its other fields checked already) as the store keeps it; a
    note that is not what its kind records raises `error` naming the field."""
    note = _note(row.get("note"), where, error)
    kind = events.ROW_KINDS[row["kind"]]
    if not kind.note_is:  # words (a compile's), or nothing the codec reads
        return note
    event = events.from_row({**row, "note": note})
    if event is None:
        raise error(f"{where} {kind.note_is}")
    return event.to_row(row["recorded_at"])["note"]  # as this app writes it, nothing else kept


def _note(value: Any, where: str, error: type[Exception]) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_NOTE:
        raise error(f"{where} must be text of at most {MAX_NOTE} characters")
    return utf8_text(value)


# ----------------------------------------------------------------------
# A bundle's per-step profile (core.engine.profiling), checked field by field and kept, so an imported
# run or a replay can say why compiled is faster or slower (core.engine.cause) as its own machine did.
# Its numbers are the bundle's: the page words them again (core.view.run_screen.why_per_step), and the
# trace file it names, a path on another machine, is dropped. No torch.

MAX_NAME = 500  # a kernel's name (Inductor's fused kernels' run to a few hundred characters)
MAX_TOP = 20
PER_STEP = ("graph_launches_per_step", "operators_per_step", "kernels_per_step")
SECONDS = ("host_s_per_step", "device_s_per_step")


def profile_from_bundle(value: Any, error: type[Exception]) -> dict[str, Any] | None:
    """The bundle's profile of both variants with its reading dropped (worded again here), or None
    where it has none; a field that is not what the profile records raises `error` naming it."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise error("run.summary.profile must be an object")
    out: dict[str, Any] = {}
    for variant in ("eager", "compiled"):
        part = value.get(variant)
        out[variant] = None if part is None else _part(part, f"run.summary.profile.{variant}", error)
    return out if out["eager"] or out["compiled"] else None


def _part(part: Any, where: str, error: type[Exception]) -> dict[str, Any]:
    if not isinstance(part, dict):
        raise error(f"{where} must be an object")
    out: dict[str, Any] = {"steps": _number(part.get("steps"), f"{where}.steps", 1, 1000, error)}
    for key in PER_STEP:
        out[key] = _number(part.get(key, 0.0), f"{where}.{key}", 0, 1e7, error)
    for key in SECONDS:
        out[key] = _number(part.get(key), f"{where}.{key}", 0, 1e5, error)
    counting = part.get("kernel_counting")
    if counting is not None and (not isinstance(counting, str) or len(counting) > MAX_NAME):
        raise error(f"{where}.kernel_counting must be text of at most {MAX_NAME} characters")
    out["kernel_counting"] = counting
    top = part.get("top_kernels") or []
    if not isinstance(top, list) or len(top) > MAX_TOP:
        raise error(f"{where}.top_kernels must be a list of at most {MAX_TOP}")
    out["top_kernels"] = [_kernel(k, f"{where}.top_kernels[{i}]", error) for i, k in enumerate(top)]
    return out


def _kernel(kernel: Any, where: str, error: type[Exception]) -> dict[str, Any]:
    if not isinstance(kernel, dict) or not isinstance(kernel.get("name"), str) or len(kernel["name"]) > MAX_NAME:
        raise error(f"{where} must be an object with a name of at most {MAX_NAME} characters")
    return {
        "name": kernel["name"],
        "calls_per_step": _number(kernel.get("calls_per_step"), f"{where}.calls_per_step", 0, 1e7, error),
        "s_per_step": _number(kernel.get("s_per_step"), f"{where}.s_per_step", 0, 1e5, error),
    }


def _number(value: Any, where: str, low: float, high: float, error: type[Exception]) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise error(f"{where} must be a number from {low:g} to {high:g} (got {str(value)[:40]!r})")
    return float(value)


FORMAT = "compile-lab/run-bundle"
VERSION = 1
MAX_BUNDLE_BYTES = 64 * 1024 * 1024
MAX_EVENTS = 2_000_000
# Compile notes a race can record (first compiles, recompiles, graph breaks' graphs): torch stops
# recompiling a frame after cache_size_limit (8) attempts, so a real race records far fewer.
MAX_COMPILE_EVENTS = 1000
MAX_STRING = 20_000
MAX_DEPTH = 8
MAX_NUMBER = 1e15
PHASES = ("train", "eval")
EVENT_KINDS = KINDS  # what a race can record: each kind's row is declared once there
# What a bundle may cost to parse, counted on its bytes before json.loads: each JSON value becomes a
# Python object, and an empty list (3 bytes of `[],`) takes 64 bytes, so 61 MB of them took the app
# from 179 MB to 1.8 GB and held every visitor for 6 s. A bundle this app exports has at most one
# value per 10 bytes (an event: 9 to 12 values in 95 to 220 bytes) and one object per event. The
# count takes every comma and bracket, those inside text too: an upper bound, never an undercount.
MAX_VALUES = 8_000_000
MAX_CONTAINERS = 1_000_000
# Values one environment or details object may hold (a race's have about 50 and 170); what is read
# of a bundle's summary holds a load sample (6 values) per variant and epoch, and a few more.
MAX_FIELD_VALUES = 10_000
MAX_CLAIMED_VALUES = 12 * MAX_EPOCHS + MAX_FIELD_VALUES
ENVIRONMENT_TEXT = ("device_type", "device_name", "torch", "cuda", "triton", "cpu_name", "python", "platform")


class BundleError(ValueError):
    """The bundle cannot be imported; the message says which field and why."""


def export_bundle(store: Store, run_id: int) -> dict[str, Any]:
    """The bundle of one stored run (its owner is not exported, nor any path of this server)."""
    run = store.get_run(run_id)
    if run is None:
        raise BundleError(f"there is no run {run_id}")
    try:
        events = store.events_after(run_id)
    except DamagedEvents as exc:  # a bundle of part of a race would read as the whole of it
        raise BundleError(f"cannot export it whole: {exc}") from None
    plain = _json_safe(
        {
            "format": FORMAT,
            "version": VERSION,
            "exported_at": time.time(),
            "run": {
                "kind": run.kind,
                "params": run.params,
                "status": run.status,
                "created_at": run.created_at,
                "started_at": run.started_at,
                "finished_at": run.finished_at,
                "environment": run.environment,
                "summary": run.summary,
                "details": run.details,
                "error": run.error,
            },
            "events": [{k: e[k] for k in e if k not in ("id", "run_id")} for e in events],
        }
    )
    return without_server_paths(plain, store.path)


def _json_safe(value: Any) -> Any:
    """NaN and infinity (a diverged loss) are not JSON: they travel as null."""
    return _each_leaf(value, lambda v: None if isinstance(v, float) and not math.isfinite(v) else v)


def _each_leaf(value: Any, change: Any) -> Any:
    """`value` with `change` applied to every value that is neither an object nor a list."""
    if isinstance(value, dict):
        return {k: _each_leaf(v, change) for k, v in value.items()}
    if isinstance(value, list):
        return [_each_leaf(v, change) for v in value]
    return change(value)


# -- a bundle names no path of the server it was exported from: a visitor who downloads a run learns
# nothing of where the host keeps its data, its checkout or its Python.


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
    return _each_leaf(
        bundle, lambda v: pattern.sub(lambda m: os.path.basename(m.group(0)), v) if isinstance(v, str) else v
    )


def params_without_paths(params: dict[str, Any]) -> dict[str, Any]:
    """A race's settings with no path: no dataset folder (another machine's means nothing here), a
    model file by its file's name."""
    model_file = params.get("model_file")
    return {
        **params,
        "data_dir": None,
        "model_file": os.path.basename(model_file) if isinstance(model_file, str) else None,
    }


def load_bundle_file(path: str) -> dict[str, Any]:
    """Read a bundle file, refusing oversized or non-JSON input with a clear message."""
    try:
        with open(path, "rb") as fh:
            return read_bundle(fh)
    except OSError as exc:
        raise BundleError(f"cannot read {path}: {exc.strerror}") from None


def read_bundle(stream: BinaryIO) -> dict[str, Any]:
    """A bundle from a file or an upload: at most MAX_BUNDLE_BYTES are read, and a larger one is
    refused before any of it is parsed (the CLI and the app share this cap)."""
    raw = stream.read(MAX_BUNDLE_BYTES + 1)
    if len(raw) > MAX_BUNDLE_BYTES:
        raise BundleError(f"bundle is larger than {MAX_BUNDLE_BYTES // 2**20} MiB")
    return parse_bundle(raw)


def events_allowed(spec: RunSpec) -> int:
    """The most events a race of `spec` can have recorded: a step event per step and variant, an
    epoch event per epoch, phase and variant, a few compile notes and its replicate processes. A
    bundle with more was not recorded by this app, and would only cost memory wherever it is drawn."""
    per_epoch = len(VARIANTS) * spec.epochs * len(PHASES)
    return min(MAX_EVENTS, spec.recorded_steps + per_epoch + MAX_COMPILE_EVENTS + MAX_REPLICATES)


def parse_bundle(raw: bytes | str) -> dict[str, Any]:
    """The bundle's JSON, once its bytes show no more values than a bundle can hold (check_structure)."""
    check_structure(raw)
    try:
        data = json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise BundleError(f"not a JSON bundle: {exc}") from None
    if not isinstance(data, dict):
        raise BundleError("not a run bundle: the top level must be an object")
    return data


def check_structure(raw: bytes | str) -> None:
    """Refuse a bundle whose JSON would hold more values or objects than an exported one can, from
    its bytes alone (a count at C speed: nothing is parsed, nothing is held)."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    containers = data.count(b"[") + data.count(b"{")
    if containers > MAX_CONTAINERS:
        raise BundleError(f"not a run bundle: more than {MAX_CONTAINERS:,} lists and objects")
    if containers + data.count(b",") > MAX_VALUES:
        raise BundleError(f"not a run bundle: more than {MAX_VALUES:,} values")


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a number")


def import_bundle(
    store: Store, data: dict[str, Any], owner: str, max_imports: int | None = None, address: str | None = None
) -> int:
    """Validate and store a bundle as a new imported run; returns its id. Writes nothing on error.
    `max_imports`: how many imported runs one owner may keep (the host's max_imports_per_owner);
    with `address` (core.runs.limits.client_address), every browser at that address counts as
    one visitor, as in the queue: a cleared cookie is no new allowance. Counted again in the import's
    own transaction, under the write lock: five tabs at once cannot all find room only one has."""

    def room(conn: Any) -> None:
        if max_imports is not None and Store.imports_kept(conn, owner, address) >= max_imports:
            raise BundleError(
                f"this host keeps at most {max_imports} imported runs per visitor"
                + (" (counting every browser at your address)" if address else "")
                + ": delete one on the Runs page first"
            )

    with store.transaction() as conn:
        room(conn)  # before the work of checking the bundle
    run_fields, events = validate_bundle(data)
    mark = fingerprint(data)

    def new_here(conn: Any) -> None:  # in the import's own transaction too: two tabs at once make one run
        room(conn)
        earlier = Store.imported_with_mark(conn, owner, mark)  # a run is its owner's to delete: one each
        if earlier is not None:
            raise AlreadyImported(earlier)

    run_fields["details"] = {**(run_fields.get("details") or {}), FINGERPRINT: mark}
    run_fields.update(owner=owner, imported=1, device_key="imported", phase=run_fields["status"], client=address)
    try:
        return store.import_run(run_fields, events, check=new_here)
    except sqlite3.IntegrityError as exc:  # validation should have caught it; still a message, not a traceback
        raise BundleError(f"the store refused the bundle ({exc}); nothing was imported") from None


FINGERPRINT = "bundle_fingerprint"  # in an imported run's details: which bundle it came from


class AlreadyImported(BundleError):
    """This visitor imported the same bundle before: it is not imported twice (two runs that are one)."""

    def __init__(self, run_id: int):
        self.run_id = run_id
        super().__init__(f"this bundle was already imported as run {run_id}; it was not imported again")


def fingerprint(data: dict[str, Any]) -> str:
    """What identifies a bundle's run: its run and events, not when it was exported."""
    canonical = json.dumps({"run": data.get("run"), "events": data.get("events")}, sort_keys=True, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def validate_bundle(data: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Check every field; return (run row fields, event rows) ready to insert."""
    if data.get("format") != FORMAT:
        raise BundleError(f"not a Compile Lab run bundle (format must be {FORMAT!r})")
    if data.get("version") != VERSION:
        raise BundleError(f"bundle version {data.get('version')!r} is not supported (this Compile Lab reads {VERSION})")
    run = _obj(data.get("run"), "run")
    if run.get("kind") != "race":
        raise BundleError("run.kind: only race runs can be imported")
    params = _obj(run.get("params"), "run.params")
    try:
        spec = RunSpec.from_dict(params)
        # Another machine's dataset folder means nothing here: check the rest of the spec.
        problems = validate(dataclasses.replace(spec, data_dir=None, download=True))
    except SpecError as exc:
        problems = exc.problems
    except TypeError as exc:
        raise BundleError(f"run.params: {exc}") from None
    if problems:
        raise BundleError(f"run.params.{problems[0].field}: {problems[0].message}")
    params = utf8_json(params_without_paths(spec.to_dict()))  # another machine's paths mean nothing here
    status = run.get("status")
    if status not in FINAL_STATES:
        raise BundleError(f"run.status must be one of {', '.join(FINAL_STATES)} (got {status!r})")
    now = time.time()
    fields: dict[str, Any] = {"kind": "race", "params": params, "status": status}
    for key in ("created_at", "started_at", "finished_at"):
        fields[key] = _bundle_number(run.get(key), f"run.{key}", 0, now + 86400, optional=key != "created_at")
    for key in ("environment", "details"):
        value = run.get(key)
        if value is not None:
            _plain_json(_obj(value, f"run.{key}"), f"run.{key}", 0, _Budget(f"run.{key}", MAX_FIELD_VALUES))
        fields[key] = utf8_json(value)
    # The summary is computed again from the events (summary_from_events): of the bundle's, only what
    # events do not carry is read, and only that is checked.
    claimed = _obj(run.get("summary") or {}, "run.summary")
    claimed = {k: claimed[k] for k in CLAIMED_SUMMARY if k in claimed}
    _plain_json(claimed, "run.summary", 0, _Budget("run.summary", MAX_CLAIMED_VALUES))
    for key in ENVIRONMENT_TEXT:
        value = (fields["environment"] or {}).get(key)
        if value is not None and not isinstance(value, str):
            raise BundleError(f"run.environment.{key} must be text (got {type(value).__name__})")
    _environment_numbers(fields["environment"] or {})
    fields["error"] = _string(run.get("error"), "run.error", optional=True)
    raw_events = data.get("events")
    if not isinstance(raw_events, list):
        raise BundleError("events must be a list")
    allowed = events_allowed(spec)
    if len(raw_events) > allowed:
        raise BundleError(
            f"events: a race of {spec.epochs} x {spec.steps_per_epoch} steps records at most {allowed} "
            f"(got {len(raw_events)})"
        )
    events = [_event(e, f"events[{i}]") for i, e in enumerate(raw_events)]
    _in_race_order(events, spec)
    compile_info = (fields["details"] or {}).get("compile")
    fields["summary"] = summary_from_events(
        events, spec, utf8_json(claimed), compile_info if isinstance(compile_info, dict) else None
    )
    return fields, events


# Numbers in a race's environment that pages compute with (a replay's own threads, the load it was
# recorded under, the device's memory and cores): each a number where present.
ENVIRONMENT_COUNTS = ("torch_threads", "cpu_count", "device_memory_bytes")
ENVIRONMENT_LOADS = ("load_at_start", "load_at_end")


def _environment_numbers(env: dict[str, Any]) -> None:
    for key in ENVIRONMENT_COUNTS:
        if env.get(key) is not None:
            _integer(env[key], f"run.environment.{key}", 0, 2**62)
    for key in ENVIRONMENT_LOADS:
        load = env.get(key)
        if load is None:
            continue
        load = _obj(load, f"run.environment.{key}")
        averages = load.get("load_average")
        if averages is not None:
            if not isinstance(averages, list) or not averages:
                raise BundleError(f"run.environment.{key}.load_average must be a list of numbers")
            for i, value in enumerate(averages):
                _bundle_number(value, f"run.environment.{key}.load_average[{i}]", 0, MAX_NUMBER)
        if load.get("cpu_count") is not None:
            _integer(load["cpu_count"], f"run.environment.{key}.cpu_count", 0, 2**62)


def _in_race_order(events: list[dict[str, Any]], spec: RunSpec) -> None:
    """Events as a race records them: a variant's steps of each phase numbered 1, 2, 3... in stored
    order (one event per step), one epoch event per variant and epoch, each within the race's
    epochs (a replicate process's at epoch 0, one per process), each kind as its event class in
    core.engine.events declares it. A bundle whose events repeat or stand still was not recorded by
    a race (a page drawing it met two rows for one step)."""
    last_step: dict[tuple[str, str], int] = {}
    epochs_seen: set[tuple[str, int]] = set()
    processes_seen: set[int] = set()
    for i, e in enumerate(events):
        where = f"events[{i}]"
        kind = ROW_KINDS[e["kind"]]
        low, high = kind.epochs(spec.epochs)
        if not low <= e["epoch"] <= high:
            belongs = (
                f"from 1 to the race's {spec.epochs} epochs" if kind.in_epoch else "0 (it belongs to the whole race)"
            )
            raise BundleError(f"{where}.epoch of {kind.what} must be {belongs} (got {e['epoch']})")
        if kind is StepEvent:
            key = (e["variant"], e["phase"])
            if e["step"] <= last_step.get(key, 0):
                raise BundleError(
                    f"{where}.step: {e['variant']} {e['phase']} steps count up from 1, one event each "
                    f"(got step {e['step']} after step {last_step.get(key, 0)})"
                )
            last_step[key] = e["step"]
        elif kind is EpochEvent:
            if (e["variant"], e["epoch"]) in epochs_seen or e["step"] != 0:
                raise BundleError(f"{where}: one epoch event per variant and epoch, at step 0")
            epochs_seen.add((e["variant"], e["epoch"]))
        elif kind is ReplicateEvent:  # counted once each in the headline: one event per process
            number = from_row(e).process["number"]  # event_note kept it as this app writes it
            if e["step"] != number or number in processes_seen:
                raise BundleError(f"{where}: one replicate event per process, its number as its step")
            processes_seen.add(number)


MEMORY_KEYS = (
    "eager_peak_memory_bytes",
    "compiled_peak_memory_bytes",
    "eager_peak_reserved_bytes",
    "compiled_peak_reserved_bytes",
    "eager_reserved_growth_bytes",
    "compiled_reserved_growth_bytes",
)
# What summary_from_events reads of a bundle's own summary (the rest is computed from the events; the
# profile is checked field by field: core.runs.bundle).
CLAIMED_SUMMARY = ("run_to_run", "machine_load", "memory_kind", "compile_failed", "profile", *MEMORY_KEYS)


def summary_from_events(
    events: list[dict[str, Any]], spec: RunSpec, claimed: dict[str, Any], compile_info: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The summary of an imported run, recomputed from its events with this app's own analysis
    (a bundle's numbers are not trusted, and an older or foreign summary may lack keys). Only the
    memory figures, which events do not carry, are taken from the bundle, when they are numbers;
    whether compile happened is judged again from the bundle's compile counters."""

    floor = analysis.warmup_floor(spec.mode, spec.backend)
    spread = RunToRun.from_dict(claimed.get("run_to_run"))  # the run-to-run spread it was measured with
    summary = Summary.from_dict(
        analysis.summarize_events(events, spec.batch_size, floor, alpha=race_alpha(spec), spread=spread)
    ).replace(replicates_asked=replicates_asked(spec.replicates, spec.target_interval))
    # The machine's load during each epoch, which events do not carry: the samples are checked and
    # the busy-machine warning said again from them (as the trainer says it), never a bundle's words.
    load = load_samples(claimed.get("machine_load"), spec)
    told = Summary.from_dict(claimed)  # read as typed: a value of the wrong type is missing
    counted = Summary.from_dict(compile_info)  # graphs and breaks, counted by torch in the bundle's run
    failed = told.compile_failed  # a reason in words, kept as text (never markup)
    summary = summary.replace(
        machine_load=tuple(load),
        noise_warnings=summary.noise_warnings + tuple(load_warnings(load)),
        **{key: getattr(told, key) for key in MEMORY_KEYS},
        memory_kind=told.memory_kind,
        compile_skipped=compile_skipped_reason(compile_info, spec.backend, spec.mode) if compile_info else None,
        compile_failed=failed[:MAX_STRING] if failed else None,
        graphs=counted.graphs,
        graph_breaks=counted.graph_breaks,
        # Its per-step anatomy, checked: what the cause of its verdict is read from (core.engine.cause).
        profile=profile_from_bundle(claimed.get("profile"), BundleError),
    )
    return summary.replace(stop_reason=stop_reading(summary, spec.target_interval, spec.total_steps)).to_dict()


def load_samples(value: Any, spec: RunSpec) -> list[dict[str, Any]]:
    """A bundle's load samples (core.engine.intervals.load_sample: one per variant and epoch), those
    that are well formed: a variant, an epoch of the race, the load and CPU share as numbers or
    null, a whole number of cores; any other entry is dropped (an older bundle has none)."""
    if not isinstance(value, list):
        return []
    out = []
    for s in value[: len(VARIANTS) * spec.epochs]:
        if not isinstance(s, dict) or s.get("variant") not in VARIANTS:
            continue
        epoch, cores = s.get("epoch"), s.get("cores")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (epoch, cores)):
            continue
        if not (1 <= epoch <= spec.epochs and 1 <= cores <= 1_000_000):
            continue
        load, share = (s.get(k) for k in ("load", "cpu_share"))
        if not all(
            v is None or (isinstance(v, int | float) and not isinstance(v, bool) and v >= 0) for v in (load, share)
        ):
            continue
        out.append({"variant": s["variant"], "epoch": epoch, "load": load, "cores": cores, "cpu_share": share})
    return out


def _event(e: Any, where: str) -> dict[str, Any]:
    e = _obj(e, where)
    row = {
        "kind": _member(e.get("kind"), EVENT_KINDS, f"{where}.kind"),
        "variant": _member(e.get("variant"), VARIANTS, f"{where}.variant"),
        "phase": _member(e.get("phase"), PHASES, f"{where}.phase"),
        "epoch": _integer(e.get("epoch"), f"{where}.epoch", 0, MAX_EPOCHS),
        "step": _integer(e.get("step"), f"{where}.step", 0, MAX_EPOCHS * MAX_STEPS_PER_EPOCH),
        "time_s": _bundle_number(e.get("time_s"), f"{where}.time_s", 0, 1e6),
        "eval_time_s": _bundle_number(e.get("eval_time_s"), f"{where}.eval_time_s", 0, 1e6, optional=True),
        "loss": _bundle_number(e.get("loss"), f"{where}.loss", -MAX_NUMBER, MAX_NUMBER, optional=True),
        "samples": _integer(e.get("samples"), f"{where}.samples", 0, 10**9, optional=True),
        # Required: the store keeps when every event was recorded (a bundle without it was not exported here).
        "recorded_at": _bundle_number(e.get("recorded_at"), f"{where}.recorded_at", 0, time.time() + 86400),
        "note": e.get("note"),
    }
    row["note"] = event_note(row, f"{where}.note", BundleError)  # read back through its kind's codec
    return row


def _obj(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BundleError(f"{where} must be an object (got {type(value).__name__})")
    return value


def _member(value: Any, allowed: tuple[str, ...], where: str) -> str:
    if value not in allowed:
        raise BundleError(f"{where} must be one of {', '.join(allowed)} (got {str(value)[:40]!r})")
    return value


def _bundle_number(value: Any, where: str, low: float, high: float, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not low <= value <= high
    ):
        raise BundleError(f"{where} must be a number from {low:g} to {high:g} (got {str(value)[:40]!r})")
    return float(value)


def _integer(value: Any, where: str, low: int, high: int, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise BundleError(f"{where} must be a whole number from {low} to {high} (got {str(value)[:40]!r})")
    return value


def _string(value: Any, where: str, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or len(value) > MAX_STRING:
        raise BundleError(f"{where} must be text of at most {MAX_STRING} characters")
    return utf8_text(value)


class _Budget:
    """How many values one field may still hold (MAX_FIELD_VALUES)."""

    def __init__(self, field: str, values: int):
        self.field, self.total, self.left = field, values, values

    def spend(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise BundleError(f"{self.field} holds more than {self.total:,} values")


def _plain_json(value: Any, where: str, depth: int, budget: _Budget) -> None:
    """Nested environment/details data: bounded depth and size, finite bounded numbers, bounded text."""
    if depth > MAX_DEPTH:
        raise BundleError(f"{where} is nested deeper than {MAX_DEPTH} levels")
    budget.spend()
    if isinstance(value, dict):
        for key, item in value.items():
            _string(key, f"{where} key")
            _plain_json(item, f"{where}.{key}", depth + 1, budget)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _plain_json(item, f"{where}[{i}]", depth + 1, budget)
    elif isinstance(value, str):
        _string(value, where)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        _bundle_number(value, where, -MAX_NUMBER, MAX_NUMBER)
    elif value is not None and not isinstance(value, bool):
        raise BundleError(f"{where} has an unsupported value")
