"""A busy moment is not a verdict, and a compile too small to see is not a negative one.

- Busy: the race reads, after every block of timed steps, how long its threads waited for a core
  (run-queue delay: core.engine.intervals.BusyWatch); a stretch above BUSY_WAIT ran while other work
  had the race's cores. It is stored as an event, read back live and from bundles, and a process
  mostly busy does not count (tests/test_replicates.py: the headline).
- Compile cost: where compiled's first steps are not measurably slower than its steady steps and
  eager's first ones, every surface says "too small to measure here (under N ms)".
"""

import json
import subprocess
import sys

import pytest
import torch
from support import ROOT, quick_spec

from core.engine import analysis, intervals, reading, words
from core.engine.events import BusyEvent
from core.engine.intervals import ProcessResult
from core.engine.models.workload import workload_for
from core.engine.summary import BUSY, Summary
from core.engine.variant import BatchSource, VariantRun
from core.runs.bundle import BundleError, _event
from core.view.report import summary_table
from core.view.run_screen.layout import result_cards

HOG_ON_MY_CORE = """
import json, os, subprocess, sys, time
from core.engine.intervals import BusyWatch
core = sorted(os.sched_getaffinity(0))[0]
os.sched_setaffinity(0, {core})
hog = subprocess.Popen([sys.executable, "-c", "import os, time\\nos.sched_setaffinity(0, {%d})\\nend = time.time() + 3\\nwhile time.time() < end: pass" % core])
time.sleep(0.3)
watch = BusyWatch(1)
watch.start()
end = time.perf_counter() + 1.0
x = 0
while time.perf_counter() < end:
    x += 1
share = watch.share()
hog.kill(); hog.wait()
print(json.dumps(share))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="run-queue delay is Linux's (schedstat)")
def test_another_process_on_the_race_core_reads_as_busy():
    # A process spinning on the same core: the scheduler shares it, so about half the time waits.
    done = subprocess.run([sys.executable, "-c", HOG_ON_MY_CORE], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    share = json.loads(done.stdout)
    assert share is not None and share > 3 * intervals.BUSY_WAIT


def test_busy_steps_are_shares_of_the_steady_steps_and_said_per_variant():
    assert intervals.busy_share([1, 2, 3, 11, 12], steady_from=10, steps=30) == pytest.approx(2 / 20)
    # At its edges: step 10 (the last warm-up step) is not steady, steps 11 and 30 are, 31 is past the race.
    assert intervals.busy_share([10], steady_from=10, steps=30) == 0.0
    assert intervals.busy_share([10, 11, 30, 31], steady_from=10, steps=30) == pytest.approx(2 / 20)
    assert (
        intervals.busy_steps_words({"eager": [[41, 80]], "compiled": [[3, 3]]})
        == "eager's steps 41-80 and compiled's step 3"
    )


def stored(kind, variant, step, time_s, note=None, phase="train", epoch=1):
    return {"kind": kind, "variant": variant, "phase": phase, "epoch": epoch, "step": step, "time_s": time_s,
            "eval_time_s": None, "note": note}  # fmt: skip


def race_events(busy_from: int = 0, turn: int = 5):
    """A stored race's events: 60 steps of each variant in turns of `turn` steps (compiled 1.25x
    faster, its first paying a 2 s compile), then a busy stretch and two replicate processes."""
    events = []
    for block in range(60 // turn):
        for variant, step_s in (("eager", 0.10), ("compiled", 0.08)):
            for i in range(1, turn + 1):
                step = turn * block + i
                extra = 2.0 if variant == "compiled" and step == 1 else 0.0
                events.append(stored("step", variant, step, step_s * (1 + 0.01 * (step % 3)) + extra))
    if busy_from:
        events.append(stored("busy", "eager", busy_from, 0.4, note="60"))
    for number, speedup in ((2, 1.24), (3, 1.27)):
        process = ProcessResult(number, speedup, 0.01, 40, 0.1, 0.08, wall_s=12.0, start_s=4.0)
        events.append(stored("replicate", "compiled", number, 12.0, note=json.dumps(process.to_dict()), epoch=0))
    return events


def test_a_live_summary_reads_the_replicates_and_busy_stretches_stored_as_events():
    summary = analysis.summarize_events(race_events(), 64)
    assert [p["number"] for p in summary["replicates"]] == [2, 3] and summary["processes_counted"] == 3
    busy = analysis.summarize_events(race_events(busy_from=6), 64)  # eager's steps 6-60: nearly all
    assert busy["busy_steps"] == {"eager": [[6, 60]]}
    assert busy["first_process"]["busy_share"] > intervals.BUSY_STEPS_SHARE and busy["processes_counted"] == 2
    text = reading.reading(busy)
    assert "The machine was busy during the first process (eager's steps 6-60): it does not count." in text
    assert "It rests on 2 replicate processes (1.24x to 1.27x each)." in text  # the first is not among them
    assert "It rests on 3 processes (" in reading.reading(summary)


def test_a_bundle_checks_what_a_replicate_and_a_busy_stretch_keep():
    good = race_events(busy_from=6)
    assert _event({**good[-1], "recorded_at": 1.0}, "e")["note"]
    with pytest.raises(BundleError, match="replicate must be its result"):
        _event({**good[-1], "note": '{"number": "two"}', "recorded_at": 1.0}, "e")
    with pytest.raises(BundleError, match="busy stretch must be its last step"):
        _event({**good[-3], "note": "<b>", "recorded_at": 1.0}, "e")


def test_a_compile_too_small_to_measure_is_said_so_everywhere_never_negative():
    # aot_eager on a busy box: eager's first step was the slow one, so compiled's minus eager's is < 0.
    eager = [0.30] + [0.10] * 59
    compiled = [0.11] + [0.10 * (1 + 0.02 * (i % 3)) for i in range(59)]
    cost, under = analysis.measured_compile(eager, compiled, 1)
    assert cost is None and 0 < under < 0.05
    summary = analysis.summarize(eager, compiled, [6.0], [6.0], 64, paired=True)
    under = analysis.measured_compile(eager, compiled, summary["warmup_steps"])[1]  # its window: the first 6
    assert summary["compile_time_s"] is None and summary["compile_time_under_s"] == under
    said = f"too small to measure here (under {words.seconds(under)})"
    assert words.compile_cost(summary) == said
    assert f"after a compile {said}" in reading.reading(summary)
    card = next(c for c in result_cards(summary) if c.label == "Compile time")
    assert card.value == f"under {words.seconds(under)}" and said in card.help
    table = summary_table({"summary": summary, "variants": {v: {"final_loss": None} for v in ("eager", "compiled")}})
    assert f"compile time                  {said}" in table
    assert " after -" not in reading.reading(Summary.from_dict(summary))  # no negative compile time


def test_a_measurable_compile_is_its_time():
    eager = [0.10] * 60
    compiled = [2.5] + [0.08] * 59
    cost, under = analysis.measured_compile(eager, compiled, 1)
    assert cost == pytest.approx(2.4) and under is None


def test_a_sweep_point_and_a_device_comparison_say_a_compile_too_small_to_measure():
    from test_sweep_view import batch_sweep, fake_runs

    from core.view.device_comparison import Comparison, comparison_rows
    from core.view.sweep import point_line, points_table, sweep_frame

    sweep = batch_sweep()
    runs = fake_runs(sweep, ["done", "done", "done", "done"])
    runs[0].summary.update(compile_time_s=None, compile_time_under_s=0.012)
    frame = sweep_frame(sweep, runs)
    said = f"too small to measure here (under {words.seconds(0.012)})"
    assert points_table(frame)[0]["compile time"] == said
    assert f"compile {said}, break-even" in point_line(next(frame.itertuples()), 4)
    assert points_table(frame)[1]["compile time"] == words.seconds(runs[1].summary["compile_time_s"])
    group = Comparison(runs=(runs[0],), devices={runs[0].id: "Test CPU"}, states={runs[0].id: "done"})
    assert comparison_rows(group)[0]["compile time"] == said


RACE_BESIDE_A_HOG = """
import os, subprocess, sys
from core.runs import race_conditions as worker_cores
share = worker_cores.this_host()
core = share.worker[0] if share.worker else sorted(os.sched_getaffinity(0))[0]  # the core the race gets
hog = subprocess.Popen([sys.executable, "-c", "import os\\nos.sched_setaffinity(0, {%d})\\nwhile True: pass" % core])
try:
    done = subprocess.run([sys.executable, "-m", "core", "race", "--json", "--quiet", *sys.argv[1:]],
                          capture_output=True, text=True, timeout=300)
finally:
    hog.kill(); hog.wait()
sys.stderr.write(done.stderr)
print(done.stdout)
sys.exit(done.returncode)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="run-queue delay is Linux's (schedstat)")
def test_a_race_beside_a_process_spinning_on_its_core_is_busy_not_a_verdict():
    # Another process has the race's core all along: both variants' timed steps read busy, the
    # race names them and gives no "faster" or "slower" about the model.
    flags = ["--model", "mlp", "--batch-size", "8", "--epochs", "2", "--steps-per-epoch", "60", "--device", "cpu"]
    flags += ["--backend", "aot_eager", "--replicates", "0"]
    done = subprocess.run(
        [sys.executable, "-c", RACE_BESIDE_A_HOG, *flags], cwd=ROOT, capture_output=True, text=True, timeout=400
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)["summary"]
    assert summary["busy_steps"].get("eager") and summary["busy_steps"].get("compiled")
    assert summary["verdict"] == BUSY
    text = reading.reading(summary)
    assert "busy" in text and "faster" not in text and "slower" not in text


@pytest.mark.parametrize("turn", [1, 2, 5, None])
def test_the_machine_is_looked_at_every_five_of_a_variants_own_steps_whatever_its_turns(monkeypatch, turn):
    # A replicate's variants take turns every step; the first process's every 5 steps or epoch by
    # epoch. Each variant's busy watch still spans 5 of its own steps (a window kept open across the
    # other's turns), and the epoch's last steps are looked at when it runs out.
    monkeypatch.setattr(intervals.BusyWatch, "share", lambda self: 0.5)  # another process has the core all along
    spec = quick_spec(epochs=1, steps_per_epoch=12, backend="eager")
    device, workload = torch.device("cpu"), workload_for(spec)
    init = workload.build().state_dict()
    seen: dict[str, list] = {"a": [], "b": []}
    runs = {}
    for name in seen:
        runs[name] = VariantRun("eager", spec, device, init, seen[name].append, workload)
        runs[name].start_epoch(BatchSource(spec, device, workload), 1)
    running = list(runs)
    while running:
        for name in list(running):
            if turn is None or runs[name].run_block(turn) < turn:
                if turn is None:
                    runs[name].run_block(None)
                running.remove(name)
    for name in seen:
        windows = [(e.first_step, e.last_step) for e in seen[name] if isinstance(e, BusyEvent)]
        assert windows == [(1, 5), (6, 10), (11, 12)]
        assert runs[name].result.busy_steps == list(range(1, 13))


def test_processes_that_read_alike_are_said_once():
    summary = analysis.summarize_events(race_events(busy_from=6), 64)  # the first does not count
    alike = [ProcessResult(n, s, 0.01, 40).to_dict() for n, s in ((2, 0.951), (3, 0.949))]
    text = reading.processes_note({**summary, "replicates": alike})
    assert "It rests on 2 replicate processes (0.95x each)." in text and "0.95x to 0.95x" not in text
    apart = [ProcessResult(n, s, 0.01, 40).to_dict() for n, s in ((2, 0.93), (3, 0.97))]
    assert "to 0.97x each" in reading.processes_note({**summary, "replicates": apart})
