"""The job-kinds table is the one place a kind of job is declared: each row's check, lane and
runner work, and the queue's limits follow the row."""

import inspect

import pytest

from core.engine.spec import DeviceCaps
from core.runs.job_kinds import JOB_KINDS, UNCOUNTED_KINDS, runner_of
from core.runs.limits import HostLimits


@pytest.mark.parametrize("kind", sorted(JOB_KINDS))
def test_every_kind_has_a_check_a_device_key_and_a_runner_that_imports(kind):
    job = JOB_KINDS[kind]
    assert job.name == kind
    problems = job.check({}, DeviceCaps(), HostLimits())
    assert isinstance(problems, list)
    key = job.device_key({}, DeviceCaps())
    assert isinstance(key, str) and key
    runner = runner_of(kind)
    assert callable(runner)
    assert list(inspect.signature(runner).parameters) == ["params", "sink"]
    assert job.plural, "a refusal names what it counts"


def test_the_app_s_own_questions_do_not_count_toward_a_visitor_s_limits():
    assert set(UNCOUNTED_KINDS) == {"probe", "lookup"}
    assert JOB_KINDS["lookup"].max_waiting_per_asker is not None
    assert [k for k, job in JOB_KINDS.items() if job.pinned_to_host] == ["probe"]


def test_the_device_keys_name_their_lanes():
    cpu = DeviceCaps()
    assert JOB_KINDS["race"].device_key({"device": "cpu"}, cpu) == "cpu"
    assert JOB_KINDS["demo"].device_key({}, cpu) == "cpu"
    assert JOB_KINDS["probe"].device_key({}, cpu) == "probe"
    assert JOB_KINDS["lookup"].device_key({}, cpu) == "lookup"
