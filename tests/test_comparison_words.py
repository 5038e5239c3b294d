"""Comparisons in words (core.view.comparison_words): what differs between runs, whether their
verdicts agree, and one configuration measured twice shown as one race with both results."""

import dataclasses

from test_pages import app, record_probe

from core.runs.store import Run
from core.view.comparison_words import comparison_rows, comparison_words, door

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
    from core.view.plan_words import plan_caveat

    mine = dataclasses.replace(race(3, "faster", 1.2, (1.1, 1.3)), summary=steps_summary(0.10, 0.08))
    alone = plan_caveat(mine, [mine], 50_000)
    assert alone.startswith("This plan rests on this one race")
    slow = dataclasses.replace(race(4, "faster", 1.2, (1.1, 1.3)), summary=steps_summary(0.21, 0.17))
    other_model = dataclasses.replace(slow, id=5, params={**PARAMS, "model": "mlp"})
    said = plan_caveat(mine, [mine, slow, other_model], 50_000)
    assert said.startswith("Races of this configuration here (run 4 and this one) predict 83 min to 2.9 h")
    assert "more than this plan's own interval allows" in said
