"""A lane is free only when the worker process of its last job is gone: a job's end is recorded
before its process exits, and until then that process holds the device's memory (after an
out-of-memory, most of the GPU), so the next job must not start beside it."""

import os
import subprocess
import sys

import pytest
from support import AMPERE, CPU, quick_spec

from core.runs import processes, queue
from core.runs.limits import HostLimits

NO_LIMITS = HostLimits(job_time_limit_s=None)


BOTH_BACKENDS = True  # each test using `store` runs on SQLite and on PostgreSQL (tests/conftest.py)


@pytest.mark.parametrize("status", ["done", "failed", "cancelled"])
def test_the_next_job_waits_until_the_ended_jobs_process_is_gone(store, sleepers, status):
    first, second = (queue.enqueue(store, quick_spec(), "ann", limits=NO_LIMITS, caps=CPU) for _ in range(2))
    store.finish_run(first, status, error="out of memory" if status == "failed" else None)
    queue.tick(store)
    assert store.get_run(second).status == "queued"  # the first job's worker still holds the device
    sleepers[0].kill()
    sleepers[0].wait()
    queue.tick(store)
    assert store.get_run(second).status == "starting"


def test_a_gpu_job_waits_for_the_worker_that_ran_out_of_memory_on_its_gpu(store, sleepers, monkeypatch):
    monkeypatch.setattr(queue, "known_caps", lambda store: AMPERE)
    spec = quick_spec(device="cuda")
    first, second = (queue.enqueue(store, spec, "ann", limits=NO_LIMITS, caps=AMPERE) for _ in range(2))
    store.finish_run(first, "failed", error="out of memory at batch size 512 on cuda:0")
    queue.tick(store)
    assert store.get_run(second).status == "queued"
    sleepers[0].kill()
    sleepers[0].wait()
    queue.tick(store)
    assert (store.get_run(second).status, store.get_run(second).device_key) == ("starting", "cuda:0")


def test_wait_for_exit_returns_once_the_worker_is_gone():
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)", "core.runs.worker"])
    try:
        assert processes.wait_for_exit(worker.pid, 30)
    finally:
        worker.wait()
    assert not processes.wait_for_exit(os.getpid(), 0.1)  # pytest itself: never gone


def test_a_cuda_job_can_be_pinned_to_one_gpu_lane(store, sleepers, monkeypatch):
    two = AMPERE.__class__(**{**AMPERE.__dict__, "gpu_count": 2})
    monkeypatch.setattr(queue, "known_caps", lambda store: two)
    pinned = queue.enqueue(store, quick_spec(device="cuda"), "ann", limits=NO_LIMITS, caps=two, lane="cuda:1")
    assert (store.get_run(pinned).device_key, store.get_run(pinned).status) == ("cuda:1", "starting")
    with pytest.raises(queue.JobError):
        queue.enqueue(store, quick_spec(), "ann", limits=NO_LIMITS, caps=two, lane="cuda:0")  # a CPU job
