"""Retake docs/screenshots/: the app served on a free port from a temporary data directory, the
pages made to show real data without a new race (the shipped recordings replayed and imported; a
two-point aot_eager sweep of a tiny MLP; one Under-the-hood demo measured here), and each page saved
at 1280x720 (a projector) and 390x844 (a phone). Prints what it measured on the way: the step
chart's height and font sizes, and where presenter mode's cards end against the fold.

    python docs/screenshots/take.py [--out docs/screenshots] [--no-sweep | --race-only | --answers-only]

Needs Playwright and Chromium (requirements-dev.txt); takes a few minutes on a small CPU. Stops
the server and every worker it started before it exits.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from core.runs.bundle import import_bundle, load_bundle_file  # noqa: E402
from core.runs.store import Store  # noqa: E402

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
CHROMIUM_ARGS += ["--disable-sync", "--no-first-run"]
VIEWPORTS = {"": {"width": 1280, "height": 720}, "-phone": {"width": 390, "height": 844}}
RECORDING = "cpu-break-even-demo"  # the shipped recording the Race page replays
SWEEP = [
    *("sweep --model pointwise_mlp --backend aot_eager --device cpu --epochs 2 --steps-per-epoch 30".split()),
    *("--batch-sizes 64,256 --owner screenshots".split()),
]
OWNER = "screenshots"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(data: str, store_path: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "COMPILE_LAB_DATA": data, "COMPILE_LAB_STORE": store_path}
    log = open(os.path.join(data, "streamlit.log"), "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port)]
        + ["--server.address", "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            if urllib.request.urlopen(url + "/_stcore/health", timeout=2).status == 200:
                return server, url
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                stop(server)
                raise SystemExit("streamlit did not start: " + open(log.name).read()[-2000:]) from None
            time.sleep(0.5)


def stop(server: subprocess.Popen) -> None:
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)


def stop_workers(store: Store) -> None:
    """Workers run in their own sessions: end those of this store's unfinished jobs, by their pid."""
    for run in store.list_runs(status=("starting", "running")):
        if run.pid:
            try:
                os.kill(run.pid, signal.SIGTERM)
            except OSError:
                pass


def wait_until(predicate, timeout: float, every: float = 0.3):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise SystemExit(f"gave up after {timeout:.0f} s")


def settle(page, seconds: float = 1.0) -> None:
    page.mouse.move(2, 2)  # no chart toolbar left hovering
    time.sleep(seconds)
    deadline = time.monotonic() + 5
    while page.locator("[data-testid='stStatusWidget']").get_by_text("Stop").count() and time.monotonic() < deadline:
        time.sleep(0.1)


def shoot(page, out: str, name: str) -> None:
    path = os.path.join(out, name)
    page.screenshot(path=path)
    print(f"{name}: {os.path.getsize(path) // 1024} KB")


def status_text(page) -> str:
    texts = page.eval_on_selector_all(
        "[data-testid='stProgress'] p, .cl-progress-text", "els => els.map(e => e.innerText)"
    )
    return texts[0] if texts else ""


# Every SVG chart on the page: its aria text, its height, and the font sizes its axis labels,
# axis titles and other text marks are drawn in.
CHART_FACTS = """() => [...document.querySelectorAll("[aria-label*=' eager ']")].map(svg => {
  const sizes = sel => [...svg.querySelectorAll(sel)].map(t => parseFloat(t.getAttribute('font-size')) || parseFloat(getComputedStyle(t).fontSize));
  const r = svg.getBoundingClientRect();
  return {label: svg.getAttribute('aria-label'), top: Math.round(r.top), bottom: Math.round(r.bottom), height: Math.round(r.height),
          ticks: sizes('.role-axis-label text'), titles: sizes('.role-axis-title text'), marks: sizes('.role-mark text'),
          heading: sizes('.role-title-text text'), y_ticks: svg.querySelectorAll('.role-axis[aria-label^="Y-axis"] .role-axis-label text').length};
})"""
# Scroll Streamlit's own scrolling container so `e` sits just under the app's header.
SCROLL_UNDER_HEADER = """e => {
    e.scrollIntoView({block: 'start'});
    let box = e.parentElement;
    while (box && !(box.scrollHeight > box.clientHeight && getComputedStyle(box).overflowY !== 'visible')) {
        box = box.parentElement;
    }
    if (box) box.scrollTop -= 70;
}"""


def chart_report(page, where: str) -> None:
    for fact in page.evaluate(CHART_FACTS):
        name = fact["label"].split(":")[0][:40]
        fonts = {k: sorted(set(round(v) for v in fact[k] if v)) for k in ("heading", "ticks", "titles", "marks")}
        print(
            f"  {where}: '{name}' {fact['top']}-{fact['bottom']} px ({fact['height']} px high), "
            f"{fact['y_ticks']} y ticks, font px {fonts}"
        )


def cards_bottom(page) -> int | None:
    boxes = page.eval_on_selector_all(
        "[data-testid='stMetric'], .cl-card", "els => els.map(e => e.getBoundingClientRect().bottom)"
    )
    return round(max(boxes)) if boxes else None


def scroll_to(page, selector: str) -> None:
    page.eval_on_selector(selector, SCROLL_UNDER_HEADER)


STATUS = "[data-testid='stProgress'], .cl-progress-text"


def race_pages(page, url: str, out: str, suffix: str) -> None:
    page.goto(f"{url}/?replay=file:{RECORDING}&speed=5x")
    wait_until(lambda: page.get_by_text("compiled steps").count() > 0, timeout=120)
    time.sleep(4)  # well into the compiled run: the sentence, the cards so far, the charts growing
    scroll_to(page, STATUS)
    settle(page, 0.3)
    shoot(page, out, f"race-replay-midrun{suffix}.png")
    chart_report(page, "race mid-replay")
    page.goto(f"{url}/?replay=file:{RECORDING}&speed=instant")
    wait_until(lambda: "done" in status_text(page), timeout=120)
    scroll_to(page, STATUS)
    settle(page)
    shoot(page, out, f"race-replay-done{suffix}.png")
    scroll_to(page, '[aria-label^="Compiled\'s lead over eager:"]')
    settle(page, 0.5)
    shoot(page, out, f"race-replay-charts{suffix}.png")
    chart_report(page, "race done")
    page.goto(f"{url}/?replay=file:{RECORDING}&speed=instant&present=1")
    wait_until(lambda: "done" in status_text(page), timeout=120)
    settle(page, 2)
    shoot(page, out, f"presenter-replay{suffix}.png")
    print(f"  presenter: cards end at {cards_bottom(page)} px of {page.viewport_size['height']}")
    chart_report(page, "presenter")


def other_pages(page, url: str, out: str, suffix: str, sweep: bool) -> None:
    from playwright.sync_api import Error as PlaywrightError

    page.goto(f"{url}/runs")
    wait_until(lambda: page.locator("[data-testid='stDataFrame']").count() > 0, timeout=60)
    settle(page)
    shoot(page, out, f"runs{suffix}.png")
    # Two rows ticked (the grid's checkbox column, rows 35 px under a 35 px header): the comparison.
    box = page.locator("[data-testid='stDataFrame']").first.bounding_box()
    for row in (0, 1):
        page.mouse.click(box["x"] + 16, box["y"] + 35 + 17 + 35 * row)
        time.sleep(1.5)
    try:
        wait_until(lambda: page.get_by_text("Colour tells the runs apart").count() > 0, timeout=30)
        page.eval_on_selector("[aria-label^='Cumulative training time, by run']", SCROLL_UNDER_HEADER)
        settle(page, 1.5)
        shoot(page, out, f"runs-compare{suffix}.png")
    except (SystemExit, PlaywrightError):
        print(f"runs-compare{suffix}.png: not taken (the rows could not be ticked)")
    if sweep:
        page.goto(f"{url}/sweep?sweep=1")
        wait_until(lambda: page.get_by_text("Sweep #1").count() > 0, timeout=60)
        settle(page, 2)
        shoot(page, out, f"sweep{suffix}.png")
    page.goto(f"{url}/under_the_hood")
    wait_until(lambda: page.get_by_role("tab").count() >= 5, timeout=60)
    page.get_by_role("tab", name="Graphs and graph breaks").click()
    panel = page.get_by_role("tabpanel", name="Graphs and graph breaks")
    measure = panel.get_by_role("button", name="Measure on this device")
    if measure.count():
        measure.click()
    try:  # a measurement on this machine: slow when the machine is busy
        wait_until(lambda: panel.get_by_role("button", name="Measure again").count() == 1, timeout=600, every=1)
    except SystemExit:
        print(f"under-the-hood-graphs{suffix}.png: not taken (the demo did not finish in 600 s)")
        return
    settle(page)
    shoot(page, out, f"under-the-hood-graphs{suffix}.png")


ANSWERS_OF = "cpu-recompiles-varying-shapes"  # the recording a finished race's answers are shown on
COMPARED = ("cpu-compile-never-pays-off", "cpu-recompiles-varying-shapes")  # the two runs compared


def answer_pages(page, url: str, out: str, ids: dict[str, int], races: list, sweep: bool) -> None:
    """Issue 34's answers at 1280x720: a finished race under its verdict (why, recompiles, what next),
    a sweep's why and next, and a comparison in words with each run's cause and next."""
    page.goto(f"{url}/?run={ids[ANSWERS_OF]}")
    wait_until(lambda: page.get_by_text("Why:").count() > 0 and page.locator(STATUS).count() > 0, timeout=120)
    scroll_to(page, STATUS)
    settle(page)
    shoot(page, out, "race-answers.png")
    if sweep:
        page.goto(f"{url}/sweep?sweep=1")
        wait_until(lambda: page.get_by_text("Next:").count() > 0, timeout=120)
        page.get_by_text("Regime:").first.evaluate(SCROLL_UNDER_HEADER)
        settle(page, 2)
        shoot(page, out, "sweep-answers.png")
    page.goto(f"{url}/runs")
    wait_until(lambda: page.locator("[data-testid='stDataFrame']").count() > 0, timeout=60)
    rows = [r.id for r in races]  # the table's order: newest first, as the Runs page lists them
    box = page.locator("[data-testid='stDataFrame']").first.bounding_box()
    for run_id in sorted(ids[name] for name in COMPARED):
        page.mouse.click(box["x"] + 16, box["y"] + 35 + 17 + 35 * rows.index(run_id))
        time.sleep(1.5)
    try:
        wait_until(lambda: page.get_by_text("Comparing 2 runs").count() > 0, timeout=30)
        page.get_by_text("Comparing 2 runs").evaluate(SCROLL_UNDER_HEADER)
        settle(page, 1.5)
        shoot(page, out, "runs-compare-answers.png")
    except SystemExit:
        print("runs-compare-answers.png: not taken (the rows could not be ticked)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "screenshots"))
    parser.add_argument("--no-sweep", action="store_true", help="skip the sweep (its two races take a minute or two)")
    parser.add_argument("--race-only", action="store_true", help="only the Race page and presenter mode")
    parser.add_argument(
        "--answers-only", action="store_true", help="only the answers' three at 1280x720 (the sweep included)"
    )
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    data = tempfile.mkdtemp(prefix="compile-lab-screens-")
    store_path = os.path.join(data, "store.sqlite3")
    store = Store(store_path)
    server = None
    try:
        folder = os.path.join(ROOT, "assets", "recordings")
        ids = {}
        for name in sorted(os.listdir(folder)):
            ids[name.removesuffix(".json")] = import_bundle(store, load_bundle_file(os.path.join(folder, name)), OWNER)
        if args.answers_only or not (args.no_sweep or args.race_only):
            env = {**os.environ, "COMPILE_LAB_DATA": data}
            done = subprocess.run([sys.executable, "-m", "core", *SWEEP, "--store", store_path], cwd=ROOT, env=env)
            if done.returncode != 0:
                raise SystemExit(f"the sweep ended with status {done.returncode}")
        server, url = start_server(data, store_path)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                for suffix, viewport in VIEWPORTS.items():
                    if args.answers_only and suffix:
                        continue  # the answers are taken at 1280x720 only
                    page = browser.new_page(viewport=viewport)
                    if not args.answers_only:
                        race_pages(page, url, args.out, suffix)
                    if not (args.race_only or args.answers_only):
                        other_pages(page, url, args.out, suffix, sweep=not args.no_sweep)
                    if not suffix and not args.race_only:
                        sweep = args.answers_only or not args.no_sweep
                        answer_pages(page, url, args.out, ids, store.list_runs(kind="race"), sweep=sweep)
                    page.close()
            finally:
                browser.close()
    finally:
        if server is not None:
            stop(server)
        stop_workers(store)
        store.close()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
