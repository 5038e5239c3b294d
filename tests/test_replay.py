"""Replays and presenter mode: a replay of a stored race yields the race's own summary, its events
arrive in recorded order at the chosen speed (a hand-driven clock), it queues nothing and uses no
device; shipped recordings are real bundles; presenter mode hides the configuration and keeps the
cards."""

import glob
import os

import pytest
from test_pages import app, record_probe, record_race

from core.runs.bundle import BundleError, export_bundle
from core.view import replay

RECORDED_AT = 1_000.0


def timed_race(store, step_s: float = 0.5):  # noqa: F811
    """A finished race whose events were recorded step_s apart (eager first, then compiled)."""
    run_id = record_race(store, "done")
    bundle = export_bundle(store, run_id)
    for n, event in enumerate(bundle["events"]):
        event["recorded_at"] = RECORDED_AT + n * step_s
    return run_id, bundle


def test_a_replay_plays_events_in_recorded_order_at_its_speed(store):  # noqa: F811
    _, bundle = timed_race(store)
    recording = replay.recording_from_bundle(bundle, "test")
    offsets = [e["offset_s"] for e in recording.events]
    assert offsets == sorted(offsets) and offsets[0] == 0.0
    clock = replay.ReplayClock(speed=2.0, started=100.0)
    assert len(replay.events_until(recording, clock.position(100.0))) == 1  # the first event, at offset 0
    # 2x: after 1 s of wall time, 2 s of recording (offsets 0, 0.5, ..., 2.0: five events).
    assert [e["offset_s"] for e in replay.events_until(recording, clock.position(101.0))] == [0, 0.5, 1, 1.5, 2]
    clock.pause(101.0)
    assert clock.position(150.0) == clock.position(101.0)  # paused: nothing arrives
    clock.resume(150.0)
    assert clock.position(151.0) == pytest.approx(4.0)
    clock.restart(200.0)
    assert clock.position(200.0) == 0.0
    instant = replay.ReplayClock(speed=None, started=0.0)
    assert len(replay.events_until(recording, instant.position(0.0))) == len(recording.events)


def test_a_finished_replay_yields_the_runs_own_summary_and_midway_reads_as_running(store):  # noqa: F811
    run_id, bundle = timed_race(store)
    recording = replay.recording_from_bundle(bundle, "test")
    clock = replay.ReplayClock(speed=1.0, started=0.0)
    end = replay.replay_view(recording, clock, recording.duration_s + 1)
    stored = store.get_run(run_id).summary
    assert end.run.status == "done" and end.run.progress == 1.0
    for key in ("steady_state_speedup", "break_even_step", "compile_time_s", "first_epoch_overhead_s"):
        assert getattr(end.summary(), key) == stored[key]
    midway = replay.replay_view(recording, clock, recording.duration_s / 3)
    assert midway.run.status == "running" and midway.run.summary is None
    assert midway.state.startswith("eager epoch") and 0 < midway.run.progress < 1
    eager_done = next(e["offset_s"] for e in recording.events if e["kind"] == "step" and e["variant"] == "compiled")
    between = replay.replay_view(recording, clock, eager_done - 0.01)
    assert between.state == "compiling"  # all eager steps in, the first compiled step (the compile) not yet


def test_a_stored_race_and_a_shipped_recording_load_by_key(store, tmp_path):  # noqa: F811
    run_id, bundle = timed_race(store)
    assert replay.load_recording(f"run:{run_id}", store).run.params["model"] == "mlp"
    with pytest.raises(BundleError):
        replay.load_recording("run:999", store)
    with pytest.raises(BundleError):
        replay.load_recording("file:nothing-here", folder=str(tmp_path))
    bundle["events"] = [{k: v for k, v in e.items() if k != "recorded_at"} for e in bundle["events"]]
    with pytest.raises(BundleError, match="recorded_at"):
        replay.recording_from_bundle(bundle, "x")


def test_the_shipped_recordings_are_real_labelled_races():
    paths = glob.glob(os.path.join(replay.RECORDINGS_DIR, "*.json"))
    assert len(paths) >= 3, paths
    for key in replay.shipped_recordings():
        recording = replay.load_recording(key)
        assert recording.run.status == "done" and recording.duration_s > 0
        env = recording.run.environment or {}
        assert env.get("torch") and (env.get("device_name") or env.get("cpu_name")), key
        assert "recorded on" in recording.label and f"torch {env['torch']}" in recording.label


def test_playing_a_replay_on_the_page_queues_nothing_and_says_it_is_one(store, sleepers):  # noqa: F811
    record_probe(store)
    run_id, _ = timed_race(store)
    before = [r.id for r in store.list_runs()]
    at = app(replay=f"run:{run_id}", speed="instant")
    assert not at.exception, at.exception
    assert any(i.value.startswith("Replay at instant of a race") for i in at.info)
    assert [r.id for r in store.list_runs()] == before  # nothing queued, no device
    assert {m.label for m in at.metric} >= {"Compile time", "Steady-state speedup", "Break-even"}
    assert at.get("progress")[0].proto.text.startswith("Replay: done")


def test_presenter_mode_hides_the_configuration_and_keeps_the_cards(store, sleepers):  # noqa: F811
    record_probe(store)
    run_id = record_race(store, "done")
    at = app(run=run_id, present=1)
    assert not at.exception, at.exception
    assert not [b for b in at.button if b.label == "Launch"]
    assert not [e for e in at.expander if e.label in ("Configure a race", "Replay a recorded run")]
    assert not at.title  # the page's title gives its room to the run
    assert {m.label for m in at.metric} >= {"Compile time", "Steady-state speedup", "Break-even"}
    assert [b.label for b in at.button] == ["Leave presenter mode"]
    at.button(key="leave_present").click().run()
    assert [b for b in at.button if b.label == "Launch"] and "present" not in at.query_params
