"""pytest's hooks and fixtures for the suite: a data home per test, process conditions put back,
the guard that fails any test leaving a process running, stand-in workers, warm starts, the store's
two backends, the one served app of the e2e tests. The helpers tests import live in tests/support.py."""

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
    build_cpu_probe,
    command_line,
    kill_processes,
    machine_seconds,
    measured_once,
    process_conditions_kept,
    process_table,
    processes_of_this_test,
    share_cpu_probe,
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
def _private_data_home(request, tmp_path, monkeypatch):
    """Warm caches and stores go to a per-test folder, never the user's data directory. A test off
    the quick lane (it may start real races) finds Inductor's CPU probe there, built once for the
    session (support.share_cpu_probe)."""
    data = tmp_path / "data"
    monkeypatch.setenv("COMPILE_LAB_DATA", str(data))
    if request.node.get_closest_marker("quick") is None:
        built = request.getfixturevalue("cpu_probe")
        if built is not None:
            share_cpu_probe(*built, str(data))


@pytest.fixture(scope="session")
def cpu_probe(tmp_path_factory) -> tuple[str, str] | None:
    """(probe folder, the data folder it was built in), built in a fresh process on first use; None
    where it cannot be built."""
    home = str(tmp_path_factory.mktemp("cpu-probe-data"))
    probe = build_cpu_probe(home)
    return (probe, home) if probe else None


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


# -- the served app of the e2e tests -----------------------------------------------------------
# One `streamlit run app.py` (tests/test_e2e.py serve_app) serves every e2e test of the session
# that asks for `app_url`: each test is a visitor of its own in a browser of its own, and none needs
# an empty store. Started when the first of them sets up, stopped once the last of them (in the
# collected order) is torn down, so it never idles beside the tests that follow.
_served_app: dict = {}


@pytest.fixture(scope="session")
def e2e_data(tmp_path_factory, cpu_probe):
    """The served app's data directory (its store is e2e_data / "store.sqlite3"), with the session's
    CPU probe in it."""
    folder = tmp_path_factory.mktemp("e2e-data")
    if cpu_probe is not None:
        share_cpu_probe(*cpu_probe, str(folder))
    return folder


@pytest.fixture(scope="session")
def app_url(e2e_data):
    from test_e2e import serve_app

    url, stop = serve_app(e2e_data)
    _served_app["stop"] = stop
    yield url
    _served_app.pop("stop", stop)()


def pytest_collection_finish(session):
    users = [item.nodeid for item in session.items if "app_url" in getattr(item, "fixturenames", ())]
    _served_app["last_user"] = users[-1] if users else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield
    if item.nodeid == _served_app.get("last_user") and "stop" in _served_app:
        _served_app.pop("stop")()


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
    # (pyproject.toml names it too; here for a suite run from a copy of this file: test_suite_guards)
    config.addinivalue_line("markers", "quick: the quick lane, -m quick (below)")


# -- the quick lane ------------------------------------------------------------------------------
# `python -m pytest -m quick`: the check a developer runs before every commit, within minutes. The
# rule: every test is quick unless it is marked slow, e2e or gpu, or it is listed here: the files
# whose tests start real processes (workers that import torch, terminal commands, agents, servers),
# and, in the other files, the tests that race for real, start a worker or render many pages (each
# 2 s or more on a 2-core box). CI runs them all; a new test that takes seconds belongs on a list.
NOT_QUICK_FILES = frozenset(
    (
        "test_cli.py",
        "test_cli_queue.py",
        "test_doctor.py",
        "test_doctor_budget.py",
        "test_events.py",
        "test_fleet.py",
        "test_fleet_faults.py",
        "test_jobs.py",
        "test_lanes.py",
        "test_library_models.py",
        "test_model_catalog.py",
        "test_model_file.py",
        "test_pids.py",
        "test_public_demo_front.py",
        "test_race_conditions.py",
        "test_seal.py",
        "test_suite_guards.py",
        "test_two_servers.py",
        "test_warm_start.py",
        "test_zoo.py",
    )
)
NOT_QUICK_TESTS = frozenset(  # file::function (every parameter of it)
    (
        "test_admin.py::test_wrong_admin_tokens_are_counted_across_sessions_and_logged",
        "test_answers.py::test_profiling_a_cpu_step_writes_nothing_to_the_terminal",
        "test_board_memory.py::test_a_bundle_at_the_cap_is_served_to_viewers_in_bounded_memory",
        "test_busy_and_compile_cost.py::test_a_race_beside_a_process_spinning_on_its_core_is_busy_not_a_verdict",
        "test_cli_errors.py::test_a_reader_that_is_already_gone_gets_no_traceback",
        "test_cli_errors.py::test_status_piped_into_head_stops_quietly",
        "test_compile_less.py::test_a_nested_race_marks_each_block_and_compiles_the_whole_model_once",
        "test_compile_less.py::test_a_precompiled_race_loads_the_step_another_process_compiled",
        "test_damaged_store.py::test_pages_the_feed_and_the_cli_read_around_a_damaged_page_of_runs",
        "test_damaged_store.py::test_the_live_feed_of_a_damaged_run_serves_what_can_be_read",
        "test_event_rows.py::test_a_real_race_with_a_replicate_exports_imports_and_replays",
        "test_explain_page.py::test_a_demo_job_runs_in_a_worker_and_is_found_again",
        "test_gpu_on_cpu.py::test_a_fresh_process_compile_takes_an_untimed_eager_step_first",
        "test_gpu_on_cpu.py::test_a_normal_race_has_no_compile_skipped_reason",
        "test_gpu_on_cpu.py::test_a_race_whose_frames_were_skipped_says_compile_did_not_happen",
        "test_gpu_on_cpu.py::test_a_sticky_device_error_keeps_the_first_error_and_what_was_measured",
        "test_gpu_on_cpu.py::test_dataloader_workers_start_before_the_timed_steps_of_each_variant",
        "test_gpu_on_cpu.py::test_the_queue_status_and_the_cli_table_say_compile_did_not_happen",
        "test_hostile_bundles.py::test_a_crafted_bundle_that_imports_renders_on_every_page_and_feed_route",
        "test_hostile_bundles.py::test_a_lone_surrogate_already_stored_is_read_as_a_replacement_character",
        "test_hostile_bundles.py::test_a_lone_surrogate_in_a_bundle_is_stored_as_a_replacement_character",
        "test_hostile_bundles.py::test_an_oversized_environment_already_stored_is_not_parsed_on_a_page_view",
        "test_hostile_bundles.py::test_the_structure_bound_admits_every_shipped_recording_and_a_bundle_at_the_size_cap",
        "test_identity_and_links.py::test_a_shared_link_does_not_make_its_receiver_an_owner",
        "test_identity_and_links.py::test_the_admin_page_says_that_fresh_browsers_from_loopback_were_not_told_apart",
        "test_identity_and_links.py::test_where_the_host_says_so_every_browser_at_one_address_shares_the_limit",
        "test_ladder.py::test_a_race_at_aot_eager_decomp_partition_compiles_and_measures",
        "test_launch_guard.py::test_the_terminals_race_is_refused_in_one_line_before_any_step",
        "test_launch_link.py::test_a_stale_rerun_naming_an_older_run_does_not_take_the_page_back_to_it",
        "test_layers.py::test_the_app_process_never_imports_torch",
        "test_live_board.py::test_a_viewer_in_a_large_audience_refreshes_less_often_and_the_owner_does_not",
        "test_live_board.py::test_two_sessions_following_a_live_run_build_its_charts_once",
        "test_live_feed.py::test_a_database_outage_is_a_503_to_try_again_not_a_damaged_record",
        "test_public_demo.py::test_a_disk_that_stays_full_fails_the_run_with_disk_full_and_keeps_what_it_could",
        "test_public_demo.py::test_a_run_on_a_full_disk_keeps_every_event_once_space_returns",
        "test_public_demo_attacks.py::test_a_worker_never_reaches_the_hugging_face_hub",
        "test_race_script.py::test_the_script_runs_alone_from_a_folder_without_compile_lab",
        "test_regions.py::test_a_regional_race_runs_and_records_its_scope",
        "test_regions.py::test_every_convnext_block_runs_compiled_although_each_compiles_its_own_graph",
        "test_regions.py::test_regional_and_whole_model_compile_agree_on_the_loss",
        "test_replicates.py::test_a_first_process_run_apart_ends_at_its_first_look_when_replicates_follow",
        "test_replicates.py::test_a_fixed_length_race_runs_the_replicates_asked_for",
        "test_replicates.py::test_a_race_run_epoch_by_epoch_rests_on_its_replicates",
        "test_replicates.py::test_a_replicate_compiles_from_its_first_processs_cache_and_adds_nothing_to_it",
        "test_replicates.py::test_a_target_adds_replicates_until_known_or_the_most_asked",
        "test_replicates.py::test_racing_to_a_target_reaches_it_by_the_cap_and_its_interval_still_covers",
        "test_store_and_bundles.py::test_a_reader_and_a_writer_at_once_never_see_database_is_locked",
        "test_sweeps.py::test_a_small_real_sweep_runs_both_points_and_reports_them",
        "test_sweeps.py::test_the_sweep_command_refuses_bad_input_with_one_line_per_problem",
        "test_tf32_settings.py::test_both_variants_are_profiled_after_both_timed_runs",
        "test_trainer.py::test_the_cpu_feature_probe_runs_once_before_the_compile_and_only_where_inductor_probes",
        "test_watching.py::test_a_cpu_race_worker_runs_pinned_to_its_cores_with_as_many_threads",
        "test_watching.py::test_the_race_a_pinned_worker_leaves_queued_gets_the_same_cores",
        "test_why_per_step.py::test_a_queued_run_keeps_torchs_compile_trace_and_offers_it_as_a_zip",
        "test_why_per_step.py::test_dynamic_true_compiles_once_for_all_lengths_and_auto_in_between",
        "test_why_per_step.py::test_varying_shapes_under_dynamic_false_recompile_at_each_new_length_with_the_guard",
    )
)


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config, items):
    for item in items:
        heavy = any(item.get_closest_marker(name) for name in ("slow", "e2e", "gpu"))
        listed = item.path.name in NOT_QUICK_FILES or f"{item.path.name}::{item.originalname}" in NOT_QUICK_TESTS
        if not heavy and not listed:
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
