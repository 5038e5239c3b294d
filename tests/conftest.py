"""pytest's hooks and fixtures for the suite: a data home per test, process conditions put back,
the guard that fails any test leaving a process running, stand-in workers, warm starts, the store's
two backends. The helpers tests import live in tests/support.py."""

import itertools
import os
import signal
import time

import pytest
import stand_in
from support import (
    LEFT_RUNNING_GRACE_S,
    SMALL_CACHES,
    SMALL_FUSION,
    SMALL_OVERHEAD,
    TEST_ID_VARIABLE,
    command_line,
    kill_processes,
    machine_seconds,
    measured_once,
    process_conditions_kept,
    process_table,
    processes_of_this_test,
    use_stand_in_launcher,
    warm_servers_of_this_test,
)

# Nothing in the tests may reach the network: Hugging Face libraries read these when imported.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Workers start cold in the tests (each test has its own data dir, so its own warm server: a torch
# import per test); the tests of warm starts turn them on (the `warm_starts` fixture).
os.environ.setdefault("COMPILE_LAB_WARM_START", "off")
# A warm server a test starts belongs to this pytest process, as the app's belong to the app: should a
# test's own cleanup miss one, it leaves when pytest exits (core.runs.warm_start.owned_by_this_app).
os.environ["COMPILE_LAB_APP_PID"] = str(os.getpid())


@pytest.fixture(autouse=True)
def _process_conditions_restored():
    """Each test's process conditions put back after it (process_conditions_kept)."""
    with process_conditions_kept():
        yield


@pytest.fixture(autouse=True)
def _private_data_home(tmp_path, monkeypatch):
    """Warm caches and stores go to a per-test folder, never the user's data directory."""
    monkeypatch.setenv("COMPILE_LAB_DATA", str(tmp_path / "data"))


@pytest.fixture(scope="session")
def fusion_result(tmp_path_factory) -> dict:
    return measured_once(tmp_path_factory, "fusion", SMALL_FUSION, device="cpu")


@pytest.fixture(scope="session")
def overhead_result(tmp_path_factory) -> dict:
    return measured_once(tmp_path_factory, "overhead", SMALL_OVERHEAD, device="cpu")


@pytest.fixture(scope="session")
def gelu_result(tmp_path_factory) -> dict:
    return measured_once(tmp_path_factory, "codegen", {"function": "gelu_chain", "size": 4096}, device="cpu")


@pytest.fixture(scope="session")
def caches_result(tmp_path_factory) -> dict:
    return measured_once(tmp_path_factory, "caches", SMALL_CACHES)


_test_ids = itertools.count(1)


@pytest.fixture(autouse=True)
def _nothing_left_running(request, monkeypatch):
    """Fail any test that leaves a worker, server or other child process alive, naming it; and kill
    what it left, so one test's leak cannot load the machine (or flake the timings) of the next."""
    if not os.path.isdir("/proc/self"):
        yield  # no /proc here (macOS): nothing to compare
        return
    test_id = f"{os.getpid()}-{next(_test_ids)}"
    monkeypatch.setenv(TEST_ID_VARIABLE, test_id)
    before = set(process_table())
    yield
    deadline = time.monotonic() + machine_seconds(LEFT_RUNNING_GRACE_S)
    left = processes_of_this_test(before, test_id)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = processes_of_this_test(before, test_id)
    if left:
        names = [f"pid {pid}: {command_line(pid)[:200] or '?'}" for pid in left]
        kill_processes(left)
        pytest.fail(f"{request.node.nodeid} left {len(left)} process(es) running (now killed):\n" + "\n".join(names))


@pytest.fixture
def sleepers(monkeypatch):
    """The stand-in worker launcher (tests/stand_in.py) for this test, in every process it starts
    (support.use_stand_in_launcher: a CLI that ticks the queue starts sleepers too). Yields the
    sleepers started in this process; those started elsewhere are killed here too, by this test's id."""
    stand_in.STARTED.clear()
    before = set(process_table()) if os.path.isdir("/proc/self") else set()
    use_stand_in_launcher(monkeypatch)
    procs = stand_in.STARTED
    yield procs
    for proc in procs:
        proc.kill()
        proc.wait()
    procs.clear()
    test_id = os.environ.get(TEST_ID_VARIABLE)
    if test_id and before:
        kill_processes(
            [pid for pid in processes_of_this_test(before, test_id) if stand_in.SLEEPER in command_line(pid)]
        )


@pytest.fixture
def warm_starts(monkeypatch):
    """Warm starts on for this test; its warm servers stopped at its end (they outlive their jobs),
    once its other processes are gone (a last worker's ticker may start one when it finds the lane idle)."""
    monkeypatch.setenv("COMPILE_LAB_WARM_START", "on")
    before = set(process_table())
    yield
    test_id = os.environ.get(TEST_ID_VARIABLE, "")
    deadline = time.monotonic() + machine_seconds(LEFT_RUNNING_GRACE_S + 5)
    while set(processes_of_this_test(before, test_id)) - set(warm_servers_of_this_test()):
        if time.monotonic() > deadline:
            break  # the guard names them
        time.sleep(0.1)
    servers = warm_servers_of_this_test()
    for pid in servers:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + machine_seconds(10)
    while any(process_table().get(pid, (0, b"Z"))[1] not in (b"Z", b"X") for pid in servers):
        if time.monotonic() > deadline:
            kill_processes(servers)
            break
        time.sleep(0.05)
    kill_processes(servers)  # reaps those that are pytest's own children


# -- the store's two backends ----------------------------------------------------------------
# A test module that sets BOTH_BACKENDS = True runs each test using `store` (or `store_location`)
# once on SQLite and once on PostgreSQL; elsewhere, and for a test marked `sqlite_only` (it checks
# the file itself: WAL, a trigger, a damaged page), the store is SQLite. PostgreSQL is the server
# COMPILE_LAB_TEST_PG names (.ci/run starts one), else a throwaway one started here when initdb is
# on the PATH; under CI a missing server fails the tests, never skips them.
BACKENDS = ("sqlite", "postgresql")
_schemas = itertools.count(1)


def pytest_configure(config):
    config.addinivalue_line("markers", "sqlite_only: checks SQLite's file itself; not run on PostgreSQL")


# -- the quick lane ------------------------------------------------------------------------------
# `python -m pytest -m quick`: the check a developer runs before every commit, within minutes. The
# rule: every test is quick unless it is marked slow, e2e or gpu, or its file is listed here: the
# files whose tests start real processes (a worker that imports torch, a terminal command, an agent,
# a server, a browser), render whole pages of the app, or race for real. CI runs them all.
NOT_QUICK = frozenset(())


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config, items):
    for item in items:
        heavy = any(item.get_closest_marker(name) for name in ("slow", "e2e", "gpu"))
        if not heavy and item.path.name not in NOT_QUICK:
            item.add_marker(pytest.mark.quick)


def pytest_generate_tests(metafunc):
    if (
        "backend" in metafunc.fixturenames
        and getattr(metafunc.module, "BOTH_BACKENDS", False)
        and not metafunc.definition.get_closest_marker("sqlite_only")
    ):
        metafunc.parametrize("backend", BACKENDS)


@pytest.fixture
def backend():
    return "sqlite"


@pytest.fixture(scope="session")
def postgresql_server():
    """A PostgreSQL server's URL for the tests (see above)."""
    import pg_server

    url = os.environ.get(pg_server.URL_VARIABLE)
    if url:
        yield url
        return
    if not pg_server.available():
        if os.environ.get("CI"):
            pytest.fail(f"CI must test the PostgreSQL store: set {pg_server.URL_VARIABLE} or put initdb on the PATH")
        pytest.skip(f"needs PostgreSQL: initdb on the PATH, or a server in {pg_server.URL_VARIABLE}")
    try:
        url, folder = pg_server.start()
    except (OSError, RuntimeError) as exc:
        pytest.fail(f"could not start a PostgreSQL server for the tests: {exc}")
    yield url
    pg_server.stop(folder)


@pytest.fixture
def store_location(backend, tmp_path, request):
    """Where the test's fresh store is: a file in its folder, or a schema of its own on the server."""
    if backend == "sqlite":
        yield str(tmp_path / "store.sqlite3")
        return
    import psycopg

    from core.runs.store.postgresql import close_pool

    server = request.getfixturevalue("postgresql_server")
    schema = f"test_{os.getpid()}_{next(_schemas)}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    url = f"{server}{'&' if '?' in server else '?'}options=-csearch_path%3D{schema}"
    yield url
    close_pool(url)
    try:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute("SET lock_timeout = '5s'")
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
    except psycopg.Error:
        pass  # a straggler still holds it: the throwaway server goes with its schemas


@pytest.fixture
def store(store_location, monkeypatch):
    """A fresh store (see store_location), named by COMPILE_LAB_STORE so the app and the CLI open it too."""
    from core.runs.store import Store

    monkeypatch.setenv("COMPILE_LAB_STORE", store_location)
    return Store(store_location)


@pytest.fixture
def own_server(postgresql_server, monkeypatch):
    """A PostgreSQL server of the test's own, to stop and start again; the store named by
    COMPILE_LAB_STORE, as the workers read it."""
    import pg_server

    from core.runs.store.postgresql import close_pool

    del postgresql_server  # (only for its rule)
    url, folder = pg_server.start()
    monkeypatch.setenv("COMPILE_LAB_STORE", url)
    try:
        yield url, folder
    finally:
        close_pool(url)
        pg_server.stop(folder)
