"""The live feed: a run's live view as one JSON document, built once per snapshot for all of its
viewers and sent compressed, so that viewers' browsers draw the view themselves.

Why: following a run through Streamlit costs a script run per viewer per refresh in the server's one
Python process. A talk's audience then takes a share of the CPU the race it watches is timed on,
slowing the race, and their views fall seconds behind (docs/benchmarks.md#viewerspy).
Here the server's work per refresh is the same for 1 viewer or 50 (one document per snapshot,
encoded once); each viewer's poll is a dictionary lookup and a send, and an unchanged document is a
304 with no body.

The document holds exactly what the page draws for a viewer (core.view.run_screen.layout plans both):
the progress line, the sentence, the result cards, the charts as Vega-Lite specs and the loss
sentence, all as plain text and data. Pages never put it into markdown or HTML: the browser sets it
as text (app_pages/run_screen/feed_view.js).
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from core.runs.store import Run
from core.view.run_screen import layout, sentences, shared_board
from core.view.run_screen.shared_board import LiveBoard, LiveSnapshot

# A viewer's browser asks every FEED_POLL_S; the server rebuilds a run's document at most once a
# FEED_MAX_AGE_S, however many ask. A viewer is then at most about 0.75 + build + 0.5 s behind the store.
# While steps are timed (core.view.run_screen.shared_board) the document tells the browser to ask every
# TIMED_POLL_S instead, and is rebuilt at most once a TIMED_MAX_AGE_S: each build and each redraw
# takes CPU from the race on a small machine.
FEED_POLL_S = 0.5
FEED_MAX_AGE_S = 0.75
# A young race (its view waiting for the first steps of the variant now running): the browser asks
# this often and the document is built from a snapshot at most this old, so the first steps are
# drawn within about a poll of being stored. Such a document is small (no charts, or few points).
YOUNG_POLL_S = 0.25
YOUNG_MAX_AGE_S = 0.2
TIMED_POLL_S = shared_board.TIMED_REFRESH_S
TIMED_MAX_AGE_S = TIMED_POLL_S - FEED_POLL_S  # a poll a timed interval after the last finds a new one
IDLE_EVICT_S = 300.0  # a document nobody asked for this long is dropped


@dataclass(frozen=True)
class Feed:
    """One encoded document: gzip-compressed JSON and its entity tag (a digest of the JSON)."""

    body: bytes
    etag: str
    finished: bool

    def json(self) -> dict[str, Any]:
        return json.loads(gzip.decompress(self.body))


def _chart_spec(chart: Any) -> dict[str, Any]:
    """A chart as the browser's Vega-Lite draws it: as wide as its place on the page."""
    spec = _with_values(chart, {}).to_dict(validate=False)  # the builders' specs are validated by their tests
    spec["width"] = "container"
    spec["autosize"] = {"type": "fit-x", "contains": "padding"}
    return spec


def _with_values(chart: Any, converted: dict[int, dict]) -> Any:
    """The chart with each layer's DataFrame replaced by its rows, encoded by pandas' C encoder:
    Altair's own conversion of the same rows (sanitize, then to_dict) was over a third of a
    document's build. The builders' frames hold numbers and strings only, which both encode alike
    (a test compares them). Copies the chart at its top level and its layers: it may be the page's
    too (LiveSnapshot.derive), and is never changed. `converted`: rows per frame, as layers share frames."""
    out = chart.copy(deep=False)
    data = out._kwds.get("data")
    if isinstance(data, pd.DataFrame):
        if id(data) not in converted:
            converted[id(data)] = {"values": json.loads(data.to_json(orient="records", double_precision=15))}
        out._kwds["data"] = converted[id(data)]
    layers = out._kwds.get("layer")
    if isinstance(layers, list):
        out._kwds["layer"] = [_with_values(layer, converted) for layer in layers]
    return out


def feed_document(
    snap: LiveSnapshot,
    present: bool,
    expected: Callable[[], tuple[float | None, bool]],
    now: float | None = None,
) -> dict[str, Any]:
    """What a viewer's browser draws for this snapshot. `present`: presenter mode's layout (the four
    lead cards, then the race and the step times side by side). `expected`: the expected compile time."""
    run = snap.run
    total = sentences.total_steps(run.params or {})
    summary = snap.summary()
    words = layout.live_words(run, snap, summary, total, expected, now)
    cards = layout.cards(run, snap, summary, total)
    if present:  # the four lead cards alone, in presenter type (as the page draws them)
        cards = layout.split_cards(cards)[0]
    built = layout.chart_builders(run, snap, summary, present, now=now)
    stamp = layout.chart_stamp(run, snap, now)  # the compile bar's second: its chart is rebuilt once a second
    return {
        "run": run.id,
        "status": run.status,
        "finished": run.finished,
        "progress": layout.progress_fraction(run),
        "progress_text": layout.progress_line(snap),
        "error": run.error if run.status == "failed" else None,
        "damaged": bool(snap.damaged),  # the page's warning names the store's file: the feed says only that
        "words": None if words is None else {"text": words.text, "compiling": words.compiling},
        "cards": [dataclasses.asdict(card) for card in cards],
        "charts": [
            {"name": _key_name(key), "spec": snap.derive(("feed", key, stamp), lambda b=build: _chart_spec(b()))}
            for key, build in built.items()
        ],
        "waiting": None if built else layout.WAITING_FOR_STEPS,
        "loss": None if present else layout.loss_words(snap),
        "counts": snap.counts(),
        "note": shared_board.watching_note(run),  # one core: the open page is part of the measurement
        "poll_ms": int(1000 * poll_s(run, snap.counts())),
        "present": present,
        "built_at": time.time() if now is None else now,
    }


def poll_s(run: Run, counts: dict[str, int]) -> float:
    """How soon a viewer's browser asks again: quickest while the race is young (nothing drawn yet
    of the variant being set up or timed: its first steps appear as soon as they are stored), every
    TIMED_POLL_S while steps are timed (core.view.run_screen.shared_board), else FEED_POLL_S."""
    if shared_board.timed(run, counts):
        return TIMED_POLL_S
    return YOUNG_POLL_S if young(run, counts) else FEED_POLL_S


def young(run: Run, counts: dict[str, int]) -> bool:
    """A race whose view has no step yet of the variant it is starting or timing (not while it
    compiles: the compile takes seconds, and its clock moves once a second)."""
    if run.finished or run.kind != "race":
        return False
    if run.status in ("queued", "starting") or not counts.get("eager"):
        return run.status != "queued"
    match = shared_board.timed_variant(run)
    return match is not None and not counts.get(match)


def _key_name(key: Any) -> str:
    return key if isinstance(key, str) else "_".join(str(part) for part in key)


def encode(document: dict[str, Any]) -> Feed:
    """The document as the browser gets it: JSON (NaN and infinities as null: JSON has neither),
    compressed once for every viewer."""
    try:
        raw = json.dumps(document, separators=(",", ":"), allow_nan=False).encode()
    except ValueError:
        raw = json.dumps(_finite(document), separators=(",", ":"), allow_nan=False).encode()
    digest = hashlib.blake2b(raw, digest_size=12).hexdigest()
    return Feed(gzip.compress(raw, compresslevel=6, mtime=0), f'"{digest}"', bool(document.get("finished")))


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


@dataclass
class _Cached:
    snapshot: LiveSnapshot
    tick: int | None  # the second it was built in, while a compile's elapsed time counts up
    feed: Feed
    asked_at: float


class LiveFeeds:
    """The documents of the runs being followed through the feed, for one live board."""

    def __init__(self, board: LiveBoard, max_age_s: float = FEED_MAX_AGE_S, timed_max_age_s: float = TIMED_MAX_AGE_S):
        self.board = board
        self.max_age_s = max_age_s
        self.timed_max_age_s = timed_max_age_s
        self._lock = threading.Lock()  # builds are serialised: one at a time is all the CPU a box spares
        self._cache: dict[tuple[int, bool], _Cached] = {}
        self._expected: dict[int, tuple[float | None, bool]] = {}
        self.builds = 0  # documents encoded (what tests and the benchmark count)

    def get(self, run_id: int, present: bool = False) -> Feed | None:
        """The run's document now (None: no such run). Built at most once per snapshot, and once a
        second while the compile runs (its elapsed time is in the sentence)."""
        snap = self.board.snapshot(run_id, max_age_s=self.max_age(run_id, present))
        if snap is None or snap.run.kind != "race":  # a lookup's or a demo's error text is not for viewers
            return None
        now = time.time()
        tick = int(now) if sentences.is_compiling(snap.run.phase) and not snap.run.finished else None
        with self._lock:
            cached = self._cache.get((run_id, present))
            if cached is not None and cached.snapshot is snap and cached.tick == tick:
                cached.asked_at = now
                return cached.feed
            feed = encode(feed_document(snap, present, lambda: self._expected_compile(snap.run), now))
            self.builds += 1
            self._cache[(run_id, present)] = _Cached(snap, tick, feed, now)
            # A cached document holds its snapshot: as many as the board keeps runs, no more.
            by_age = sorted(self._cache, key=lambda k: self._cache[k].asked_at)
            for key in by_age[: max(0, len(by_age) - 2 * shared_board.MAX_BOARD_RUNS)]:
                del self._cache[key]
            for key in by_age:
                if key in self._cache and now - self._cache[key].asked_at > IDLE_EVICT_S:
                    del self._cache[key]
            return feed

    def max_age(self, run_id: int, present: bool = False) -> float:
        """How old a snapshot this run's document may be built from: longer while its steps are
        timed (as of the document last built), so its viewers' redraws come less often too."""
        cached = self._cache.get((run_id, present))
        if cached is not None and shared_board.timed(cached.snapshot.run, cached.snapshot.counts()):
            return max(self.max_age_s, self.timed_max_age_s)
        if cached is not None and young(cached.snapshot.run, cached.snapshot.counts()):
            return min(self.max_age_s, YOUNG_MAX_AGE_S)
        return self.max_age_s

    def _expected_compile(self, run: Run) -> tuple[float | None, bool]:
        if run.id not in self._expected:
            if len(self._expected) > 1000:
                self._expected.clear()  # a long-lived process: forget old runs' estimates
            self._expected[run.id] = self.board.read(lambda db: layout.expected_compile(db, run))
        return self._expected[run.id]


_FEEDS: dict[int, LiveFeeds] = {}
_FEEDS_LOCK = threading.Lock()


def feeds_for(board: LiveBoard) -> LiveFeeds:
    """The process's feeds for this board (created on first use)."""
    with _FEEDS_LOCK:
        if id(board) not in _FEEDS:
            _FEEDS[id(board)] = LiveFeeds(board)
        return _FEEDS[id(board)]
