"""core.runs.warm_start: one answer to "is this process still running", a zombie included."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from core.runs import outage, processes
from core.runs.store import Store
from core.runs.warm_start import pid_running, readable


def _zombie() -> subprocess.Popen:
    """A child that has exited and that nobody has reaped yet (its Popen kept: dropped, it reaps it)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open(f"/proc/{child.pid}/stat", "rb") as fh:
            if fh.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                return child
        time.sleep(0.01)
    raise AssertionError("the child did not exit")


def test_a_zombie_is_not_running_though_it_can_still_be_signalled():
    child = _zombie()
    os.kill(child.pid, 0)  # what a check on kill alone took for alive
    assert not pid_running(child.pid)
    child.wait()
    assert not pid_running(child.pid)  # reaped: gone


def test_a_running_process_and_this_one_are_running():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert pid_running(child.pid)
        assert pid_running(os.getpid())
    finally:
        child.kill()
        child.wait()
    assert not pid_running(child.pid)


def test_a_kept_file_claimed_by_a_process_that_ended_unreaped_is_taken_back(tmp_path):
    """A claim on kept events whose process is a zombie is taken back (delivered on the next pass),
    not left for ever."""
    store = Store(str(tmp_path / "store.sqlite3"))
    folder = outage.kept_dir(store.path)
    os.makedirs(folder, exist_ok=True)
    child = _zombie()
    pid = child.pid
    try:
        kept = os.path.join(folder, f"run-1{outage.KEPT_SUFFIX}")
        claimed = f"{kept}{outage.DELIVERING}{pid}"
        with open(claimed, "w") as fh:
            fh.write("{}")
        outage.deliver_kept(store)
        assert not os.path.exists(claimed)  # the claim of a process that has ended is taken back
        assert os.path.exists(kept)
    finally:
        child.wait()
    assert not processes.pid_alive(pid)


def test_readable_watches_a_descriptor_past_1024_which_select_refuses():
    """A suite or an app serving many viewers holds more than 1,024 descriptors; the warm start's
    waits used select, which then raised 'filedescriptor out of range in select()'."""
    import resource
    import select

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1600:
        pytest.skip(f"this machine allows {hard} open files: none past 1,024 to test with")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1600), hard))
    read, write = os.pipe()
    high = 1500
    try:
        os.dup2(read, high)
        assert readable([high], 0.05) == []
        os.write(write, b"x")
        assert readable([high], 1.0) == [high]
        with pytest.raises(ValueError):
            select.select([high], [], [], 0)
    finally:
        for fd in (read, write, high):
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
