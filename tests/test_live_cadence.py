"""A young race is drawn at once (issue 36): eager's first steps are charted as soon as they are
stored, without waiting for compiled's; while compiled's first step compiles, a bar grows on the race
chart where its line will start; and the view asks often until the variant being timed has its first
steps on the page, then less often while steps are timed."""

import json
import time

from core.runs import fleet
from core.view import race_charts
from core.view.run_screen import layout
from core.view.run_screen.feed import FEED_POLL_S, TIMED_POLL_S, YOUNG_POLL_S, LiveFeeds
from core.view.run_screen.shared_board import LIVELY_REFRESH_S, TIMED_REFRESH_S, LiveBoard, refresh_s, timed_variant


def young_race(store, phase, eager_steps=0, compiled_steps=0, compile_started=None):
    """A running race with so many steps stored of each variant, in `phase`."""
    run_id = store.create_run(
        "race",
        {"model": "mlp", "batch_size": 16, "epochs": 3, "steps_per_epoch": 100, "device": "cpu"},
        "someone",
        "cpu",
        status="running",
        started_at=time.time(),
        heartbeat_at=time.time(),
        host=fleet.HOST,
        phase=phase,
    )
    rows = [
        {"kind": "step", "variant": variant, "phase": "train", "epoch": 1, "step": i, "time_s": t, "loss": 2.0}
        for variant, count, t in (("eager", eager_steps, 0.05), ("compiled", compiled_steps, 0.04))
        for i in range(1, count + 1)
    ]
    details = {"compile_phase": {"compile_started": compile_started, "phase": "Dynamo"}} if compile_started else {}
    store.append_events(run_id, rows, {"details": details} if details else {})
    return run_id


def snapshot(store, run_id):
    return LiveBoard(store.path).snapshot(run_id, fresh=True)


def test_eager_first_steps_are_charted_before_compiled_has_any(store):
    run_id = young_race(store, "eager epoch 1/3", eager_steps=3)
    snap = snapshot(store, run_id)
    built = layout.chart_builders(snap.run, snap, snap.summary(), present=False)
    assert "cumulative" in built and "lead" not in built  # the race at once; a lead needs both
    chart = built["cumulative"]().to_dict(validate=False)
    assert "compiling:" not in json.dumps(chart)  # eager is timed, nothing compiles yet


def test_while_compiled_compiles_a_bar_grows_where_its_line_will_start(store):
    started = time.time() - 7.4
    run_id = young_race(store, "compiling (compiled epoch 1/3): Dynamo", eager_steps=5, compile_started=started)
    snap = snapshot(store, run_id)
    run = snap.run
    now = started + 7.4
    assert abs(layout.compile_clock(run, snap, now) - 7.4) < 1e-3
    assert layout.chart_stamp(run, snap, now) == 7
    spec = layout.chart_builders(run, snap, snap.summary(), present=False, now=now)["cumulative"]().to_dict()
    text = json.dumps(spec)
    assert race_charts.compile_clock_label(7) in text  # 'compiling: 7 s so far', validated as Vega-Lite
    bar = next(d for d in spec["datasets"].values() if d and "top" in d[0])
    assert bar == [{"step": 1, "bottom": 0.0, "top": 7.0, "label": "compiling: 7 s so far"}]
    later = layout.chart_builders(run, snap, snap.summary(), present=False, now=now + 3)["cumulative"]()
    assert "compiling: 10 s so far" in json.dumps(later.to_dict())  # the same snapshot, a second later: grown
    present = layout.chart_builders(run, snap, snap.summary(), present=True, now=now)["present_cumulative"]()
    assert "compiling: 7 s so far" in json.dumps(present.to_dict())
    # The live feed's document grows it too, once a second, with the chart under the same name.
    feeds = LiveFeeds(LiveBoard(store.path), max_age_s=0)
    document = feeds.get(run_id).json()
    assert document["charts"][0]["name"] == "cumulative" and "so far" in json.dumps(document["charts"][0]["spec"])
    # Once compiled's first step is stored the bar is gone: its line starts at the compile's top.
    first = {"kind": "step", "variant": "compiled", "phase": "train", "epoch": 1, "step": 1, "time_s": 8.0, "loss": 2.0}
    store.append_events(run_id, [first], {"phase": "compiled epoch 1/3"})
    snap = snapshot(store, run_id)
    assert layout.compile_clock(snap.run, snap, now) is None
    assert "so far" not in json.dumps(
        layout.chart_builders(snap.run, snap, snap.summary(), False)["cumulative"]().to_dict()
    )


def test_the_view_asks_often_until_the_timed_variants_first_steps_are_drawn(store):
    assert timed_variant(snapshot(store, young_race(store, "eager epoch 1/3")).run) == "eager"
    cases = [
        ("eager: starting", 0, 0, YOUNG_POLL_S),  # the worker sets up: the first steps come any moment
        ("eager epoch 1/3", 0, 0, YOUNG_POLL_S),  # eager is timed, none of its steps on the page yet
        ("eager epoch 1/3", 5, 0, TIMED_POLL_S),  # drawn: now steps are timed, ask less often
        ("compiling (compiled epoch 1/3)", 5, 0, FEED_POLL_S),  # the compile's clock moves once a second
        ("compiled epoch 1/3", 5, 0, YOUNG_POLL_S),  # compiled's first steps are coming: draw them at once
        ("compiled epoch 1/3", 5, 5, TIMED_POLL_S),
    ]
    for phase, eager, compiled, poll in cases:
        run_id = young_race(store, phase, eager, compiled)
        feeds = LiveFeeds(LiveBoard(store.path))
        document = feeds.get(run_id).json()
        assert document["poll_ms"] == int(poll * 1000), (phase, eager, compiled)
        snap = snapshot(store, run_id)
        timed = poll == TIMED_POLL_S
        assert refresh_s(snap.run, snap.counts()) == (TIMED_REFRESH_S if timed else LIVELY_REFRESH_S)
    queued = store.create_run("race", {"model": "mlp"}, "someone", "cpu", status="queued", phase="queued")
    assert LiveFeeds(LiveBoard(store.path)).get(queued).json()["poll_ms"] == int(FEED_POLL_S * 1000)
