"""A public demo that no visitor can read into or take over: secrets stay with the server, the feed
and links serve races only, the queue shares the device fairly, and a worker's leftovers are swept."""

import time

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient
from test_pages import app, record_probe, record_race, texts

from app_pages.run_screen import feed_routes
from core.runs import devices, model_catalog, processes
from core.runs.lookups import model_params
from core.runs.store import Store
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
