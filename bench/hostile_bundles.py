"""What the two worst bundles of issue 35 cost the app: a recording whose device name is a lone
surrogate ("\\ud800"), and one whose environment holds millions of empty lists. For one checkout
(this one by default; `--checkout PATH` measures another, e.g. the main branch before the fix) it
imports both through that checkout's own import (timed, its peak memory read), stores whatever was
refused as an older version stored it (so a checkout's pages meet the same rows either way), starts
`streamlit run app.py` there and opens the Runs page and each run's page in Chromium, timing each
until it has drawn (or shown an error) and reading the server's memory from /proc.

    python bench/hostile_bundles.py [--checkout PATH] [--quick]

Run two checkouts one after the other on a quiet machine to compare them; it prints one table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from viewers import launch_browser, start_server

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORDING = os.path.join("assets", "recordings", "cpu-compile-never-pays-off.json")
LISTS = 20_000_000  # the bundle: 61 MB of `[],` in the environment, under the 64 MiB cap
QUICK_LISTS = 2_000_000
VIEWS = 3  # each page opened this many times; the median time is shown

# Runs in the measured checkout: builds the two bundles from its own recording, imports each through
# its own code, and stores a refused one's row directly (as an older version's import stored it).
PREPARE = r"""
import io, json, os, sys, time
sys.path.insert(0, os.getcwd())
from core.runs import fleet as devices
from core.runs.bundle import BundleError, import_bundle, read_bundle
from core.runs.store import Store
store_path, lists = sys.argv[1], int(sys.argv[2])
store = Store(store_path)
env = {"device_type": "cpu", "device_name": "Bench CPU", "cpu_name": "Bench CPU", "cpu_count": 2, "torch": "2.x"}
probe = store.create_run("probe", {}, "system", "probe", status="done", host=devices.HOST)
store.update_run(probe, summary={"caps": {"cuda": False, "mps": False}, "environment": env}, environment=env)
with open(sys.argv[3]) as fh:
    recording = fh.read()
surrogate = recording.replace('"device_name": "', '"device_name": "\\ud800', 1)
data = json.loads(recording)
data["run"]["environment"]["padding"] = "PADDING"
lists_raw = json.dumps(data, separators=(",", ":")).replace('"PADDING"', "[" + "[]," * (lists - 1) + "[]]")
out = {}
for name, raw in (("surrogate", surrogate), ("empty lists", lists_raw)):
    raw = raw.encode("utf-8", "surrogatepass")
    started = time.perf_counter()
    try:
        run_id = import_bundle(store, read_bundle(io.BytesIO(raw)), "visitor:bench")
        outcome = "imported"
    except BundleError as exc:
        outcome = "refused: " + str(exc)[:70]
        run_id = import_bundle(store, json.loads(recording), "visitor:bench")
        if name == "surrogate":
            environment = json.dumps({**json.loads(recording)["run"]["environment"], "device_name": "\ud800"})
        else:
            environment = json.dumps({**json.loads(recording)["run"]["environment"], "padding": [[]] * lists})
        store._write("UPDATE runs SET environment = ? WHERE id = ?", (environment, run_id))
    out[name] = {"run": run_id, "import": outcome, "import_s": time.perf_counter() - started, "bytes": len(raw)}
print(json.dumps(out))
"""


def memory_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a process, in MB: its memory now and at its peak."""
    fields = {}
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            fields[key] = value
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def prepare(checkout: str, data: str, lists: int) -> tuple[dict, float]:
    """Import the two bundles in `checkout`; (what happened to each, the import's peak memory in MB)."""
    store = os.path.join(data, "store.sqlite3")
    command = [
        "/usr/bin/time",
        "-v",
        sys.executable,
        "-c",
        PREPARE,
        store,
        str(lists),
        os.path.join(checkout, RECORDING),
    ]
    done = subprocess.run(
        command, cwd=checkout, capture_output=True, text=True, env={**os.environ, "COMPILE_LAB_DATA": data}
    )
    if done.returncode != 0:
        sys.exit(f"preparing the store failed:\n{done.stderr[-3000:]}")
    peak = next(line for line in done.stderr.splitlines() if "Maximum resident set size" in line)
    return json.loads(done.stdout.strip().splitlines()[-1]), int(peak.split(":")[1]) / 1024


def open_page(browser, url: str, drawn: str) -> tuple[float, str]:
    """Seconds until the page has drawn `drawn` (a text) or an error box; and which it was."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    started = time.perf_counter()
    page.goto(url)
    done = page.locator(f'text="{drawn}"').or_(page.locator('[data-testid="stException"]')).first
    done.wait_for(timeout=600_000)
    took = time.perf_counter() - started
    shown = "error" if page.locator('[data-testid="stException"]').count() else "drawn"
    page.close()
    return took, shown


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", default=ROOT, help="the checkout to measure (default: this one)")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_LISTS:,} empty lists instead of {LISTS:,}")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    lists = QUICK_LISTS if args.quick else LISTS
    data = tempfile.mkdtemp(prefix="hostile-bundles-")
    server = None
    try:
        runs, import_peak = prepare(os.path.abspath(args.checkout), data, lists)
        print(
            f"checkout {args.checkout}: {lists:,} empty lists; load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
        )
        for name, run in runs.items():
            print(f"  {name} bundle ({run['bytes'] / 1e6:.0f} MB): {run['import']} in {run['import_s']:.1f} s")
        print(f"  importing both took at most {import_peak:.0f} MB (its process's peak)")
        server, url = start_server(
            data, cwd=os.path.abspath(args.checkout), env={"STREAMLIT_CLIENT_SHOW_ERROR_DETAILS": "full"}
        )
        with sync_playwright() as p:
            browser = launch_browser(p)
            open_page(browser, url + "/under_the_hood", "Under the hood")  # the server warmed up, no run read
            idle = memory_mb(server.pid)[0]
            print(f"  server at rest: {idle:.0f} MB")
            print(f"  {'page':<28} {'shown':<6} {'median s':>9} {'RSS after MB':>13} {'peak MB':>8}")
            pages = [
                ("/runs", f"{url}/runs", "Import a bundle"),
                ("run of the empty lists", f"{url}/?run={runs['empty lists']['run']}", f"Run {runs['empty lists']['run']}: done"),
                ("run of the surrogate", f"{url}/?run={runs['surrogate']['run']}", f"Run {runs['surrogate']['run']}: done"),
            ]  # fmt: skip
            for label, page_url, drawn in pages:
                times, shown = [], set()
                for _ in range(VIEWS):
                    took, what = open_page(browser, page_url, drawn)
                    times.append(took)
                    shown.add(what)
                rss, peak = memory_mb(server.pid)
                print(
                    f"  {label:<28} {'/'.join(sorted(shown)):<6} {statistics.median(times):>9.1f} {rss:>13.0f} {peak:>8.0f}"
                )
            browser.close()
    finally:
        if server is not None:
            os.killpg(server.pid, 9)
            server.wait()
        shutil.rmtree(data, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
