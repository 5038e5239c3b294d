"""Does watching a race slow it? The same race with no page open, with its owner's Race page open
in Chromium, and with a viewer's page open (someone given the link), side by side.

On a small machine the page that watches a race shares the CPU the race is timed on: the browser
draws the charts, the Streamlit server builds them. This starts the app as the Dockerfile does
(`streamlit run app.py`, a free port, a temporary data directory), builds Inductor's one-time CPU
probe first (as any box that has raced before has it), and runs the same race once per arm in ABBA
order (none, owner, viewer, viewer, owner, none, per round), each with the queue paused until its
page, if any, has drawn. The owner's page is a browser whose visitor token is the race's owner (as
if it had pressed Launch); the viewer's, a browser with a token of its own.

For each race it prints the steady median step of each variant, their ratio to the mean of the
no-page races, the CPU (cores, over the race) of the Streamlit server, of Chromium (its renderer
apart) and of the worker, the worker's torch threads and the cores it was allowed. Goal (issue 23):
with the owner's page open, the steady steps within 5% of the race with no page open. Prints
figures, never asserts; a loaded machine's noise is printed beside them (the no-page races against
each other, the load average).

Run from the repo root: python bench/watching.py [--quick] [--rounds 1] [--model small_cnn]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field

from viewers import ROOT, cpu_seconds, launch_browser, load_average, start_server

from core.engine.spec import RunSpec
from core.runs import fleet, queue
from core.runs.limits import HostLimits, owner_of
from core.runs.store import Store

VISITOR_COOKIE = "compile_lab_visitor"
GOAL = 1.05  # the owner's page: steady steps within 5% of no page
ARMS = ("none", "owner", "viewer")


@dataclass
class Race:
    arm: str
    run_id: int
    status: str = ""
    eager_s: float | None = None
    compiled_s: float | None = None
    cores: dict[str, float] = field(default_factory=dict)  # process group -> cores over the race
    window_s: float = 0.0
    torch_threads: int | None = None
    worker_cpus: str = "?"
    view: str = ""  # how the page drew the live race: the live feed, or Streamlit's reruns
    note: str = ""


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (Linux /proc), found through each process's parent."""
    parents: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        parents.setdefault(ppid, []).append(int(name))
    out, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def cpus_allowed(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("Cpus_allowed_list:"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


class CpuMeter:
    """CPU seconds of the server, Chromium (renderers apart) and the worker, summed over the processes
    seen; sampled every second, so a process that ends still counts up to its last sample."""

    def __init__(self, server_pid: int):
        self.server_pid = server_pid
        self.last: dict[int, tuple[str, float]] = {}  # pid -> (group, cpu seconds at the last sample)
        self.first: dict[int, float] = {}

    def group(self, pid: int, worker_pid: int | None) -> str | None:
        if pid == self.server_pid:
            return "server"
        if worker_pid is not None and pid == worker_pid:
            return "worker"
        line = cmdline(pid)
        if "chromium" in line or "chrome" in line:
            return "renderer" if "--type=renderer" in line else "chromium"
        return None

    def sample(self, worker_pid: int | None) -> None:
        pids = set(descendants(os.getpid()))
        if worker_pid:
            pids.add(worker_pid)  # started by the server or a ticker: reparented when that one ends
        for pid in pids:
            name = self.group(pid, worker_pid)
            if name is None:
                continue
            try:
                used = cpu_seconds(pid)
            except (OSError, IndexError, ValueError):
                continue
            self.first.setdefault(pid, used)
            self.last[pid] = (name, used)

    def cores(self, window_s: float) -> dict[str, float]:
        out: dict[str, float] = {}
        for pid, (name, used) in self.last.items():
            out[name] = out.get(name, 0.0) + (used - self.first[pid]) / window_s
        return out


def open_page(browser, url: str, run_id: int, token: str):
    """A browser of this visitor (its token in the cookie the app reads, and in localStorage) on the
    run's link; returns its context once the page shows the run."""
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    host = url.split("//", 1)[1].split(":")[0]
    context.add_cookies([{"name": VISITOR_COOKIE, "value": token, "domain": host, "path": "/"}])
    context.add_init_script(f"window.localStorage.setItem('{VISITOR_COOKIE}', '{token}')")
    page = context.new_page()
    page.goto(f"{url}/?run={run_id}")
    deadline = time.monotonic() + 90
    selector = "[data-testid='stProgress'], .cl-progress-text"
    while not page.locator(selector).count():
        if time.monotonic() > deadline:
            sys.exit(f"the page never showed run {run_id} ({page.url})")
        time.sleep(0.2)
    time.sleep(3)  # the first render settles: the race starts under a page already drawing it
    return context, page


def race_once(arm: str, spec: RunSpec, url: str, store: Store, server_pid: int, browser, owner_token: str) -> Race:
    store.set_queue_paused(True)
    run_id = queue.enqueue(
        store, spec, owner_of(owner_token), limits=HostLimits(job_time_limit_s=None), caps=fleet.known_caps(store)
    )
    race = Race(arm, run_id)
    context = page = None
    if arm != "none":
        token = owner_token if arm == "owner" else uuid.uuid4().hex
        context, page = open_page(browser, url, run_id, token)
    meter = CpuMeter(server_pid)
    store.set_queue_paused(False)
    queue.tick(store)
    worker_pid, t0 = None, None
    while True:
        run = store.get_run(run_id)
        if page is not None and not race.view and run.status == "running":
            race.view = "feed" if page.locator(".cl-feed").count() else "streamlit"
        if worker_pid is None and run.pid:
            worker_pid = run.pid
        if t0 is None and run.status == "running":
            meter.sample(worker_pid)
            t0 = time.monotonic()
        elif t0 is not None:
            meter.sample(worker_pid)
        if worker_pid and not run.finished and cpus_allowed(worker_pid) != "?":
            race.worker_cpus = cpus_allowed(worker_pid)  # as the race left it pinned (it pins itself first)
        if run.finished:
            break
        time.sleep(1.0)
    race.window_s = time.monotonic() - (t0 or time.monotonic())
    if page is not None:
        context.close()
    race.status = run.status
    race.cores = meter.cores(race.window_s) if race.window_s > 0 else {}
    summary = run.summary or {}
    race.eager_s, race.compiled_s = summary.get("eager_median_step_s"), summary.get("compiled_median_step_s")
    race.torch_threads = (run.environment or {}).get("torch_threads")
    if run.status != "done":
        race.note = f"{run.status}: {run.error}"
    return race


def order(rounds: int) -> list[str]:
    """ABBA per round: none, owner, viewer, viewer, owner, none."""
    return [*ARMS, *reversed(ARMS)] * rounds


def report(races: list[Race]) -> None:
    def mean(values):
        values = [v for v in values if v]
        return statistics.mean(values) if values else None

    base = {v: mean(getattr(r, f"{v}_s") for r in races if r.arm == "none") for v in ("eager", "compiled")}

    def ratio(x, b):
        return "-" if not x or not b else f"{x / b:.3f}"

    print()
    print(
        f"{'arm':<7} {'run':>4}  {'eager step':>10} {'vs none':>7}  {'compiled':>9} {'vs none':>7}  "
        f"{'server':>6} {'chromium':>8} {'renderer':>8} {'worker':>6}  {'threads':>7} {'cpus':>5}  {'race s':>6}"
    )
    for r in races:
        c = r.cores
        print(
            f"{r.arm:<7} {r.run_id:>4}  {_ms(r.eager_s):>10} {ratio(r.eager_s, base['eager']):>7}  "
            f"{_ms(r.compiled_s):>9} {ratio(r.compiled_s, base['compiled']):>7}  "
            f"{c.get('server', 0):>6.2f} {c.get('chromium', 0):>8.2f} {c.get('renderer', 0):>8.2f} "
            f"{c.get('worker', 0):>6.2f}  {r.torch_threads or '?':>7} {r.worker_cpus:>5}  {r.window_s:>6.0f}  {r.view or '-'}"
            + (f"  ! {r.note}" if r.note else "")
        )
    print()
    print("medians by arm (steady median step; ratio to the mean of the no-page races):")
    verdicts = {}
    for arm in ARMS:
        mine = [r for r in races if r.arm == arm and r.eager_s and r.compiled_s]
        if not mine:
            continue
        e = statistics.median(r.eager_s for r in mine)
        c = statistics.median(r.compiled_s for r in mine)
        worst = max(e / base["eager"], c / base["compiled"]) if base["eager"] and base["compiled"] else None
        verdicts[arm] = worst
        cores = {k: statistics.median(r.cores.get(k, 0) for r in mine) for k in ("server", "chromium", "renderer")}
        print(
            f"  {arm:<7} eager {_ms(e)} ({ratio(e, base['eager'])}), compiled {_ms(c)} ({ratio(c, base['compiled'])}); "
            f"server {cores['server']:.2f}, chromium {cores['chromium'] + cores['renderer']:.2f} cores "
            f"(renderer {cores['renderer']:.2f})"
        )
    nones = [r.eager_s for r in races if r.arm == "none" and r.eager_s]
    if len(nones) >= 2:
        print(
            f"noise: the no-page races' eager steps differ by {(max(nones) / min(nones) - 1) * 100:.1f}% between them"
        )
    print(f"machine: {os.cpu_count()} cores, load average {load_average()} at the end")
    worst = verdicts.get("owner")
    if worst is not None:
        print(
            f"goal: the owner's page within {(GOAL - 1) * 100:.0f}% of no page: "
            + ("met" if worst <= GOAL else "NOT met")
            + f" (worst variant {worst:.3f}x)"
        )


def _ms(seconds: float | None) -> str:
    return "-" if not seconds else f"{seconds * 1000:.1f} ms"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="small_cnn")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--steps", type=int, default=80, help="steps per epoch and variant (default 80)")
    p.add_argument("--backend", default="inductor")
    p.add_argument("--rounds", type=int, default=1, help="ABBA rounds (each: 6 races)")
    p.add_argument("--quick", action="store_true", help="one round of 1 x 50 steps: a first look in a few minutes")
    args = p.parse_args(argv)
    if args.quick:
        args.epochs, args.steps, args.rounds = 1, 50, 1
    from playwright.sync_api import sync_playwright

    data = tempfile.mkdtemp(prefix="compile-lab-bench-watching-")
    os.environ["COMPILE_LAB_DATA"] = data
    os.environ.pop("COMPILE_LAB_CONFIG", None)
    store = Store(os.path.join(data, "store.sqlite3"))
    os.environ["COMPILE_LAB_STORE"] = store.path
    env = {**os.environ}
    probe = "import torch; from core.engine.device_state import probe_cpu_vector_isa as p; print(p(torch.device('cpu'), 'inductor'))"
    built = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True)
    print(f"one-time CPU probe built before the races: {float(built.stdout.strip() or 'nan'):.1f} s", flush=True)
    if queue.ensure_probe(store, owner="bench", wait_s=120) is None:
        sys.exit("the device probe did not finish")
    spec = RunSpec(
        model=args.model,
        batch_size=args.batch_size,
        epochs=args.epochs,
        steps_per_epoch=args.steps,
        backend=args.backend,
        device="cpu",
    )
    server, url = start_server(data)
    print(
        f"server {url} (pid {server.pid}); race: {spec.model} bs{spec.batch_size}, {spec.epochs} x "
        f"{spec.steps_per_epoch} steps, {spec.backend}; machine: {os.cpu_count()} cores, load average "
        f"{load_average()} before starting",
        flush=True,
    )
    owner_token = uuid.uuid4().hex
    races: list[Race] = []
    try:
        with sync_playwright() as pw:
            browser = launch_browser(pw)
            try:
                for arm in order(args.rounds):
                    race = race_once(arm, spec, url, store, server.pid, browser, owner_token)
                    races.append(race)
                    print(
                        f"  {arm:<6} run {race.run_id}: {race.status}, eager {_ms(race.eager_s)}, compiled "
                        f"{_ms(race.compiled_s)}, server {race.cores.get('server', 0):.2f} + chromium "
                        f"{race.cores.get('chromium', 0) + race.cores.get('renderer', 0):.2f} cores, "
                        f"load average {load_average()}",
                        flush=True,
                    )
            finally:
                browser.close()
    finally:
        for run in store.list_runs(status=("queued", "starting", "running")):
            queue.cancel(store, run.id, run.owner)
        os.killpg(server.pid, 15)
        server.wait(timeout=30)
    report(races)


if __name__ == "__main__":
    main()
