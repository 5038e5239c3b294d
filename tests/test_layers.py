"""The tree's architecture, checked: imports point one way (view -> runs -> engine), and the app's
process (every page, every view module, what they reach) never imports torch."""

import ast
import os
import pkgutil
import re
import subprocess
import sys

import pytest
from support import ROOT

import core

LAYERS = ("engine", "runs", "view")
# The command line sits above the three layers: it may import any of them, and none of them imports it.
ENTRIES = (*LAYERS, "cli")
FORBIDDEN = {
    "engine": ("core.runs", "core.view", "core.cli"),
    "runs": ("core.view", "core.cli"),
    "view": ("core.cli",),
    "cli": (),
}
# The engine and the runs layer run on a bare GPU box (workers, `python -m core doctor`) that has only torch;
# the CLI runs there too (`race`, `doctor`), with pandas at most.
NO_UI_LIBRARIES = {
    "engine": ("streamlit", "altair", "pandas"),
    "runs": ("streamlit", "altair", "pandas"),
    "view": ("streamlit",),
    "cli": ("streamlit", "altair"),
}


def modules_of(layer: str) -> list[str]:
    package = os.path.join(ROOT, "core", layer)
    names = [f"core.{layer}"]
    for info in pkgutil.walk_packages([package], prefix=f"core.{layer}."):
        names.append(info.name)
    return names


def source_path(module: str) -> str:
    path = os.path.join(ROOT, *module.split("."))
    return os.path.join(path, "__init__.py") if os.path.isdir(path) else path + ".py"


def imported_names(path: str) -> set[str]:
    """Every module an import statement in the file names, at any depth (function-level too)."""
    with open(path) as fh:
        tree = ast.parse(fh.read())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_core_lists_its_three_layers_the_cli_and_nothing_flat():
    entries = sorted(e for e in os.listdir(os.path.join(ROOT, "core")) if not e.startswith("__pycache__"))
    assert entries == ["__init__.py", "__main__.py", *sorted(ENTRIES)]
    for layer in ENTRIES:
        doc = __import__(f"core.{layer}", fromlist=["_"]).__doc__ or ""
        assert "never import" in doc.lower(), f"core.{layer} must say what it may never import"


@pytest.mark.parametrize("layer", ENTRIES)
def test_imports_only_point_down(layer):
    offenders = []
    for module in modules_of(layer):
        for name in imported_names(source_path(module)):
            banned = FORBIDDEN[layer] + NO_UI_LIBRARIES[layer]
            if any(name == b or name.startswith(b + ".") for b in banned):
                offenders.append(f"{module} imports {name}")
    assert offenders == []


# Runs in a fresh interpreter: the pages through AppTest (a stored probe, a finished race and a demo
# request, as a visitor would see them), then every view module and the torch-free parts of the
# other layers; prints the torch modules that got imported (none, if the rule holds).
_APP_PROCESS = r"""
import os, pkgutil, sys, time
sys.path.insert(0, ROOT)
from streamlit.testing.v1 import AppTest
from core.engine import analysis
from core.engine.spec import DeviceCaps, RunSpec
from core.runs import fleet as devices, processes
from core.runs.store import Store

processes.launch_worker = lambda store_path, run_id, key: os.getpid()  # nothing runs: only what the app imports counts
store = Store(os.environ["COMPILE_LAB_STORE"])
env = {"device_type": "cpu", "device_name": "CPU", "cpu_name": "CPU", "cpu_count": 2, "torch": "2.x"}
probe = store.create_run("probe", {}, "system", "probe", status="done", host=devices.HOST)
store.update_run(probe, summary={"caps": DeviceCaps().to_dict(), "environment": env}, environment=env)
spec = RunSpec(model="mlp", batch_size=8, epochs=1, steps_per_epoch=4, device="cpu")
race = store.create_run("race", spec.to_dict(), "someone", "cpu", status="running", started_at=time.time())
times = {"eager": [0.02] * 4, "compiled": [0.5, 0.01, 0.01, 0.01]}
rows = [dict(kind="step", variant=v, phase="train", epoch=1, step=i + 1, time_s=t, loss=1.0, samples=8)
        for v, ts in times.items() for i, t in enumerate(ts)]
rows += [dict(kind="epoch", variant=v, phase="train", epoch=1, step=0, time_s=sum(ts)) for v, ts in times.items()]
store.append_events(race, rows)
summary = analysis.summarize(times["eager"], times["compiled"], [0.08], [0.53], 8)
store.finish_run(race, "done", summary=summary)

at = AppTest.from_file(os.path.join(ROOT, "streamlit_app.py"), default_timeout=60)
at.query_params["run"] = str(race)
at.run()
assert not at.exception, at.exception
for source in ("timm", "hf"):  # the model selector: lookups are queued, never run here
    at.radio(key="pick_source").set_value(source).run()
    assert not at.exception, at.exception
assert store.list_runs(kind="lookup"), "choosing a library model queued a lookup"
for page in ("app_pages/sweep.py", "app_pages/runs.py", "app_pages/under_the_hood.py"):
    at.switch_page(page).run()
    assert not at.exception, at.exception
measure = [b for b in at.button if b.label.startswith("Measure")]
assert measure, "the explainer offers to measure"
measure[0].click().run()
assert not at.exception, at.exception
assert store.list_runs(kind="demo"), "the click queued a demo job"

for layer_module in ("core.view",):
    for info in pkgutil.walk_packages([os.path.join(ROOT, *layer_module.split("."))], prefix=layer_module + "."):
        __import__(info.name)
import core.engine.explain, core.engine.explain.params, core.engine.spec, core.engine.models.sources, core.engine.analysis
import core.engine.words, core.engine.models.sources, core.engine.models.sources, core.engine.compile_stats
import core.runs.bundle, core.runs.queue, core.runs.job_kinds, core.runs.fleet, core.runs.processes, core.runs.job_kinds, core.runs.limits, core.runs.store, core.runs.sweeps, core.runs.model_catalog
import core.runs.admin, core.runs.limits, core.runs.device_history
print(sorted(m for m in sys.modules if m == "torch" or m.startswith("torch.")))
"""


def test_the_app_process_never_imports_torch(tmp_path):
    env = {**os.environ, "COMPILE_LAB_DATA": str(tmp_path), "COMPILE_LAB_STORE": str(tmp_path / "store.sqlite3")}
    done = subprocess.run(
        [sys.executable, "-c", f"ROOT = {ROOT!r}\n" + _APP_PROCESS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_the_demo_registries_name_what_the_demo_modules_define():
    """The torch-free parameter lists must match the modules that run the demos."""
    from core.engine.explain import codegen, fusion, graphs, params

    assert tuple(fusion.OP_SETS) == params.FUSION_OP_SET_NAMES
    assert tuple(graphs.EXAMPLES) == params.GRAPH_EXAMPLES
    assert tuple(codegen.FUNCTIONS) == params.CODEGEN_FUNCTIONS


def test_core_package_root_is_the_project_root():
    assert os.path.samefile(core.PROJECT_ROOT, ROOT)


def test_every_demo_module_offers_defaults_validate_and_run():
    from core.engine.explain import DEMOS, demo_module, params

    for name in DEMOS:
        module = demo_module(name)
        assert module.DEFAULTS == params.DEFAULTS[name]
        assert module.validate is params.VALIDATORS[name] and callable(module.run)


# The house's shape, kept: no two modules of the app import each other (at any depth, function-level
# imports included: an import inside a function hides a circle, it does not remove it), and no file
# grows past what one concept holds. Files are cut by concept, not by length (a cap of 500 made
# splits by length: a module made only so another stays under it), so the cap is the house style's.
MAX_LINES = 1000
CHECKED_TREES = ("core", "app_pages")


def python_files_of(tree: str) -> list[str]:
    out = []
    for folder, dirs, files in os.walk(os.path.join(ROOT, tree)):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        out += [os.path.join(folder, f) for f in files if f.endswith(".py")]
    return sorted(out)


def module_name(path: str) -> str:
    name = os.path.relpath(path, ROOT)[: -len(".py")].replace(os.sep, ".")
    return name.removesuffix(".__init__")


def import_graph() -> dict[str, set[str]]:
    """module -> the modules of this tree it imports (a `from package import name` counts the
    submodule when `name` is one)."""
    paths = {module_name(p): p for tree in CHECKED_TREES for p in python_files_of(tree)}
    return {
        module: {name for name in imported_names(path) if name in paths and name != module}
        for module, path in paths.items()
    }


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    circles.append(sorted(group))
    return circles


def test_nothing_the_command_line_reaches_imports_a_ui_library():
    """The CLI's own files import no UI library (above), and neither may any module they reach, at any
    depth: the module cut once put the Runs page's altair overlays into core.view.compare, and
    `python -m core race` then failed on a box without altair (through report -> answers ->
    race_form -> compare)."""
    graph = import_graph()
    reached, todo = set(), [m for m in graph if m.startswith("core.cli")]
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo.extend(graph[module])
    offenders = sorted(
        f"{module} imports {name}"
        for module in reached
        for name in imported_names(source_path(module))
        if any(name == b or name.startswith(b + ".") for b in NO_UI_LIBRARIES["cli"])
    )
    assert "core.view.report" in reached and offenders == []


def test_the_circle_finder_finds_a_circle_and_only_circles():
    assert import_circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_circles({"a": {"b"}, "b": set(), "c": {"b"}}) == []


def test_no_import_circle_in_the_app():
    assert import_circles(import_graph()) == []


def test_no_file_of_the_app_passes_the_line_cap():
    long = {}
    for tree in CHECKED_TREES:
        for path in python_files_of(tree):
            with open(path) as fh:
                lines = sum(1 for _ in fh)
            if lines > MAX_LINES:
                long[os.path.relpath(path, ROOT)] = lines
    assert long == {}


# SQL lives in the store (core/runs/store/): the one place that knows the schema and both backends'
# dialects. Elsewhere code calls a named function of the store, never a statement of its own.
STORE_PACKAGE = os.path.join("core", "runs", "store")
SQL_STATEMENT = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|ALTER|PRAGMA|WITH)\b")
SQL_WORD = re.compile(r"\b(FROM|INTO|SET|TABLE|INDEX|WHERE)\b")


def sql_statements(source: str) -> list[tuple[int, str]]:
    """(line, text) of each string in `source` that reads as an SQL statement: it starts with a
    statement's verb and names a clause after it, in capitals as this project writes SQL (plain
    strings and f-strings alike; prose such as "Select a model from the list" stays out)."""
    tree = ast.parse(source)
    parts = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
    found = []
    for node in ast.walk(tree):
        if id(node) in parts:
            continue
        if isinstance(node, ast.JoinedStr):
            text = "".join(part.value if isinstance(part, ast.Constant) else "{}" for part in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        verb = SQL_STATEMENT.match(text)
        if verb and SQL_WORD.search(text, verb.end()):
            found.append((node.lineno, " ".join(text.split())[:80]))
    return found


def test_sql_statements_finds_statements_and_not_prose():
    planted = (
        'rows = c.execute("SELECT id FROM runs WHERE status = ?", ("done",))\n'
        'c.execute(f"DELETE FROM events WHERE run_id IN ({holes})", chunk)\n'
        'c.execute(\n    "UPDATE runs SET pid = ? "\n    "WHERE id = ?", (1, 2)\n)\n'
        'HELP = "Select a model from the list."\n'
        'LABEL = "Update the page where the race is shown"\n'
    )
    assert [line for line, _ in sql_statements(planted)] == [1, 2, 4]


def test_no_sql_statement_outside_the_store():
    checked, outside = 0, []
    for tree in CHECKED_TREES:
        for path in python_files_of(tree):
            if os.path.relpath(path, ROOT).startswith(STORE_PACKAGE + os.sep):
                continue
            checked += 1
            with open(path, encoding="utf-8") as fh:
                outside += [f"{os.path.relpath(path, ROOT)}:{line}: {text}" for line, text in sql_statements(fh.read())]
    assert checked > 100, "the app's sources were not found"
    assert not outside, "SQL outside core/runs/store/ (make it a named function of the store):\n" + "\n".join(outside)
