"""A public demo attacked again (issue 35): the store's password stays out of every page, route and
line the CLI prints; a shell user cannot act as a web visitor; what a stranger can reach of another
visitor's run, of the admin page and of the server's environment is what the docs say."""

import errno
import io
import logging

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient
from test_pages import app, record_probe, record_race, texts

from app_pages.run_screen import feed as feed_routes
from core.cli.main import main
from core.runs import disk_space
from core.runs.server_log import RepeatedLines, guard_repeated_errors
from core.runs.store.records import shown_location

PASSWORD = "S3cretDbPassword9"
# Nothing listens on port 1: the store cannot be reached, and the message says which one.
UNREACHABLE = [f"postgresql://cl@127.0.0.1:1/db?password={PASSWORD}", f"postgresql://cl:{PASSWORD}@127.0.0.1:1/db"]


# -- 5: the database password ---------------------------------------------------------------------


def test_a_store_urls_password_is_hidden_in_either_of_libpqs_places():
    for url in (
        f"postgresql://cl:{PASSWORD}@db/x",
        f"postgresql://cl@db/x?password={PASSWORD}",
        f"postgres://db/x?sslmode=require&Password={PASSWORD}&application_name=a",
        f"postgresql://db/x?sslpassword={PASSWORD}",
        f"postgresql://cl@db/x?%70assword={PASSWORD}",  # libpq decodes a key's escapes: this is password
        f"postgresql://db/x?sslmode=require&ssl%50ASSWORD={PASSWORD}",
    ):
        shown = shown_location(url)
        assert PASSWORD not in shown and "***" in shown, shown
    assert shown_location("postgresql://cl@db/x?sslmode=require") == "postgresql://cl@db/x?sslmode=require"
    assert PASSWORD not in disk_space.disk_full_message(f"postgresql://cl:{PASSWORD}@db/x")


@pytest.mark.parametrize("url", UNREACHABLE, ids=["query", "userinfo"])
def test_a_visitor_never_reads_the_store_password_on_a_page_or_the_feed(url, monkeypatch):
    monkeypatch.setenv("COMPILE_LAB_STORE", url)
    monkeypatch.setattr(feed_routes, "_served", type(feed_routes._served)())
    at = app()
    assert not at.exception
    shown = texts(at)
    assert "cannot reach the store postgresql://cl" in shown.replace("\\", "").replace("\u2060", "")  # which store
    assert PASSWORD not in shown
    response = TestClient(Starlette(routes=feed_routes.routes())).get("/api/live/3")
    assert response.status_code == 503 and PASSWORD not in response.text


def test_a_full_stdout_is_not_called_a_full_store(store, monkeypatch, capsys):
    record_race(store, "done")

    class FullStdout(io.StringIO):
        def write(self, text):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("sys.stdout", FullStdout())
    monkeypatch.setenv("COMPILE_LAB_STORE", store.path)
    assert main(["runs"]) == 1
    err = capsys.readouterr().err
    assert err == "error: disk full: the output cannot be written; free some space and try again\n"


# -- 17: a shell user is not a web visitor ------------------------------------------------------


@pytest.mark.parametrize("command", [["delete", "{run}"], ["cancel", "{run}"], ["import", "bundle.json"]])
def test_the_cli_refuses_a_visitors_owner(store, capsys, command):
    from core.runs.limits import owner_of

    record_probe(store)
    run_id = record_race(store, "done")
    visitor = owner_of("0123456789abcdef")
    store.update_run(run_id, owner=visitor)
    argv = [a.format(run=run_id) for a in command] + ["--store", store.path, "--owner", visitor]
    with pytest.raises(SystemExit) as exited:
        main(argv)
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.count("\n") == 1 and "not a web visitor's" in err
    assert store.get_run(run_id) is not None and store.get_run(run_id).owner == visitor
    assert main(["delete", str(run_id), "--store", store.path, "--owner", "cli:someone"]) != 0  # not theirs either


# -- 14: a full disk during Launch or Import ---------------------------------------------------


def said(at) -> str:
    """The page's text as a person reads it (markdown's escapes and word joiners taken out)."""
    return texts(at).replace("\\", "").replace("\u2060", "")


def test_a_full_disk_on_launch_or_import_is_one_line_on_the_page(store, sleepers, monkeypatch):
    import sqlite3

    from support import ROOT

    from core.runs.store import Store

    record_probe(store)
    insert_run, disk = Store._insert_run, {"full": True}

    def full_or_not(conn, values):
        if disk["full"]:
            raise sqlite3.OperationalError("database or disk is full")
        return insert_run(conn, values)

    monkeypatch.setattr(Store, "_insert_run", staticmethod(full_or_not))
    at = app()
    at.selectbox(key="pick_zoo").set_value("mlp").run()
    at.button(key="launch").click().run()
    assert not at.exception, at.exception
    assert "disk full: the store" in said(at) and store.list_runs(kind="race") == []
    at.switch_page("app_pages/runs.py").run()
    with open(f"{ROOT}/assets/recordings/cpu-compile-never-pays-off.json", "rb") as fh:
        at.file_uploader[0].set_value(("run.json", fh.read(), "application/json")).run()
    assert not at.exception, at.exception
    assert "Not imported: disk full: the store" in said(at)
    disk["full"] = False  # space again: the upload imports
    with open(f"{ROOT}/assets/recordings/cpu-compile-never-pays-off.json", "rb") as fh:
        at.file_uploader[0].set_value(("run2.json", fh.read(), "application/json")).run()
    assert "Imported as run" in "\n".join(str(s.value) for s in at.success)


# -- 16: a run's trace files are its owner's ----------------------------------------------------


def test_a_runs_trace_files_are_offered_to_its_owner_only(store, sleepers):
    import os

    from streamlit.testing.v1 import AppTest
    from test_pages import APP

    from core.runs import run_files
    from core.runs.limits import owner_of

    record_probe(store)
    run_id = record_race(store, "done")
    owner_token, other_token = "0123456789abcdef", "fedcba9876543210"
    store.update_run(run_id, owner=owner_of(owner_token))
    trace = run_files.compile_trace_dir(store.path, run_id)
    os.makedirs(trace)
    with open(os.path.join(trace, "dedicated_log_torch_trace.log"), "w") as fh:
        fh.write('{"path": "/srv/compile-lab/data/cold-caches/pid-1/x.py"}\n')

    def downloads(token):
        at = AppTest.from_file(APP, default_timeout=60)
        at.session_state["visitor"] = token
        at.run()
        at.switch_page("app_pages/runs.py").run()
        at.session_state["runs_table"] = {"selection": {"rows": [0], "columns": [], "cells": []}}
        at.run()
        assert not at.exception, at.exception
        return [b.label for b in at.get("download_button")], texts(at)

    mine, _ = downloads(owner_token)
    assert any(label.startswith("Compile trace (TORCH_TRACE)") for label in mine)
    theirs, said_to_them = downloads(other_token)
    assert not any("trace" in label.lower() for label in theirs)
    assert "trace files are offered to whoever ran it" in said_to_them


# -- 10: every size a visitor can ask for has a host limit --------------------------------------

# One row per size-like input of a race: (the spec's field, its host limit, a spec at the limit and
# one past it, as RunSpec fields). A new size-like option without a row fails the guard below.
SIZE_LIMITS = [
    ("batch_size", "max_batch_size", 64, dict(batch_size=64), dict(batch_size=65)),
    ("epochs", "max_epochs", 4, dict(epochs=4), dict(epochs=5)),
    ("steps_per_epoch", "max_steps", 100, dict(epochs=2, steps_per_epoch=50), dict(epochs=2, steps_per_epoch=51)),
    (
        "eval_steps",
        "max_steps",
        100,
        dict(epochs=2, steps_per_epoch=40, eval_steps=10),
        dict(epochs=2, steps_per_epoch=40, eval_steps=11),
    ),
    ("image_size", "max_input_size", 64, dict(model="resnet18", image_size=64), dict(model="resnet18", image_size=65)),
    ("replicates", "max_replicates", 3, dict(replicates=3), dict(replicates=4)),
]
NOT_SIZES = {"seed": "a number, not a size", "profile_steps": "at most 50 steps, profiled after the timed epochs"}


def test_every_size_like_option_has_a_host_limit_row():
    from core.engine.spec import OPTIONS
    from core.runs.limits import _LIMIT_PARSERS

    whole_numbers = {o.name for o in OPTIONS.values() if o.type is int}
    assert whole_numbers == {row[0] for row in SIZE_LIMITS} | set(NOT_SIZES)
    assert {row[1] for row in SIZE_LIMITS} | {"max_model_parameters"} <= set(_LIMIT_PARSERS)


@pytest.mark.parametrize("field, limit, value, within, past", SIZE_LIMITS, ids=[r[0] for r in SIZE_LIMITS])
def test_a_size_past_the_hosts_limit_is_refused_naming_the_field(field, limit, value, within, past):
    from support import quick_spec

    from core.runs.limits import load_host_limits

    limits = load_host_limits({f"COMPILE_LAB_{limit.upper()}": str(value)})
    assert limits.problems(quick_spec(**within)) == []
    problems = limits.problems(quick_spec(**past))
    assert [p.field for p in problems] == [field] and f"this host allows at most {value}" in problems[0].message


def test_model_settings_are_refused_where_the_host_takes_names_only():
    from support import ROOT, quick_spec

    from core.runs.limits import load_host_limits

    shipped = load_host_limits({"COMPILE_LAB_CONFIG": f"{ROOT}/deploy/host-limits.toml"})
    assert shipped.max_input_size and shipped.max_model_parameters and not shipped.allow_model_settings
    docs = load_host_limits({"COMPILE_LAB_ALLOWED_MODELS": "hf:gpt2*", "COMPILE_LAB_ALLOW_MODEL_SETTINGS": "false"})
    (problem,) = docs.problems(quick_spec(model="hf:gpt2:n_layer=2000,n_embd=16384,n_head=128"))
    assert problem.field == "model" and "without settings" in problem.message
    assert docs.problems(quick_spec(model="hf:gpt2")) == []


def test_a_model_past_the_hosts_parameters_is_refused_by_its_worker_before_it_is_built(store, sleepers):
    from support import quick_spec

    from core.runs import job_kinds, queue
    from core.runs.limits import HostLimits

    run_id = queue.enqueue(store, quick_spec(), "visitor:a", limits=HostLimits(max_model_parameters=1000))
    assert store.get_run(run_id).details["max_model_parameters"] == 1000

    class Sink:  # what run_race_job reads of its worker's sink before the race
        store_path, run_id = store.path, 0

    Sink.run_id = run_id
    status, fields = job_kinds.run_race_job(store.get_run(run_id).params, Sink())
    assert status == "failed" and fields["error"] == (
        "model: mlp has 1,585,162 parameters; this host allows at most 1,000"
    )


def test_a_library_models_parameters_are_counted_on_the_meta_device():
    from support import require_model_libraries

    from core.engine.models.workload import model_size_problem
    from core.engine.spec import RunSpec

    require_model_libraries()
    wide = model_size_problem(RunSpec(model="hf:gpt2:n_layer=4,n_embd=4096,n_head=32", device="cpu"), 400_000_000)
    assert wide.startswith("model: hf:gpt2:n_layer=4,n_embd=4096,n_head=32 has 1,") and "at most 400,000,000" in wide
    classes = model_size_problem(RunSpec(model="timm:convnext_tiny:num_classes=10000000", device="cpu"), 400_000_000)
    assert "has 7,717,820,128 parameters" in classes
    assert model_size_problem(RunSpec(model="hf:gpt2", device="cpu"), 400_000_000) is None


# -- 18: the first form is within the host's limits ----------------------------------------------


def test_a_first_visit_under_the_shipped_limits_is_offered_a_race_the_host_runs(store, sleepers, monkeypatch):
    from support import ROOT

    record_probe(store)
    monkeypatch.setenv("COMPILE_LAB_CONFIG", f"{ROOT}/deploy/host-limits.toml")
    at = app()
    assert not at.exception
    assert "this host allows" not in said(at) and not at.error
    assert not at.button(key="launch").disabled
    at.button(key="launch").click().run()
    (run,) = store.list_runs(kind="race")
    assert run.params["batch_size"] <= 256 and run.params["epochs"] * run.params["steps_per_epoch"] <= 600


# -- 11 and 12: what a worker's code can read, and reach ----------------------------------------

SECRET = "s3cr3tValue42"


@pytest.mark.parametrize("word", ["TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "KEY"])  # written out: not the list
def test_no_variable_named_as_a_secret_reaches_a_worker_whatever_its_prefix(word):
    from core.runs import processes

    server = {f"{prefix}API_{word}": SECRET for prefix in ("NVIDIA_", "CUDA_", "TORCH_", "MKL_", "COMPILE_LAB_TEST_")}
    server.update({f"MY_{word}": SECRET, "NVIDIA_VISIBLE_DEVICES": "all", "PGSSLKEY": "/home/lab/.pg/client.key"})
    env = processes.worker_environment("cpu", server)
    assert SECRET not in " ".join(f"{k}={v}" for k, v in env.items()), sorted(env)
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all" and env["PGSSLKEY"] == "/home/lab/.pg/client.key"


def test_model_files_are_off_while_a_process_above_the_app_holds_a_secret(tmp_path):
    """As under a shell or tini that exported the admin token: the app is sealed, its parent is not."""
    import os
    import subprocess
    import sys

    from support import ROOT

    from core.runs.limits import HostLimits

    app = (
        f"import sys; sys.path.insert(0, {ROOT!r}); from core.runs.limits import HostLimits; "
        "print(HostLimits(allow_custom_models=True).model_files_problem())"
    )
    parent = f"import os, subprocess, sys; sys.exit(subprocess.run([sys.executable, '-c', {app!r}], env={{'PATH': os.environ['PATH']}}).returncode)"
    clean = {"PATH": os.environ["PATH"]}
    for exported, refused in ({"COMPILE_LAB_ADMIN_TOKEN": SECRET, "HF_TOKEN": SECRET}, True), ({}, False):
        done = subprocess.run(
            [sys.executable, "-c", parent], env={**clean, **exported}, capture_output=True, text=True, timeout=60
        )
        said = done.stdout.strip()
        if refused:
            assert "holds COMPILE_LAB_ADMIN_TOKEN, HF_TOKEN in its environment" in said, done.stderr
            assert SECRET not in said
        else:
            assert said == "None", (said, done.stderr)
    assert HostLimits().model_files_problem().startswith("this host does not run uploaded model files")


def test_a_worker_never_reaches_the_hugging_face_hub():
    import os
    import subprocess
    import sys

    from support import ROOT, require_model_libraries

    from core.runs import processes

    require_model_libraries()
    server = {k: v for k, v in os.environ.items() if not k.endswith("_OFFLINE")}  # the host set no switch
    env = processes.worker_environment("lookup", {**server, "HF_HUB_OFFLINE": "0"})
    assert env["HF_HUB_OFFLINE"] == env["TRANSFORMERS_OFFLINE"] == "1"
    lookup = (
        f"import socket, sys; sys.path.insert(0, {ROOT!r}); tried = []\n"
        "def refuse(self, address): tried.append(address); raise OSError('no network here')\n"
        "socket.socket.connect = refuse\n"
        "from core.engine.models.library_models import hf_config\n"
        "from core.engine.models.sources import parse_model_name\n"
        "try: hf_config(parse_model_name('hf:someone-unknown/not-a-model'))\n"
        "except Exception as exc: print(type(exc).__name__)\n"
        "print('contacted', tried)\n"
    )
    done = subprocess.run([sys.executable, "-c", lookup], env=env, capture_output=True, text=True, timeout=120)
    assert done.stdout.splitlines()[-2:] == ["ModelError", "contacted []"], done.stdout + done.stderr[-2000:]


# -- a flood of one error does not flood the server's log ----------------------------------------


def accept_error() -> logging.LogRecord:
    """asyncio's record for one connection it could not accept (its default exception handler's)."""
    return logging.LogRecord(
        "asyncio", logging.ERROR, __file__, 1, "socket.accept() out of system resource\nsocket: <fd=3>", (), None
    )


def test_a_repeated_accept_error_is_logged_once_a_minute_with_how_many_were_left_out():
    now = [0.0]
    guard = RepeatedLines(clock=lambda: now[0])
    passed = [guard.filter(accept_error()) for _ in range(5000)]  # 2,048 a second under the attack
    assert passed.count(True) == 1 and passed[0]
    other = logging.LogRecord("asyncio", logging.ERROR, __file__, 1, "Task exception was never retrieved", (), None)
    assert guard.filter(other)  # anything else passes untouched
    now[0] = 59.0
    assert not guard.filter(accept_error())
    now[0] = 61.0
    record = accept_error()
    assert guard.filter(record)
    assert record.getMessage().endswith("(5000 more like it in the last 61 s were not logged)")
    assert not guard.filter(accept_error())  # and the next minute starts


def test_the_app_fits_asyncios_logger_with_one_guard():
    logger = logging.getLogger("asyncio")
    before = list(logger.filters)
    try:
        guard = guard_repeated_errors()
        assert guard_repeated_errors() is guard
        assert [f for f in logger.filters if isinstance(f, RepeatedLines)] == [guard]
    finally:
        logger.filters[:] = before
