"""The queue from the command line: submit, status, cancel, runs, export, import."""

import json
import subprocess
import sys

import pytest
from support import QUICK_CLI, ROOT

QUICK = [*QUICK_CLI, "--epochs", "1"]


@pytest.fixture
def cli(tmp_path):
    store = str(tmp_path / "store.sqlite3")

    def run(*args, owner=None):
        extra = ["--store", store] + (["--owner", owner] if owner else [])
        return subprocess.run(
            [sys.executable, "-m", "core", *args, *extra], cwd=ROOT, capture_output=True, text=True, timeout=300
        )

    return run


def test_submit_wait_follows_the_run_and_prints_the_summary(cli):
    done = cli("submit", *QUICK, "--wait")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("run ") and "steady-state speedup" in done.stdout
    assert "100%" in done.stderr and "done" in done.stderr
    run_id = int(done.stdout.split()[1].rstrip(":"))
    status = cli("status", str(run_id))
    assert status.returncode == 0 and f"run {run_id}" in status.stdout and ": done" in status.stdout
    runs = cli("runs")
    assert "mlp" in runs.stdout and "done" in runs.stdout


def test_submit_refuses_bad_input_and_host_limits_with_one_line(cli, monkeypatch):
    bad = cli("submit", "--batch-size", "0", "--device", "cpu")
    assert bad.returncode == 2 and bad.stderr.strip() == "error: batch_size: must be from 1 to 65536 (got 0)"
    monkeypatch.setenv("COMPILE_LAB_MAX_BATCH_SIZE", "4")
    limited = cli("submit", *QUICK)
    assert limited.returncode == 2
    assert limited.stderr.strip() == "error: batch_size: this host allows at most 4 (got 8)"


def test_cancel_someone_elses_run_is_refused(cli):
    submitted = cli("submit", *QUICK, "--wait", owner="ann")
    run_id = submitted.stdout.split()[1].rstrip(":")
    refused = cli("cancel", run_id, owner="bob")
    assert refused.returncode == 2 and "belongs to someone else" in refused.stderr
    assert cli("delete", run_id, owner="bob").returncode == 2
    assert cli("delete", run_id, owner="ann").returncode == 0
    assert cli("status", run_id).returncode == 2


def test_export_and_import_round_trip_and_a_bad_bundle_is_one_clear_line(cli, tmp_path):
    run_id = cli("submit", *QUICK, "--wait").stdout.split()[1].rstrip(":")
    path = tmp_path / "run.json"
    exported = cli("export", run_id, "-o", str(path))
    assert exported.returncode == 0
    bundle = json.loads(path.read_text())
    assert bundle["run"]["summary"]["steady_state_speedup"] > 0 and len(bundle["events"]) > 0
    imported = cli("import", str(path))
    assert imported.returncode == 0 and imported.stdout.startswith("imported as run ")
    assert "* imported" in cli("runs").stdout
    bundle["events"][0]["variant"] = "../../etc"
    path.write_text(json.dumps(bundle))
    rejected = cli("import", str(path))
    assert rejected.returncode == 2
    assert (
        rejected.stderr.strip() == f"error: {path}: events[0].variant must be one of eager, compiled (got '../../etc')"
    )


@pytest.mark.parametrize("bad", ["99999999999999999999", "0", "seven"])
def test_a_run_id_that_cannot_exist_is_one_clear_line(cli, bad):
    done = cli("status", bad)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "is not a run id" in done.stderr and "Traceback" not in done.stderr
