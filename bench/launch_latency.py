"""From Launch to the first chart: workers started cold (a fresh `python -m core.runs.worker`) against
workers forked from a warm server (core.runs.warm_start), and what a replicate process's start costs.

Two apps are started as the Dockerfile starts one (`streamlit run app.py`, a free port, a data
directory of its own, Inductor's one-time CPU probe built first): one with COMPILE_LAB_WARM_START=off,
one with it on. In Chromium, a new visitor opens the Race page and presses Launch on the default race
(the app's own enqueue path), in A B A B order; for each race it measures, from the click:
  - the run queued and the worker's claim (both from the store);
  - the first step stored (polled from the store every 20 ms, as a live page reads it), and when the
    worker had timed it (its recorded_at);
  - the first chart: the race chart drawn in the page with eager's first step (a check in the page
    every 20 ms: the live feed's first chart, drawn before the others, or Streamlit's);
then cancels the race and waits for its worker to be gone. One race per app first, not counted: it
runs the device probe and, in the warm app, is the idle tick that starts the warm server.

Then a replicate's start: a replicate of the default race through the app's own path
(core.runs.processes.start_replicate, from the race's compile cache), started cold (warm
starts off) and forked warm, in turns; from the start to its first timed step (the model and
batches behind it), how much of that was the process start itself, and to its first counted step
(its first block of each variant, the warm compile and the process's one-time costs, is dropped).

Goals (issue 36): the median first chart at most 2 s after Launch with warm starts on this CPU; a
replicate process's overhead (start to first timed step) under 0.5 s. Prints figures, never asserts;
the load average beside each (a shared box is noisy).

Run from the repo root: python bench/launch_latency.py [--races 5] [--replicates 5] [--quick] [--replicates-only]
                        python bench/launch_latency.py --first 3   (a fresh app's first Launch alone)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from viewers import ROOT, free_port, launch_browser, load_average  # noqa: F401  (viewers puts the repo on sys.path)

from core.runs import processes, queue, warm_start
from core.runs.store import Store

ARMS = {"cold": "off", "warm": "on"}
GOAL_FIRST_CHART_S = 2.0
GOAL_REPLICATE_S = 0.5
# In the page: when the race chart first shows eager's first step, by the live feed or by Streamlit.
FIRST_CHART_WATCH = """
window.__firstChart = null;
setInterval(() => {
  if (window.__firstChart) return;
  const feed = document.querySelector('.cl-feed');  // its charts exist from eager's first step on
  if (feed && feed.querySelector('.cl-chart svg')) {
    window.__firstChart = Date.now();
    return;
  }
  for (const el of document.querySelectorAll("[aria-label^='The race: cumulative training time:']")) {
    if (!/: 0 eager/.test(el.getAttribute('aria-label'))) { window.__firstChart = Date.now(); return; }
  }
}, 20);
"""


class App:
    """One app server with its own data directory, store and warm-start setting."""

    def __init__(self, arm: str, data: str | None = None):
        self.arm = arm
        self.started = time.time()
        fresh = data is None
        self.data = data or tempfile.mkdtemp(prefix=f"compile-lab-bench-launch-{arm}-")
        self.store_path = os.path.join(self.data, "store.sqlite3")
        self.env = {
            **os.environ,
            "COMPILE_LAB_DATA": self.data,
            "COMPILE_LAB_STORE": self.store_path,
            warm_start.SETTING: ARMS[arm],
        }
        self.env.pop("COMPILE_LAB_CONFIG", None)
        probe = "import torch; from core.engine.device_state import probe_cpu_vector_isa as p; p(torch.device('cpu'), 'inductor')"
        if fresh:
            subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=self.env, check=True, capture_output=True)
        self.started = time.time()  # the app's start: what a first Launch may have readied since
        self.store = Store(self.store_path)
        port = free_port()
        self.log = open(os.path.join(self.data, "streamlit.log"), "w")
        self.server = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port)]
            + ["--server.address", "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false"]
            + ["--server.fileWatcherType", "none"],
            cwd=ROOT,
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.url = f"http://127.0.0.1:{port}"
        import urllib.request

        deadline = time.monotonic() + 90
        while True:
            try:
                if urllib.request.urlopen(self.url + "/_stcore/health", timeout=2).status == 200:
                    break
            except OSError:
                if time.monotonic() > deadline or self.server.poll() is not None:
                    sys.exit(f"streamlit did not start; see {self.data}/streamlit.log")
                time.sleep(0.3)

    def warm_server_ready(self) -> bool:
        """Whether a warm server of this app's data directory forks jobs now."""
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/comm") as fh:
                    if fh.read().strip() != warm_start.SERVER_NAME:
                        continue
                with open(f"/proc/{pid}/environ", "rb") as fh:
                    if f"COMPILE_LAB_DATA={self.data}".encode() + b"\0" not in fh.read():
                        continue
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    command = fh.read().split(b"\0")
                key = command[command.index(b"--key") + 1].decode()
            except (OSError, ValueError, IndexError):
                continue
            import socket

            with socket.socket(socket.AF_UNIX) as sock:
                try:
                    sock.connect(warm_start.address(key))
                    return True
                except OSError:
                    return False
        return False

    def stop(self) -> None:
        for run in self.store.list_runs(status=("queued", "starting", "running")):
            queue.cancel(self.store, run.id, run.owner)
        os.killpg(self.server.pid, 15)
        self.server.wait(timeout=30)
        for pid in os.listdir("/proc"):  # this app's warm server
            try:
                with open(f"/proc/{pid}/environ", "rb") as fh:
                    mine = f"COMPILE_LAB_DATA={self.data}".encode() + b"\0" in fh.read()
                with open(f"/proc/{pid}/comm") as fh:
                    if mine and fh.read().strip() == warm_start.SERVER_NAME:
                        os.kill(int(pid), 15)
            except (OSError, ValueError):
                continue


def launch_once(app: App, browser, wait_warm: bool = True) -> dict:
    """One Launch of the default race by a new visitor; the times from the click, in seconds.
    `wait_warm`: first wait for the warm app's server (False: a person who clicks as soon as Launch
    is enabled, however far the app has got)."""
    if app.arm == "warm" and wait_warm:
        deadline = time.monotonic() + 120
        while not app.warm_server_ready() and time.monotonic() < deadline:
            time.sleep(0.2)
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    context.add_init_script(FIRST_CHART_WATCH)
    page = context.new_page()
    page.goto(app.url)
    button = page.get_by_role("button", name="Launch")
    button.wait_for(timeout=60_000)
    page.wait_for_function(
        "() => [...document.querySelectorAll('button')].some(b => b.innerText.trim() === 'Launch' && !b.disabled)",
        timeout=120_000,
    )
    enabled = time.time() - app.started
    time.sleep(2)  # the page settles as a person would read it
    before = max((r.id for r in app.store.list_runs(limit=5)), default=0)
    load = os.getloadavg()[0]
    clicked = time.time()
    button.click()
    times: dict = {"load": load, "enabled": enabled}
    run_id, last = None, 0
    while time.time() - clicked < 180:
        if run_id is None:
            newer = [r for r in app.store.list_runs(kind="race", limit=5) if r.id > before]
            if newer:
                run_id = newer[0].id
                times["queued"] = newer[0].created_at - clicked
        if run_id is not None:
            run = app.store.get_run(run_id)
            if "claimed" not in times and run.status == "running":
                times["claimed"] = time.time() - clicked
            if "stored" not in times:
                for event in app.store.events_after(run_id, last):
                    last = event["id"]
                    if event["kind"] == "step":
                        times["stored"] = time.time() - clicked
                        times["timed"] = event["recorded_at"] - clicked
                        break
            if run.finished:
                times["note"] = f"{run.status}: {run.error}"
                break
        shown = page.evaluate("window.__firstChart")
        if shown and "stored" in times:
            times["chart"] = shown / 1000.0 - clicked
            break
        time.sleep(0.02)
    if run_id is not None:
        run = app.store.get_run(run_id)
        times["run"] = run_id
        times["started"] = (run.environment or {}).get("process_start", "?")
        times["view"] = "feed" if page.locator(".cl-feed").count() else "streamlit"
        queue.cancel(app.store, run_id, run.owner)
        deadline = time.monotonic() + 60
        while processes.pid_alive(app.store.get_run(run_id).pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if times["started"] == "?":  # the environment is stored with the run's end
            times["started"] = (app.store.get_run(run_id).environment or {}).get("process_start", "?")
    context.close()
    time.sleep(1)
    return times


# The Race page's default CPU race (core.view.race_form.default_spec), named here without the view.
REPLICATE_SPEC = dict(model="pointwise_mlp", batch_size=4096, epochs=3, steps_per_epoch=100, device="cpu")
REPLICATE_STEPS = 10  # timed steps per variant: the start is measured, not the steps


def replicate_once(arm: str, env: dict, cache_dir: str) -> dict:
    """One replicate of the default race through the app's own path (core.runs.processes:
    start_replicate, warm where the server of `env` is ready; cold with warm starts off), from the
    race's compile cache: its timeline from the start, in seconds."""
    from core.engine.spec import RunSpec
    from core.runs.processes import RESULT_PREFIX, start_replicate

    sent = time.time()
    job = {
        "spec": RunSpec(**REPLICATE_SPEC).to_dict(),
        "number": 2,
        "steps": REPLICATE_STEPS,
        "cache_dir": cache_dir,
        "conditions": None,
        "sent_at": sent,
    }
    proc = start_replicate(job, env if arm == "warm" else {**env, warm_start.SETTING: "off"})
    if proc.warm != (arm == "warm"):
        proc.kill()
        return {"error": "no warm server" if arm == "warm" else "started warm"}
    out, err = proc.communicate(300)
    line = next((x for x in out.splitlines() if x.startswith(RESULT_PREFIX)), None)
    if line is None:
        return {"error": (err.strip().splitlines() or ["no result"])[-1][:200]}
    result = json.loads(line[len(RESULT_PREFIX) :])
    return {
        "entered": result["entered_at"] - sent,
        "first_step": result["first_step_at"] - sent,
        "first_counted": result["process"].get("start_s"),  # its first timed blocks dropped, warm compile included
        "started": result["process"].get("started"),
    }


def replicates(rounds: int) -> dict[str, list[dict]]:
    data = tempfile.mkdtemp(prefix="compile-lab-bench-replicate-")
    cache_dir = os.path.join(data, "inductor")
    env = processes.worker_environment("cpu", {**os.environ, "COMPILE_LAB_DATA": data, warm_start.SETTING: "on"})
    warm_start.ensure_server(env, data)
    deadline = time.monotonic() + 120
    while warm_start.server_state(env) != "ready" and time.monotonic() < deadline:
        time.sleep(0.2)
    results: dict[str, list[dict]] = {"cold": [], "warm": []}
    try:
        replicate_once("cold", env, cache_dir)  # not counted: fills the cache (the race's first process did)
        for _ in range(rounds):
            for arm in ("cold", "warm"):
                result = replicate_once(arm, env, cache_dir)
                result["load"] = os.getloadavg()[0]
                results[arm].append(result)
                print(f"  replicate {arm}: {_fmt(result)}", flush=True)
    finally:
        warm_start.stop_server(env)
    return results


def _fmt(result: dict) -> str:
    return ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in result.items())


def median(values: list[float]) -> str:
    values = [v for v in values if isinstance(v, float)]
    return f"{statistics.median(values):.2f} s" if values else "-"


def launch_races(rounds: int) -> dict[str, list[dict]]:
    """The two apps, `rounds` races each in A B A B order, after one not counted per app."""
    from playwright.sync_api import sync_playwright

    os.environ[warm_start.SETTING] = (
        "off"  # this process's own ticks (a cancel's) start no server: each app has its setting
    )
    apps = {arm: App(arm) for arm in ARMS}
    results: dict[str, list[dict]] = {arm: [] for arm in ARMS}
    try:
        with sync_playwright() as pw:
            browser = launch_browser(pw)
            try:
                for arm, app in apps.items():  # the device probe; the warm app's idle tick starts its server
                    print(f"  {arm} app {app.url}: first race, not counted: {_fmt(launch_once(app, browser))}")
                for i in range(rounds):
                    for arm, app in apps.items():
                        times = launch_once(app, browser)
                        results[arm].append(times)
                        print(f"  {arm} race {i + 1}: {_fmt(times)}", flush=True)
            finally:
                browser.close()
    finally:
        for app in apps.values():
            app.stop()
    return results


def first_launches(tries: int) -> dict[str, list[dict]]:
    """A fresh app's first Launch, `tries` times: each try a new app on a new data directory
    (`fresh`: the device probe not run yet), then that app stopped and started again on the same
    directory (`restart`: the probe known, nothing else warm), each with the default warm starts
    on; a new visitor opens the Race page at once and clicks Launch 2 s after it is enabled; then
    (`later`) a second visitor's Launch of the restarted app, as every later one is. The times from
    the click; `enabled`: from the app's start to Launch enabled."""
    from playwright.sync_api import sync_playwright

    os.environ[warm_start.SETTING] = "off"  # this process's own ticks (a cancel's) start no server
    results: dict[str, list[dict]] = {"fresh": [], "restart": [], "later": []}
    with sync_playwright() as pw:
        browser = launch_browser(pw)
        try:
            for i in range(tries):
                data = None
                for arm in ("fresh", "restart"):
                    app = App("warm", data)
                    data = app.data
                    try:
                        times = launch_once(app, browser, wait_warm=False)
                        results[arm].append(times)
                        print(f"  first Launch, {arm} app, try {i + 1}: {_fmt(times)}", flush=True)
                        if arm == "restart":  # a later Launch of the same app, for comparison
                            later = launch_once(app, browser, wait_warm=False)
                            results["later"].append(later)
                            print(f"  a later Launch, try {i + 1}: {_fmt(later)}", flush=True)
                    finally:
                        app.stop()
        finally:
            browser.close()
    return results


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--races", type=int, default=5, help="races per arm, in A B A B order (default 5)")
    p.add_argument("--replicates", type=int, default=5, help="replicate starts per arm (default 5)")
    p.add_argument("--quick", action="store_true", help="2 races and 2 replicates per arm")
    p.add_argument("--replicates-only", action="store_true", help="a replicate's start alone (no apps, no browser)")
    p.add_argument("--first", type=int, default=0, help="only a fresh app's first Launch, this many tries")
    args = p.parse_args(argv)
    if args.first:
        print(f"machine: {os.cpu_count()} cores, load average {load_average()} before starting", flush=True)
        firsts = first_launches(args.first)
        print("\nA fresh app's first Launch (medians, seconds; enabled: from the app's start)")
        for arm, rows in firsts.items():
            charts = ", ".join(f"{r['chart']:.2f}" for r in rows if "chart" in r)
            print(
                f"{arm:<8} Launch enabled {median([r.get('enabled') for r in rows])}, first chart "
                f"{median([r.get('chart') for r in rows])} ({charts}); started "
                + ", ".join(sorted({str(r.get("started")) for r in rows}))
            )
        print(f"load average at the end: {load_average()}")
        return
    if args.quick:
        args.races, args.replicates = 2, 2
    if args.replicates_only:
        args.races = 0
    print(f"machine: {os.cpu_count()} cores, load average {load_average()} before starting", flush=True)
    results = launch_races(args.races) if args.races else {arm: [] for arm in ARMS}
    reps = replicates(args.replicates)
    print("\nFrom Launch (medians, seconds)")
    print(f"{'':<6} {'queued':>8} {'claimed':>8} {'1st step timed':>15} {'stored':>8} {'first chart':>12}  started")
    for arm, rows in results.items():
        started = ", ".join(sorted({str(r.get("started")) for r in rows}))
        print(
            f"{arm:<6} {median([r.get('queued') for r in rows]):>8} {median([r.get('claimed') for r in rows]):>8} "
            f"{median([r.get('timed') for r in rows]):>15} {median([r.get('stored') for r in rows]):>8} "
            f"{median([r.get('chart') for r in rows]):>12}  {started}"
        )
    warm_chart = [r["chart"] for r in results["warm"] if "chart" in r]
    if warm_chart:
        met = statistics.median(warm_chart) <= GOAL_FIRST_CHART_S
        print(f"goal: median first chart with warm starts <= {GOAL_FIRST_CHART_S:.0f} s: {'met' if met else 'NOT met'}")
    print("\nA replicate's start (medians, seconds from the start)")
    for arm, rows in reps.items():
        print(
            f"{arm:<6} entered {median([r.get('entered') for r in rows])}, first timed step "
            f"{median([r.get('first_step') for r in rows])} (of which the model and batches "
            f"{median([r.get('first_step', 0) - r.get('entered', 0) for r in rows if 'first_step' in r])}), "
            f"first counted step {median([r.get('first_counted') for r in rows])}"
        )
    warm_rep = [r["first_step"] for r in reps["warm"] if "first_step" in r]
    if warm_rep:
        met = statistics.median(warm_rep) < GOAL_REPLICATE_S
        print(f"goal: a warm replicate's overhead < {GOAL_REPLICATE_S} s: {'met' if met else 'NOT met'}")
    print(f"load average at the end: {load_average()}")


if __name__ == "__main__":
    main()
