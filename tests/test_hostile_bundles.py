"""Bundles crafted to break the app: one is refused from its bytes before it is parsed, checked field
by field before anything is stored, its text made encodable; one that imports is drawn on every page
and feed route of its run without an error; and a row already stored that no check would let in now
(a lone surrogate, an oversized environment, events twice) reads as a line naming that run."""

import copy
import io
import json
import os
import random
import tracemalloc

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient
from streamlit.testing.v1 import AppTest
from support import ROOT
from test_pages import APP, record_probe

from app_pages.run_screen import feed as feed_routes
from core.cli.main import main
from core.runs import bundle
from core.runs.bundle import MAX_NOTE, BundleError, import_bundle, parse_bundle, read_bundle
from core.runs.store.records import MAX_STORED_JSON

RECORDING = os.path.join(ROOT, "assets", "recordings", "cpu-compile-never-pays-off.json")
MiB = 2**20


def recording() -> dict:
    with open(RECORDING) as fh:
        return json.load(fh)


def page(**query) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in query.items():
        at.query_params[key] = str(value)
    return at.run()


def warnings_of(at) -> str:
    """The page's warnings as a person reads them (markdown's escapes and word joiners taken out)."""
    return "\n".join(str(w.value) for w in at.warning).replace("\\", "").replace("\u2060", "")


def every_surface(store, run_id: int, capsys) -> None:
    """Every page and feed route of one run, and the CLI's table: none raises, each answers."""
    pages = ({"run": run_id}, {"run": run_id, "present": 1}, {"replay": f"run:{run_id}"}, {"compare": f"1,{run_id}"})
    for query in pages:  # its page, presenter mode, its replay, and beside another run (?compare=)
        at = page(**query)
        assert not at.exception, (query, at.exception)
    at.switch_page("app_pages/runs.py").run()
    assert not at.exception, at.exception
    row = [int(i) for i in at.dataframe[0].value["id"]].index(run_id)
    at.session_state["runs_table"] = {"selection": {"rows": [row], "columns": [], "cells": []}}
    at.run()  # the run reopened on the Runs page, its plan and downloads
    assert not at.exception, at.exception
    http = TestClient(Starlette(routes=feed_routes.routes()), raise_server_exceptions=True)
    for suffix in ("", "?present=1"):
        response = http.get(f"/api/live/{run_id}{suffix}")
        assert response.status_code == 200, (suffix, response.text[:300])
        json.dumps(response.json(), allow_nan=False)
    capsys.readouterr()  # (what the pages logged)
    assert main(["runs", "--store", store.path]) == 0
    out, err = capsys.readouterr()
    assert f"\n{run_id} " in out or out.startswith(f"{run_id} ") or f" {run_id} " in out
    assert "Traceback" not in err, err[-3000:]


@pytest.fixture
def feed(monkeypatch):
    monkeypatch.setattr(feed_routes, "_served", type(feed_routes._served)())


# -- 1: a lone surrogate --------------------------------------------------------------------------


def test_a_lone_surrogate_in_a_bundle_is_stored_as_a_replacement_character(store, feed, capsys, sleepers):
    record_probe(store)
    data = recording()
    data["run"]["environment"]["device_name"] = "\ud800 box"
    next(e for e in data["events"] if e["kind"] == "compile")["note"] = "\udfff compiled"  # a text column's
    raw = json.dumps(data)
    assert '"\\ud800 box"' in raw  # JSON's escape of it, as a crafted file holds it
    run_id = import_bundle(store, parse_bundle(raw), "visitor:a")
    run = store.get_run(run_id)
    assert run.environment["device_name"].startswith("\ufffd")
    assert any((e["note"] or "").startswith("\ufffd") for e in store.events_after(run_id))
    every_surface(store, run_id, capsys)


def test_a_lone_surrogate_already_stored_is_read_as_a_replacement_character(store, feed, capsys, sleepers):
    record_probe(store)
    run_id = import_bundle(store, recording(), "visitor:a")
    environment = json.dumps({**store.get_run(run_id).environment, "device_name": "\ud800 box"})
    store._write("UPDATE runs SET environment = ? WHERE id = ?", (environment, run_id))  # an older import's row
    assert store.get_run(run_id).environment["device_name"] == "\ufffd box"
    every_surface(store, run_id, capsys)


# -- 2 and 3: structure bounded before and while parsing -----------------------------------------


def test_a_bundle_of_millions_of_empty_lists_is_refused_from_its_bytes_before_parsing(monkeypatch):
    raw = b"[" + b"[]," * 20_000_000 + b"[]]"  # 57 MiB: under the size cap, 64 bytes of memory per 3 of them
    monkeypatch.setattr(bundle.json, "loads", lambda *_a, **_k: pytest.fail("parsed before it was checked"))
    tracemalloc.start()
    try:
        with pytest.raises(BundleError, match="more than 1,000,000 lists and objects"):
            read_bundle(io.BytesIO(raw))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < len(raw) + 8 * MiB  # the bytes read, and nothing built from them


def test_a_bundle_of_millions_of_values_is_refused_before_parsing(monkeypatch):
    monkeypatch.setattr(bundle.json, "loads", lambda *_a, **_k: pytest.fail("parsed before it was checked"))
    with pytest.raises(BundleError, match="more than 8,000,000 values"):
        parse_bundle(b"[" + b"0," * 9_000_000 + b"0]")


def test_the_structure_bound_admits_every_shipped_recording_and_a_bundle_at_the_size_cap():
    from test_board_memory import bundle_at_the_cap  # as many of a race's events as fit in 64 MiB

    for name in os.listdir(os.path.dirname(RECORDING)):
        with open(os.path.join(os.path.dirname(RECORDING), name), "rb") as fh:
            bundle.check_structure(fh.read())
    raw, _, _ = bundle_at_the_cap()
    bundle.check_structure(raw)
    bundle.check_structure(json.dumps(json.loads(raw), indent=1).encode()[: bundle.MAX_BUNDLE_BYTES])


def test_an_environment_of_many_values_is_refused_and_nothing_is_written(store):
    data = recording()
    data["run"]["environment"]["padding"] = [[] for _ in range(bundle.MAX_FIELD_VALUES)]
    with pytest.raises(BundleError, match="run.environment holds more than 10,000 values"):
        import_bundle(store, data, "visitor:a")
    data = recording()
    data["run"]["details"]["padding"] = [0] * bundle.MAX_FIELD_VALUES
    with pytest.raises(BundleError, match="run.details holds more than 10,000 values"):
        import_bundle(store, data, "visitor:a")
    assert store.list_runs() == []


def test_an_oversized_environment_already_stored_is_not_parsed_on_a_page_view(store, feed, capsys, sleepers):
    record_probe(store)
    run_id = import_bundle(store, recording(), "visitor:a")
    huge = json.dumps({"device_name": "x", "padding": [[]] * (MAX_STORED_JSON["environment"] // 4)})
    store._write("UPDATE runs SET environment = ? WHERE id = ?", (huge, run_id))  # an older import's row
    monkeypatch_loads = []
    original = json.loads

    def counting(text, *args, **kwargs):
        monkeypatch_loads.append(len(text))
        return original(text, *args, **kwargs)

    from core.runs.store import records

    records.json.loads, saved = counting, records.json.loads
    try:
        assert store.get_run(run_id).environment == {
            "__corrupt__": f"environment too large to read ({len(huge):,} characters)"
        }
        assert max(monkeypatch_loads) < MAX_STORED_JSON["environment"]  # the row's text was never parsed
    finally:
        records.json.loads = saved
    every_surface(store, run_id, capsys)


# -- 7 and the fuzz: crafted bundles that pass the checks render everywhere ----------------------

HOSTILE_TEXT = "\ud800 [link](http://evil/x) <img src=x onerror=alert(1)> **b** $x$ \x1b[2J =SUM(A1) \u202e"


def _texts(data: dict) -> dict:
    env = data["run"]["environment"]
    for key in ("device_name", "cpu_name", "torch", "python", "platform", "device_type"):
        env[key] = HOSTILE_TEXT
    for event in data["events"]:
        if event["kind"] == "compile":
            event["note"] = HOSTILE_TEXT
    data["run"]["error"] = HOSTILE_TEXT
    data["run"]["status"] = "failed"
    data["run"]["summary"]["compile_failed"] = HOSTILE_TEXT
    return data


def _only(variant: str):
    def apply(data: dict) -> dict:
        data["events"] = [e for e in data["events"] if e["variant"] == variant]
        return data

    return apply


def _set_events(**fields):
    def apply(data: dict) -> dict:
        for event in data["events"]:
            event.update(fields)
        return data

    return apply


def _details(data: dict) -> dict:
    data["run"]["details"] = {
        "compile": {"graphs": "x", "graph_breaks": -1, "break_reasons": [{"a": [1, None]}], "phases": "x"},
        "compile_phase": {"phase": 5, "started_at": "x"},
        "compile_skipped": ["not text"],
        "variants": "x",
        "estimate": {"seconds": "x"},
    }
    return data


def _environment(data: dict) -> dict:
    env = data["run"]["environment"]
    env.update(
        device_type="cuda", compute_capability="x", precision_flags=["x"], run_to_run={"log_sd": "x"},
        load_at_start={"load_average": [1e15], "cpu_count": 0}, load_at_end={}, worker_cpus="all",
        device_memory_bytes=0, cpu_count=0, torch_threads=0,
    )  # fmt: skip
    return data


def _summary(data: dict) -> dict:
    data["run"]["summary"] = {
        "run_to_run": {"log_sd": -5, "races": "x"},
        "machine_load": [{"variant": "eager", "epoch": 99, "load": -1, "cores": 0}, "x", None],
        "memory_kind": HOSTILE_TEXT,
        "eager_peak_memory_bytes": 1e15,
    }
    return data


def _long_text(data: dict) -> dict:
    data["run"]["environment"]["device_name"] = "W" * bundle.MAX_STRING
    data["run"]["error"] = "e" * bundle.MAX_STRING
    for event in data["events"]:
        if event["kind"] == "compile":
            event["note"] = "n" * MAX_NOTE
    return data


CRAFTED = {
    "hostile text in every field": _texts,
    "only eager ran": _only("eager"),
    "only compiled ran": _only("compiled"),
    "no events": lambda d: {**d, "events": []},
    "no epoch events": lambda d: {**d, "events": [e for e in d["events"] if e["kind"] != "epoch"]},
    "every step took no time": _set_events(time_s=0.0),
    "every step took a million seconds": _set_events(time_s=1e6),
    "losses at the bounds": lambda d: _set_events(loss=-bundle.MAX_NUMBER)(d),
    "no losses": _set_events(loss=None, samples=None),
    "all recorded at one instant": _set_events(recorded_at=0.0),
    "details of every wrong type": _details,
    "environment at its edges": _environment,
    "summary claims of every wrong type": _summary,
    "text at its caps": _long_text,
    "cancelled midway": lambda d: {**d, "run": {**d["run"], "status": "cancelled"}, "events": d["events"][:40]},
}
REFUSED = {
    "every event twice": lambda d: {**d, "events": [e for e in d["events"] for _ in (0, 1)]},
    "every step 0": _set_events(step=0),
    "steps counting down": lambda d: {**d, "events": d["events"][::-1]},
    "an epoch past the race's": lambda d: _set_events(epoch=99)(d),
    "torch threads as text": lambda d: (d["run"]["environment"].update(torch_threads="x"), d)[1],
    "a load that is not a number": lambda d: (d["run"]["environment"].update(load_at_start={"load_average": ["x"]}), d)[
        1
    ],
}
# Seeded random mutations: a hostile value at a random place of a real bundle.
HOSTILE_VALUES = [None, -1, 0, 1e15, -1e15, 2**63, "x", "", "\ud800", HOSTILE_TEXT, [], {}, [[]], True]


def _random_mutation(seed: int):
    def apply(data: dict) -> dict:
        rng = random.Random(seed)
        for _ in range(3):
            place = rng.choice(["event", "environment", "details", "summary", "params"])
            value = copy.deepcopy(rng.choice(HOSTILE_VALUES))
            if place == "event":
                event = rng.choice(data["events"])
                event[rng.choice(sorted(event))] = value
            elif place == "params":
                params = data["run"]["params"]
                params[rng.choice(sorted(params))] = value
            else:
                target = data["run"][place]
                target[rng.choice(sorted(target))] = value
        return data

    return apply


RANDOM = {f"random mutation {seed}": _random_mutation(seed) for seed in range(8)}


@pytest.mark.parametrize("name", list(REFUSED))
def test_a_crafted_bundle_whose_events_no_race_records_is_refused(store, name):
    with pytest.raises(BundleError) as refused:
        import_bundle(store, REFUSED[name](recording()), "visitor:a")
    assert "\n" not in str(refused.value) and len(str(refused.value)) < 300
    assert store.list_runs() == []


@pytest.mark.parametrize("name", [*CRAFTED, *RANDOM])
def test_a_crafted_bundle_that_imports_renders_on_every_page_and_feed_route(store, feed, capsys, sleepers, name):
    record_probe(store)
    data = {**CRAFTED, **RANDOM}[name](recording())
    raw = json.dumps(data).encode("utf-8", "surrogatepass")  # as a file would carry it
    try:
        run_id = import_bundle(store, read_bundle(io.BytesIO(raw)), "visitor:a")
    except BundleError as exc:
        assert name.startswith("random"), f"{name} was refused: {exc}"  # a random one may be refused, in a line
        assert "\n" not in str(exc)
        return
    every_surface(store, run_id, capsys)


def test_events_already_stored_twice_show_a_line_naming_the_run_not_a_traceback(store, feed, sleepers):
    record_probe(store)
    run_id = import_bundle(store, recording(), "visitor:a")
    again = [{k: v for k, v in e.items() if k not in ("id", "run_id")} for e in store.events_after(run_id)]
    store.append_events(run_id, again)  # as an older version let a bundle in: every event twice
    for query in ({"run": run_id}, {"replay": f"run:{run_id}"}):
        at = page(**query)
        assert not at.exception, (query, at.exception)
        assert "cannot be shown" not in warnings_of(at), query  # drawn, one loss a step (sentences.py)
    http = TestClient(Starlette(routes=feed_routes.routes()), raise_server_exceptions=True)
    response = http.get(f"/api/live/{run_id}")
    assert response.status_code == 200, response.text[:300]


def test_a_stored_environment_of_wrong_types_is_refused_by_its_replay_in_one_line(store, feed, sleepers):
    """A row an older import let in, its torch threads as text (?replay= raised ValueError on every
    rerun): the replay checks the stored run as an import would, and says why in one line."""
    record_probe(store)
    run_id = import_bundle(store, recording(), "visitor:a")
    environment = json.dumps({**store.get_run(run_id).environment, "torch_threads": "x"})
    store._write("UPDATE runs SET environment = ? WHERE id = ?", (environment, run_id))
    at = page(replay=f"run:{run_id}")
    assert not at.exception, at.exception
    said = [str(e.value).replace("\\", "") for e in at.error]
    assert len(said) == 1 and said[0].startswith("Cannot replay this: run.environment.torch_threads must be"), said


def test_a_run_that_cannot_be_drawn_is_a_line_naming_it_and_the_page_draws_the_rest(store, feed, sleepers, monkeypatch):
    from core.view import compare
    from core.view.run_screen import feed as feed_module
    from core.view.run_screen import layout

    record_probe(store)
    good, bad = (import_bundle(store, recording(), f"visitor:{who}") for who in "ab")  # (one bundle, one run each)

    def failing_for_bad(function):
        def call(run, *args, **kwargs):
            if run.id == bad:
                raise KeyError("a field this app never wrote")
            return function(run, *args, **kwargs)

        return call

    monkeypatch.setattr(compare, "table_row", failing_for_bad(compare.table_row))
    monkeypatch.setattr(layout, "chart_builders", failing_for_bad(layout.chart_builders))
    monkeypatch.setattr(feed_module, "feed_document", lambda snap, *a: failing_for_bad(lambda *_: {})(snap.run))
    at = page(run=bad)
    assert not at.exception, at.exception
    assert f"Run {bad} cannot be shown: its stored record is damaged" in warnings_of(at)
    assert at.get("progress") and at.expander  # the rest of the page: the run's progress line, the replay picker
    assert "cannot be shown" not in warnings_of(page(run=good))
    at.switch_page("app_pages/runs.py").run()
    assert not at.exception, at.exception
    assert list(at.dataframe[0].value["id"]) == [good]  # the table shows the others
    assert f"Run {bad} cannot be shown" in warnings_of(at)
    assert "Import a bundle" in [h.value for h in at.subheader]  # and what comes after it
    http = TestClient(Starlette(routes=feed_routes.routes()), raise_server_exceptions=True)
    response = http.get(f"/api/live/{bad}")
    assert response.status_code == 500
    assert response.json() == {"error": f"Run {bad} cannot be shown: its stored record is damaged."}


def test_the_bounds_admit_a_race_of_the_most_epochs_with_every_load_sample(store):
    from core.engine.spec import MAX_EPOCHS

    data = recording()
    data["run"]["params"].update(epochs=MAX_EPOCHS, steps_per_epoch=1)
    samples = [
        {"variant": v, "epoch": e, "load": 0.5, "cores": 2, "cpu_share": 1.0}
        for e in range(1, MAX_EPOCHS + 1)
        for v in ("eager", "compiled")
    ]
    data["run"]["summary"] = {"machine_load": samples}
    data["events"] = []
    run = store.get_run(import_bundle(store, data, "visitor:a"))
    assert len(run.summary["machine_load"]) == 2 * MAX_EPOCHS
