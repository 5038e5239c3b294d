"""Two app servers on one data dir (a restart's overlap: the old one still serving, the new one up):
both enqueue and both dispatch, at once, over many jobs. The queue never runs two jobs on one lane
and loses none: every job runs exactly once and ends with what its worker recorded."""

import json
import os
import subprocess
import sys
import time

from support import ROOT, quick_spec

from core.runs.fleet import ANY_GPU

JOBS_PER_SERVER = 14

# A stand-in worker: claims its job as core.runs.worker does, records an event, works a moment,
# records the end, and exits. It writes when it started and when it is about to exit, so that a
# lane's workers' lifetimes can be checked for overlap (a lane is busy until its worker is gone).
WORKER = """
import json, os, random, sys, time
from core.runs.fleet import HOST
from core.runs.store import Store
store_path, run_id, lane, log = sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
def note(what):
    with open(log, "a") as fh:
        fh.write(json.dumps({"run": run_id, "lane": lane, "pid": os.getpid(), what: time.time()}) + "\\n")
note("start")
store = Store(store_path)
if store.claim_run(run_id, os.getpid(), HOST):
    store.append_events(run_id, [{"kind": "epoch", "variant": "eager", "phase": "train", "epoch": 1, "step": 1,
                                  "time_s": 0.1, "recorded_at": time.time()}])
    time.sleep(random.uniform(0.02, 0.2))
    store.finish_run(run_id, "done", phase="done")
note("end")
"""

# A server: queues its visitors' jobs while it dispatches (as page refreshes and workers' tickers
# do), with the stand-in worker as its launcher, until every job of both servers has ended.
SERVER = """
import json, random, subprocess, sys, time
from core.runs import queue
from core.runs.store import Store
store_path, name, jobs, params, log, worker, total = sys.argv[1:8]
store = Store(store_path)
def launch(path, run_id, lane):
    return subprocess.Popen([sys.executable, "-c", worker, "core.runs.worker", path, str(run_id), lane, log],
                            start_new_session=True).pid
lanes = ["cpu", "cuda"]
queued = 0
deadline = time.monotonic() + 240
while time.monotonic() < deadline:
    if queued < int(jobs):
        store.create_run("race", json.loads(params), f"{name}-visitor{queued % 3}", lanes[queued % 2])
        queued += 1
    queue.tick(store, launch=launch)
    if len(store.list_runs(status=("done", "failed", "cancelled"))) >= int(total):
        break
    time.sleep(random.uniform(0, 0.03))
"""


def test_two_servers_on_one_data_dir_never_run_two_jobs_on_a_lane_and_lose_none(store, tmp_path):
    log = str(tmp_path / "workers.jsonl")
    params = json.dumps(quick_spec().to_dict())
    total = 2 * JOBS_PER_SERVER
    servers = [
        subprocess.Popen(
            [sys.executable, "-c", SERVER, store.path, name, str(JOBS_PER_SERVER), params, log, WORKER, str(total)],
            cwd=ROOT,
        )
        for name in ("old", "new")
    ]
    most_active: dict[str, int] = {}
    try:
        while any(s.poll() is None for s in servers):  # watch the store all along
            with store.transaction() as conn:
                rows = conn.execute(
                    "SELECT device_key, COUNT(*) FROM runs WHERE status IN ('starting', 'running') GROUP BY device_key"
                ).fetchall()
            for lane, active in rows:
                most_active[lane] = max(most_active.get(lane, 0), active)
            time.sleep(0.005)
    finally:
        for server in servers:
            if server.poll() is None:
                server.kill()
            server.wait()
    assert [s.returncode for s in servers] == [0, 0]
    deadline = time.monotonic() + 30  # the last worker may still be between its end and its exit
    while time.monotonic() < deadline and sum(1 for _ in open(log)) < 2 * total:
        time.sleep(0.05)

    runs = store.list_runs()
    assert len(runs) == total
    assert [r.status for r in runs] == ["done"] * total, [(r.id, r.status, r.error) for r in runs]
    assert {r.device_key for r in runs} == {"cpu", "cuda:0"} and ANY_GPU not in most_active
    assert max(most_active.values()) == 1, most_active  # never two at one moment the store was read
    for run in runs:  # nothing lost: each kept what its worker recorded
        assert len(store.events_after(run.id)) == 1

    notes = [json.loads(line) for line in open(log)]
    workers: dict[int, dict] = {}
    for note in notes:
        workers.setdefault(note["pid"], {}).update(note)
    assert len(workers) == total and all("end" in w for w in workers.values())
    assert sorted(w["run"] for w in workers.values()) == sorted(r.id for r in runs)  # each job ran once
    for lane in ("cpu", "cuda:0"):
        lives = sorted((w["start"], w["end"]) for w in workers.values() if w["lane"] == lane)
        assert len(lives) == JOBS_PER_SERVER
        for (_, end), (start, _) in zip(lives, lives[1:]):
            assert start > end, f"two workers were alive on {lane} at once"
    assert {r.owner.split("-")[0] for r in runs} == {"old", "new"}
    assert not os.path.exists(os.path.join(os.path.dirname(store.path), "logs"))  # only the stand-ins ran
