"""A worker's code cannot read its server's environment through /proc (core/runs/race_conditions.py): the
admin token a model file's build_model() could otherwise take from its parent."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINUX = sys.platform.startswith("linux")
SYSTEM_PYTHON = "/usr/bin/python3"
# A server that seals itself (or not), then starts a "worker" that tries to read its environment.
SERVER = """
import subprocess, sys
{seal_source}
if sys.argv[1] == "seal":
    assert seal_from_workers()
worker = "import os\\ntry:\\n    print('the-admin-token' in open(f'/proc/{{os.getppid()}}/environ').read())\\nexcept PermissionError:\\n    print('refused')"
print(subprocess.run([sys.executable, "-c", worker], capture_output=True, text=True).stdout.strip())
"""


@pytest.mark.skipif(not LINUX, reason="prctl and /proc are Linux's")
def test_a_sealed_process_is_not_dumpable_and_its_workers_are():
    code = (
        "import ctypes, subprocess, sys\nfrom core.runs.race_conditions import seal_from_workers\n"
        "libc = ctypes.CDLL(None)\nprint(seal_from_workers(), libc.prctl(3, 0, 0, 0, 0))\n"
        "print(subprocess.run([sys.executable, '-c', 'import ctypes; print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))'],"
        " capture_output=True, text=True).stdout.strip())"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "0", "1"]  # sealed; a worker started by exec is an ordinary process


def sealing_code() -> str:
    """The sealing's own lines of core/runs/race_conditions.py (the system Python has none of the
    project's other imports): PR_SET_DUMPABLE's constants and seal_from_workers, as they are there."""
    text = (ROOT / "core/runs/race_conditions.py").read_text()
    wanted = []
    for node in ast.parse(text).body:
        names = {t.id for t in getattr(node, "targets", []) for t in ast.walk(t) if isinstance(t, ast.Name)}
        if getattr(node, "name", None) == "seal_from_workers" or "PR_SET_DUMPABLE" in names:
            wanted.append(ast.get_source_segment(text, node))
    assert len(wanted) == 2, "race_conditions.py no longer has the sealing as this test reads it"
    return "\n\n".join(wanted) + "\n"


def as_another_user(mode: str) -> str:
    """Run the server as `nobody` (root reads every process's /proc whatever it seals)."""
    source = "import ctypes, sys\n" + sealing_code()
    command = [SYSTEM_PYTHON, "-c", SERVER.format(seal_source=source), mode]
    if os.geteuid() == 0:
        command = [shutil.which("runuser"), "-u", "nobody", "--", *command]
    env = {"PATH": "/usr/bin:/bin", "COMPILE_LAB_ADMIN_TOKEN": "the-admin-token"}
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd="/", timeout=60).stdout.strip()


@pytest.mark.skipif(not LINUX, reason="prctl and /proc are Linux's")
@pytest.mark.skipif(
    not os.path.exists(SYSTEM_PYTHON) or (os.geteuid() == 0 and not shutil.which("runuser")),
    reason="needs /usr/bin/python3 (and runuser when run as root) to act as an ordinary user",
)
def test_a_worker_cannot_read_a_sealed_servers_environment_from_proc():
    assert as_another_user("open") == "True"  # what a model file could do before: the token, read
    assert as_another_user("seal") == "refused"
