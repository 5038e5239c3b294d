"""HTTP routes beside Streamlit's, mounted by app.py (st.App): a run's live feed
(core.view.run_screen.feed) and the chart library that viewers' browsers draw it with.

The Race page sends everyone following a live run (its owner too) to the feed only where these
routes are served (`served()`: the app was started with `streamlit run app.py`). Started as
`streamlit run streamlit_app.py`, the routes do not exist and every tab refreshes through Streamlit.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from core import PROJECT_ROOT
from core.runs.disk_space import store_unavailable
from core.runs.store import StoreError, default_store_path, id_from_text, store_location
from core.view.run_screen.feed import FEED_POLL_S, feeds_for
from core.view.run_screen.shared_board import board_for, yield_to_measurements

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
