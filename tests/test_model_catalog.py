"""Lookups: the app learns a model's facts and timm's names from short worker jobs, stored and reused,
on a lane of their own that never waits behind a race and never sees a GPU. Uploaded model files
are kept by content and refused where the host has not allowed them. Real worker processes."""

import os
import subprocess
import sys
import time

import pytest
from support import require_model_libraries

from core.engine.models import sources as model_sources
from core.engine.spec import RunSpec, SpecError
from core.runs import fleet, job_kinds, model_catalog, processes, queue
from core.runs.job_kinds import lookup_problems
from core.runs.limits import CUSTOM_MODELS_OFF, HostLimits
from core.runs.model_catalog import lookup_model, model_names, save_model_file
from core.runs.store import Store
from core.view.race_form import facts_line

LIMITS = HostLimits(job_time_limit_s=300)


@pytest.fixture
def store(tmp_path):
    s = Store(str(tmp_path / "store.sqlite3"))
    yield s
    for run in s.list_runs(status=("starting", "running")):
        if run.pid:
            processes.terminate_group(run.pid, wait_s=1)


def answered(store, ask, timeout=240.0):
    """Ask until the answer is no longer pending, moving the queue meanwhile."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = ask()
        if answer.state != "pending":
            return answer
        queue.tick(store)
        time.sleep(0.3)
    raise AssertionError(f"still pending after {timeout} s")


@pytest.fixture
def busy_cpu(store):
    """A race holding the CPU lane (a process that looks like a worker), as while a visitor races."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", "core.runs.worker"])
    spec = RunSpec(model="mlp", device="cpu")
    run_id = store.create_run(
        "race", spec.to_dict(), "visitor:a", "cpu", status="running", pid=proc.pid, host=fleet.HOST,
        started_at=time.time(), heartbeat_at=time.time(),
    )  # fmt: skip
    yield run_id
    proc.kill()
    proc.wait()


def test_a_models_facts_come_from_a_worker_once_while_a_race_holds_the_cpu(store, busy_cpu):
    require_model_libraries()
    first = lookup_model(store, "timm:test_resnet", limits=LIMITS)
    assert first.state == "pending"
    (job,) = store.list_runs(kind="lookup")
    assert job.device_key == "lookup" and job.owner == "system"
    assert job.params == {
        "model": "timm:test_resnet",
        "model_file": None,
        "library": model_sources.library_version("timm"),
    }
    ready = answered(store, lambda: lookup_model(store, "timm:test_resnet", limits=LIMITS))
    assert ready.state == "ready", ready.message
    assert ready.facts["params"] == 469_688 and ready.facts["default_size"] == 160
    assert ready.facts["summary"] == "0.47 M parameters; images 3x160x160 (the model's default); image classification"
    assert store.get_run(busy_cpu).status == "running"  # it ran beside the race, which was not disturbed
    assert lookup_model(store, "timm:test_resnet", limits=LIMITS).facts == ready.facts
    assert len(store.list_runs(kind="lookup")) == 1  # the next visitor's question is answered from the store


def test_timms_names_are_read_once_by_a_worker(store):
    require_model_libraries()
    listing = answered(store, lambda: model_names(store, "timm", LIMITS))
    assert listing.state == "ready", listing.message
    assert "timm:convnext_small" in listing.names and len(listing.names) > 1000
    assert all(name.startswith("timm:") for name in listing.names)


def test_a_lookup_that_fails_on_the_model_says_why_and_is_not_asked_again(store):
    require_model_libraries()
    failed = answered(store, lambda: lookup_model(store, "timm:no_such_net", limits=LIMITS))
    assert failed.state == "failed" and "has no model 'no_such_net'" in failed.message
    later = lookup_model(store, "timm:no_such_net", limits=LIMITS)
    assert later.message == failed.message and len(store.list_runs(kind="lookup")) == 1


def test_an_uploaded_file_is_checked_by_a_worker_before_a_race_is_queued(store, tmp_path):
    allowed = HostLimits(allow_custom_models=True, job_time_limit_s=300)
    source = b"import torch\ndef build_model():\n    return torch.nn.Linear(3, 10)\n"  # takes 3 features, gets images
    model, path = save_model_file(source, "bad.py")
    failed = answered(store, lambda: lookup_model(store, model, path, allowed))
    assert failed.state == "failed" and failed.message.startswith("file:bad.py failed on its input")


def test_lookups_are_refused_for_what_the_host_does_not_allow(store, tmp_path):
    path = tmp_path / "net.py"
    path.write_text("def build_model():\n    pass\n")
    cases = {
        "zoo": lookup_problems({"model": "mlp"}, LIMITS),
        "pattern": lookup_problems({"model": "hf:gpt2"}, HostLimits(allowed_models=("timm:*",))),
        "uploads off": lookup_problems({"model": "file:net.py", "model_file": str(path)}, LIMITS),
        "no file": lookup_problems({"model": "file:net.py", "model_file": "/nope.py"}, HostLimits(allow_custom_models=True)),
        "bad name": lookup_problems({"model": "timm:a b"}, LIMITS),
        "bad list": lookup_problems({"list": "everything"}, LIMITS),
    }  # fmt: skip
    assert all(len(problems) == 1 for problems in cases.values()), cases
    assert cases["uploads off"][0].message == CUSTOM_MODELS_OFF
    assert "this host allows only: timm:*" in cases["pattern"][0].message
    refused = lookup_model(store, "hf:gpt2", limits=HostLimits(allowed_models=("timm:*",)))
    assert refused.state == "failed" and "this host allows only" in refused.message
    assert store.list_runs(kind="lookup") == []  # nothing was queued


def test_a_missing_library_is_reported_and_nothing_is_queued(store, monkeypatch):
    monkeypatch.setattr(model_sources, "library_version", lambda source: None)
    answer = lookup_model(store, "timm:resnet18", limits=LIMITS)
    assert answer.state == "unavailable" and "pip install -r requirements-models.txt" in answer.message
    assert model_names(store, "timm", LIMITS).state == "unavailable"
    assert store.list_runs() == []


def test_lookups_do_not_count_against_a_visitors_queue_limits(store, sleepers):
    strict = HostLimits(max_queue_length=1, max_queued_per_owner=1)
    for name in ("timm:a", "timm:b", "timm:c"):
        queue.enqueue(store, job_kinds.model_params(name), "system", kind="lookup", limits=strict)
    run_id = queue.enqueue(store, RunSpec(model="mlp", device="cpu"), "visitor:a", limits=strict)
    assert store.get_run(run_id).status in ("queued", "starting")


def test_a_lookup_worker_sees_no_gpu():
    env = processes.worker_environment("lookup", {"CUDA_VISIBLE_DEVICES": "0,1", "PATH": "/bin"})
    assert env["CUDA_VISIBLE_DEVICES"] == "" and env["PATH"] == "/bin"


# -- uploads ----------------------------------------------------------------------------------------


def test_an_upload_is_kept_by_content_under_the_data_directory():
    source = b"import torch\ndef build_model():\n    return torch.nn.Linear(2, 2)\n"
    model, path = save_model_file(source, "../../My Net.py")
    assert model == "file:My_Net.py"
    assert os.path.dirname(path) == os.path.join(os.environ["COMPILE_LAB_DATA"], "model-files")
    assert open(path, "rb").read() == source
    assert save_model_file(source, "other.py")[1] != path  # the name is part of what is shown
    assert save_model_file(source, "../../My Net.py") == (model, path)  # the same file is one file
    assert save_model_file(source + b"\n", "My Net.py")[1] != path


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"\xff\xfe not text", "not UTF-8 text"),
        (b"def build_model(:\n", "not valid Python"),
        (b"def model():\n    pass\n", "defines no build_model()"),
        (b"#" * 1_000_001, "larger than 1000 kB"),
    ],
)
def test_an_upload_that_is_not_a_model_file_is_refused_with_the_reason(data, says):
    with pytest.raises(ValueError, match=says):
        save_model_file(data, "x.py")


def test_a_race_of_an_uploaded_file_is_refused_unless_the_host_allows_it(store, sleepers, tmp_path):
    model, path = save_model_file(b"def build_model():\n    pass\n", "net.py")
    spec = RunSpec(model=model, model_file=path, device="cpu")
    with pytest.raises(SpecError) as refused:
        queue.enqueue(store, spec, "visitor:a", limits=HostLimits())
    assert [p.message for p in refused.value.problems] == [CUSTOM_MODELS_OFF]
    assert store.list_runs() == []
    run_id = queue.enqueue(store, spec, "visitor:a", limits=HostLimits(allow_custom_models=True))
    assert store.get_run(run_id).params["model_file"] == path


class _Phases:
    """What a lookup job tells its run while it works (phases), kept for the test."""

    def __init__(self):
        self.updates = []

    def update(self, **fields):
        self.updates.append(fields)


def test_a_library_failing_in_its_own_way_is_kept_as_the_models_answer(store, monkeypatch):
    """Not only ModelError: a library's own exception building the model is an answer about the
    model too, kept (not asked again every LOOKUP_RETRY_S by every page showing it)."""
    from core.engine.models import workload as resolve
    from core.runs.job_kinds import run_lookup_job

    def broken(spec):
        raise AttributeError("'ResNetConfig' object has no attribute 'image_size'")

    monkeypatch.setattr(resolve, "describe_model", broken)
    params = job_kinds.model_params("hf:resnet")
    status, outcome = run_lookup_job(params, _Phases())
    assert status == "failed" and outcome["summary"] == {"model_error": True}
    assert outcome["error"] == (
        "hf:resnet could not be built: AttributeError: 'ResNetConfig' object has no attribute 'image_size'"
    )
    run_id = store.create_run("lookup", params, "system", "lookup", status="running", host=fleet.HOST)
    long_ago = time.time() - 10 * model_catalog.LOOKUP_RETRY_S
    store.finish_run(run_id, status, error=outcome["error"], summary=outcome["summary"], finished_at=long_ago)
    answer = lookup_model(store, "hf:resnet", limits=LIMITS)
    assert answer.state == "failed" and answer.message == outcome["error"]
    assert [r.id for r in store.list_runs(kind="lookup")] == [run_id]


def test_one_visitor_can_keep_only_a_few_lookups_waiting(store, sleepers, monkeypatch):
    """Lookups fill no visitor's race queue, but each builds a model: one asker may keep at most
    MAX_QUEUED_LOOKUPS waiting; the next is deferred with the reason, and others are not held up."""
    monkeypatch.setattr(model_sources, "library_version", lambda source: "1.0")
    strict = HostLimits(max_queue_length=1, max_queued_per_owner=1)
    answers = [lookup_model(store, f"timm:net_{i}", limits=strict, asker="visitor:a") for i in range(8)]
    queued = [r for r in store.list_runs(kind="lookup", status=["queued"]) if r.owner == "visitor:a"]
    assert len(queued) == job_kinds.MAX_QUEUED_LOOKUPS
    deferred = [a for a in answers if a.state == "deferred"]
    assert deferred and all(a.state in ("pending", "deferred") for a in answers)
    assert f"at most {job_kinds.MAX_QUEUED_LOOKUPS} at once" in deferred[0].message
    assert facts_line(deferred[0]) == ("info", f"Not looked up yet: {deferred[0].message}.")  # launch not blocked
    # Where the host counts visitors by address, every browser at that address counts together.
    for i in range(job_kinds.MAX_QUEUED_LOOKUPS):
        assert (
            lookup_model(store, f"timm:b_{i}", limits=strict, asker="visitor:b", address="10.0.0.1").state == "pending"
        )
    assert lookup_model(store, "timm:c_0", limits=strict, asker="visitor:c", address="10.0.0.1").state == "deferred"
    # Another visitor still gets answers, and visitor:a's lookups leave their race queue alone.
    assert lookup_model(store, "timm:elsewhere", limits=strict, asker="visitor:d").state == "pending"
    race = queue.enqueue(store, RunSpec(model="mlp", device="cpu"), "visitor:a", limits=strict)
    assert store.get_run(race).status in ("queued", "starting")
