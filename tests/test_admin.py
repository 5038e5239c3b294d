"""The host's admin: unlocked only by the token from the host's environment; every run (cancel any),
pause and resume the queue, purge old runs, workers and their lanes."""

import time

import pytest
from streamlit.testing.v1 import AppTest
from support import CPU, quick_spec
from test_pages import APP, record_probe, record_race

from core.runs import admin, fleet, queue
from core.runs.limits import ConfigError, HostLimits
from core.view.host_tables import describe

TOKEN = "correct-horse-battery-staple-42"


def test_the_token_comes_from_the_environment_and_must_be_a_secret():
    assert admin.admin_token({}) is None
    assert admin.admin_token({"COMPILE_LAB_ADMIN_TOKEN": "  "}) is None
    with pytest.raises(ConfigError, match="at least 16 characters"):
        admin.admin_token({"COMPILE_LAB_ADMIN_TOKEN": "hunter2"})
    env = {"COMPILE_LAB_ADMIN_TOKEN": TOKEN}
    assert admin.token_matches(TOKEN, env) and not admin.token_matches(TOKEN[:-1], env)
    assert not admin.token_matches("", env) and not admin.token_matches(None, env)
    assert not admin.token_matches(TOKEN, {}) and not admin.token_matches(
        "hunter2", {"COMPILE_LAB_ADMIN_TOKEN": "hunter2"}
    )


@pytest.fixture(autouse=True)
def _fresh_guesses(monkeypatch):
    """The app process counts wrong tokens across sessions: each test starts with none."""
    monkeypatch.setattr(admin, "GUESSES", admin.TokenGuesses())


def test_admin_cancels_anyones_run(store, sleepers):
    run_id = queue.enqueue(store, quick_spec(), "visitor:someone", limits=HostLimits(), caps=CPU)
    with pytest.raises(queue.JobError, match="belongs to someone else"):
        queue.cancel(store, run_id, "visitor:me")
    assert admin.cancel_any(store, run_id) == "cancelled"
    with pytest.raises(queue.JobError, match="there is no run"):
        admin.cancel_any(store, 424242)


def test_a_paused_queue_starts_nothing_but_the_device_probe_and_resumes(store, sleepers):
    admin.set_queue_paused(store, True)
    race = queue.enqueue(store, quick_spec(), "ann", limits=HostLimits(), caps=CPU)
    probe = queue.enqueue(store, {}, "system", kind="probe", limits=HostLimits())
    queue.tick(store)
    assert store.get_run(race).status == "queued" and store.get_run(probe).status != "queued"
    assert describe(store, store.get_run(race)) == "queued (position 1; the host has paused the queue)"
    admin.set_queue_paused(store, False)
    assert store.get_run(race).status in ("starting", "running")


def test_purge_deletes_old_finished_runs_only(store, sleepers):
    record_probe(store)  # the device probe: kept however old
    old, recent = record_race(store, "done"), record_race(store, "done")
    waiting = store.create_run("race", quick_spec().to_dict(), "ann", "cpu", status="queued", created_at=0.0)
    now = time.time()
    store.update_run(old, finished_at=now - 40 * 86400)
    store.update_run(store.list_runs(kind="probe")[0].id, finished_at=now - 400 * 86400)
    assert admin.purge_older_than(store, 30, now=now).runs == 1
    assert store.get_run(old) is None and store.events_after(old) == []
    assert store.get_run(recent) is not None and store.get_run(waiting) is not None
    assert fleet.latest_probe(store) is not None
    for nonsense in (0, -1, float("inf"), float("nan")):
        with pytest.raises(ValueError):
            admin.purge_older_than(store, nonsense)


def test_lanes_show_each_devices_worker_and_queue(store, sleepers):
    first = queue.enqueue(store, quick_spec(), "ann", limits=HostLimits(), caps=CPU)
    queue.enqueue(store, quick_spec(), "bob", limits=HostLimits(), caps=CPU)
    lanes = admin.lanes(store)
    assert [(lane.device_key, lane.running.id, lane.waiting, lane.worker_alive) for lane in lanes] == [
        ("cpu", first, 1, True)
    ]


def test_without_a_configured_token_there_is_no_admin_page(store, sleepers, monkeypatch):
    monkeypatch.delenv("COMPILE_LAB_ADMIN_TOKEN", raising=False)
    at = AppTest.from_file(APP, default_timeout=60).run()
    with pytest.raises(ValueError, match="Could not find a navigation page") as refused:
        at.switch_page("app_pages/admin.py")  # not a page of this app at all: nothing to reach
    known = str(refused.value).split("Known pages:")[1]
    assert "race.py" in known and "admin" not in known


def test_the_admin_page_shows_only_the_prompt_until_the_token_is_given(store, sleepers, monkeypatch):
    monkeypatch.setenv("COMPILE_LAB_ADMIN_TOKEN", TOKEN)
    record_probe(store)
    theirs = queue.enqueue(store, quick_spec(), "visitor:0123456789abcdef0123", limits=HostLimits(), caps=CPU)
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("app_pages/admin.py").run()
    assert not at.exception
    assert [t.value for t in at.title] == ["Admin"] and len(at.text_input) == 1
    assert not at.dataframe and not [b for b in at.button if "queue" in b.label.lower()]
    at.text_input[0].input("not-the-token-at-all")
    at.button[0].click().run()  # the form's Unlock
    assert "not this host's admin token" in " ".join(e.value for e in at.error) and not at.dataframe
    at.text_input[0].input(TOKEN)
    at.button[0].click().run()
    assert not at.exception and at.session_state["admin_unlocked"]
    assert len(at.dataframe) == 2  # lanes, every run
    runs = at.dataframe[1].value
    assert theirs in list(runs["id"]) and "0123456789abcdef0123" not in " ".join(runs["owner"])
    [b for b in at.button if b.label == "Pause the queue"][0].click().run()
    assert store.queue_paused()
    [b for b in at.button if b.label == "Resume the queue"][0].click().run()
    assert not store.queue_paused()
    at.session_state["admin_runs"] = {
        "selection": {"rows": [list(runs["id"]).index(theirs)], "columns": [], "cells": []}
    }
    at.run()
    [b for b in at.button if b.label.startswith("Cancel 1 selected")][0].click().run()
    assert store.get_run(theirs).status == "cancelled"
    assert any(c.value.startswith("The data folder holds ") for c in at.caption)  # and no budget: said
    assert [b for b in at.button if b.label == "Free files to the disk budget now"][0].disabled
    [b for b in at.button if b.label.startswith("Delete finished runs older than 30 days")][0].click().run()
    assert [s.value for s in at.success] == ["Deleted 0 runs and their events; no files of theirs were left."]


def test_wrong_tokens_lock_the_prompt_after_a_few_tries(store, sleepers, monkeypatch):
    monkeypatch.setenv("COMPILE_LAB_ADMIN_TOKEN", TOKEN)
    monkeypatch.setattr(time, "sleep", lambda s: None)  # the page waits a second per wrong token
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("app_pages/admin.py").run()
    for _ in range(5):
        at.text_input[0].input("wrong-wrong-wrong-wrong")
        at.button[0].click().run()
    at.run()
    assert "Too many wrong admin tokens lately" in " ".join(e.value for e in at.error) and not at.text_input
    assert "admin_unlocked" not in at.session_state


def test_wrong_admin_tokens_are_counted_across_sessions_and_logged(store, sleepers, monkeypatch, caplog):
    """A new session (a new browser) is no new allowance: 5 wrong tokens per visitor, and 20 from
    everyone together, in 15 minutes; each is logged, without what was typed."""
    import logging

    monkeypatch.setenv("COMPILE_LAB_ADMIN_TOKEN", TOKEN)
    monkeypatch.setattr("time.sleep", lambda _s: None)  # (the page's second per wrong token)
    record_probe(store)

    def session(visitor_token):
        at = AppTest.from_file(APP, default_timeout=60)
        at.session_state["visitor"] = visitor_token
        at.run()
        at.switch_page("app_pages/admin.py").run()
        return at

    def guess(at, token="wrong-token-guess-0000"):
        at.text_input[0].input(token)
        at.button[0].click().run()

    caplog.set_level(logging.WARNING, logger="compile_lab")
    for _ in range(admin.GUESSES_PER_VISITOR):
        guess(session("a" * 16))  # each in a fresh session
    refused = session("a" * 16)
    assert not refused.text_input and "Too many wrong admin tokens lately" in refused.error[0].value
    assert len([r for r in caplog.records if "admin token refused" in r.getMessage()]) == admin.GUESSES_PER_VISITOR
    assert "wrong-token-guess" not in caplog.text
    for i in range(admin.GUESSES_FROM_EVERYONE - admin.GUESSES_PER_VISITOR):
        guess(session(f"{i:016x}"))  # many browsers, one wrong token each
    assert "Too many wrong admin tokens lately" in session("f" * 16).error[0].value  # even a new one waits
    later = time.time() + admin.GUESS_WINDOW_S + 1
    assert admin.GUESSES.refusal("b" * 16, now=later) is None  # the window passes
