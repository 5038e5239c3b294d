"""A public demo that no visitor can read into or take over: secrets stay with the server, the feed
and links serve races only, the queue shares the device fairly, and a worker's leftovers are swept."""

import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from conftest import CPU, ROOT, quick_spec
from starlette.applications import Starlette
from starlette.testclient import TestClient
from test_pages import app, record_probe, record_race, texts

from app_pages.run_screen import feed_routes
from core.runs import devices, model_catalog, processes, queue
from core.runs.limits import HostLimits
from core.runs.lookups import model_params
from core.runs.store import Store
from core.view.queue import describe
from core.view.run_screen.feed import LiveFeeds
from core.view.run_screen.shared_board import LiveBoard

SECRET = "s3cr3tAdminTokenValue42"  # no markdown-special characters: shown text stays findable


@pytest.fixture
def store(tmp_path, monkeypatch):
    path = str(tmp_path / "store.sqlite3")
    monkeypatch.setenv("COMPILE_LAB_STORE", path)
    return Store(path)


def failed_lookup(store, owner="visitor:attacker"):
    """A lookup whose model file's code raised with whatever it could read."""
    params = model_params("file:net.py", "/data/model-files/abc.py")
    return store.create_run(
        "lookup", params, owner, "lookup", status="failed", host=devices.HOST, finished_at=time.time(),
        error=f"RuntimeError: {SECRET}", phase=f"failed: RuntimeError: {SECRET}",
    )  # fmt: skip


# -- secrets stay with the server ---------------------------------------------------------------


def test_a_worker_inherits_no_secret_of_the_servers_environment():
    server = {
        "COMPILE_LAB_ADMIN_TOKEN": SECRET,
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "HF_TOKEN": SECRET,
        "DATABASE_URL": f"postgresql://u:{SECRET}@db/x",
        "TORCH_SOME_TOKEN": SECRET,  # a secret's name wins over an allowed prefix
        "COMPILE_LAB_MAX_BATCH_SIZE": "64",  # the server checks limits; a worker reads none
        "PATH": "/usr/bin",
        "HOME": "/home/lab",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "OMP_NUM_THREADS": "1",
        "TORCHINDUCTOR_CACHE_DIR": "/c",
        "TRITON_CACHE_DIR": "/t",
        "CUDA_HOME": "/usr/local/cuda",
        "COMPILE_LAB_DATA": "/data",
        "COMPILE_LAB_WORKER_THREADS": "2",
        "COMPILE_LAB_TEST_ID": "1-2",
    }
    env = processes.worker_environment("cpu", server)
    assert SECRET not in " ".join(f"{k}={v}" for k, v in env.items())
    assert set(env) == {
        "PATH", "HOME", "LANG", "LC_ALL", "OMP_NUM_THREADS", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR",
        "CUDA_HOME", "COMPILE_LAB_DATA", "COMPILE_LAB_WORKER_THREADS", "COMPILE_LAB_TEST_ID",
    }  # fmt: skip
    gpu = processes.worker_environment("cuda:1", {**server, "CUDA_VISIBLE_DEVICES": "4,6"})
    assert gpu["CUDA_VISIBLE_DEVICES"] == "6" and gpu["COMPILE_LAB_LANE"] == "cuda:1"
    assert "COMPILE_LAB_ADMIN_TOKEN" not in gpu


def test_the_live_feed_serves_races_only(store, monkeypatch):
    monkeypatch.setattr(feed_routes, "_served", type(feed_routes._served)())
    race = record_race(store, "running")
    lookup = failed_lookup(store)
    feeds = LiveFeeds(LiveBoard(store.path))
    assert feeds.get(race) is not None and feeds.get(lookup) is None
    http = TestClient(Starlette(routes=feed_routes.routes()))
    response = http.get(f"/api/live/{lookup}")
    assert response.status_code == 404 and SECRET not in response.text


def test_a_link_to_a_lookup_shows_no_run_and_none_of_its_error(store, sleepers):
    record_probe(store)
    lookup = failed_lookup(store)
    at = app(run=lookup)
    assert not at.exception
    assert SECRET not in texts(at) and SECRET not in " ".join(str(i.value) for i in at.info)


def test_a_lookups_error_text_reaches_only_its_asker(store, monkeypatch):
    monkeypatch.setattr(model_catalog, "library_problem", lambda source: None)
    failed_lookup(store, owner="visitor:attacker")
    model, path = "file:net.py", "/data/model-files/abc.py"
    mine = model_catalog.lookup_model(store, model, path, asker="visitor:attacker")
    theirs = model_catalog.lookup_model(store, model, path, asker="visitor:someone-else")
    assert mine.state == theirs.state == "failed"
    assert SECRET in mine.message and SECRET not in theirs.message


# -- fair share by design ------------------------------------------------------------------------

FAIR = HostLimits(job_time_limit_s=None)


def test_a_visitor_who_queues_five_races_delays_only_themselves(store, sleepers):
    a = [queue.enqueue(store, quick_spec(), "visitor:a", limits=FAIR, caps=CPU) for _ in range(5)]
    (b,) = [queue.enqueue(store, quick_spec(), "visitor:b", limits=FAIR, caps=CPU)]
    assert store.get_run(a[0]).status == "starting"
    assert queue.queue_position(store, b) == 1 and describe(store, store.get_run(b)) == "queued (position 1)"
    assert [queue.queue_position(store, i) for i in a[1:]] == [2, 3, 4, 5]
    store.finish_run(a[0], "done")
    queue.tick(store)
    assert store.get_run(b).status == "starting"  # B's race runs second, not sixth
    assert [store.get_run(i).status for i in a[1:]] == ["queued"] * 4


def test_many_identities_from_one_address_are_one_visitor_in_the_queue(store, sleepers):
    flood = [
        queue.enqueue(store, quick_spec(), f"visitor:fake{i}", limits=FAIR, caps=CPU, address="address:10.0.0.9")
        for i in range(5)
    ]
    other = queue.enqueue(store, quick_spec(), "visitor:b", limits=FAIR, caps=CPU, address="address:10.0.0.7")
    assert store.get_run(flood[0]).status == "starting" and queue.queue_position(store, other) == 1
    store.finish_run(flood[0], "done")
    queue.tick(store)
    assert store.get_run(other).status == "starting"


def test_turns_alternate_between_visitors_who_both_queued_many(store, sleepers):
    a = [queue.enqueue(store, quick_spec(), "visitor:a", limits=FAIR, caps=CPU) for _ in range(3)]
    b = [queue.enqueue(store, quick_spec(), "visitor:b", limits=FAIR, caps=CPU) for _ in range(3)]
    started = [a[0]]
    for _ in range(5):
        store.finish_run(started[-1], "done")
        queue.tick(store)
        (now,) = [r.id for r in store.list_runs(status=("starting",))]
        started.append(now)
    assert started == [a[0], b[0], a[1], b[1], a[2], b[2]]


# -- cold-cache folders under the data dir, swept ------------------------------------------------

LEAK = (
    "import os, signal, sys; sys.path.insert(0, {root!r}); from core.engine.cold_caches import make_cold_cache; "
    "path = make_cold_cache(); open(os.path.join(path, 'kernel.so'), 'w').write('x'); print(path, flush=True); "
    "os.kill(os.getpid(), signal.SIGKILL)"
)


def test_a_killed_workers_cold_cache_is_swept_by_the_next_cold_compile(tmp_path):
    from core.engine.cold_caches import cold_cache_root, make_cold_cache
    from core.engine.device_state import inductor_cache

    root = cold_cache_root()
    assert root.startswith(str(tmp_path / "data") + os.sep)  # the data dir, not the system temp folder
    killed = subprocess.run([sys.executable, "-c", LEAK.format(root=ROOT)], capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL
    leaked = killed.stdout.strip()
    assert os.path.dirname(leaked) == root and os.path.exists(os.path.join(leaked, "kernel.so"))
    mine = make_cold_cache()  # a live process's folder (this one's) is never swept
    with inductor_cache(quick_spec(cache="cold"), torch.device("cpu")) as path:
        assert os.path.dirname(path) == root and os.environ["TORCHINDUCTOR_CACHE_DIR"] == path
        assert not os.path.exists(leaked) and os.path.isdir(mine)
    assert not os.path.exists(path) and os.listdir(root) == [os.path.basename(mine)]
