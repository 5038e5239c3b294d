"""Comparisons in words (core.view.compare): what differs between runs, whether their
verdicts agree, and one configuration measured twice shown as one race with both results."""

import dataclasses

from test_pages import app, record_probe

from core.runs.store import Run
from core.view.compare import comparison_rows, comparison_words, door

PARAMS = {"model": "pointwise_mlp", "batch_size": 4096, "epochs": 3, "steps_per_epoch": 100, "device": "cpu"}


def race(run_id, verdict, speedup, ci, params=None, device="AMD EPYC", owner="visitor:a", load=0.2, **extra):
    summary = {"verdict": verdict, "steady_state_speedup": speedup, "speedup_ci95": list(ci), "compile_time_s": 9.0}
    env = {"device_name": device, "load_at_start": {"load_average": [load, load, load], "cpu_count": 2}}
    return Run(
        id=run_id, kind="race", params=dict(params or PARAMS), owner=owner, device_key="cpu", status="done",
        phase="done", progress=1.0, created_at=0.0, started_at=None, finished_at=None, heartbeat_at=None, pid=None,
        host=None, time_limit_s=None, cancel_requested=0, environment=env, summary=summary, details=None, error=None,
        imported=0, **extra,
    )  # fmt: skip


def test_one_configuration_read_two_ways_is_one_race_with_both_results_not_two_truths():
    runs = [race(3, "faster", 1.12, (1.05, 1.20)), race(7, "no clear difference", 0.99, (0.91, 1.08), load=2.1)]
    said = comparison_words(runs)
    assert said[0] == ("What differs: load at the start (0.2 on 2 cores (run 3) vs 2.1 on 2 cores (busy) (run 7)).")
    assert "Runs 3 and 7 are one configuration on AMD EPYC measured 2 times, with different readings" in said[1]
    assert "run 3 1.12x faster (1.05-1.20x); run 7 no clear difference (0.99x, 0.91-1.08x)" in said[1]
    assert "not two truths" in said[1]
    rows = comparison_rows(runs)
    assert len(rows) == 1 and rows[0]["runs"] == "3, 7" and rows[0]["agree"] == "no"


def test_runs_that_differ_in_settings_device_and_door_say_so_and_whether_verdicts_agree():
    other = {**PARAMS, "batch_size": 256}
    runs = [
        race(3, "faster", 1.3, (1.2, 1.4)),
        race(5, "slower", 0.8, (0.75, 0.85), params=other, device="NVIDIA H100", owner="cli:ann"),
    ]
    said = comparison_words(runs)
    assert "batch (4,096 (run 3) vs 256 (run 5))" in said[0]
    assert "device (AMD EPYC (run 3) vs NVIDIA H100 (run 5))" in said[0]
    assert "door (the app (run 3) vs the terminal (run 5))" in said[0]
    assert said[-1].startswith("The configurations' verdicts differ (run 3 faster; run 5 slower)")
    assert [r["runs"] for r in comparison_rows(runs)] == ["3", "5"]


def test_repeats_that_agree_say_so():
    runs = [race(3, "faster", 1.3, (1.2, 1.4)), race(4, "faster", 1.28, (1.19, 1.38))]
    assert "are one configuration on AMD EPYC, and agree" in comparison_words(runs)[1]
    assert comparison_words(runs)[0].startswith("Nothing differs between them")


def test_doors():
    assert door(race(1, "faster", 1.0, (1, 1))) == "the app"
    assert door(race(1, "faster", 1.0, (1, 1), owner="cli:root")) == "the terminal"
    assert door(dataclasses.replace(race(1, "faster", 1.0, (1, 1)), sweep_id=2)) == "a sweep"
    assert door(dataclasses.replace(race(1, "faster", 1.0, (1, 1)), imported=1)) == "imported"


def test_the_runs_page_compares_in_words(store, sleepers):  # noqa: F811
    record_probe(store)
    ids = []
    for verdict, speedup, ci in (("faster", 1.12, [1.05, 1.2]), ("no clear difference", 0.99, [0.91, 1.08])):
        summary = {"verdict": verdict, "steady_state_speedup": speedup, "speedup_ci95": ci}
        ids.append(store.create_run("race", PARAMS, "someone", "cpu", status="done", summary=summary))
    at = app()
    at.switch_page("app_pages/runs.py").run()
    at.session_state["runs_table"] = {"selection": {"rows": [0, 1], "columns": [], "cells": []}}
    at.run()
    assert not at.exception, at.exception
    text = "\n".join(m.value for m in at.markdown).replace("\\", "").replace("\u2060", "")
    assert f"Runs {ids[1]} and {ids[0]} are one configuration" in text and "not two truths" in text
    assert any("agree" in t.value.columns for t in at.dataframe)


def steps_summary(eager_s, compiled_s, n=60):
    from core.engine import analysis

    return analysis.summarize([eager_s] * n, [5.0] + [compiled_s] * (n - 1), [eager_s * n], [5.0 + compiled_s * n], 16)


def test_a_plan_names_what_other_races_of_its_configuration_predict():
    from core.view.compare import plan_caveat

    mine = dataclasses.replace(race(3, "faster", 1.2, (1.1, 1.3)), summary=steps_summary(0.10, 0.08))
    alone = plan_caveat(mine, [mine], 50_000)
    assert alone.startswith("This plan rests on this one race")
    slow = dataclasses.replace(race(4, "faster", 1.2, (1.1, 1.3)), summary=steps_summary(0.21, 0.17))
    other_model = dataclasses.replace(slow, id=5, params={**PARAMS, "model": "mlp"})
    said = plan_caveat(mine, [mine, slow, other_model], 50_000)
    assert said.startswith("Races of this configuration here (run 4 and this one) predict 83 min to 2.9 h")
    assert "more than this plan's own interval allows" in said


def cached(run_id, speedup, ci, compile_s, asked, found_files, verdict, hits=None):
    run = race(run_id, verdict, speedup, ci, params={**PARAMS, "cache": asked})
    env = {**run.environment, "inductor_cache": asked}
    if asked == "warm":
        env["warm_cache"] = {"files": found_files, "bytes": found_files * 1000, "filled_by": [{"run": 5}]}
    details = {"compile": {"cache_hits": hits, "cache_misses": 0}} if hits is not None else None
    return dataclasses.replace(
        run, environment=env, details=details, summary={**run.summary, "compile_time_s": compile_s}
    )


def test_a_cold_and_a_warm_run_are_two_configurations_of_the_cache_with_their_compiles_said():
    # Issue 43: runs 6 (cold) and 7 (warm cache) were "one configuration ... measured 2 times", the
    # table labelled both "cache warm", 35 s vs 2.44 s went unsaid, and 1.11x (1.05-1.18x) was
    # called "no clear difference" (a stored verdict the headline interval does not bear out).
    runs = [
        cached(6, 1.11, (1.05, 1.18), 35.0, "warm", 0, "no clear difference"),  # asked warm, found it empty
        cached(7, 1.10, (1.04, 1.17), 2.44, "warm", 40, "faster", hits=3),
    ]
    said = comparison_words(runs)
    text = " ".join(said)
    assert "one configuration" not in text and "measured 2 times" not in text
    assert "cache (warm but empty, so compiled cold (run 6) vs warm (run 7))" in said[0]
    assert "Compile: 35 s in run 6 (cache warm but empty, so compiled cold) vs 2.44 s in run 7 (cache warm)" in text
    assert "the warm cache saved 32.6 s, 14x less" in text
    assert "Every configuration compared reads the same: faster." in said
    assert "no clear difference" not in text
    rows = comparison_rows(runs)
    assert [r["runs"] for r in rows] == ["6", "7"]
    assert [r["configuration"] for r in rows] == ["cache warm but empty, so compiled cold", "cache warm"]
    assert rows[0]["results"] == "run 6: 1.11x faster (1.05-1.18x)"
    assert [r["compile"] for r in rows] == ["run 6: 35 s", "run 7: 2.44 s"]
    # The chart's legend labels them by what they compiled from, too.
    from core.view.compare import comparison_labels

    labels = comparison_labels(runs)
    assert labels == {6: "run 6: cache warm but empty, so compiled cold", 7: "run 7: cache warm"}


def test_a_cold_run_beside_a_warm_one_that_read_nothing_says_the_cache_saved_nothing():
    runs = [
        cached(6, 1.02, (0.97, 1.08), 30.0, "cold", 0, "no clear difference"),
        cached(7, 1.01, (0.96, 1.07), 31.0, "warm", 12, "no clear difference", hits=0),
    ]
    said = " ".join(comparison_words(runs))
    # hits=0 with misses=0 is no graph read and none missed: its label stays warm
    assert (
        "Compile: 30 s in run 6 (cache cold) vs 31 s in run 7 (cache warm): the warm cache saved nothing measurable here."
        in said
    )
