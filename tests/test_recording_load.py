"""Recordings carry the load they were recorded under (issue 26, point 9): the worker's environment
record holds the load average and the cores at the start (and a race's runner at the end), the replay
says it ('with load 3.1 on 2 cores', busy ones flagged, 'load not recorded' for old ones), and
`python -m core record` re-makes a shipped recording only on a quiet machine."""

import json
import os

import pytest
from support import ROOT

from core.cli.main import main
from core.engine.spec import RunSpec
from core.runs.bundle import load_bundle_file
from core.runs.race_conditions import STEADY_MALLOC
from core.view import replay


def env(start, end=None, cores=2, threads=1):
    record = {"load_at_start": {"load_average": [start, start, start], "cpu_count": cores}, "torch_threads": threads}
    if end is not None:
        record["load_at_end"] = {"load_average": [end, end, end], "cpu_count": cores}
    return record


def test_the_environment_record_holds_the_load_and_the_cores_at_the_start():
    import torch

    from core.engine.environment import environment_record, machine_load

    load = machine_load()
    assert len(load["load_average"]) == 3 and all(x >= 0 for x in load["load_average"])
    assert load["cpu_count"] == os.cpu_count()
    assert set(environment_record(torch.device("cpu"))["load_at_start"]) == {"load_average", "cpu_count"}


@pytest.mark.parametrize(
    "environment, text, busy",
    [
        ({}, "(load not recorded)", False),
        (env(0.1), "with load 0.1 on 2 cores", False),
        (env(0.1, end=1.2), "with load 0.1 at the start and 1.2 at the end on 2 cores", False),
        (env(3.1), "with load 3.1 on 2 cores", True),
        (env(0.2, end=3.5), "with load 0.2 at the start and 3.5 at the end on 2 cores", True),  # got busy
        ({"load_at_start": "garbage"}, "(load not recorded)", False),
    ],
)
def test_the_load_reading_says_how_busy_the_machine_was(environment, text, busy):
    assert replay.load_reading(environment) == (text, busy)
    shown = replay.recorded_load(environment)
    assert shown.startswith(text) and ("busy" in shown) == busy


def test_a_replay_names_the_load_it_was_recorded_under():
    for key in replay.shipped_recordings():
        recording = replay.load_recording(key)
        assert replay.recorded_load(recording.run.environment) in recording.label
        if "load_at_start" not in (recording.run.environment or {}):
            assert "(load not recorded)" in recording.label, key


def test_every_shipped_recording_has_its_row_and_the_row_makes_the_same_race():
    shipped = {os.path.splitext(f)[0] for f in os.listdir(os.path.join(ROOT, "assets", "recordings"))}
    assert shipped == set(replay.BY_NAME)
    for row in replay.SHIPPED:
        params = load_bundle_file(os.path.join(ROOT, "assets", "recordings", f"{row.name}.json"))["run"]["params"]
        wanted = RunSpec(**row.params).to_dict()
        assert {k: params.get(k) for k in row.params} == {k: wanted[k] for k in row.params}, row.name


def test_record_refuses_a_busy_machine_and_writes_nothing(tmp_path, monkeypatch, capsys):
    import core.engine.environment as environment

    monkeypatch.setattr(environment, "machine_load", lambda: {"load_average": [3.1, 2.0, 1.0], "cpu_count": 2})
    code = main(["record", "cpu-compile-never-pays-off", "--wait-quiet", "0", "--out-dir", str(tmp_path)])
    assert code == 1 and os.listdir(tmp_path) == []
    assert "the machine is busy (load 3.1 on 2 cores)" in capsys.readouterr().err


def test_record_names_the_recordings_it_knows(tmp_path, capsys):
    assert main(["record", "no-such-recording", "--out-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no shipped recording named 'no-such-recording'" in err and "cpu-break-even-demo" in err


def test_busy_is_judged_against_the_cores(tmp_path):
    assert replay.machine_busy({"load_average": [0.9, 0, 0], "cpu_count": 2}) is None
    assert replay.machine_busy({"load_average": [1.1, 0, 0], "cpu_count": 2}) == "load 1.1 on 2 cores"
    assert replay.machine_busy({"load_average": [1.1, 0, 0], "cpu_count": 8}) is None
    assert json.dumps(replay.BY_NAME["cpu-break-even-demo"].params)  # plain JSON, as a queued job's params


def test_record_waits_for_a_load_well_under_the_line_a_recording_is_judged_by(monkeypatch):
    """A start just under the busy line would be judged busy once the worker's start-up adds to it."""
    import core.engine.environment as environment
    from core.cli.record import wait_for_quiet

    loads = iter([0.9, 0.9, 0.5])
    monkeypatch.setattr(environment, "machine_load", lambda: {"load_average": [next(loads), 0, 0], "cpu_count": 2})
    clock = iter(range(100))
    assert wait_for_quiet(60, sleep=lambda s: None, now=lambda: next(clock)) is None
    assert next(loads, None) is None  # it waited past both 0.9s (quiet by the judging line) for 0.5


def test_every_shipped_recording_was_made_on_a_quiet_machine():
    for key in replay.shipped_recordings():
        environment = replay.load_recording(key).run.environment
        text, busy = replay.load_reading(environment)
        assert text != "(load not recorded)" and not busy, (key, text)
        # and as workers run races now: glibc's moving malloc threshold made eager's steps jump
        assert environment.get("malloc") == STEADY_MALLOC, key
