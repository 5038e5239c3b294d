"""Many viewers of one live run: what they cost the server, how far behind they are, and whether
they slow the race they watch.

A talk's audience opens the speaker's link at once: N browser sessions follow one live race. Real
browsers would eat the very CPU under test, so this drives N sessions at the protocol level, as a
browser does: each opens Streamlit's websocket (/_stcore/stream), asks for the page with the run
in its link (BackMsg rerun_script), keeps the messages Streamlit marks cacheable and reports their
hashes back, and asks for every fragment rerun the server schedules (ForwardMsg auto_rerun ->
BackMsg rerun_script with the fragment id, every interval; a new interval for the same fragment
replaces the old, as in Streamlit's frontend: a large audience's views refresh less often). Each session reads what it was sent:
the step chart's description, "Step time per step: E eager steps, C compiled steps".

Started as the Dockerfile starts it (`streamlit run app.py`), a viewer's page holds the live feed's
component instead of a refreshing fragment (core.view.run_screen.feed): then each session does what the
component's JavaScript does, over HTTP with keep-alive: ask for the feed's URL (from the component's
data) every every_ms with the ETag it has, and read the step counts of every new document.
--streamlit-only runs `streamlit run streamlit_app.py` instead: no feed, every viewer through Streamlit.

For each N (0 = nobody watching, then 1, 10, 50, then 0 again to see the drift) the same small race
is queued with the queue paused, the N sessions connect and draw the page, the queue resumes, and
until the race ends it measures:
  - server CPU: the Streamlit process's user+system time over the race, per viewer;
  - staleness: sampled every 0.1 s per viewer, how old the oldest step in the store that the viewer
    does not show yet is (0 when it shows everything; measured from the step's recorded_at, the time
    the worker finished it, so the worker's 0.25 s flush interval counts against it);
  - step time: the race's steady median step of each variant, against the no-viewer races.
Goals (issue 13): under 0.02 of a core per viewer with 50 viewers, every view at most 2 s behind,
the steady step within 3% of the race with nobody watching. Prints figures side by side; never asserts.
Machines are noisy: run it on an otherwise idle box, and read the two no-viewer rows as the noise.

Run from the repo root: python bench/viewers.py [--viewers 1,10,50] [--steps 400] [--model mlp]
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from core.engine.spec import RunSpec
from core.runs import fleet, queue
from core.runs.limits import HostLimits
from core.runs.store import Store

STEP_CHART = re.compile(r"Step time per step: (\d+) eager steps, (\d+) compiled steps")
CLK_TCK = os.sysconf("SC_CLK_TCK")
CONNECT_PER_S = 25  # viewers opening the link per second (a room does not click in the same millisecond)
SAMPLE_EVERY_S = 0.1
CACHE_RUNS = 5  # a browser forgets a cached message not used for this many script runs (Streamlit's is 2 full runs)
GOALS = {"cpu_per_viewer": 0.02, "staleness_s": 2.0, "step_ratio": 1.03}


# -- the server ------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Debian's Chromium, as every browser bench drives it (`playwright install` cannot download one here).
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def launch_browser(playwright):
    """A headless Chromium for a bench (Playwright's sync API)."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def start_server(
    data: str, script: str = "app.py", *, cwd: str = ROOT, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen, str]:
    """`streamlit run app.py` as the Dockerfile runs it: the repo's .streamlit/config.toml, and no
    file watcher (a hosted box does not edit its code; each new session would otherwise scan every
    imported module's file). `script`: streamlit_app.py for the app without the live feed's routes;
    `cwd`: the checkout served (this one); `env`: settings besides its data folder and store."""
    port = free_port()
    log = open(os.path.join(data, "streamlit.log"), "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", script, "--server.port", str(port)]
        + ["--server.address", "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false"]
        + ["--server.fileWatcherType", "none"],
        cwd=cwd,
        env={
            **os.environ,
            "COMPILE_LAB_DATA": data,
            "COMPILE_LAB_STORE": os.path.join(data, "store.sqlite3"),
            **(env or {}),
        },
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            if urllib.request.urlopen(url + "/_stcore/health", timeout=2).status == 200:
                return server, url
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                sys.exit("streamlit did not start; see " + os.path.join(data, "streamlit.log"))
            time.sleep(0.3)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


# -- one viewer, at the protocol level ------------------------------------------------------------


@dataclass
class Viewer:
    """One browser session following a run: what it asked for, and what it was shown when."""

    index: int
    query: str
    shown: list[tuple[float, int, int]] = field(default_factory=list)  # (time.time(), eager, compiled)
    full_runs: int = 0
    fragment_runs: int = 0
    early_runs: int = 0  # script runs stopped by the next rerun request before they finished
    messages: int = 0
    refs: int = 0
    received_bytes: int = 0
    error: str | None = None
    rendered: asyncio.Event = field(default_factory=asyncio.Event)
    intervals: dict[str, float] = field(default_factory=dict)  # fragment id -> its refresh interval now
    feed_requests: int = 0  # the live feed's polls (as the component's JavaScript makes them)
    feed_new: int = 0  # ... answered with a new document (the others: 304, unchanged)
    feed_every_s: float | None = None

    async def poll_feed(self, base_url: str, config: dict, stop: asyncio.Event) -> None:
        """What app_pages/run_screen/feed_view.js does: GET the feed every every_ms with the ETag it has, over
        one keep-alive connection, and read the step counts of each new document."""
        host, port = base_url.split("//", 1)[1].split(":")
        self.feed_every_s = config["every_ms"] / 1000
        etag = None
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            while not stop.is_set():
                lines = [f"GET {config['url']} HTTP/1.1", f"Host: {host}:{port}", "Accept-Encoding: gzip"]
                if etag:
                    lines.append(f"If-None-Match: {etag}")
                writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
                await writer.drain()
                status = int((await reader.readline()).split()[1])
                headers = {}
                while (line := await reader.readline()) not in (b"\r\n", b""):
                    name, _, value = line.decode().partition(":")
                    headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", 0)))
                self.received_bytes += len(body)
                self.feed_requests += 1
                if status == 200:
                    if headers.get("content-encoding") == "gzip":
                        body = gzip.decompress(body)
                    doc = json.loads(body)
                    etag = headers.get("etag")
                    self.feed_new += 1
                    self.shown.append((time.time(), doc["counts"]["eager"], doc["counts"]["compiled"]))
                    if doc["finished"]:
                        return
                elif status != 304:
                    raise RuntimeError(f"feed answered {status}: {body[:200]!r}")
                await asyncio.sleep(self.feed_every_s)
        finally:
            writer.close()

    async def follow(self, ws_url: str, stop: asyncio.Event) -> None:
        cache: dict[str, tuple[int, tuple[int, int] | None]] = {}  # hash -> (last run used, step counts)
        timers: dict[str, tuple[asyncio.Task, float]] = {}  # fragment id -> (its rerun timer, interval)
        feeds: list[asyncio.Task] = []
        base_url = "http" + ws_url[2:].split("/_stcore", 1)[0]
        page_hash, runs = "", 0
        try:
            async with websockets.connect(ws_url, subprotocols=["streamlit"], max_size=None) as ws:

                async def rerun(fragment_id: str | None = None) -> None:
                    msg = BackMsg()
                    state = msg.rerun_script
                    state.query_string = self.query
                    state.page_script_hash = page_hash
                    if fragment_id:
                        state.fragment_id, state.is_auto_rerun = fragment_id, True
                    state.cached_message_hashes.extend(cache)
                    await ws.send(msg.SerializeToString())

                async def every(fragment_id: str, interval: float) -> None:
                    while True:
                        await asyncio.sleep(interval)
                        await rerun(fragment_id)

                await rerun()
                while not stop.is_set():
                    try:
                        data = await asyncio.wait_for(ws.recv(), timeout=0.5)
                    except TimeoutError:
                        continue
                    self.messages += 1
                    self.received_bytes += len(data)
                    msg = ForwardMsg()
                    msg.ParseFromString(data)
                    kind = msg.WhichOneof("type")
                    if kind == "ref_hash":  # the browser has it: Streamlit sent a reference, not the element
                        self.refs += 1
                        entry = cache.get(msg.ref_hash)
                        if entry is not None:
                            cache[msg.ref_hash] = (runs, entry[1])
                            if entry[1] is not None:
                                self.shown.append((time.time(), *entry[1]))
                    elif kind == "delta":
                        feed = _feed_config(msg)
                        if feed is not None and not feeds:
                            feeds.append(asyncio.create_task(self.poll_feed(base_url, feed, stop)))
                        counts = _step_counts(msg)
                        if counts is not None:
                            self.shown.append((time.time(), *counts))
                        if msg.metadata.cacheable:
                            cache[msg.hash] = (runs, counts)
                    elif kind == "new_session":
                        page_hash = msg.new_session.page_script_hash
                        runs += 1
                        for h in [h for h, (used, _) in cache.items() if runs - used > CACHE_RUNS]:
                            del cache[h]
                    elif kind == "auto_rerun":  # as the browser does: a new interval replaces the old
                        fragment_id, interval = msg.auto_rerun.fragment_id, msg.auto_rerun.interval
                        current = timers.get(fragment_id)
                        if current is None or current[1] != interval:
                            if current is not None:
                                current[0].cancel()
                            timers[fragment_id] = (asyncio.create_task(every(fragment_id, interval)), interval)
                            self.intervals[fragment_id] = interval
                    elif kind == "stop_auto_rerun":
                        for fragment_id in msg.stop_auto_rerun.fragment_ids:
                            current = timers.pop(fragment_id, None)
                            self.intervals.pop(fragment_id, None)
                            if current:
                                current[0].cancel()
                    elif kind == "script_finished":
                        if msg.script_finished == ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY:
                            self.fragment_runs += 1
                        elif msg.script_finished == ForwardMsg.FINISHED_EARLY_FOR_RERUN:
                            self.early_runs += 1
                        else:
                            self.full_runs += 1
                            self.rendered.set()
                for task, _ in timers.values():
                    task.cancel()
                for task in feeds:
                    await task  # it ends at the stop or the run's end; its error is this viewer's
        except Exception as exc:  # noqa: BLE001 - report it, keep the other viewers going
            self.error = f"{type(exc).__name__}: {exc}"
            self.rendered.set()


def _feed_config(msg: ForwardMsg) -> dict | None:
    """The live feed component's data (its URL and poll interval), if this delta mounts it."""
    if msg.delta.WhichOneof("type") != "new_element":
        return None
    element = msg.delta.new_element
    if (
        element.WhichOneof("type") != "bidi_component"
        or element.bidi_component.component_name != "compile_lab.live_feed"
    ):
        return None
    return json.loads(element.bidi_component.json)


def _step_counts(msg: ForwardMsg) -> tuple[int, int] | None:
    if msg.delta.WhichOneof("type") != "new_element":
        return None
    element = msg.delta.new_element
    if element.WhichOneof("type") != "vega_lite_chart":
        return None
    m = STEP_CHART.search(element.vega_lite_chart.spec)
    return (int(m.group(1)), int(m.group(2))) if m else None


# -- one race, watched by N viewers ---------------------------------------------------------------


@dataclass
class Result:
    viewers: int
    cpu_cores: float
    window_s: float
    staleness_p95_s: float | None
    staleness_max_s: float | None
    eager_step_s: float | None
    compiled_step_s: float | None
    fragment_runs: int
    full_runs: int
    early_runs: int
    idle_viewers: int  # viewers whose live view never refreshed during the race
    refs: int
    messages: int
    errors: list[str]
    bench_cpu_cores: float
    worker_lag_p95_s: float | None
    live_intervals: dict[float, int] = field(default_factory=dict)  # live view's refresh interval -> viewers
    feed_requests: int = 0  # the live feed's polls, all viewers
    feed_new: int = 0  # ... of which answered with a new document
    staleness_max_at_s: float | None = None  # when the worst staleness was, after the race's first step


class StoreTimeline:
    """Polls the store from this process every POLL_S: when each step of the run was first there to
    be read (`seen`), and when the worker finished it (`recorded`, the event's recorded_at)."""

    POLL_S = 0.05

    def __init__(self, store_path: str, run_id: int):
        self.store = Store(store_path)
        self.run_id = run_id
        self.seen: dict[str, list[float]] = {"eager": [], "compiled": []}
        self.recorded: dict[str, list[float]] = {"eager": [], "compiled": []}
        self._last = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.POLL_S):
            self.poll()

    def poll(self) -> None:
        now = time.time()
        for e in self.store.events_after(self.run_id, self._last):
            self._last = e["id"]
            if e["kind"] == "step" and e["phase"] == "train":
                self.seen[e["variant"]].append(now)
                self.recorded[e["variant"]].append(e["recorded_at"])

    def worker_lag(self) -> list[float]:
        """From a step finishing in the worker to it being readable: the worker's flush interval and
        the machine's load, not the viewers' (reported apart)."""
        return [s - r for v in self.seen for s, r in zip(self.seen[v], self.recorded[v])]

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.poll()


def staleness(viewer: Viewer, timeline: StoreTimeline, start: float, end: float) -> list[float]:
    """Every SAMPLE_EVERY_S from start to end: how long the oldest step that was in the store by then,
    and that the viewer did not show yet, had been there (0 when it showed everything in the store).
    "In the store" is when this process's reader first saw it (it polls every 50 ms)."""
    eager, compiled = timeline.seen["eager"], timeline.seen["compiled"]
    out, i, shown = [], 0, (0, 0)
    t = start
    while t <= end:
        while i < len(viewer.shown) and viewer.shown[i][0] <= t:
            shown = viewer.shown[i][1:]
            i += 1
        oldest = None
        if shown[0] < len(eager) and eager[shown[0]] <= t:
            oldest = eager[shown[0]]
        elif shown[1] < len(compiled) and compiled[shown[1]] <= t:
            oldest = compiled[shown[1]]
        out.append(0.0 if oldest is None else t - oldest)
        t += SAMPLE_EVERY_S
    return out


async def watch_race(url: str, store: Store, server_pid: int, spec: RunSpec, n: int) -> Result:
    store.set_queue_paused(True)
    run_id = queue.enqueue(
        store, spec, f"bench:{n}", limits=HostLimits(job_time_limit_s=None), caps=fleet.known_caps(store)
    )
    ws_url = url.replace("http", "ws", 1) + "/_stcore/stream"
    stop = asyncio.Event()
    viewers = [Viewer(i, f"run={run_id}") for i in range(n)]
    tasks = []
    for v in viewers:  # the audience opens the link
        tasks.append(asyncio.create_task(v.follow(ws_url, stop)))
        await asyncio.sleep(1 / CONNECT_PER_S)
    for v in viewers:
        await asyncio.wait_for(v.rendered.wait(), timeout=300)
    await asyncio.sleep(2.0)  # first renders done; the live fragments tick
    timeline = StoreTimeline(store.path, run_id)
    cpu0, bench0, t0 = cpu_seconds(server_pid), time.process_time(), time.monotonic()
    wall0 = time.time()
    store.set_queue_paused(False)
    queue.tick(store)
    intervals: dict[float, int] = {}
    while True:
        await asyncio.sleep(0.2)
        run = store.get_run(run_id)
        if run.finished:
            break
        # How often each viewer's live view refreshes while the race runs (its shortest interval:
        # the sidebar's is longer; the live view's stops when the race ends).
        intervals = dict(
            Counter(
                v.feed_every_s if v.feed_every_s else min(v.intervals.values())
                for v in viewers
                if v.intervals or v.feed_every_s
            )
        )
    cpu1, bench1, t1 = cpu_seconds(server_pid), time.process_time(), time.monotonic()
    wall1 = time.time()
    timeline.close()
    await asyncio.sleep(1.5)  # the last refreshes arrive (counted in staleness, not in CPU)
    stop.set()
    await asyncio.gather(*tasks)
    window = t1 - t0
    if run.status != "done":
        sys.exit(f"the race with {n} viewers ended {run.status}: {run.error}")
    first = min([t[0] for t in timeline.seen.values() if t] or [wall0])
    lag = timeline.worker_lag()
    per_viewer = [staleness(v, timeline, first, wall1) for v in viewers]
    ages = [a for samples in per_viewer for a in samples]
    worst_at = max(
        ((i * SAMPLE_EVERY_S, a) for samples in per_viewer for i, a in enumerate(samples)),
        key=lambda x: x[1],
        default=(None, None),
    )[0]  # seconds after the first step: at the start, at the compile, or anywhere?
    summary = run.summary or {}
    return Result(
        viewers=n,
        cpu_cores=(cpu1 - cpu0) / window,
        window_s=window,
        staleness_p95_s=statistics.quantiles(ages, n=100)[94] if len(ages) > 1 else None,
        staleness_max_s=max(ages) if ages else None,
        staleness_max_at_s=worst_at,
        eager_step_s=summary.get("eager_median_step_s"),
        compiled_step_s=summary.get("compiled_median_step_s"),
        fragment_runs=sum(v.fragment_runs for v in viewers),
        full_runs=sum(v.full_runs for v in viewers),
        early_runs=sum(v.early_runs for v in viewers),
        idle_viewers=sum(1 for v in viewers if v.fragment_runs == 0 and v.feed_new == 0),
        feed_requests=sum(v.feed_requests for v in viewers),
        feed_new=sum(v.feed_new for v in viewers),
        refs=sum(v.refs for v in viewers),
        messages=sum(v.messages for v in viewers),
        errors=[f"viewer {v.index}: {v.error}" for v in viewers if v.error],
        bench_cpu_cores=(bench1 - bench0) / window,
        worker_lag_p95_s=statistics.quantiles(lag, n=100)[94] if len(lag) > 1 else None,
        live_intervals=intervals,
    )


def intervals_text(intervals: dict[float, int]) -> str:
    """'1.5 s (48 viewers), 1.0 s (2)': how often the viewers' live views were refreshing at the end."""
    parts = sorted(intervals.items(), key=lambda item: -item[1])
    return ", ".join(f"{s:g} s ({n}{' viewers' if i == 0 else ''})" for i, (s, n) in enumerate(parts)) or "-"


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def report(results: list[Result], cores: int) -> None:
    none = [r for r in results if r.viewers == 0]
    base_eager = statistics.mean(r.eager_step_s for r in none) if none else None
    base_compiled = statistics.mean(r.compiled_step_s for r in none) if none else None

    def ratio(x: float | None, base: float | None) -> str:
        return "-" if x is None or not base else f"{x / base:.3f}"

    print()
    print(
        f"{'viewers':>7}  {'server CPU':>10}  {'per viewer':>10}  {'stale p95':>9}  {'stale max':>9}  "
        f"{'eager step':>10}  {'vs none':>7}  {'compiled':>8}  {'vs none':>7}  {'refreshes':>9}  {'cached refs':>11}  "
        f"{'feed polls':>10}  {'new docs':>8}"
    )
    for r in results:
        per = "-" if r.viewers == 0 else f"{(r.cpu_cores - (none[0].cpu_cores if none else 0)) / r.viewers:.4f}"
        stale = (
            ("-", "-") if r.staleness_p95_s is None else (f"{r.staleness_p95_s:.2f} s", f"{r.staleness_max_s:.2f} s")
        )
        eager = "-" if r.eager_step_s is None else f"{r.eager_step_s * 1000:.2f} ms"
        compiled = "-" if r.compiled_step_s is None else f"{r.compiled_step_s * 1000:.2f} ms"
        print(
            f"{r.viewers:>7}  {r.cpu_cores:>7.3f} c  {per:>8} c  {stale[0]:>9}  {stale[1]:>9}  {eager:>10}  "
            f"{ratio(r.eager_step_s, base_eager):>7}  {compiled:>8}  {ratio(r.compiled_step_s, base_compiled):>7}  "
            f"{r.fragment_runs:>9}  {r.refs:>11}  {r.feed_requests:>10}  {r.feed_new:>8}"
        )
        for error in r.errors[:3]:
            print(f"         ! {error}")
    print()
    print(
        "server CPU: cores the Streamlit process used while the race ran; per viewer: that minus the "
        "no-viewer race's, divided by the viewers."
    )
    print(
        "stale: how long the oldest step in the store that a viewer did not show yet had been there, "
        "sampled every 0.1 s (p95 and max over all viewers)."
    )
    lags = [r.worker_lag_p95_s for r in results if r.worker_lag_p95_s is not None]
    if lags:
        print(
            f"(before that, a step reached the store {min(lags):.2f}-{max(lags):.2f} s (p95) after the worker "
            "finished it: its 0.25 s flush plus the machine's load; not counted above.)"
        )
    print(
        "refreshes: fragment reruns through Streamlit; feed polls: the live feed's requests (new docs: "
        "answered with a new document, the rest 304)."
    )
    print(f"step: the race's steady median step; vs none: against the mean of the {len(none)} no-viewer races.")
    if len(none) >= 2:
        spread = max(r.eager_step_s for r in none) / min(r.eager_step_s for r in none)
        print(f"noise: the no-viewer races' eager steps differ by {abs(spread - 1) * 100:.1f}% between them.")
    print(
        f"bench process (the viewers' side): up to {max(r.bench_cpu_cores for r in results):.2f} cores; "
        f"machine: {cores} cores, load average {load_average()}."
    )
    print(
        f"goals: < {GOALS['cpu_per_viewer']} core per viewer at 50 viewers, stale < {GOALS['staleness_s']:.0f} s, "
        f"step within {(GOALS['step_ratio'] - 1) * 100:.0f}% of no viewers."
    )


async def main_async(args: argparse.Namespace) -> None:
    data = tempfile.mkdtemp(prefix="compile-lab-bench-viewers-")
    os.environ["COMPILE_LAB_DATA"] = data
    os.environ.pop("COMPILE_LAB_CONFIG", None)
    store = Store(os.path.join(data, "store.sqlite3"))
    if queue.ensure_probe(store, owner="bench", wait_s=120) is None:
        sys.exit("the device probe did not finish")
    server, url = start_server(data, "streamlit_app.py" if args.streamlit_only else "app.py")
    spec = RunSpec(
        model=args.model,
        batch_size=args.batch_size,
        epochs=args.epochs,
        steps_per_epoch=args.steps,
        backend=args.backend,
        device="cpu" if args.cpu else "auto",
    )
    print(
        f"server {url} (pid {server.pid}, {'streamlit_app.py, no feed' if args.streamlit_only else 'app.py, live feed'}); race: {spec.model} bs{spec.batch_size}, {spec.epochs} x {spec.steps_per_epoch} steps, {spec.backend}"
    )
    print(f"machine: {os.cpu_count()} cores, load average {load_average()} before starting")
    results = []
    try:
        for n in [0, *args.viewers, 0]:
            result = await watch_race(url, store, server.pid, spec, n)
            results.append(result)
            print(
                f"  {n:>3} viewers: server {result.cpu_cores:.3f} cores over {result.window_s:.0f} s, "
                f"stale max {result.staleness_max_s if result.staleness_max_s is not None else float('nan'):.2f} s"
                f"{'' if result.staleness_max_at_s is None else f' ({result.staleness_max_at_s:.0f} s into the race)'}, "
                f"{result.fragment_runs} fragment and {result.full_runs} full script runs, "
                f"{result.early_runs} stopped early by the next rerun, "
                f"{result.idle_viewers} viewers never refreshed, "
                f"live view refreshing every {intervals_text(result.live_intervals)}, "
                f"load average {load_average()}",
                flush=True,
            )
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=30)
    report(results, os.cpu_count() or 0)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--viewers", default="1,10,50", help="viewer counts to run, besides none (default 1,10,50)")
    p.add_argument("--model", default="mlp")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--steps", type=int, default=800, help="steps per epoch and variant (default 800)")
    p.add_argument("--backend", default="aot_eager", help="compile backend (default aot_eager: a short compile)")
    p.add_argument("--cpu", action="store_true", help="race on the CPU even where a GPU is present")
    p.add_argument(
        "--streamlit-only",
        action="store_true",
        help="serve streamlit_app.py (no live feed): every viewer refreshes through Streamlit",
    )
    args = p.parse_args(argv)
    args.viewers = [int(n) for n in args.viewers.split(",") if n.strip()]
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
