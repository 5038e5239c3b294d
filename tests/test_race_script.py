"""A race as one script (issue 45): the script a stored race is written as needs only torch, runs
from any folder with no Compile Lab on the path and prints its compile time, steady speedup and
versions; it reads the steps as the app does (the same interval, the same warm-up rule); every zoo
model's fits in 200 lines; a run whose settings do not validate is refused, and free text from a
bundle lands in comments only, never in code; `export --script` and `--report` write them; the Race
and Runs pages offer both downloads for a finished race."""

import ast
import io
import json
import math
import os
import random
import subprocess
import sys
import tokenize
import zipfile
from types import SimpleNamespace

import pytest
from support import ROOT, quick_spec
from test_pages import app, record_probe, record_race

from core.engine import intervals
from core.engine.models.sources import MODELS
from core.engine.summary import default_warmup, steady_state_speedup
from core.runs import race_script, run_files
from core.runs.race_script import MAX_LINES, ScriptError, script_text

TINY = dict(model="pointwise_mlp", batch_size=8, epochs=2, steps_per_epoch=10, backend="aot_eager", device="cpu")
HOSTILE = "x'); __import__('os').system('touch pwned'); ('"
RESULT = {
    "steady_state_speedup": 1.17,
    "speedup_ci95": [1.1, 1.25],
    "verdict": "faster",
    "compile_time_s": 9.5,
    "processes_counted": 4,
}
MACHINE = {"device_type": "cpu", "device_name": "Test CPU", "cpu_count": 2, "torch": "2.x", "python": "3.11"}
STEADY = {"MALLOC_MMAP_THRESHOLD_": "33554432", "MALLOC_TRIM_THRESHOLD_": "1073741824"}


def run_of(params, environment=None, summary=None, run_id=7, error=None):
    return SimpleNamespace(
        id=run_id, kind="race", params=params, environment=environment or MACHINE, summary=summary or RESULT,
        error=error, owner="someone",
    )  # fmt: skip


def calls(text: str) -> set[str]:
    """Every function a script calls, by its dotted name as written."""
    names = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Call):
            names.add(ast.unparse(node.func))
    return names


def settings_of(text: str) -> dict:
    """The values a script's settings lines assign (literals only: ast.literal_eval)."""
    values = {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple):
            names = [t.id for t in node.targets[0].elts]
            try:
                values.update(zip(names, ast.literal_eval(node.value), strict=True))
            except ValueError:
                continue
    return values


def code_tokens(text: str) -> str:
    """The script without its comments: what Python runs of it."""
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    return " ".join(t.string for t in tokens if t.type != tokenize.COMMENT)


# -- what the script is --------------------------------------------------------------------------


@pytest.mark.parametrize("model", list(MODELS))
def test_every_zoo_models_script_is_short_and_runs_only_its_own_code(model):
    text = script_text({"model": model, "batch_size": 8}, MACHINE, RESULT, "race 7", "a test")
    assert len(text.splitlines()) <= MAX_LINES
    compile(text, f"race_{model}.py", "exec")
    imported = {a.name for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(ast.parse(text)) if isinstance(n, ast.ImportFrom)}
    assert not {name for name in imported if name.split(".")[0] == "core"}, "no Compile Lab in the script"
    assert imported <= {"__future__", "gc", "math", "os", "platform", "statistics", "sys", "tempfile", "time",
                        "torch", "torch.nn", "torchvision"}  # fmt: skip


def test_the_header_carries_the_result_the_machine_and_the_command():
    text = script_text({**TINY, "batch_size": 64}, MACHINE, RESULT, "race 7", "python -m core export 7 --script F")
    header = [line for line in text.splitlines() if line.startswith("#")][:5]
    assert "steady speedup 1.17x (95% interval 1.10-1.25x), faster; compile 9.5 s" in header[1]
    assert "cpu: Test CPU (2 CPU cores); torch 2.x, Python 3.11" in header[2]
    assert header[3] == "# Made by: python -m core race --model pointwise_mlp --batch-size 64 --backend aot_eager " \
        "--epochs 2 --steps-per-epoch 10 --device cpu (and written as this script by: python -m core export 7 " \
        "--script F)"  # fmt: skip
    assert "rests on 4 processes" in header[4]


def test_a_race_on_other_data_says_the_script_makes_synthetic_batches():
    text = script_text({**TINY, "model": "small_cnn", "data": "cifar10", "data_dir": None}, MACHINE, RESULT)
    assert "synthetic batches (the race read cifar10 through a DataLoader)" in text.splitlines()[4]


@pytest.mark.parametrize(
    "options",
    [
        dict(schedule="sequential", compile_scope="regional", shapes="varying", stance="eager_on_recompile"),
        dict(schedule="alternating", precision="amp-bf16", dynamic=True, fullgraph=True),
        dict(
            model="gpt", device="cuda", precision="amp-fp16", backend="inductor", mode="reduce-overhead", cache="warm"
        ),
        dict(model="resnet18", compile_scope="regional", backend="eager"),
        dict(model="timm:resnet18:drop_rate=0.1"),
    ],
)
def test_each_option_gives_a_script_that_compiles_with_only_the_lines_it_needs(options):
    text = script_text({**TINY, **options})
    compile(text, "race.py", "exec")
    assert "{" not in "".join(line[:1] for line in text.splitlines())  # no condition left unresolved
    assert ("block.compile(**kwargs)" in text) == (options.get("compile_scope") == "regional")
    assert ("GradScaler" in text) == (options.get("precision") == "amp-fp16")
    assert ("cudagraph_mark_step_begin" in text) == (options.get("mode") == "reduce-overhead")
    assert ("set_stance(STANCE)" in text) == ("stance" in options)
    assert ("Welch" in text) == (options.get("schedule") == "sequential")


def test_the_script_reads_the_steps_as_the_app_does():
    """Its interval and warm-up rule against the engine's on the same step times: the same median
    ratio, the same block interval, paired and not."""
    namespace: dict = {"__name__": "race"}
    exec(compile(script_text({**TINY, "schedule": "blocks"}), "race.py", "exec"), namespace)
    apart: dict = {"__name__": "race"}
    exec(compile(script_text({**TINY, "schedule": "sequential"}), "race.py", "exec"), apart)
    rng = random.Random(3)
    for n in (8, 20, 61, 200):
        eager = [0.02 * math.exp(rng.gauss(0, 0.1)) for _ in range(n)]
        compiled = [0.5] + [0.016 * math.exp(rng.gauss(0, 0.1)) for _ in range(n - 1)]
        w = default_warmup(n)
        assert namespace["default_warmup"](n) == w
        for ns, paired in ((namespace, True), (apart, False)):
            app = steady_state_speedup(eager, compiled, warmup=w, paired=paired)
            e, c = eager[w:], compiled[w:]
            point = sorted(e)[len(e) // 2] if len(e) % 2 else None
            mine = ns["interval"](e, c, app.speedup)
            assert mine == pytest.approx(app.within, rel=2e-3), (n, paired)
            assert point is None or point == pytest.approx(app.eager_median_s)
    for df in (1, 2, 3, 4, 7.5, 30):
        assert namespace["t975"](df) == pytest.approx(intervals.t_quantile(0.975, df), rel=2e-3)


def test_the_script_runs_alone_from_a_folder_without_compile_lab(tmp_path):
    """Under the race's process conditions too: its malloc thresholds (it starts itself again with
    them) and its cores."""
    path = tmp_path / "race_7.py"
    core = min(os.sched_getaffinity(0))
    machine = {**MACHINE, "torch_threads": 1, "conditions": {"cores": [core], "malloc": STEADY}}
    path.write_text(script_text(TINY, machine, RESULT, "race 7", "a test"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "COMPILE_LAB"))}
    done = subprocess.run(
        [sys.executable, "-I", str(path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "pointwise_mlp, batch 8, fp32, backend aot_eager, mode default, blocks schedule"
    assert lines[1].startswith("compile time: ") and "(compiled's first 2 steps less eager's)" in lines[1]
    assert lines[2].startswith("steady speedup: ") and "x (95% interval " in lines[2] and "18 steady steps" in lines[2]
    assert lines[2].rsplit(": ", 1)[1] in ("faster", "slower", "no clear difference")
    assert lines[3].startswith("steady step: eager ") and ", compiled " in lines[3]
    assert lines[4].startswith("versions: torch ") and ", Python " in lines[4]
    assert lines[5].startswith("device: cpu: ") and lines[5].endswith(", 1 torch threads)")


@pytest.mark.slow
def test_the_script_races_a_real_inductor_compile(tmp_path):
    path = tmp_path / "race.py"
    path.write_text(script_text({**TINY, "backend": "inductor", "steps_per_epoch": 15}))
    done = subprocess.run([sys.executable, "-I", str(path)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    compile_line = done.stdout.splitlines()[1]
    assert compile_line.startswith("compile time: ") and " s (compiled's first" in compile_line


# -- hostile settings and text -------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        {"model": HOSTILE},
        {"model": "timm:resnet18:drop_rate=__import__('os')"},
        {"model": "hf:gpt2\nimport os"},
        {"precision": HOSTILE},
        {"backend": "inductor'; import os; '"},
        {"batch_size": "8); import os; (8"},
        {"batch_size": True},
        {"dynamic": 1},
        {"lr": float("nan")},
        {"seed": 1.5},
        {"epochs": [1]},
        {"stance": {"a": 1}},
        {"not_an_option": 1},
    ],
)
def test_a_setting_that_does_not_validate_is_refused(bad):
    with pytest.raises(ScriptError):
        script_text({**TINY, **bad})


def test_free_text_from_a_bundle_lands_in_comments_only():
    hostile_env = {
        **MACHINE,
        "device_name": "CPU\nimport os; os.system('touch pwned')\r\u2028#",
        "platform": HOSTILE,
        "torch": "2.x\x0c__import__('os')",
        "torch_threads": "os.system('x')",
    }
    hostile_summary = {**RESULT, "verdict": "faster\nimport os", "compile_time_s": "__import__('os')"}
    clean = script_text(TINY, MACHINE, RESULT)
    text = script_text(TINY, hostile_env, hostile_summary)
    assert calls(text) == calls(clean)
    assert "pwned" not in code_tokens(text) and "__import__" not in code_tokens(text)
    assert [line for line in text.splitlines() if "pwned" in line or "__import__" in line][0].startswith("# ")
    assert settings_of(text)["THREADS"] is None


def test_only_a_races_own_process_conditions_reach_the_script():
    recorded = {"cores": [1, 0], "malloc": STEADY}
    text = script_text(TINY, {**MACHINE, "conditions": recorded})
    assert settings_of(text)["CORES"] == (0, 1) and settings_of(text)["MALLOC"] == STEADY
    assert "os.execve(" in text and "sched_setaffinity" in text
    hostile = {
        "cores": ["os.system('x')", 1],
        "malloc": {"LD_PRELOAD": "/tmp/evil.so", "MALLOC_ARENA_MAX": "2; rm -rf /", "MALLOC_X": 1},
    }
    text = script_text(TINY, {**MACHINE, "conditions": hostile})
    assert settings_of(text)["CORES"] is None and settings_of(text)["MALLOC"] == {}
    assert "os.execve(" not in text and "sched_setaffinity" not in text
    assert "LD_PRELOAD" not in text and "evil" not in text


def test_a_report_keeps_a_bundles_text_inside_its_blocks():
    error = "boom\n```\n# Injected heading\n````"
    zipped = race_script.report_zip("/nonexistent/store.sqlite3", run_of(TINY, error=error))
    report = zipfile.ZipFile(io.BytesIO(zipped)).read("report.md").decode()
    fence = "`````"  # longer than the longest run of backticks in the error
    assert f"{fence}\nboom\n```\n# Injected heading\n````\n{fence}" in report


# -- the report ----------------------------------------------------------------------------------


def test_the_report_is_laid_out_as_pytorchs_template_asks(tmp_path):
    trace = run_files.compile_trace_dir(str(tmp_path / "s.sqlite3"), 7)
    os.makedirs(trace)
    with open(os.path.join(trace, "dedicated_log_torch_trace_1.log"), "w") as fh:
        fh.write('{"dynamo_start": {}}\n')
    zipped = zipfile.ZipFile(io.BytesIO(race_script.report_zip(str(tmp_path / "s.sqlite3"), run_of(TINY))))
    assert sorted(zipped.namelist()) == ["race_7.py", "report.md", "torch_trace/dedicated_log_torch_trace_1.log"]
    report = zipped.read("report.md").decode()
    headings = [line for line in report.splitlines() if line.startswith("### ")]
    assert headings == ["### 🐛 Describe the bug", "### Error logs", "### Minified repro", "### Versions"]
    assert "steady speedup 1.17x (95% interval 1.10-1.25x); compile 9.5 s" in report
    rungs = ",".join(race_script.ladder_rungs())
    assert rungs.startswith("eager,aot_eager") and rungs.endswith("inductor")
    assert f"python -m core sweep --model pointwise_mlp --batch-size 8 --epochs 2 --steps-per-epoch 10 " \
        f"--device cpu --backends {rungs}" in report  # fmt: skip
    assert zipped.read("race_7.py").decode() in report and "torch: 2.x" in report
    assert "TORCH_TRACE: in torch_trace/" in report
    alone = zipfile.ZipFile(io.BytesIO(race_script.report_zip(str(tmp_path / "s.sqlite3"), run_of(TINY), False)))
    assert "torch_trace/dedicated_log_torch_trace_1.log" not in alone.namelist()
    assert "offered to whoever ran the race" in alone.read("report.md").decode()


def test_a_model_not_written_as_a_script_yet_still_has_its_report():
    run = run_of({**TINY, "model": "hf:gpt2"})
    assert "not written as scripts yet" in race_script.script_problem(run)
    assert race_script.script_problem(run, scriptable=False) is None
    zipped = zipfile.ZipFile(io.BytesIO(race_script.report_zip("/nonexistent/s.sqlite3", run)))
    assert zipped.namelist() == ["report.md"]
    assert "No script: hf models are not written as scripts yet" in zipped.read("report.md").decode()


# -- the command line and the pages --------------------------------------------------------------


def cli(*args):
    return subprocess.run([sys.executable, "-m", "core", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_export_writes_the_script_and_the_report(store, tmp_path):
    run_id = store.create_run("race", quick_spec().to_dict(), "ann", "cpu", status="done")
    store.update_run(run_id, summary=RESULT, environment=MACHINE)
    script, report = tmp_path / "race.py", tmp_path / "report.zip"
    done = cli("export", str(run_id), "--script", str(script), "--report", str(report), "--store", store.path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"run {run_id}: script written to {script}",
        f"run {run_id}: report written to {report}",
    ]
    assert f"(and written as this script by: python -m core export {run_id} --script FILE)" in script.read_text()
    assert "report.md" in zipfile.ZipFile(report).namelist()
    assert json.loads(cli("export", str(run_id), "--store", store.path).stdout)["run"]["status"] == "done"


def test_export_refuses_a_run_whose_settings_do_not_validate(store, tmp_path):
    run_id = store.create_run("race", {**quick_spec().to_dict(), "precision": HOSTILE}, "ann", "cpu", status="done")
    target = tmp_path / "race.py"
    for flag in ("--script", "--report"):
        done = cli("export", str(run_id), flag, str(target), "--store", store.path)
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert done.stderr.startswith(
            f"error: run {run_id} cannot be written as a script: its settings do not validate"
        )
        assert not target.exists()
    assert cli("export", "999", "--script", str(target), "--store", store.path).stderr == "error: there is no run 999\n"


def test_a_finished_race_offers_its_script_and_report_on_both_pages(store, sleepers):
    record_probe(store)
    run_id = record_race(store, "done")
    labels = ["The race as one script (.py)", "Report for a PyTorch issue (zip)"]
    at = app(run=run_id)
    assert not at.exception, at.exception
    assert [b.label for b in at.get("download_button") if b.label in labels] == labels
    at.switch_page("app_pages/runs.py").run()
    at.session_state["runs_table"] = {"selection": {"rows": [0], "columns": [], "cells": []}}
    at.run()
    assert not at.exception, at.exception
    assert [b.label for b in at.get("download_button") if b.label in labels] == labels
    running = record_race(store, "running")
    at = app(run=running)
    assert not [b.label for b in at.get("download_button") if b.label in labels]
