"""A run's live feed in the browser: the HTTP routes beside Streamlit's (mounted by app.py) that
serve the feed document and the chart library, and the view that draws it once and then asks the
server for the shared document instead of Streamlit rerunning the page every second. UI only.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import streamlit as st
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app_pages.common import board
from app_pages.run_screen.show import PRESENT_CHROME
from core import PROJECT_ROOT
from core.runs.disk_space import store_unavailable
from core.runs.store import StoreError, default_store_path, id_from_text, store_location
from core.view.run_screen.feed import FEED_POLL_S, feeds_for
from core.view.run_screen.shared_board import board_for, yield_to_measurements

# ----------------------------------------------------------------------
# HTTP routes beside Streamlit's, mounted by app.py (st.App): a run's live feed
# (core.view.run_screen.feed) and the chart library that viewers' browsers draw it with.
#
# The Race page sends everyone following a live run (its owner too) to the feed only where these
# routes are served (`served()`: the app was started with `streamlit run app.py`). Started as
# `streamlit run streamlit_app.py`, the routes do not exist and every tab refreshes through Streamlit.

VENDOR_DIR = os.path.join(PROJECT_ROOT, "assets", "vendor", "vega")
ASSETS = ("vega.min.js", "vega-lite.min.js", "vega-embed.min.js")  # in loading order
FEED_PREFIX = "/api/live"
UNAVAILABLE = (
    "Compile Lab cannot reach its store just now (the database is away or the file is locked); nothing is lost."
)
RETRY_AFTER_S = 5

# Builds run on two threads of their own at a viewer's low priority (a box racing on its CPU gives
# the race the CPU first), off the event loop that serves every session's websocket.
_executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="live-feed", initializer=yield_to_measurements)
_served = threading.Event()
_assets: dict[str, tuple[bytes, str]] = {}
_LOGGER = logging.getLogger("compile_lab")


def routes() -> list[Route]:
    """The routes for st.App; from then on the Race page uses the feed for viewers."""
    _served.set()
    return [
        Route(FEED_PREFIX + "/assets/{name}", asset),
        Route(FEED_PREFIX + "/{run_id}", feed),
    ]


def served() -> bool:
    return _served.is_set()


def feed_url(run_id: int, present: bool) -> str:
    return f"{FEED_PREFIX}/{run_id}" + ("?present=1" if present else "")


def asset_urls() -> list[str]:
    return [f"{FEED_PREFIX}/assets/{name}" for name in ASSETS]


def poll_ms() -> int:
    return int(FEED_POLL_S * 1000)


def _send(request: Request, body: bytes, etag: str, media_type: str, cache_control: str) -> Response:
    """A body compressed once for every client: 304 when the client has it (its ETag), else the
    bytes as they are (the gzip middleware leaves an encoded response alone), or decompressed for a
    client that does not take gzip."""
    headers = {"ETag": etag, "Cache-Control": cache_control, "Vary": "Accept-Encoding"}
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers=headers)
    if "gzip" in request.headers.get("accept-encoding", ""):
        return Response(body, media_type=media_type, headers={**headers, "Content-Encoding": "gzip"})
    return Response(gzip.decompress(body), media_type=media_type, headers=headers)


async def feed(request: Request) -> Response:
    """The run's document (core.view.run_screen.feed), encoded once for every viewer."""
    run_id = id_from_text(request.path_params["run_id"])
    present = request.query_params.get("present") in ("1", "true")
    if run_id is None:  # not a possible id (a crafted path): no traceback, no echo of it
        return JSONResponse({"error": "No such run."}, status_code=404)
    try:
        board = board_for(store_location(default_store_path()))
        document = await asyncio.get_running_loop().run_in_executor(_executor, feeds_for(board).get, run_id, present)
    except StoreError as exc:
        return JSONResponse({"error": f"Compile Lab cannot open its store: {exc}"}, status_code=503)
    except Exception as exc:  # noqa: BLE001 - a stored record the feed cannot draw: its viewers read why, not a traceback
        if store_unavailable(exc):  # the database away or the file locked: not the record's fault
            return JSONResponse({"error": UNAVAILABLE}, status_code=503, headers={"Retry-After": str(RETRY_AFTER_S)})
        _LOGGER.exception("the live feed cannot draw run %s", run_id)
        return JSONResponse({"error": f"Run {run_id} cannot be shown: its stored record is damaged."}, status_code=500)
    if document is None:
        return JSONResponse({"error": f"Run {run_id} does not exist."}, status_code=404)
    return _send(request, document.body, document.etag, "application/json", "no-cache")


async def asset(request: Request) -> Response:
    """One of the vendored chart libraries, compressed once per process and cached by the browser."""
    name = request.path_params["name"]
    if name not in ASSETS:
        return JSONResponse({"error": "not found"}, status_code=404)
    if name not in _assets:
        with open(os.path.join(VENDOR_DIR, name), "rb") as fh:
            raw = fh.read()
        _assets[name] = (gzip.compress(raw, compresslevel=9, mtime=0), '"' + hashlib.sha256(raw).hexdigest()[:24] + '"')
    body, etag = _assets[name]
    return _send(request, body, etag, "text/javascript", "public, max-age=86400")


# ----------------------------------------------------------------------
# A viewer's live view drawn by the browser from the run's live feed (core.view.run_screen.feed): the
# page is drawn once, and from then on the browser asks the server for the shared document instead of
# Streamlit rerunning this page for it every second. UI only.

GIVE_UP_AFTER = 5  # failed reads in a row before the page falls back to refreshing through Streamlit
# The sidebar (device card, queue) of a tab following a run through the feed refreshes this often:
# with a talk's audience of such tabs, their sidebars every 5 s are most of what it costs the server;
# the run itself is on the page, from the feed.
SIDEBAR_WHILE_FOLLOWING_S = 30.0
SIDEBAR_S = 5.0

with open(os.path.join(os.path.dirname(__file__), "feed_view.js"), encoding="utf-8") as _fh:
    _JS = _fh.read()

# Close to the page's own elements (st.progress, st.info, st.metric with border, two columns).
_CSS = """
.cl-feed { display: flex; flex-direction: column; gap: 0.8rem; }
.cl-progress-text { margin: 0 0 0.2rem 0; font-size: 0.9rem; }
.cl-progress { height: 0.5rem; border-radius: 0.25rem; background: rgba(49, 51, 63, 0.1); overflow: hidden; }
.cl-progress-fill { height: 100%; width: 0; background: var(--st-primary-color, #ee4c2c); transition: width 0.3s; }
.cl-error:empty, .cl-words:empty, .cl-cards:empty, .cl-note:empty { display: none; }
.cl-note { margin: 0; font-size: 0.875rem; color: rgba(49, 51, 63, 0.6); }
.cl-error { padding: 0.8rem 1rem; border-radius: 0.5rem; background: rgba(255, 43, 43, 0.09); color: #7d353b; }
.cl-info { padding: 0.8rem 1rem; border-radius: 0.5rem; background: rgba(28, 131, 225, 0.1); color: #004280; }
.cl-bold { font-weight: 600; margin: 0; }
.cl-waiting { margin: 0; font-size: 0.9rem; color: rgba(49, 51, 63, 0.6); }
.cl-cards { display: flex; flex-wrap: wrap; gap: 0.6rem; }
.cl-card { flex: 1 1 calc(33.3% - 0.6rem); min-width: calc(33.3% - 0.6rem); box-sizing: border-box;
  border: 1px solid rgba(49, 51, 63, 0.2); border-radius: 0.5rem; padding: 0.5rem 0.75rem; }
.cl-label { font-size: 0.875rem; cursor: help; }
.cl-value { font-size: 1.6rem; line-height: 1.4; }
.cl-delta { font-size: 0.875rem; }
.cl-delta.good { color: #09ab3b; } .cl-delta.bad { color: #ff2b2b; } .cl-delta.off { color: rgba(49, 51, 63, 0.6); }
.cl-row { display: flex; gap: 1rem; } .cl-row > * { flex: 1 1 0; min-width: 0; }
.cl-chart { width: 100%; }
.cl-present .cl-words, .cl-present .cl-info { font-size: max(2.6vh, 16px); line-height: 1.3; }
.cl-present .cl-progress-text { font-size: max(2.6vh, 16px); }
.cl-present .cl-value { font-size: max(4.8vh, 26px); line-height: 1.2; }
@media (min-width: 641px) { .cl-present .cl-card { flex: 1 1 calc(25% - 0.6rem); min-width: calc(25% - 0.6rem); } }
.cl-present .cl-label { font-size: max(2.7vh, 16px); }
.cl-present .cl-delta { font-size: max(2.6vh, 15px); }
.cl-present .cl-chart { height: max(calc(100vh - CHROME), 280px); }
@media (max-width: 640px) {
  .cl-row { flex-direction: column; }
  .cl-card { flex: 1 1 calc(50% - 0.6rem); min-width: calc(50% - 0.6rem); }
  .cl-value { font-size: 1.25rem; }
}
"""

_CSS = _CSS.replace("CHROME", PRESENT_CHROME)  # presenter mode's charts fill the screen, as the page's
_feed_component = st.components.v2.component("compile_lab.live_feed", js=_JS, css=_CSS, isolate_styles=False)


def use_feed() -> bool:
    """Whether this tab follows a live run through the feed: where the feed is served, unless the
    feed could not be read in this tab. The owner too (its Cancel button drawn by the page): a
    Streamlit rerun every second makes the owner's browser and the server take more of the CPU the
    race is timed on than the feed's view does."""
    return served() and not st.session_state.get("feed_unreadable")


def follows_link_through_feed(on_race_page: bool) -> bool:
    """Whether this tab will follow the run in its link through the feed: the Race page's choice,
    made before the page runs so the sidebar can refresh less often meanwhile (the link's run, live,
    no replay)."""
    if not (on_race_page and served()) or "replay" in st.query_params:
        return False
    run_id = id_from_text(st.query_params.get("run"))
    if run_id is None:
        return False
    snap = board().snapshot(run_id)  # the shared one: no store read of its own
    return snap is not None and not snap.run.finished and use_feed()


def sidebar_every(on_race_page: bool) -> float:
    return SIDEBAR_WHILE_FOLLOWING_S if follows_link_through_feed(on_race_page) else SIDEBAR_S


def _fall_back() -> None:
    st.session_state.feed_unreadable = True


def show_live_feed(run_id: int, present: bool) -> None:
    """Mount the browser's live view of the run; the page reruns when the run ends."""
    _feed_component(
        key=f"live_feed_{run_id}_{int(present)}",
        data={
            "url": feed_url(run_id, present),
            "assets": asset_urls(),
            "every_ms": poll_ms(),
            "give_up_after": GIVE_UP_AFTER,
            "present": present,
        },
        on_ended_change=lambda: None,  # the run ended: this rerun draws its final result
        on_unreadable_change=_fall_back,
    )
