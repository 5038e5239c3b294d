"""The path of one race: every file of this project whose code runs for one race, from the Race
page's Launch to the finished race's card, in every process it passes through (the app, the warm
server, the worker it forks, any replicate process).

    python bench/race_path.py [--list]

A throwaway data folder and store; the app driven by Streamlit's AppTest (the real Race page, its
real Launch button), the race a short CPU race on the form's defaults. Every process started on the
way records which of this project's files its code ran in (a profile hook that a `sitecustomize` on
PYTHONPATH installs: PYTHONPATH is one of the variables a worker inherits), and writes them when it
ends. Printed: the files per process and all of them together; --list names them. A count, not a
timing: run it on any box.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Installed in every Python process started with this folder on PYTHONPATH: the project's files whose
# functions were called, written as <pid>.json beside this file at exit (os._exit too: a forked job ends so).
SITE = r"""
import json, os, sys, threading
_here = os.path.dirname(os.path.abspath(__file__))
_root = open(os.path.join(_here, "root")).read().strip()
_seen = set()
def _hook(frame, event, arg):
    if event == "call" and frame.f_code.co_name != "<module>":  # a function ran, not an import
        name = frame.f_code.co_filename
        if name.startswith(_root) and "/site-packages/" not in name:
            _seen.add(os.path.relpath(name, _root))
def _dump():
    with open(os.path.join(_here, "out", f"{os.getpid()}.json"), "w") as fh:
        json.dump({"argv": sys.argv[:3], "files": sorted(_seen)}, fh)
sys.setprofile(_hook)
threading.setprofile(_hook)
import atexit
atexit.register(_dump)
_exit = os._exit
def _exit_after_dump(code):
    try:
        _dump()
    finally:
        _exit(code)
os._exit = _exit_after_dump
"""

# The app's side, in a process of its own so the hook sees it from its first line.
DRIVER = r"""
import os, sys, time
sys.path.insert(0, os.getcwd())
from streamlit.testing.v1 import AppTest
from core.runs.store import Store

store = Store(os.environ["COMPILE_LAB_STORE"])
at = AppTest.from_file("streamlit_app.py", default_timeout=120).run()
deadline = time.monotonic() + 180
while time.monotonic() < deadline:  # the first visit asks for the device probe; Launch waits for it
    launch = [b for b in at.button if b.key == "launch"]
    if launch and not launch[0].disabled:
        break
    time.sleep(1)
    at.run()
at.number_input(key="form_steps_per_epoch").set_value(8).run()
at.button(key="launch").click().run()
assert not at.exception, at.exception
run = store.list_runs(kind="race")[0]
deadline = time.monotonic() + 600
while store.get_run(run.id).status not in ("done", "failed", "cancelled") and time.monotonic() < deadline:
    time.sleep(2)
    at.run()  # the page's own refreshes: what a visitor watching it runs
run = store.get_run(run.id)
print("race", run.id, run.status, file=sys.stderr)
card = AppTest.from_file("streamlit_app.py", default_timeout=120)
card.query_params["run"] = str(run.id)
card.run()
shown = " ".join(m.label for m in card.metric)
assert "speedup" in shown.lower(), shown
print("card", shown[:200], file=sys.stderr)
"""


def _names(environ_file: str, tmp: str) -> bool:
    """Whether the process behind /proc/PID/environ was started for this data folder."""
    try:
        with open(environ_file, "rb") as fh:
            return tmp.encode() in fh.read()
    except OSError:
        return False


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        site = os.path.join(tmp, "site")
        os.makedirs(os.path.join(site, "out"))
        with open(os.path.join(site, "sitecustomize.py"), "w") as fh:
            fh.write(SITE)
        with open(os.path.join(site, "root"), "w") as fh:
            fh.write(ROOT + os.sep)
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([site, ROOT]),
            "COMPILE_LAB_DATA": os.path.join(tmp, "data"),
            "COMPILE_LAB_STORE": os.path.join(tmp, "store.sqlite3"),
            "COMPILE_LAB_WARM_IDLE_S": "5",  # the warm server leaves soon after the race, writing what it ran
        }
        done = subprocess.run([sys.executable, "-c", DRIVER], cwd=ROOT, env=env, timeout=900)
        for _ in range(60):  # until every process of this data folder has ended
            if not [p for p in glob.glob("/proc/[0-9]*/environ") if _names(p, tmp)]:
                break
            time.sleep(1)
        everything: set[str] = set()
        for path in sorted(glob.glob(os.path.join(site, "out", "*.json"))):
            with open(path) as fh:
                seen = json.load(fh)
            files = [f for f in seen["files"] if f.endswith(".py") and not f.startswith(("tests/", "bench/"))]
            everything.update(files)
            print(f"{len(files):4d} files  {' '.join(seen['argv'])[:90]}")
        print(f"{len(everything):4d} files in all, from Launch to the card (driver exit {done.returncode})")
        if "--list" in sys.argv:
            print("\n".join(sorted(everything)))
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
