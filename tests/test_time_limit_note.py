"""A queued race whose estimate is past the host's job time limit says so beside its estimate, before
it runs: on the Race form and where `submit` queues it. Said, not refused: the visitor decides."""

import subprocess
import sys

from streamlit.testing.v1 import AppTest
from support import ROOT
from test_pages import APP, record_probe

from core.engine.race_estimates import RaceEstimate
from core.runs.limits import HostLimits
from core.view.race_form import time_limit_note


def estimate(low_s, total_s):
    return RaceEstimate(total_s, low_s, total_s * 2, 30.0, "table")


def test_a_race_whose_estimate_is_past_the_time_limit_says_so():
    note = time_limit_note(estimate(1800, 3600), HostLimits(job_time_limit_s=900))
    assert note.startswith("Past this host's time limit") and "at least 30 min" in note and "15 min" in note
    assert "what it measured by then" in note


def test_a_race_within_the_limit_or_without_one_says_nothing():
    assert time_limit_note(estimate(600, 1200), HostLimits(job_time_limit_s=900)) is None  # its low end fits
    assert time_limit_note(estimate(1800, 3600), HostLimits(job_time_limit_s=None)) is None
    assert time_limit_note(None, HostLimits(job_time_limit_s=900)) is None


def test_the_form_shows_the_time_limit_beside_the_estimate(store, monkeypatch):
    monkeypatch.setenv("COMPILE_LAB_JOB_TIME_LIMIT_S", "60")
    record_probe(store)
    at = AppTest.from_file(APP, default_timeout=90)
    at.query_params.update(model="resnet18", batch_size="64", epochs="5", steps_per_epoch="200")
    at.run()
    assert not at.exception, at.exception
    warnings = [w.value for w in at.warning]
    assert any(w.startswith("Past this host's time limit") and "after 60 s" in w for w in warnings), warnings
    assert not at.button(key="launch").disabled  # said, not refused: the visitor decides


def test_submit_says_the_time_limit_as_it_queues(store, sleepers, monkeypatch):
    monkeypatch.setenv("COMPILE_LAB_JOB_TIME_LIMIT_S", "60")
    record_probe(store)
    done = subprocess.run(
        [sys.executable, "-m", "core", "submit", "--model", "resnet18", "--batch-size", "64", "--epochs", "5",
         "--steps-per-epoch", "200", "--device", "cpu"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("run ")
    assert "warning: Past this host's time limit" in done.stderr and "python -m core cancel" in done.stderr


# -- a sweep: each point is a job of its own ----------------------------------------------------------


def test_a_sweeps_points_past_the_time_limit_are_said_once():
    from core.engine.spec import DeviceCaps, RunSpec
    from core.runs.sweeps import Axis, SweepSpec
    from core.view.sweep import time_limit_points

    sweep = SweepSpec(RunSpec(model="resnet18", epochs=5, steps_per_epoch=200, device="cpu"),
                      (Axis("batch_size", (8, 64, 512)),))  # fmt: skip
    note = time_limit_points(sweep, DeviceCaps(), HostLimits(job_time_limit_s=120))
    assert note.startswith("Past this host's time limit: 2 of 3 points would take longer than 2.0 min")
    assert "batch size 64: at least" in note and "batch size 512: at least" in note and "batch size 8:" not in note
    assert time_limit_points(sweep, DeviceCaps(), HostLimits(job_time_limit_s=None)) is None


def test_the_sweep_page_and_the_cli_say_it_before_the_points_run(store, sleepers, monkeypatch):
    monkeypatch.setenv("COMPILE_LAB_JOB_TIME_LIMIT_S", "60")
    record_probe(store)
    at = AppTest.from_file(APP, default_timeout=90)
    at.switch_page("app_pages/sweep.py").run()
    at.selectbox(key="sweep_model").set_value("resnet18").run()
    at.number_input(key="sweep_steps_per_epoch").set_value(500).run()
    assert not at.exception, at.exception
    shown = [w.value.replace("\\", "").replace("\u2060", "") for w in at.warning]  # markdown-escaped
    assert any(w.startswith("Past this host's time limit: 4 of 4 points") for w in shown), shown
    done = subprocess.run(
        [sys.executable, "-m", "core", "sweep", "--model", "resnet18", "--batch-sizes", "64,128", "--epochs", "2",
         "--steps-per-epoch", "500", "--device", "cpu", "--detach"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "warning: Past this host's time limit: 2 of 2 points" in done.stderr and "cancel-sweep" in done.stderr
