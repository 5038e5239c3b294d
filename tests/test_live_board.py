"""The live board: every viewer of a run in one app process shares one store read and one set of
charts per refresh; the owner still reads the store every refresh; what is shared draws exactly
what a session's own chart would."""

import threading
import time

from streamlit.testing.v1 import AppTest
from test_pages import APP, record_probe, record_race

from core.engine.summary import Summary
from core.runs.limits import owner_of
from core.view import race_charts
from core.view.run_screen import sentences, why_per_step
from core.view.run_screen.shared_board import (
    AUDIENCE_REFRESHES_PER_S,
    AUDIENCE_WINDOW_S,
    VIEWER_REFRESH_S,
    LiveBoard,
    board_for,
    viewer_refresh_s,
)


def more_steps(store, run_id, n=3, start=100):
    rows = [
        dict(kind="step", variant="compiled", phase="train", epoch=1, step=start + i, time_s=0.01, loss=1.0, samples=16)
        for i in range(n)
    ]
    store.append_events(run_id, rows, {"progress": 0.7})


def test_many_viewers_within_a_refresh_share_one_store_read(store):
    run_id = record_race(store, "running")
    board = LiveBoard(store.path, viewer_max_age_s=60)
    snapshots = {id(board.snapshot(run_id)) for _ in range(50)}
    assert board.reads == 1 and len(snapshots) == 1
    assert board.snapshot(run_id).counts() == {"eager": 12, "compiled": 3}


def test_the_owner_reads_the_store_on_every_refresh(store):
    run_id = record_race(store, "running")
    board = LiveBoard(store.path, viewer_max_age_s=60)
    board.snapshot(run_id)
    more_steps(store, run_id)
    assert board.snapshot(run_id).counts()["compiled"] == 3  # a viewer: the shared one, under a minute old
    assert board.snapshot(run_id, fresh=True).counts()["compiled"] == 6  # the owner sees the new steps now
    assert board.reads == 2
    assert board.snapshot(run_id).counts()["compiled"] == 6  # and so does everyone after


def test_an_unchanged_run_keeps_its_snapshot_and_new_events_make_a_new_one(store):
    run_id = record_race(store, "running")
    board = LiveBoard(store.path, viewer_max_age_s=0)  # every call reads
    first = board.snapshot(run_id)
    assert board.snapshot(run_id) is first and board.reads == 2  # read again, nothing changed: same object
    more_steps(store, run_id)
    second = board.snapshot(run_id)
    assert second is not first and second.counts()["compiled"] == 6
    assert second.frames()[0]["step"].max() == 102


def test_a_finished_run_shows_its_stored_summary(store):
    run_id = record_race(store, "done")
    snap = LiveBoard(store.path).snapshot(run_id)
    assert snap.run.finished and snap.summary() == Summary.of(store.get_run(run_id).summary)
    assert LiveBoard(store.path).snapshot(424242) is None


def test_derived_renderings_are_built_once_per_snapshot_however_many_sessions_ask(store):
    run_id = record_race(store, "running")
    snap = LiveBoard(store.path).snapshot(run_id)
    builds = []

    def build():
        builds.append(1)
        time.sleep(0.05)
        return object()

    results = []
    threads = [threading.Thread(target=lambda: results.append(snap.derive("chart", build))) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(builds) == 1 and len({id(r) for r in results}) == 1


def test_viewers_asking_while_another_session_reads_wait_for_that_read(store):
    run_id = record_race(store, "running")
    board = LiveBoard(store.path, viewer_max_age_s=0.2)
    board.snapshot(run_id)
    more_steps(store, run_id)
    time.sleep(0.25)  # every viewer's snapshot is now too old
    got = []
    entry = board._entries[run_id]
    with entry.lock:  # another session is reading the store right now
        waiting = threading.Thread(target=lambda: got.append(board.snapshot(run_id)))
        waiting.start()
        time.sleep(0.1)
        assert got == []  # it waits rather than take the stale snapshot
    waiting.join()
    assert got[0].counts()["compiled"] == 6 and board.reads == 2


def test_two_sessions_following_a_live_run_build_its_charts_once(store, sleepers, monkeypatch):
    record_probe(store)
    run_id = record_race(store, "running")
    built, agreements, marks = [], [], []
    original = race_charts.step_time_chart
    monkeypatch.setattr(race_charts, "step_time_chart", lambda *a, **k: built.append(1) or original(*a, **k))
    # Per-viewer work that cost more than the charts' drawing (measured with bench/viewers.py).
    loss_agreement, compile_marks = sentences.loss_agreement, why_per_step.compile_marks
    monkeypatch.setattr(sentences, "loss_agreement", lambda *a: agreements.append(1) or loss_agreement(*a))
    monkeypatch.setattr(why_per_step, "compile_marks", lambda *a: marks.append(1) or compile_marks(*a))
    sessions = []
    for _ in range(2):
        at = AppTest.from_file(APP, default_timeout=60)
        at.query_params["run"] = str(run_id)
        sessions.append(at.run())
    assert all(not at.exception and len(at.metric) == 6 for at in sessions)
    assert len(built) == 1  # one build for both viewers (nothing new was recorded between them)
    assert len(agreements) == 1 and len(marks) == 1
    assert board_for(store.path).reads >= 1
    more_steps(store, run_id)
    time.sleep(0.6)  # past a viewer's max age
    sessions[0].run()
    assert len(built) == 2  # new steps: rebuilt once
    assert len(agreements) == 2 and len(marks) == 2


def _draw_both_ways():
    import altair as alt
    import pandas as pd
    import streamlit as st

    from app_pages.common import draw_chart, vega_spec

    data = pd.DataFrame({"step": [1, 2, 3], "time_s": [0.5, 0.01, 0.012], "variant": ["compiled"] * 3})
    chart = alt.Chart(data).mark_line().encode(x="step:Q", y="time_s:Q", color="variant:N").properties(title="t")
    st.altair_chart(chart, width="stretch")
    draw_chart(st, vega_spec(chart))


def test_a_shared_chart_draws_exactly_what_st_altair_chart_draws():
    at = AppTest.from_function(_draw_both_ways, default_timeout=60).run()
    assert not at.exception
    direct, shared = [el.proto for el in at.get("arrow_vega_lite_chart")] or [
        el.proto for el in at.get("vega_lite_chart")
    ]
    assert direct.spec == shared.spec
    assert [(d.name, d.data.data) for d in direct.datasets] == [(d.name, d.data.data) for d in shared.datasets]
    assert direct.datasets and direct.use_container_width == shared.use_container_width


def test_a_large_audience_refreshes_less_often_and_all_together_about_as_often_as_35():
    assert viewer_refresh_s(0) == viewer_refresh_s(1) == viewer_refresh_s(35) == VIEWER_REFRESH_S == 1.0
    assert viewer_refresh_s(36) == viewer_refresh_s(50) == 1.5
    assert viewer_refresh_s(100) == 3.0
    intervals = [viewer_refresh_s(n) for n in range(1, 500)]
    assert intervals == sorted(intervals)  # never faster for a larger audience
    for n in range(36, 500):  # all viewers together: the cap, within one half-second step
        assert AUDIENCE_REFRESHES_PER_S * 0.6 <= n / viewer_refresh_s(n) <= AUDIENCE_REFRESHES_PER_S
    # Hysteresis: a viewer at 1.5 s stays there while the audience hovers just under the step.
    assert viewer_refresh_s(34, current=1.5) == 1.5
    assert viewer_refresh_s(28, current=1.5) == 1.0
    assert viewer_refresh_s(60, current=1.5) == 2.0  # up at once


def test_the_audience_is_the_sessions_that_asked_recently(store, monkeypatch):
    run_id = record_race(store, "running")
    board = LiveBoard(store.path, viewer_max_age_s=60)
    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    for session in ["a", "b", "c", "a"]:
        board.snapshot(run_id, follower=session)
    board.snapshot(run_id)  # a read that names no session (a test, a script) is nobody
    assert board.audience(run_id) == 3
    now[0] += AUDIENCE_WINDOW_S - 1
    board.snapshot(run_id, follower="c")
    now[0] += 2  # a and b have not asked for longer than the window: gone
    assert board.audience(run_id) == 1
    assert board.audience(run_id + 1) == 0


def test_a_viewer_in_a_large_audience_refreshes_less_often_and_the_owner_does_not(store, sleepers):
    record_probe(store)
    run_id = record_race(store, "running")
    store.update_run(run_id, phase="compiling (compiled epoch 1/2)")  # no steps timed: the lively cadence
    board = board_for(store.path)
    for i in range(49):  # 49 other tabs following the run
        board.snapshot(run_id, follower=f"tab-{i}")
    viewer = AppTest.from_file(APP, default_timeout=60)
    viewer.query_params["run"] = str(run_id)
    viewer.run()
    viewer.run()  # the second run sees itself in the audience too
    assert not viewer.exception and viewer.session_state["live_every"] == 1.5
    owner = AppTest.from_file(APP, default_timeout=60)
    owner.session_state["visitor"] = "0123456789abcdef"
    store.update_run(run_id, owner=owner_of("0123456789abcdef"))
    owner.query_params["run"] = str(run_id)
    owner.run()
    assert not owner.exception and owner.session_state["live_every"] == 1.0
