"""A host's configuration: nonsense values and malformed files are clear messages naming the
setting, on the page and in `submit`, never a traceback or a silent default."""

import os
import subprocess
import sys

import pytest
from support import QUICK_CLI, ROOT
from test_pages import app, record_probe

from core.runs.limits import ConfigError, HostLimits, load_host_limits


@pytest.mark.parametrize(
    "variable, value, words",
    [
        ("MAX_BATCH_SIZE", "-1", "COMPILE_LAB_MAX_BATCH_SIZE must be a whole number of at least 1 (got '-1')"),
        ("MAX_BATCH_SIZE", "0", "at least 1"),
        ("MAX_BATCH_SIZE", "2.5", "whole number"),
        ("MAX_BATCH_SIZE", "", "COMPILE_LAB_MAX_BATCH_SIZE is empty: give a value, or none for no limit"),
        ("JOB_TIME_LIMIT_S", "inf", "COMPILE_LAB_JOB_TIME_LIMIT_S must be a finite number of seconds (got 'inf')"),
        ("JOB_TIME_LIMIT_S", "nan", "finite"),
        ("JOB_TIME_LIMIT_S", "-5", "more than 0 seconds"),
        ("ALLOWED_MODELS", "", "COMPILE_LAB_ALLOWED_MODELS is empty: name at least one model"),
        ("ALLOWED_MODELS", " , ", "is empty"),
        ("ALLOWED_MODELS", "mlp,resnet5O", "unknown models (resnet5O)"),
        ("MAX_QUEUED_PER_OWNER", "lots", "whole number"),
        ("LIMIT_BY_ADDRESS", "maybe", "true or false"),
        ("ADDRESS_HEADER", "X Forwarded", "header name"),
        ("AUTO_REUSE_QUEUE_LENGTH", "-2", "at least 1"),
        ("DISK_BUDGET", "lots", "COMPILE_LAB_DISK_BUDGET must be a size: bytes, or a number with one of"),
        ("DISK_BUDGET", "-5 GB", "must be a size"),
        ("DISK_BUDGET", "20 XB", "must be a size"),
        ("DISK_BUDGET", "0", "at least 1"),
        ("DISK_BUDGET", "0.1 B", "at least 1 byte"),
    ],
)
def test_nonsense_values_in_the_environment_are_refused_naming_the_variable(variable, value, words):
    with pytest.raises(ConfigError) as raised:
        load_host_limits({f"COMPILE_LAB_{variable}": value})
    assert words in str(raised.value)


@pytest.mark.parametrize(
    "toml, words",
    [
        ("[limits\nmax_batch_size = 4\n", "is not valid TOML"),
        ("limits = 5\n", "limits in {path} must be a [limits] table of settings (got 5 (int))"),
        ("[limits]\nmax_batch_size = true\n", "max_batch_size in [limits] of {path} must be a whole number"),
        ("[limits]\nmax_batch_size = 2.5\n", "whole number"),
        ("[limits]\nallowed_models = []\n", "allowed_models in [limits] of {path} is empty"),
        ("[limits]\nallowed_models = [1, 2]\n", "must be a list of model names"),
        ("[limits]\njob_time_limit_s = inf\n", "finite"),
        ("[limits]\nmax_batch_sise = 4\n", "max_batch_sise in [limits] of {path}: unknown setting"),
        ("[limit]\nmax_batch_size = 4\n", "has unknown settings (limit)"),
    ],
)
def test_a_malformed_config_file_is_refused_naming_the_file_and_setting(tmp_path, toml, words):
    path = tmp_path / "host.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError) as raised:
        load_host_limits({"COMPILE_LAB_CONFIG": str(path)})
    assert words.format(path=path) in str(raised.value)


def test_a_config_file_that_is_not_utf8_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "host.toml"
    path.write_bytes('[limits]\nallowed_models = ["modèle"]\n'.encode("latin-1"))  # saved as Latin-1
    with pytest.raises(ConfigError) as raised:
        load_host_limits({"COMPILE_LAB_CONFIG": str(path)})
    message = str(raised.value)
    assert f"the host configuration {path} is not valid TOML" in message and "not UTF-8" in message, message
    assert "0xe8" in message


def test_a_missing_config_file_is_refused_naming_it(tmp_path):
    with pytest.raises(ConfigError, match="cannot read the host configuration .*nope.toml"):
        load_host_limits({"COMPILE_LAB_CONFIG": str(tmp_path / "nope.toml")})


def test_good_values_parse_and_none_removes_a_limit(tmp_path):
    path = tmp_path / "host.toml"
    path.write_text('[limits]\nallowed_models = ["mlp", "gpt"]\nmax_batch_size = 64\njob_time_limit_s = 900\n')
    env = {"COMPILE_LAB_CONFIG": str(path), "COMPILE_LAB_JOB_TIME_LIMIT_S": "none", "COMPILE_LAB_MAX_EPOCHS": " 5 "}
    limits = load_host_limits(env)
    assert limits == HostLimits(allowed_models=("mlp", "gpt"), max_batch_size=64, max_epochs=5, job_time_limit_s=None)


def test_a_disk_budget_is_bytes_or_a_size_with_its_unit(tmp_path):
    path = tmp_path / "host.toml"
    path.write_text('[limits]\ndisk_budget = "20 GB"\n')
    assert load_host_limits({"COMPILE_LAB_CONFIG": str(path)}).disk_budget == 20 * 10**9
    assert load_host_limits({"COMPILE_LAB_DISK_BUDGET": "1.5GiB"}).disk_budget == 3 * 2**29
    assert load_host_limits({"COMPILE_LAB_DISK_BUDGET": " 4096 "}).disk_budget == 4096
    path.write_text("[limits]\ndisk_budget = 500_000_000\n")
    assert load_host_limits({"COMPILE_LAB_CONFIG": str(path)}).disk_budget == 500_000_000
    assert load_host_limits({}).disk_budget is None
    path.write_text("[limits]\ndisk_budget = 2.5\n")
    with pytest.raises(ConfigError, match="disk_budget in .* must be a whole number"):
        load_host_limits({"COMPILE_LAB_CONFIG": str(path)})


def test_a_demo_working_set_limit_is_a_size_of_at_least_two_small_tensors():
    assert load_host_limits({"COMPILE_LAB_MAX_DEMO_WORKING_SET": "256 MiB"}).max_demo_working_set == 256 * 2**20
    assert load_host_limits({}).max_demo_working_set is None
    with pytest.raises(ConfigError, match="COMPILE_LAB_MAX_DEMO_WORKING_SET must be at least 8,192 bytes"):
        load_host_limits({"COMPILE_LAB_MAX_DEMO_WORKING_SET": "4 KiB"})


@pytest.mark.parametrize(
    "toml", ["[limits\n", "limits = 5\n", "[limits]\nmax_batch_size = -1\n", b"[limits]\nallowed_models = ['\xe9']\n"]
)
def test_a_malformed_config_is_a_message_on_the_page_and_nothing_can_be_launched(
    store, sleepers, monkeypatch, tmp_path, toml
):
    record_probe(store)
    path = tmp_path / "host.toml"
    path.write_bytes(toml if isinstance(toml, bytes) else toml.encode())
    monkeypatch.setenv("COMPILE_LAB_CONFIG", str(path))
    at = app()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert any(e.startswith("This host's configuration has a problem") and "host\\.toml" in e for e in errors), errors
    assert at.button(key="launch").label == "Launch" and at.button(key="launch").disabled
    at.switch_page("app_pages/under_the_hood.py").run()
    assert not at.exception
    at.button[0].click().run()  # "Measure on this device": refused with the reason, nothing queued
    assert not at.exception and store.list_runs(kind="demo") == []
    assert any("configuration has a problem" in e.value for e in at.error)


def test_nonsense_limits_in_the_environment_are_a_message_on_the_page(store, sleepers, monkeypatch):
    record_probe(store)
    monkeypatch.setenv("COMPILE_LAB_JOB_TIME_LIMIT_S", "inf")
    at = app()
    assert not at.exception
    assert any("COMPILE\\_LAB\\_JOB\\_TIME\\_LIMIT\\_S must be a finite number" in e.value for e in at.error)
    assert at.button(key="launch").disabled


@pytest.mark.parametrize(
    "toml", ["[limits\n", "limits = 5\n", "[limits]\nallowed_models = []\n", b"[limits]\nallowed_models = ['\xe9']\n"]
)
def test_submit_with_a_malformed_config_is_one_line_and_exit_status_2(tmp_path, toml):
    path = tmp_path / "host.toml"
    path.write_bytes(toml if isinstance(toml, bytes) else toml.encode())
    done = subprocess.run(
        [sys.executable, "-m", "core", "submit", *QUICK_CLI, "--store", str(tmp_path / "s.sqlite3")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COMPILE_LAB_CONFIG": str(path)},
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert done.stderr.startswith("error: configuration: ") and str(path) in done.stderr
