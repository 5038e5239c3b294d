"""One voice, checked across every surface: one set of races (done, live, compile failed, no clear
difference, never pays off, stopped on its interval, imported) goes through the cards, the live and
the finished reading, the terminal's table and runs list, a sweep's table and lines, the device
comparison, the plan, presenter mode and the live feed; each says the same number the same way.
Each test runs twice: with words as shipped, and with words' speedup, interval and seconds
formatters swapped for marked ones ('1.23×', '1.10–1.20×', '12.3\u2009ms'), so a surface that
formats a number by hand (f"{x:.2f}x") says it differently from words and fails."""

import contextlib
import io
import time

import numpy as np
import pytest
from support import quick_spec

from core.cli.main import main as cli
from core.engine import analysis, intervals, words
from core.engine.reading import reading
from core.engine.summary import NEVER, NO_COMPILE, NO_GAIN, PROJECTED, REACHED, Summary
from core.runs.bundle import export_bundle, import_bundle
from core.runs.sweeps import Axis, SweepSpec
from core.view.device_comparison import comparison, comparison_rows
from core.view.report import run_row, summary_table
from core.view.run_screen.feed import feed_document
from core.view.run_screen.layout import LEAD_CARDS, result_cards
from core.view.run_screen.shared_board import LiveBoard
from core.view.sweep import point_line, points_table, sweep_frame

SPEC = quick_spec(epochs=1, steps_per_epoch=60)
STEPS = 60
VARIANTS = {"eager": {"final_loss": 2.0}, "compiled": {"final_loss": 2.0}}


@pytest.fixture(params=["as shipped", "marked"], autouse=True)
def voice(request, monkeypatch):
    """Words as shipped, or with marked formats that no hand-written f-string produces."""
    if request.param == "marked":
        seconds = words.seconds
        monkeypatch.setattr(words, "SPEEDUP_FORMAT", "%.2f\u00d7")
        monkeypatch.setattr(words, "speedup_range", lambda low, high: f"{low:.2f}\u2013{high:.2f}\u00d7")
        monkeypatch.setattr(words, "seconds", lambda s, signed=False: seconds(s, signed).replace(" ", "\u2009"))
    return request.param


def jitter(centre: float, n: int, seed: int, spread: float = 0.002) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(t) for t in centre + rng.uniform(-spread, spread, n)]


def times(kind: str) -> tuple[list[float], list[float]]:
    """Each variant's step times for a race of this kind (the compile lands in compiled's first step)."""
    eager = jitter(0.1, STEPS, 1)
    compiled = {
        "done": [1.0] + jitter(0.05, STEPS - 1, 2),  # compile paid for itself in the race
        "projected": [3.0] + jitter(0.08, STEPS - 1, 3),  # clearly faster, still behind
        "no clear difference": [3.0] + jitter(0.1, STEPS - 1, 4, spread=0.03),
        "never pays off": [3.0] + jitter(0.13, STEPS - 1, 5),
    }[kind]
    return eager, compiled


def summary_of(kind: str, **fields) -> dict:
    eager, compiled = times(kind)
    summary = analysis.summarize(eager, compiled, [sum(eager)], [sum(compiled)], SPEC.batch_size)
    return Summary.from_dict({**summary, **fields}).to_dict()


def step_events(kind: str, compiled_steps: int = STEPS) -> list[dict]:
    eager, compiled = times(kind)
    rows = []
    for variant, series in (("eager", eager), ("compiled", compiled[:compiled_steps])):
        rows += [
            {"kind": "step", "variant": variant, "phase": "train", "epoch": 1, "step": i + 1, "time_s": t, "loss": 2.0}
            for i, t in enumerate(series)
        ]
        if len(series) == STEPS:
            rows.append({"kind": "epoch", "variant": variant, "phase": "train", "epoch": 1, "step": 0,
                         "time_s": sum(series)})  # fmt: skip
    return rows


def finished(store, summary: dict, events: list[dict] | None = None) -> int:
    run_id = store.create_run("race", SPEC.to_dict(), "ann", "cpu", status="running")
    store.update_run(run_id, environment={"device_type": "cpu", "device_name": "a test CPU"}, started_at=time.time())
    if events:
        store.append_events(run_id, events)
    store.finish_run(run_id, "done", summary=summary)
    return run_id


# The races: what each is, and the break-even state every surface must agree on.
RACES = {
    "done": (lambda: summary_of("done"), REACHED),
    "projected": (lambda: summary_of("projected"), PROJECTED),
    "no clear difference": (lambda: summary_of("no clear difference"), NO_GAIN),
    "never pays off": (lambda: summary_of("never pays off"), NEVER),
    "compile failed": (
        lambda: summary_of("done", compile_failed="fullgraph=True but the model has a graph break"),
        NO_COMPILE,
    ),
    "stopped on its interval": (
        lambda: summary_of(
            "projected",
            interval_alpha=intervals.ALPHA / 6,
            stop_reason="Known to ±5% after 60 steps per variant (the race stopped there).",
        ),
        PROJECTED,
    ),
}


def surfaces(store, run_id: int) -> dict:
    """What every surface shows for one finished run, keyed by surface."""
    run = store.get_run(run_id)
    snap = LiveBoard(store.path).snapshot(run_id)
    doc = feed_document(snap, present=False, expected=lambda: (None, False))
    presented = feed_document(snap, present=True, expected=lambda: (None, False))
    sweep = SweepSpec(SPEC, (Axis("batch_size", (SPEC.batch_size,)),))
    frame = sweep_frame(sweep, [run])
    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert cli(["runs"]) == 0  # the store the fixture named in COMPILE_LAB_STORE
    runs_line = next(line for line in out.getvalue().splitlines() if line.split()[:1] == [str(run_id)])
    return {
        "cards": {c.label: c for c in result_cards(run.summary, total=STEPS)},
        "feed cards": {c["label"]: c for c in doc["cards"]},
        "presenter cards": {c["label"]: c for c in presented["cards"]},
        "feed words": doc["words"]["text"] if doc["words"] else None,
        "presenter words": presented["words"]["text"] if presented["words"] else None,
        "reading": reading(run.summary),
        "table": summary_table({"summary": run.summary, "variants": VARIANTS}),
        "runs row": run_row(run),
        "runs text": runs_line,
        "sweep row": points_table(frame)[0],
        "sweep line": point_line(next(frame.itertuples()), 1),
        "comparison": comparison_rows(comparison(store, [run_id]))[0],
        "plan": words.plan_from_summary(run.summary, 50_000),
    }


@pytest.mark.parametrize("kind", list(RACES))
def test_a_finished_race_says_each_number_the_same_way_on_every_surface(store, kind):
    build, state = RACES[kind]
    summary = build()
    typed = Summary.from_dict(summary)
    assert typed.break_even == state
    said = surfaces(store, finished(store, summary))
    cards, table = said["cards"], said["table"]
    # Presenter mode and the live feed show the page's own cards and words (presenter mode its four lead cards).
    for shown, labels in (("feed cards", list(cards)), ("presenter cards", list(LEAD_CARDS))):
        assert {k: (c["value"], c["help"]) for k, c in said[shown].items()} == {
            k: (c.value, c.help) for k, c in cards.items() if k in labels
        }
    assert said["feed words"] == said["presenter words"] == said["reading"]
    if state == NO_COMPILE:  # compile failed: no compile figure anywhere, the same reason everywhere
        reason = "Compile failed on this model: fullgraph=True but the model has a graph break; eager ran."
        assert said["reading"] == reason and cards["Steady-state speedup"].help == reason
        assert cards["Steady-state speedup"].value == "failed" and said["runs row"]["steady_state_speedup"] is None
        assert "none: compile failed on this model" in table
        assert said["comparison"]["steady speedup"] == "none: compile failed"
        assert said["sweep row"]["steady speedup (95%)"] == ""
        assert said["runs text"].split()[-2:] == [words.NONE, words.NONE]  # no speedup, no break-even
        return
    speedup, interval = words.speedup(typed.steady_state_speedup), words.speedup_range(*typed.speedup_ci95)
    compile_s = words.seconds(typed.compile_time_s)
    # The speedup: one number, one way of writing it, on every surface that shows it.
    assert cards["Steady-state speedup"].value == speedup
    assert (
        f"({speedup}, 95% interval {interval}" in said["reading"]
        or f"{speedup} faster (95% interval {interval}" in (said["reading"])
    )
    assert f"steady-state speedup          {speedup}  (95% interval {interval}" in table
    assert said["sweep row"]["steady speedup (95%)"] == f"{speedup} ({interval})"
    assert said["sweep line"].startswith(f"point 1/1 batch size {SPEC.batch_size}: done, {speedup} ({interval}) ")
    assert said["comparison"]["steady speedup"] == speedup and said["comparison"]["95% interval"] == interval
    assert f" {speedup}  " in said["runs text"]
    assert words.interval(typed) in cards["Steady-state speedup"].help
    # The compile time: the card's figure is the table's, the sweep's, the comparison's and the reading's.
    assert cards["Compile time"].value == compile_s
    assert f"compile time                  {compile_s}  (" in table
    assert said["sweep row"]["compile time"] == said["comparison"]["compile time"] == compile_s
    assert f"after {compile_s} of compilation" in said["reading"]
    # The break-even: one state, its short words where space is short, its long words elsewhere.
    short, long = words.break_even(typed, short=True), words.break_even(typed)
    assert cards["Break-even"].value == short == said["runs row"]["break_even"] == said["sweep row"]["break-even"]
    assert said["runs text"].endswith(f" {short}")
    assert f"break-even                    {long}\n" in table
    assert said["sweep line"].endswith(f"break-even {long}") and said["comparison"]["break-even"] == long
    assert long.capitalize() in cards["Break-even"].help or state == REACHED
    plan = words.plan_sentence(said["plan"])
    if state == NEVER:
        assert short == "never" and "never pays off" in plan and "compile does not pay off" in said["reading"]
    if state == NO_GAIN:  # never called "never" where the interval cannot tell the two apart
        assert short == "none" and "never" not in plan and "never" not in said["reading"].lower()
        assert "no clear difference" in said["reading"].lower()
    if state == REACHED:
        assert f"compile paid for itself at {long}" in said["reading"]
        assert said["plan"].break_even_step == typed.break_even_step
    if state == PROJECTED:
        step = words.step_at(typed.projected_position)
        assert f"about step {words.number(step)}" in said["reading"] and short == f"≈ step {words.number(step)}"
    if kind == "stopped on its interval":
        assert "widened for the stopping rule's 6 looks" in said["reading"]
        assert "widened for the stopping rule's 6 looks" in cards["Steady-state speedup"].help
        assert "widened for the stopping rule's 6 looks" in table
        assert typed.stop_reason in said["reading"]


def test_a_live_race_says_its_numbers_as_the_finished_one_will_and_never_a_final_word(store):
    run_id = store.create_run("race", SPEC.to_dict(), "ann", "cpu", status="running", phase="compiled")
    store.append_events(run_id, step_events("projected", compiled_steps=40))
    snap = LiveBoard(store.path).snapshot(run_id)
    live = snap.summary()
    doc = feed_document(snap, present=False, expected=lambda: (None, False))
    cards = {c["label"]: c for c in doc["cards"]}
    speedup = words.speedup(live.steady_state_speedup)
    assert (
        cards["Steady-state speedup"]["value"] == speedup
        and f"compiled steps are {speedup} faster" in (doc["words"]["text"])
    )
    assert doc["words"]["text"] == reading(live, live=True, total=STEPS, counts=snap.counts())
    assert doc["words"]["text"].startswith("After 40 of 60 compiled steps")
    assert cards["Break-even"]["value"] == "not yet"  # no final word while it runs
    assert cards["Compile time"]["value"] == words.seconds(live.compile_time_s)
    presented = feed_document(snap, present=True, expected=lambda: (None, False))
    assert presented["words"] == doc["words"]
    assert presented["cards"] == [c for c in doc["cards"] if c["label"] in LEAD_CARDS]  # the four lead cards


def test_an_imported_race_says_what_the_original_says(store):
    original = finished(store, summary_of("projected"), step_events("projected"))
    copy = import_bundle(store, export_bundle(store, original), "bea")
    mine, theirs = surfaces(store, original), surfaces(store, copy)
    assert store.get_run(copy).imported
    assert theirs["reading"] == mine["reading"]
    assert {k: c.value for k, c in theirs["cards"].items()} == {k: c.value for k, c in mine["cards"].items()}
    assert theirs["sweep row"] == {**mine["sweep row"], "run": str(copy)}
    assert theirs["runs row"]["break_even"] == mine["runs row"]["break_even"]
