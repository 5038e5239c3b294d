"""A public demo that no visitor can read into or take over: secrets stay with the server, the feed
and links serve races only, the queue shares the device fairly, and a worker's leftovers are swept."""

import errno
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
import torch
from starlette.applications import Starlette
from starlette.testclient import TestClient
from support import CPU, ROOT, end_run, quick_spec
from test_pages import app, record_probe, record_race, texts

from app_pages import common
from app_pages.run_screen import feed as feed_routes
from core.runs import disk_space, fleet, model_catalog, processes, queue
from core.runs.job_kinds import model_params
from core.runs.limits import ConfigError, HostLimits, client_address, load_host_limits
from core.runs.race_conditions import STEADY_MALLOC
from core.runs.store import Store
from core.view.host_tables import describe
from core.view.run_screen.feed import LiveFeeds
from core.view.run_screen.shared_board import LiveBoard

SECRET = "s3cr3tAdminTokenValue42"  # no markdown-special characters: shown text stays findable


def failed_lookup(store, owner="visitor:attacker"):
    """A lookup whose model file's code raised with whatever it could read."""
    params = model_params("file:net.py", "/data/model-files/abc.py")
    return store.create_run(
        "lookup", params, owner, "lookup", status="failed", host=fleet.HOST, finished_at=time.time(),
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
    assert set(env) - set(STEADY_MALLOC) - set(processes.OFFLINE) == {
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
    end_run(store, sleepers, a[0])
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
    end_run(store, sleepers, flood[0])
    queue.tick(store)
    assert store.get_run(other).status == "starting"


def test_turns_alternate_between_visitors_who_both_queued_many(store, sleepers):
    a = [queue.enqueue(store, quick_spec(), "visitor:a", limits=FAIR, caps=CPU) for _ in range(3)]
    b = [queue.enqueue(store, quick_spec(), "visitor:b", limits=FAIR, caps=CPU) for _ in range(3)]
    started = [a[0]]
    for _ in range(5):
        end_run(store, sleepers, started[-1])
        queue.tick(store)
        (now,) = [r.id for r in store.list_runs(status=("starting",))]
        started.append(now)
    assert started == [a[0], b[0], a[1], b[1], a[2], b[2]]


def page_text(at) -> str:
    """Everything a visitor can read on a page: its text, the sidebar's, its progress bars' and its
    tables' cells."""
    parts = [texts(at), *(str(e.value) for e in [*at.info, *at.warning, *at.success, *at.sidebar.markdown])]
    parts += [e.value.to_string() for e in at.dataframe] + [str(e.value) for e in at.text]
    parts += [e.proto.text.replace("\\", "") for e in at.get("progress")]  # markdown text, unescaped
    return "\n".join(parts)


def test_a_visitor_sees_their_place_and_whats_ahead_only_as_counts(store, sleepers):
    from test_identity_and_links import OTHER, TOKEN, tab

    from core.runs.limits import owner_of

    record_probe(store)
    theirs = [
        queue.enqueue(store, quick_spec(), owner_of(TOKEN), limits=FAIR, caps=CPU, address="address:8.8.4.4")
        for _ in range(3)
    ]
    mine = queue.enqueue(store, quick_spec(steps_per_epoch=7), owner_of(OTHER), limits=FAIR, caps=CPU)
    at = tab(OTHER, run=mine)
    assert not at.exception
    shown = page_text(at)
    assert "queued (position 1)" in shown  # my place, as a number
    assert f"cpu: run {theirs[0]} mlp, starting (3 waiting)" in shown  # what is ahead and waits: counts
    at.switch_page("app_pages/runs.py").run()
    shown += page_text(at)
    for secret in (TOKEN, owner_of(TOKEN), "8.8.4.4", "visitor:"):  # who is behind them: never
        assert secret not in shown, secret
    assert store.get_run(theirs[0]).status == "starting"


# -- cold-cache folders under the data dir, swept ------------------------------------------------

LEAK = (
    "import os, signal, sys; sys.path.insert(0, {root!r}); from core.engine.warm_cache import make_cold_cache; "
    "path = make_cold_cache(); open(os.path.join(path, 'kernel.so'), 'w').write('x'); print(path, flush=True); "
    "os.kill(os.getpid(), signal.SIGKILL)"
)


def test_a_killed_workers_cold_cache_is_swept_by_the_next_cold_compile(tmp_path):
    from core.engine.device_state import inductor_cache
    from core.engine.warm_cache import cold_cache_root, make_cold_cache

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


# -- nothing measured is lost on a full disk -----------------------------------------------------

# A real worker whose every write of events fails as SQLite fails on a full disk while the flag file
# exists, after `full_after` writes that got through; it marks when the race is over (its sink closing).
FULL_DISK_WORKER = """
import os, sqlite3, sys
sys.path.insert(0, {root!r})
from core.runs import disk_space, worker
from core.runs.store import Store
store, run_id, flag, wait_s, full_after = sys.argv[1:6]
disk_space.DISK_FULL_WAIT_S = float(wait_s)
written = []
append_events, close = Store.append_events, worker.EventSink.close

def full_disk(self, run_id, rows, run_fields=None):
    if os.path.exists(flag) and len(written) >= int(full_after):
        raise sqlite3.OperationalError("database or disk is full")
    written.append(len(rows)) if rows else None
    return append_events(self, run_id, rows, run_fields)

def closing(self):
    open(flag + ".closing", "w").close()
    return close(self)

Store.append_events, worker.EventSink.close = full_disk, closing
sys.exit(worker.main(["--store", store, "--run-id", run_id]))
"""
QUICK = dict(epochs=2, steps_per_epoch=3, eval_steps=1)
QUICK_STEPS = 2 * 2 * (3 + 1)  # both variants, two epochs of 3 training steps and 1 eval step


def full_disk_worker(store, tmp_path, wait_s, full_after=0):
    run_id = store.create_run(
        "race", quick_spec(**QUICK).to_dict(), "ann", "cpu", status="starting", started_at=time.time(),
        host=fleet.HOST,
    )  # fmt: skip
    flag = tmp_path / "disk-is-full"
    flag.touch()
    script = FULL_DISK_WORKER.format(root=ROOT)
    args = [store.path, str(run_id), str(flag), str(wait_s), str(full_after)]
    proc = subprocess.Popen([sys.executable, "-c", script, *args], stderr=subprocess.PIPE, text=True)
    return run_id, flag, proc


def wait_until(predicate, timeout=120.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.1)


def test_a_run_on_a_full_disk_keeps_every_event_once_space_returns(store, tmp_path):
    run_id, flag, proc = full_disk_worker(store, tmp_path, wait_s=60)
    try:
        wait_until(lambda: os.path.exists(f"{flag}.closing") or proc.poll() is not None)
        time.sleep(1.5)  # the race is over, nothing of it stored: the worker holds it and retries
        assert store.events_after(run_id) == [] and proc.poll() is None
        flag.unlink()  # space comes back
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    run = store.get_run(run_id)
    assert proc.returncode == 0 and run.status == "done", (run.error, err[-2000:])
    assert len([e for e in store.events_after(run_id) if e["kind"] == "step"]) == QUICK_STEPS
    assert "Traceback" not in err


def test_a_disk_that_stays_full_fails_the_run_with_disk_full_and_keeps_what_it_could(store, tmp_path):
    run_id, _, proc = full_disk_worker(store, tmp_path, wait_s=1, full_after=1)
    try:
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    run = store.get_run(run_id)
    kept = store.events_after(run_id)
    assert run.status == "failed" and run.error.startswith("disk full: "), (run.error, err[-2000:])
    assert 0 < len(kept) < QUICK_STEPS and f"the {len(kept)} before them are kept" in run.error
    assert run.summary and "Traceback" not in err  # the summary, measured in memory, is kept too


def test_submit_on_a_full_disk_says_disk_full_in_one_line(store, sleepers, monkeypatch, capsys):
    from core.cli.main import main

    def full(*_args, **_kwargs):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(Store, "_insert_run", full)
    code = main(["submit", "--store", store.path, "--model", "mlp", "--device", "cpu"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "disk full" in err and "Traceback" not in err
    assert disk_space.is_disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert not disk_space.is_disk_full(sqlite3.OperationalError("database is locked"))


# -- per-address limits on by default where an address is known ---------------------------------


def test_by_default_an_address_counts_where_it_is_known():
    auto = load_host_limits({})
    assert auto.limit_by_address is None  # auto, unless the host says true or false
    assert client_address(auto, "8.8.4.4") == "address:8.8.4.4"  # a public address: one person's
    assert client_address(auto, "::ffff:8.8.4.4") == "address:8.8.4.4"  # one address, however written
    for shared in ("127.0.0.1", "::1", "10.0.0.5", "172.17.0.1", "192.168.1.20", None, "not an ip"):
        assert client_address(auto, shared) is None, shared  # a proxy or a NAT: many people behind it
    proxy = load_host_limits({"COMPILE_LAB_ADDRESS_HEADER": "X-Real-IP"})
    assert client_address(proxy, "127.0.0.1", [("x-real-ip", "192.168.7.7")]) == "address:192.168.7.7"
    assert client_address(proxy, "127.0.0.1", []) is None  # no header from the proxy: not known
    off = load_host_limits({"COMPILE_LAB_LIMIT_BY_ADDRESS": "false"})
    assert client_address(off, "8.8.4.4") is None
    on = load_host_limits({"COMPILE_LAB_LIMIT_BY_ADDRESS": "true"})
    assert client_address(on, "127.0.0.1") == "address:127.0.0.1"
    with pytest.raises(ConfigError, match="must be true or false, or auto"):
        load_host_limits({"COMPILE_LAB_LIMIT_BY_ADDRESS": "maybe"})


def test_one_persons_address_is_counted_once_however_it_is_written():
    auto = load_host_limits({})
    household = ["2001:4860:4860:1:0:0:0:8888", "2001:4860:4860:1::1", "2001:4860:4860:1:ffff:abcd:1:2"]
    assert {client_address(auto, ip) for ip in household} == {"address:2001:4860:4860:1::/64"}  # one /64
    assert client_address(auto, "2001:4860:4860:2::1") == "address:2001:4860:4860:2::/64"  # the next one: another
    assert client_address(auto, "8.8.8.8") == client_address(auto, "::ffff:8.8.8.8") == "address:8.8.8.8"
    proxy = load_host_limits({"COMPILE_LAB_ADDRESS_HEADER": "X-Forwarded-For"})
    for ip in ("::ffff:8.8.8.8", "8.8.8.8"):
        assert client_address(proxy, "127.0.0.1", [("x-forwarded-for", f"1.2.3.4, {ip}")]) == "address:8.8.8.8"
    for ip in household:
        assert client_address(proxy, "127.0.0.1", [("x-forwarded-for", ip)]) == "address:2001:4860:4860:1::/64"


def test_the_shipped_host_config_counts_known_addresses(tmp_path):
    shipped = load_host_limits({"COMPILE_LAB_CONFIG": os.path.join(ROOT, "deploy", "host-limits.toml")})
    assert shipped.limit_by_address is None and client_address(shipped, "8.8.4.4") == "address:8.8.4.4"


def test_fresh_identities_from_one_public_address_share_its_limit_by_default(store, sleepers, monkeypatch):
    from test_identity_and_links import launch_small_race, tab

    record_probe(store)
    monkeypatch.setenv("COMPILE_LAB_MAX_QUEUED_PER_OWNER", "1")
    monkeypatch.setattr(common, "connection_address", lambda: ("8.8.4.4", []))
    launch_small_race(tab("a" * 16))
    refused = launch_small_race(tab("b" * 16))  # cookie cleared: a new identity, the same address
    assert "(counting every browser at your address)" in texts(refused)
    assert [r.client for r in store.list_runs(kind="race")] == ["address:8.8.4.4"]
