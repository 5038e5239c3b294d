"""The live board's memory is bounded: a bundle at the import cap (as many step events as 64 MiB
holds) is drawn from thinned steps, its numbers from every step; the board keeps a bounded number
of runs and lets idle ones go. Memory is measured with tracemalloc, never with a clock."""

import copy
import functools
import glob
import io
import json
import os
import random
import tracemalloc

import pytest
from support import ROOT

from core.engine.spec import RunSpec
from core.engine.summary import Summary
from core.runs.bundle import MAX_BUNDLE_BYTES, BundleError, events_allowed, import_bundle, read_bundle
from core.view import replay
from core.view.run_screen import shared_board
from core.view.run_screen.feed import LiveFeeds
from core.view.run_screen.shared_board import LiveBoard, RunView

RECORDING = sorted(glob.glob(os.path.join(ROOT, "assets", "recordings", "*.json")))[0]
MiB = 2**20


def recording() -> dict:
    with open(RECORDING) as fh:
        return json.load(fh)


def step(variant: str, n: int) -> dict:
    """Step n of a variant in a race of 4 x 100,000 steps, as small as a bundle's event can be, so
    that the most of them fit in the cap. Compiled's first step is its compile: the slowest."""
    return {
        "kind": "step",
        "variant": variant,
        "phase": "train",
        "epoch": 1 + (n - 1) // 100_000,
        "step": n,
        "time_s": 0.02 if variant == "eager" else 5.01 if n == 1 else 0.01,
        "recorded_at": 1.7e9 + n,
    }


@functools.cache  # built once for the session (tests/test_hostile_bundles.py reads it too): bytes, never changed
def bundle_at_the_cap() -> tuple[bytes, int, int]:
    """A sequential race's bundle (eager's steps, then compiled's) of as many step events as fit
    in MAX_BUNDLE_BYTES, each one its race could record."""
    data = recording()
    data["run"]["params"].update(epochs=4, steps_per_epoch=100_000, shapes="fixed")
    data["events"] = []
    size = len(json.dumps(data, separators=(",", ":")))
    eager, compiled = [], []
    for n in range(1, 400_001):
        for variant, events in (("eager", eager), ("compiled", compiled)):
            event = step(variant, n)
            size += len(json.dumps(event, separators=(",", ":"))) + 1
            if size > MAX_BUNDLE_BYTES:
                break
            events.append(event)
        else:
            continue
        break
    data["events"] = eager + compiled
    assert len(data["events"]) <= events_allowed(RunSpec.from_dict(data["run"]["params"]))
    raw = json.dumps(data, separators=(",", ":")).encode()
    assert MAX_BUNDLE_BYTES - 200 < len(raw) <= MAX_BUNDLE_BYTES  # at the cap, not past it
    return raw, len(eager), len(compiled)


def test_a_bundle_at_the_cap_is_served_to_viewers_in_bounded_memory(store):
    raw, eager, compiled = bundle_at_the_cap()
    run_id = import_bundle(store, read_bundle(io.BytesIO(raw)), "visitor:a")
    del raw
    tracemalloc.start()
    try:
        feeds = LiveFeeds(LiveBoard(store.path))
        document = feeds.get(run_id).json()  # what GET /api/live/<id> sends
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Unthinned, the board held about 450 MB for this run (and 520 MB at the peak of its build).
    assert held < 48 * MiB, f"the board holds {held / MiB:.0f} MiB for one run"
    assert peak < 128 * MiB, f"building the feed took {peak / MiB:.0f} MiB"
    assert document["counts"] == {"eager": eager, "compiled": compiled}  # counted exactly, all of them
    assert "its charts draw one point per" in document["progress_text"]  # the page says it is thinned
    snap = feeds.board.snapshot(run_id)
    assert snap.bucket > 1 and len(snap.frames()[0]) <= 8_000
    assert snap.summary() == Summary.of(store.get_run(run_id).summary)  # the numbers: the summary of every step
    assert snap.frames()[0]["time_s"].max() == pytest.approx(5.01)  # the compile step's spike survives
    assert snap.frames()[0]["time_s"].median() in (0.01, 0.02)  # the others: real steps' own times


def long_race(seed: int = 1) -> list[dict]:
    """Three alternating epochs with evaluation and a few stalls, then one more eager epoch than
    compiled had; compiled's first step is its compile."""
    rng = random.Random(seed)
    events: list[dict] = []

    def add(**fields):
        events.append({"id": len(events) + 1, "recorded_at": 1.0, "loss": None, **fields})

    for epoch in range(1, 4):
        for variant, typical in (("eager", 0.02), ("compiled", 0.01)):
            for s in range(1, 3001):
                n = (epoch - 1) * 3000 + s
                time_s = typical * rng.uniform(0.9, 1.1) * (40 if n % 2500 == 0 else 1)  # a stall now and then
                time_s = 5.0 if (variant, n) == ("compiled", 1) else time_s
                add(kind="step", variant=variant, phase="train", epoch=epoch, step=n, time_s=time_s)
                events[-1]["loss"] = rng.random()
            for _ in range(40):
                add(kind="step", variant=variant, phase="eval", epoch=epoch, step=epoch * 3000, time_s=rng.random())
            add(
                kind="epoch",
                variant=variant,
                phase="train",
                epoch=epoch,
                step=epoch * 3000,
                time_s=1.0,
                eval_time_s=0.1,
            )
    for s in range(1, 11):
        add(kind="step", variant="eager", phase="train", epoch=4, step=9000 + s, time_s=0.02)
    return events


@pytest.mark.parametrize("when", ["before its events", "after its events", "without knowing how many"])
def test_a_thinned_view_draws_what_the_whole_view_does(when):
    events = long_race()
    whole, thinned = RunView(1), RunView(1)
    whole.feed(copy.deepcopy(events))
    if when == "after its events":
        thinned.feed(events)
        thinned.thin_steps(500, expected=2 * 3 * 3040 + 10)
    else:
        thinned.thin_steps(500, expected=None if when == "without knowing how many" else 2 * 3 * 3040 + 10)
        for i in range(0, len(events), 777):  # in polls of any size
            thinned.feed(events[i : i + 777])
    assert thinned.counts() == whole.counts()
    for variant in ("eager", "compiled"):
        assert thinned.train_times(variant) == whole.train_times(variant)  # eager's late epoch held back too
    (all_steps, all_epochs), (steps, epochs) = whole.frames(), thinned.frames()
    assert list(steps.columns) == list(all_steps.columns) and epochs.equals(all_epochs)
    assert len(steps) <= 500 and thinned.bucket > 1
    for variant in ("eager", "compiled"):
        train = all_steps[(all_steps["variant"] == variant) & (all_steps["phase"] == "train")].set_index("step")
        kept = steps[(steps["variant"] == variant) & (steps["phase"] == "train")]
        assert kept["step"].is_monotonic_increasing and kept["step"].is_unique
        for column in ("time_s", "cumulative_s", "loss"):  # every row is a real step, as it was measured
            assert kept[column].tolist() == pytest.approx(train.loc[kept["step"], column].tolist(), nan_ok=True)
        stalls = set(train.index[train["time_s"] > 10 * train["time_s"].median()])
        assert stalls and stalls <= set(kept["step"])  # the compile and every stall keep their row
        typical = kept[~kept["step"].isin(stalls)]["time_s"]
        assert typical.median() == pytest.approx(train["time_s"].median(), rel=0.05)  # not biased up
    assert {1} <= set(steps[steps["variant"] == "compiled"]["step"])


def test_the_board_keeps_a_bounded_number_of_runs_and_lets_idle_ones_go(store, monkeypatch):
    ids = [import_bundle(store, recording(), f"visitor:{i}") for i in range(4)]  # one bundle, one run per visitor
    monkeypatch.setattr(shared_board, "MAX_BOARD_RUNS", 2)
    feeds = LiveFeeds(LiveBoard(store.path))
    for run_id in ids:
        assert feeds.get(run_id) is not None
        assert feeds.get(run_id, present=True) is not None
    assert sorted(feeds.board._entries) == ids[2:]  # the least recently asked went first
    assert len(feeds._cache) <= 4 and {key[0] for key in feeds._cache} <= set(ids[1:])
    monkeypatch.setattr(shared_board, "IDLE_EVICT_S", 0.0)
    feeds.board.snapshot(ids[0])
    assert sorted(feeds.board._entries) == [ids[0]]  # nobody asked for the others since: let go


def test_a_stored_race_too_long_to_replay_is_a_message_not_a_gigabyte_per_tab(store, monkeypatch):
    from test_pages import record_race

    run_id = record_race(store, "done", steps=30)  # 62 events
    assert len(replay.load_recording(f"run:{run_id}", store).events) == 62
    monkeypatch.setattr(replay, "MAX_REPLAY_EVENTS", 61)
    with pytest.raises(BundleError, match=f"run {run_id} recorded more than 61 events, too many to replay"):
        replay.load_recording(f"run:{run_id}", store)


def test_ids_that_name_no_run_take_no_place_on_the_board(store, monkeypatch):
    run_id = import_bundle(store, recording(), "visitor:a")
    monkeypatch.setattr(shared_board, "MAX_BOARD_RUNS", 2)
    feeds = LiveFeeds(LiveBoard(store.path))
    first = feeds.get(run_id)
    reads = feeds.board.reads
    for missing in range(10**6, 10**6 + 40):  # a loop asking for ids no run has
        assert feeds.get(missing) is None
    assert sorted(feeds.board._entries) == [run_id]
    assert feeds.get(run_id) is first and feeds.board.reads == reads  # still held: not read again


def test_a_long_runs_rebuild_leaves_the_store_to_other_runs_between_its_chunks(store, monkeypatch):
    """One run's rebuild reads its events a chunk at a time, the store's lock held for each query
    only: another run's viewers are served while it is half read."""
    import threading

    from test_pages import record_race

    from core.view.run_screen import shared_board as store_reader

    long_run, other = record_race(store, "done", steps=40), record_race(store, "done")
    monkeypatch.setattr(store_reader, "POLL_CHUNK", 10)  # the long run: several chunks
    half_read, go_on = threading.Event(), threading.Event()
    feed = store_reader.RunView.feed

    def slow_for_the_long_run(self, new):  # after its first chunk, the long run's rebuild takes its time
        if self.run_id == long_run and self.last_id > 0:
            half_read.set()
            assert go_on.wait(60)
        return feed(self, new)

    monkeypatch.setattr(store_reader.RunView, "feed", slow_for_the_long_run)
    board = LiveBoard(store.path)
    rebuild = threading.Thread(target=board.snapshot, args=(long_run,))
    rebuild.start()
    try:
        assert half_read.wait(60)
        served = []
        viewer = threading.Thread(target=lambda: served.append(board.snapshot(other)))
        viewer.start()
        viewer.join(30)
        assert served and served[0].run.id == other, "the other run waited for the long run's whole read"
    finally:
        go_on.set()
        rebuild.join(60)
    assert board.snapshot(long_run).counts() == {"eager": 40, "compiled": 40}
