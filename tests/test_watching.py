"""Watching must not cost the race (issue 23): while steps are timed the live view refreshes less
often, the owner follows the run through the live feed with a Cancel button of its own, a CPU race's
worker gets cores of its own where the machine has two or more (the app's deprioritised threads
kept off them), and on one core the page says that the open page is part of the measurement."""

import os
import sys
import threading
import time
from types import SimpleNamespace

import pytest
from streamlit.testing.v1 import AppTest
from support import CPU, quick_spec
from test_jobs import NO_LIMITS, finished, wait_for
from test_live_board import more_steps
from test_live_feed import OWNER_TOKEN, feeds_mounted, open_run, served  # noqa: F401 (a fixture)
from test_pages import APP, record_probe, record_race

from core.runs import queue
from core.runs import race_conditions as worker_cores
from core.runs.limits import owner_of
from core.runs.race_conditions import STEADY_MALLOC, CoreSettingError, CoreShare, core_share
from core.view.run_screen import shared_board
from core.view.run_screen.feed import TIMED_POLL_S, LiveFeeds
from core.view.run_screen.shared_board import LiveBoard, yield_to_measurements

LINUX = sys.platform.startswith("linux")


def run_in(phase, status="running", environment=None, finished_=False):
    return SimpleNamespace(phase=phase, status=status, environment=environment, finished=finished_)


@pytest.mark.parametrize(
    "phase, status, timed",
    [
        ("eager epoch 2/3", "running", True),
        ("compiled epoch 1/3", "running", True),
        ("compiled epoch 3/3, evaluating", "running", True),
        ("compiling (compiled epoch 1/3)", "running", False),
        ("eager: starting", "running", False),
        ("queued", "queued", False),
        ("compiled epoch 3/3", "done", False),
        (None, "starting", False),
    ],
)
def test_the_view_refreshes_less_often_only_while_steps_are_timed(phase, status, timed):
    run = run_in(phase, status)
    assert shared_board.timed(run) is timed
    assert shared_board.refresh_s(run) == (shared_board.TIMED_REFRESH_S if timed else shared_board.LIVELY_REFRESH_S)
    assert shared_board.TIMED_REFRESH_S > shared_board.LIVELY_REFRESH_S


def test_on_one_core_the_page_says_watching_is_part_of_the_measurement():
    one = {"device_type": "cpu", "cpu_count": 1}
    assert "this page takes its CPU from the race" in shared_board.watching_note(
        run_in("eager epoch 1/2", environment=one)
    )
    done = run_in("done", "done", environment=one, finished_=True)
    assert "watching was part of what was measured" in shared_board.watching_note(done)
    for env in ({"device_type": "cpu", "cpu_count": 2}, {"device_type": "cuda", "cpu_count": 1}, None):
        assert shared_board.watching_note(run_in("eager epoch 1/2", environment=env)) is None


@pytest.mark.parametrize(
    "cores, cpus, threads, expected",
    [
        ((0, 1), None, None, CoreShare((1,), 1, (0,))),
        (range(8), "auto", None, CoreShare(tuple(range(1, 8)), 7, (0,))),
        ((2, 5, 7), "", None, CoreShare((5, 7), 2, (2,))),  # the cores this process may use, not 0..n
        ((0,), None, None, CoreShare(None, None, None)),  # one core: nothing to set aside
        ((0, 1), None, "2", CoreShare((1,), 2, (0,))),  # the thread setting wins over the count
        (range(8), None, "0", CoreShare(tuple(range(1, 8)), None, (0,))),  # "0": torch's default
        (range(8), "off", None, CoreShare(None, 7, None)),  # not pinned, still a core's worth left
        ((0, 1), "off", None, CoreShare(None, 1, None)),
        (range(4), "2-3", None, CoreShare((2, 3), 2, (0, 1))),
        (range(4), "1,3", None, CoreShare((1, 3), 2, (0, 2))),
        (range(4), "0-3", None, CoreShare((0, 1, 2, 3), 4, None)),  # all of them: the app anywhere
        (range(2), "1-5", None, CoreShare((1,), 1, (0,))),  # only those that exist here
    ],
)
def test_a_cpu_race_gets_cores_of_its_own_and_the_app_the_others(cores, cpus, threads, expected):
    assert core_share(cores, cpus, threads) == expected


@pytest.mark.parametrize("cpus, threads", [("one", None), ("3-1", None), (",", None), ("7", None), (None, "two")])
def test_a_core_setting_that_cannot_be_read_is_a_clear_error(cpus, threads):
    with pytest.raises(CoreSettingError, match="COMPILE_LAB_WORKER_(CPUS|THREADS)="):
        core_share(range(4), cpus, threads)


@pytest.mark.skipif(not LINUX, reason="per-thread affinity and niceness are Linux's")
def test_a_deprioritised_app_thread_keeps_off_the_workers_cores(monkeypatch):
    from core.view.run_screen import shared_board

    monkeypatch.setattr(shared_board, "_SHARE", [CoreShare((1,), 1, (0,))])
    seen = {}

    def refresh():
        seen["lowered"] = yield_to_measurements()
        seen["cores"] = os.sched_getaffinity(threading.get_native_id())

    before = os.sched_getaffinity(0)
    thread = threading.Thread(target=refresh)
    thread.start()
    thread.join()
    assert seen == {"lowered": True, "cores": {0}}
    assert os.sched_getaffinity(0) == before  # the process, and this thread, keep all of theirs


@pytest.mark.skipif(not LINUX or len(os.sched_getaffinity(0)) < 2, reason="needs Linux and two cores or more")
def test_a_cpu_race_worker_runs_pinned_to_its_cores_with_as_many_threads(store):
    share = worker_cores.this_host()
    run_id = queue.enqueue(store, quick_spec(epochs=1, steps_per_epoch=2), "ann", limits=NO_LIMITS, caps=CPU)
    wait_for(finished(store, run_id), store=store)
    run = store.get_run(run_id)
    assert run.status == "done", run.error
    assert run.environment["worker_cpus"] == list(share.worker)
    assert run.environment["torch_threads"] == share.threads


@pytest.mark.skipif(not LINUX or len(os.sched_getaffinity(0)) < 2, reason="needs Linux and two cores or more")
def test_the_race_a_pinned_worker_leaves_queued_gets_the_same_cores(store):
    """The second race is started by the ticker the first race's (pinned) worker leaves behind:
    it must be pinned and threaded the same, not see only the first race's cores."""
    share = worker_cores.this_host()
    spec = quick_spec(epochs=1, steps_per_epoch=2)
    first, second = (queue.enqueue(store, spec, "ann", limits=NO_LIMITS, caps=CPU) for _ in range(2))
    wait_for(finished(store, second))  # no ticking here: the first worker's ticker starts the second
    for run_id in (first, second):
        run = store.get_run(run_id)
        assert run.status == "done", run.error
        assert run.environment["worker_cpus"] == list(share.worker)
        assert run.environment["torch_threads"] == share.threads
        assert run.environment["malloc"] == STEADY_MALLOC  # kept with the run it steadied


def test_while_steps_are_timed_the_feed_asks_and_builds_less_often(store, monkeypatch):
    run_id = record_race(store, "running")  # phase 'compiled epoch 1/2': timed
    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    feeds = LiveFeeds(LiveBoard(store.path))
    first = feeds.get(run_id)
    assert first.json()["poll_ms"] == int(TIMED_POLL_S * 1000)
    more_steps(store, run_id)
    now[0] += 1.0  # past the lively age, within the timed one: the same document
    assert feeds.get(run_id) is first and feeds.builds == 1
    now[0] += TIMED_POLL_S
    second = feeds.get(run_id)
    assert second.etag != first.etag and feeds.builds == 2
    store.update_run(run_id, phase="compiling (compiled epoch 2/2)")
    now[0] += TIMED_POLL_S
    assert feeds.get(run_id).json()["poll_ms"] == 500  # compiling: lively again
    more_steps(store, run_id)
    now[0] += 1.0
    assert feeds.get(run_id).json()["counts"]["compiled"] == 9 and feeds.builds == 4


def test_the_feed_carries_the_one_core_note(store):
    run_id = record_race(store, "running")
    feeds = LiveFeeds(LiveBoard(store.path), max_age_s=0, timed_max_age_s=0)
    assert feeds.get(run_id).json()["note"] is None
    store.update_run(run_id, environment={"device_type": "cpu", "cpu_count": 1})
    more_steps(store, run_id)
    assert "part of the measurement" in feeds.get(run_id).json()["note"]


def test_the_owner_follows_the_feed_with_a_cancel_button_that_cancels(store, served):  # noqa: F811
    record_probe(store)
    run_id = record_race(store, "running")
    store.update_run(run_id, owner=owner_of(OWNER_TOKEN))
    owner = open_run(run_id, visitor=OWNER_TOKEN)
    assert not owner.exception and len(feeds_mounted(owner)) == 1 and len(owner.metric) == 0
    viewer = open_run(run_id)
    assert len(feeds_mounted(viewer)) == 1 and not [b for b in viewer.button if b.label == "Cancel"]
    cancel = [b for b in owner.button if b.label == "Cancel"]
    assert len(cancel) == 1
    cancel[0].click().run()
    assert store.get_run(run_id).status == "cancelled"


def test_without_the_feed_the_owners_page_refreshes_less_often_while_steps_are_timed(store, sleepers):
    record_probe(store)
    run_id = record_race(store, "running")  # timed
    store.update_run(run_id, owner=owner_of(OWNER_TOKEN))
    owner = AppTest.from_file(APP, default_timeout=60)
    owner.session_state["visitor"] = OWNER_TOKEN
    owner.query_params["run"] = str(run_id)
    owner.run()
    assert not owner.exception and owner.session_state["live_every"] == shared_board.TIMED_REFRESH_S
    assert [b for b in owner.button if b.label == "Cancel"]
    store.update_run(run_id, phase="compiling (compiled epoch 2/2)")
    owner.run()
    assert owner.session_state["live_every"] == shared_board.LIVELY_REFRESH_S


def test_on_one_core_the_race_page_says_so_near_the_verdict(store):
    record_probe(store)
    run_id = record_race(store, "done")
    store.update_run(run_id, environment={"device_type": "cpu", "cpu_count": 1})
    at = open_run(run_id)
    assert not at.exception
    assert any("watching was part of what was measured" in c.value for c in at.caption)
    other = open_run(record_race(store, "done"))
    assert not any("part of what was measured" in c.value for c in other.caption)
