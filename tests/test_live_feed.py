"""The live feed: a run's live view as one document per snapshot for all of its viewers, served
beside Streamlit with an ETag, and used by the Race page for everyone following a live run (its
owner too) only where the feed's routes are mounted (app.py)."""

import json
import math
import os
import time

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient
from streamlit.testing.v1 import AppTest
from test_live_board import more_steps
from test_pages import APP, record_probe, record_race

from app_pages.run_screen import feed as feed_routes
from core.runs.limits import owner_of
from core.runs.store import Store, postgresql
from core.view.run_screen.feed import LiveFeeds, encode, feed_document
from core.view.run_screen.layout import PRESENT_CHART_HEIGHT
from core.view.run_screen.shared_board import LiveBoard, board_for

OWNER_TOKEN = "0123456789abcdef"


@pytest.fixture
def served(monkeypatch):
    """The feed's routes mounted, as app.py mounts them (module state: undone after the test)."""
    monkeypatch.setattr(feed_routes, "_served", type(feed_routes._served)())
    feed_routes.routes()
    return True


def no_compiled_steps(store, run_id):
    with store._db._conn:  # before the compiled run's first step
        store._db._conn.execute("DELETE FROM events WHERE run_id = ? AND variant = 'compiled'", (run_id,))


def never(*_):
    raise AssertionError("the expected compile time is asked for only before the compile ends")


def test_the_document_holds_what_a_viewer_sees_as_plain_data(store):
    run_id = record_race(store, "running")
    snap = LiveBoard(store.path).snapshot(run_id)
    doc = feed_document(snap, present=False, expected=never)
    assert doc["run"] == run_id and doc["status"] == "running" and not doc["finished"]
    assert doc["counts"] == {"eager": 12, "compiled": 3}
    assert doc["progress_text"] == f"Run {run_id}: compiled epoch 1/2"
    assert doc["words"]["text"].startswith(
        "After 3 of 12 compiled steps and all 12 eager: compiled steps are 2.00x faster"
    )
    assert [c["name"] for c in doc["charts"]] == ["cumulative", "lead", "step_time_False", "epochs", "loss"]
    step_chart = next(c["spec"] for c in doc["charts"] if c["name"] == "step_time_False")
    assert step_chart["description"].startswith("Step time per step: 12 eager steps, 3 compiled steps")
    assert step_chart["width"] == "container"
    labels = [card["label"] for card in doc["cards"]]
    assert "Steady-state speedup" in labels and len(labels) == 6
    assert doc["loss"].startswith("The two loss curves coincide")
    json.dumps(doc, allow_nan=False)  # what the browser can parse


def test_presenter_mode_holds_the_race_and_the_step_times_only(store):
    run_id = record_race(store, "running")
    doc = feed_document(LiveBoard(store.path).snapshot(run_id), present=True, expected=never)
    assert [c["name"] for c in doc["charts"]] == ["present_cumulative", "present_steps"]
    assert all(c["spec"]["height"] == PRESENT_CHART_HEIGHT for c in doc["charts"])
    assert doc["loss"] is None and doc["present"]
    for c in doc["charts"]:  # sized for a projector: read from the back of a room
        config = c["spec"]["config"]
        assert config["axis"]["labelFontSize"] >= 18 and config["axis"]["titleFontSize"] >= 18
        assert config["text"]["fontSize"] >= 20 and config["legend"]["labelFontSize"] >= 18


def test_before_the_compile_the_words_give_the_expected_compile_time(store):
    run_id = record_race(store, "running")
    sequential = {**store.get_run(run_id).params, "schedule": "sequential"}  # eager's whole run first
    store.update_run(run_id, phase="eager epoch 1/2", params=sequential)
    no_compiled_steps(store, run_id)
    doc = feed_document(LiveBoard(store.path).snapshot(run_id), False, lambda: (11.0, False))
    assert doc["words"] == {
        "text": "Eager run: step 12 of 12. Next: compile (about 11 s on this device), then the compiled run.",
        "compiling": False,
    }
    assert doc["cards"] == []  # nothing to compare yet: no row of six dashes pushing the race down


def test_text_from_a_run_stays_text_in_the_document(store):
    run_id = record_race(store, "running")
    phase = "compiling [click me](http://host/phish) <img src=x onerror=alert(1)>"
    store.update_run(run_id, phase=phase, details={"compile_phase": {"phase": "![x](http://host/pixel.png)"}})
    no_compiled_steps(store, run_id)
    doc = feed_document(LiveBoard(store.path).snapshot(run_id), False, lambda: (None, True))
    assert "<img src=x onerror=alert(1)>" in doc["progress_text"]  # as typed: the browser sets it as text
    assert doc["words"]["compiling"] and "Now: ![x](http://host/pixel.png)." in doc["words"]["text"]
    assert "textContent" in feed_routes_js() and "innerHTML" not in feed_routes_js()


def feed_routes_js() -> str:
    with open(os.path.join(os.path.dirname(feed_routes.__file__), "feed_view.js"), encoding="utf-8") as fh:
        return fh.read()


def test_not_a_number_reaches_the_browser_as_null():
    feed = encode({"finished": False, "a": [1.0, math.nan], "b": {"c": math.inf}})
    assert feed.json() == {"finished": False, "a": [1.0, None], "b": {"c": None}}


def test_one_build_per_snapshot_however_many_viewers_ask(store):
    run_id = record_race(store, "running")
    feeds = LiveFeeds(LiveBoard(store.path), max_age_s=60)
    first = feeds.get(run_id)
    assert all(feeds.get(run_id) is first for _ in range(50)) and feeds.builds == 1
    assert feeds.get(run_id, present=True) is not first and feeds.builds == 2  # another layout
    assert feeds.get(424242) is None


def test_new_steps_make_a_new_document_and_nothing_new_keeps_its_tag(store):
    run_id = record_race(store, "running")
    feeds = LiveFeeds(LiveBoard(store.path), max_age_s=0, timed_max_age_s=0)  # every call reads the store
    first = feeds.get(run_id)
    again = feeds.get(run_id)
    assert again.etag == first.etag and feeds.builds == 1  # read again, nothing changed: not rebuilt
    more_steps(store, run_id)
    second = feeds.get(run_id)
    assert second.etag != first.etag and second.json()["counts"]["compiled"] == 6
    store.update_run(run_id, status="done", finished_at=time.time())
    assert feeds.get(run_id).json()["finished"]


def test_during_the_compile_the_elapsed_time_counts_up_with_nothing_new_recorded(store, monkeypatch):
    run_id = record_race(store, "running")
    store.update_run(run_id, phase="compiling", details={"compile_phase": {"compile_started": 1000.0}})
    no_compiled_steps(store, run_id)
    feeds = LiveFeeds(LiveBoard(store.path), max_age_s=60)
    feeds._expected[run_id] = (None, True)
    clock = [1012.2]
    monkeypatch.setattr("core.view.run_screen.feed.time.time", lambda: clock[0])
    assert "12 s so far" in feeds.get(run_id).json()["words"]["text"]
    clock[0] += 3
    assert "15 s so far" in feeds.get(run_id).json()["words"]["text"] and feeds.builds == 2


def client() -> TestClient:
    return TestClient(Starlette(routes=feed_routes.routes()))  # with `served`: undone after the test


def test_the_route_sends_the_document_compressed_and_304_when_the_browser_has_it(store, served):
    run_id = record_race(store, "running")
    http = client()
    response = http.get(f"/api/live/{run_id}", headers={"Accept-Encoding": "gzip"})
    assert response.status_code == 200 and response.headers["content-encoding"] == "gzip"
    assert response.json()["counts"] == {"eager": 12, "compiled": 3}  # the client undoes the gzip
    assert "someone" not in response.text  # the owner's name is not in it (enough to cancel from a shell)
    etag = response.headers["etag"]
    unchanged = http.get(f"/api/live/{run_id}", headers={"If-None-Match": etag})
    assert unchanged.status_code == 304 and unchanged.content == b""
    plain = http.get(f"/api/live/{run_id}?present=1", headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers and plain.json()["present"]
    missing = http.get("/api/live/424242")
    assert missing.status_code == 404 and missing.json() == {"error": "Run 424242 does not exist."}
    assert http.get(f"/api/live/{2**63}").status_code == 404
    assert http.get("/api/live/abc").status_code == 404


def test_the_route_serves_the_chart_library_and_nothing_else(served):
    http = client()
    for url in feed_routes.asset_urls():
        response = http.get(url)
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/javascript")
        assert len(response.content) > 50_000 and response.headers["cache-control"].startswith("public")
    assert http.get("/api/live/assets/LICENSE.vega").status_code == 404
    assert http.get("/api/live/assets/..%2F..%2Fapp.py").status_code == 404


def open_run(run_id: int, **state) -> AppTest:
    """The Race page with the run in its link, in a tab with this session state."""
    at = AppTest.from_file(APP, default_timeout=60)
    for name, value in state.items():
        at.session_state[name] = value
    at.query_params["run"] = str(run_id)
    return at.run()


def feeds_mounted(at: AppTest) -> list:
    return [el for el in at.get("bidi_component") if el.proto.component_name == "compile_lab.live_feed"]


def test_the_page_gives_a_viewer_and_the_owner_the_feed(store, served):
    record_probe(store)
    run_id = record_race(store, "running")
    viewer = open_run(run_id)
    mounted = feeds_mounted(viewer)
    assert not viewer.exception and len(mounted) == 1 and len(viewer.metric) == 0  # the browser draws them
    data = json.loads(mounted[0].proto.json)
    assert data["url"] == f"/api/live/{run_id}" and data["every_ms"] == 500
    store.update_run(run_id, owner=owner_of(OWNER_TOKEN))
    owner = open_run(run_id, visitor=OWNER_TOKEN)  # its Cancel: tests/test_watching.py
    assert not owner.exception and len(feeds_mounted(owner)) == 1 and len(owner.metric) == 0


def test_without_the_routes_or_once_the_feed_failed_a_viewer_refreshes_through_streamlit(store, served):
    record_probe(store)
    run_id = record_race(store, "running")
    viewer = open_run(run_id, feed_unreadable=True)  # what the component reports after 5 failed reads
    assert not viewer.exception and len(viewer.metric) == 6 and not feeds_mounted(viewer)
    feed_routes._served.clear()  # started as `streamlit run streamlit_app.py`
    other = open_run(run_id)
    assert not other.exception and len(other.metric) == 6 and not feeds_mounted(other)


def test_a_finished_run_is_drawn_by_the_page_for_everyone(store, served):
    record_probe(store)
    viewer = open_run(record_race(store, "done"))
    assert not viewer.exception and len(viewer.metric) >= 6  # the result, and the plan for a real run
    assert not feeds_mounted(viewer)


def test_the_feed_and_the_page_share_one_board(store):
    path = os.path.abspath(store.path)
    assert board_for(path) is board_for(Store().path)  # the page's store() and the route's, same file


def _sidebar_interval():
    import streamlit as st

    from app_pages.run_screen.feed import sidebar_every

    st.text(f"{sidebar_every(True)} {sidebar_every(False)}")


def test_a_tab_following_a_run_through_the_feed_refreshes_its_sidebar_less_often(store, served):
    record_probe(store)
    run_id = record_race(store, "running")
    viewer = AppTest.from_function(_sidebar_interval, default_timeout=60)
    viewer.query_params["run"] = str(run_id)
    assert viewer.run().text[0].value == "30.0 5.0"  # on the Race page only
    owner = AppTest.from_function(_sidebar_interval, default_timeout=60)
    owner.session_state["visitor"] = OWNER_TOKEN
    own = record_race(store, "running")
    store.update_run(own, owner=owner_of(OWNER_TOKEN))
    owner.query_params["run"] = str(own)
    assert owner.run().text[0].value == "30.0 5.0"  # the owner follows its run through the feed too
    viewer.query_params["run"] = str(record_race(store, "done"))
    assert viewer.run().text[0].value == "5.0 5.0"  # a finished run is drawn once, by the page


def _datasets(spec: dict) -> list[str]:
    """A spec's datasets as canonical text, floats to 12 significant digits (their names are digests
    of the exact JSON, which may differ in a float's last digit)."""

    def canonical(value):
        if isinstance(value, float):
            return float(f"{value:.12g}")
        if isinstance(value, dict):
            return {k: canonical(v) for k, v in value.items()}
        if isinstance(value, list):
            return [canonical(v) for v in value]
        return value

    return sorted(json.dumps(canonical(rows), sort_keys=True) for rows in spec.get("datasets", {}).values())


@pytest.mark.parametrize("present", [False, True])
def test_the_feed_encodes_every_chart_as_altair_would_and_leaves_the_pages_chart_alone(store, present):
    from app_pages.common import vega_spec
    from core.view.run_screen import layout
    from core.view.run_screen.feed import _chart_spec

    run_id = record_race(store, "running", steps=40)
    snap = LiveBoard(store.path).snapshot(run_id)
    for key, build in layout.chart_builders(snap.run, snap, snap.summary(), present).items():
        chart = build()
        before = chart.to_dict(validate=False)
        vega_spec(chart)  # the page's conversion of the same (shared) chart first
        ours = _chart_spec(chart)
        assert chart.to_dict(validate=False) == before, key  # the shared chart is unchanged
        altairs = chart.to_dict(validate=False)
        assert _datasets(ours) == _datasets(altairs) and _datasets(ours), key
        without_data = {k: v for k, v in ours.items() if k not in ("datasets", "width", "autosize")}
        assert json.dumps(without_data).count('"name": "data-') == json.dumps(altairs).count('"name": "data-')


def test_the_page_quotes_only_torchs_words_in_the_sentence(store):
    from core.view.run_screen.layout import live_words
    from core.view.safe_text import markdown_text

    run_id = record_race(store, "running")
    store.update_run(run_id, phase="compiling", details={"compile_phase": {"compile_started": 1000.0, "phase": "a*b*"}})
    no_compiled_steps(store, run_id)
    snap = LiveBoard(store.path).snapshot(run_id)
    words = live_words(snap.run, snap, snap.summary(), 12, lambda: (13.0, False), now=1012.0, quote=markdown_text)
    assert words.compiling and words.text.startswith("Compiling (about 13 s on this device): 12 s so far.")
    assert "Now: a\\*b\\*." in words.text  # torch's words as markdown text; this app's words as they are


def test_a_store_that_cannot_be_opened_is_a_clear_503_not_a_traceback(tmp_path, monkeypatch, served):
    folder = tmp_path / "a-folder"
    folder.mkdir()
    monkeypatch.setenv("COMPILE_LAB_STORE", str(folder))
    response = client().get("/api/live/1")
    assert response.status_code == 503
    assert response.json()["error"].startswith("Compile Lab cannot open its store: store ")
    assert "is a folder" in response.json()["error"]


def test_a_database_outage_is_a_503_to_try_again_not_a_damaged_record(own_server, served):
    """While the PostgreSQL server is away the feed says so (503, Retry-After), not "its stored
    record is damaged" (a 500 that made viewers give up on a sound run); back, it answers again."""
    import pg_server

    url, folder = own_server
    store = Store(url)
    watched, run_id = record_race(store, "running"), record_race(store, "running")
    http = client()
    assert http.get(f"/api/live/{watched}").status_code == 200  # the feed has its store open
    pg_server.pause(folder)  # and run_id's document, never built, must be read from it
    try:
        asked = time.monotonic()
        away = http.get(f"/api/live/{run_id}")
        waited = time.monotonic() - asked
    finally:
        pg_server.resume(folder)
    assert away.status_code == 503 and away.headers["retry-after"] == "5"
    # The viewer was answered once its read gave up (shared_board.READ_WAIT_S), not held for the pool's own wait.
    assert waited < postgresql.POOL_WAIT_S, waited
    assert away.json()["error"] == feed_routes.UNAVAILABLE and "damaged" not in away.text
    assert http.get(f"/api/live/{run_id}").status_code == 200
