"""The deployment files, read as the tools that use them would read them (Docker cannot build here):
the Dockerfile installs torch with CUDA, keeps the data directory in a volume, checks Streamlit's
health endpoint and runs the app; the example compose file and host limits fit the image and load."""

import json
import os
import re
import shlex

import pytest
import yaml
from streamlit import config as streamlit_config
from streamlit.web.server.starlette.starlette_routes import ROUTE_HEALTH
from support import ROOT

from core.runs import admin
from core.runs.limits import _LIMIT_PARSERS, load_host_limits

DOCKERFILE = os.path.join(ROOT, "Dockerfile")
COMPOSE = os.path.join(ROOT, "deploy", "compose.yaml")
FLEET_COMPOSE = os.path.join(ROOT, "deploy", "compose.fleet.yaml")


def instructions(path: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments dropped."""
    out, pending = [], ""
    with open(path) as fh:
        for raw in fh:
            line = raw.rstrip("\n")
            if not pending and (not line.strip() or line.lstrip().startswith("#")):
                continue
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            line, pending = pending + line, ""
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


@pytest.fixture(scope="module")
def docker():
    steps = instructions(DOCKERFILE)
    env = {}
    for word, rest in steps:
        if word == "ENV":
            env.update(dict(pair.split("=", 1) for pair in shlex.split(rest)))
    return steps, env


def one(steps, word):
    found = [rest for w, rest in steps if w == word]
    assert len(found) == 1, (word, found)
    return found[0]


def test_the_image_installs_torch_built_for_cuda(docker):
    steps, _ = docker
    assert one(steps, "FROM").startswith("python:3.")
    runs = " ".join(rest for w, rest in steps if w == "RUN")
    index = re.search(r"ARG TORCH_INDEX_URL=(\S+)", " ".join(f"{w} {r}" for w, r in steps)).group(1)
    assert re.fullmatch(r"https://download\.pytorch\.org/whl/cu\d+", index)
    assert '--index-url "${TORCH_INDEX_URL}" torch torchvision' in runs
    assert "-r requirements.txt" in runs and "g++" in runs and "tini" in runs


def test_the_image_installs_the_model_libraries_the_host_limits_may_allow(docker):
    """timm:<name> and hf:<name> models need timm and transformers; docs/hosting.md's host limits allow
    them, so the image installs requirements-models.txt, after torch (so pip keeps the CUDA build)."""
    steps, _ = docker
    install_at = [i for i, (w, rest) in enumerate(steps) if w == "RUN" and "pip install" in rest]
    assert len(install_at) == 1
    commands = [c.strip() for c in steps[install_at[0]][1].split("&&")]
    torch_at = next(i for i, c in enumerate(commands) if "${TORCH_INDEX_URL}" in c)
    models_at = next(i for i, c in enumerate(commands) if "-r requirements-models.txt" in c)
    assert torch_at < models_at and "--index-url" not in commands[models_at]
    copied_before = [rest.split()[:-1] for w, rest in steps[: install_at[0]] if w == "COPY"]
    assert any("requirements-models.txt" in sources for sources in copied_before)
    with open(os.path.join(ROOT, "requirements-models.txt")) as fh:
        wanted = {re.split(r"[<>=!~\[ ]", line.strip())[0] for line in fh if line.strip() and line[0] != "#"}
    assert {"timm", "transformers"} <= wanted


def test_the_data_directory_is_a_volume(docker):
    steps, env = docker
    assert json.loads(one(steps, "VOLUME")) == [env["COMPILE_LAB_DATA"]]
    assert "chown lab:lab " + env["COMPILE_LAB_DATA"] in " ".join(r for w, r in steps if w == "RUN")
    assert one(steps, "USER") == "lab"  # the app and its workers do not run as root


def test_the_health_check_asks_streamlits_health_endpoint_on_the_apps_port(docker):
    steps, env = docker
    port = env["STREAMLIT_SERVER_PORT"]
    assert one(steps, "EXPOSE") == port
    check = one(steps, "HEALTHCHECK")
    assert f"http://127.0.0.1:{port}/{ROUTE_HEALTH}" in check and ROUTE_HEALTH == "_stcore/health"
    assert check.split(" CMD ", 1)[1].startswith("curl --fail")


def test_the_image_runs_the_app_under_an_init_process(docker):
    steps, _ = docker
    assert json.loads(one(steps, "ENTRYPOINT")) == ["tini", "--"]
    command = json.loads(one(steps, "CMD"))
    assert command == ["python", "-m", "streamlit", "run", "app.py"]  # with the live feed's routes
    assert os.path.exists(os.path.join(ROOT, command[-1]))
    assert one(steps, "WORKDIR") == "/app"
    for word, rest in steps:
        if word == "COPY" and rest != ". .":
            assert all(os.path.exists(os.path.join(ROOT, src)) for src in rest.split()[:-1])


def test_every_streamlit_setting_the_image_sets_exists(docker):
    _, env = docker
    known = {option.env_var for option in streamlit_config.get_config_options().values()}
    settings = [name for name in env if name.startswith("STREAMLIT_")]
    assert settings and set(settings) <= known
    assert env["STREAMLIT_SERVER_FILE_WATCHER_TYPE"] == "none"


def test_the_image_leaves_out_local_data_and_history():
    with open(os.path.join(ROOT, ".dockerignore")) as fh:
        ignored = {line.strip() for line in fh if line.strip() and not line.startswith("#")}
    assert {".git", "data", "test-artifacts"} <= ignored


@pytest.fixture(scope="module")
def service():
    with open(COMPOSE) as fh:
        compose = yaml.safe_load(fh)
    assert list(compose["services"]) == ["front", "compile-lab"]
    return compose, compose["services"]["compile-lab"]


def test_the_compose_file_builds_this_image_and_asks_for_the_gpus(service):
    _, svc = service
    context = os.path.normpath(os.path.join(os.path.dirname(COMPOSE), svc["build"]["context"]))
    assert context == ROOT and os.path.exists(os.path.join(context, svc["build"]["dockerfile"]))
    gpus = svc["deploy"]["resources"]["reservations"]["devices"]
    assert gpus == [{"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}]


@pytest.mark.parametrize("compose_file, app_service", [(COMPOSE, "compile-lab"), (FLEET_COMPOSE, "app")])
def test_visitors_reach_the_app_only_through_the_front_which_names_their_address(compose_file, app_service, docker):
    """In both compose files the app publishes no port (so no way around the front's limits); the
    front publishes the one visitors use, runs the shipped haproxy.cfg against the app's port, and
    sets the header the app counts visitors by (tests/test_public_demo_front.py holds the file
    itself to what it promises)."""
    with open(compose_file) as fh:
        compose = yaml.safe_load(fh)
    svc = compose["services"][app_service]
    _, env = docker
    front = compose["services"]["front"]
    assert front["depends_on"] == [app_service]
    assert "ports" not in svc and svc["expose"] == [env["STREAMLIT_SERVER_PORT"]]
    assert front["ports"] == ["8501:8501"] and front["environment"]["COMPILE_LAB_FRONT_BIND"] == ":8501"
    assert front["environment"]["COMPILE_LAB_APP"] == f"{app_service}:{env['STREAMLIT_SERVER_PORT']}"
    assert front["volumes"] == ["./haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro"]
    with open(os.path.join(os.path.dirname(COMPOSE), "haproxy.cfg")) as fh:
        header = re.search(r"http-request set-header (\S+) %\[src\]", fh.read()).group(1)
    assert svc["environment"]["COMPILE_LAB_ADDRESS_HEADER"] == header == "X-Forwarded-For"
    assert load_host_limits(dict(svc["environment"]) | {"COMPILE_LAB_CONFIG": ""}).address_header == header


def test_the_compose_file_keeps_the_data_in_a_named_volume(service, docker):
    compose, svc = service
    _, env = docker
    named = [v for v in svc["volumes"] if v.split(":")[1] == env["COMPILE_LAB_DATA"]]
    assert len(named) == 1 and named[0].split(":")[0] in compose["volumes"]


def test_the_compose_settings_are_ones_compile_lab_reads_and_they_load(service, tmp_path):
    _, svc = service
    environment = dict(svc["environment"])
    known = {"COMPILE_LAB_CONFIG", admin.TOKEN_VARIABLE} | {f"COMPILE_LAB_{key.upper()}" for key in _LIMIT_PARSERS}
    assert set(environment) <= known
    assert environment[admin.TOKEN_VARIABLE].startswith("${COMPILE_LAB_ADMIN_TOKEN:?")  # required, never a default
    mounts = {v.split(":")[1]: v.split(":")[0] for v in svc["volumes"]}
    config_file = os.path.join(os.path.dirname(COMPOSE), mounts[environment["COMPILE_LAB_CONFIG"]])
    env = {**environment, "COMPILE_LAB_CONFIG": config_file, admin.TOKEN_VARIABLE: "x" * 24}
    limits = load_host_limits(env)
    assert limits.max_batch_size == 256 and limits.max_queued_per_owner == 2 and limits.allowed_models
    assert admin.admin_token(env) == "x" * 24
