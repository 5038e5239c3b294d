"""A public demo attacked again (issue 35): the store's password stays out of every page, route and
line the CLI prints; a shell user cannot act as a web visitor; what a stranger can reach of another
visitor's run, of the admin page and of the server's environment is what the docs say."""

import errno
import io

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient
from test_pages import app, record_probe, record_race, texts

from app_pages.run_screen import feed_routes
from core.cli.main import main
from core.runs import disk_space
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
    from core.runs.identity import owner_of

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

    from conftest import ROOT

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
