"""The models package: one row per zoo model and per source, every other table derived from them,
and imports that point one way (the floor imports only the rows; a source's module loads only when used)."""

import ast
import importlib
import os
import subprocess
import sys

import pytest
from support import ROOT

from core.engine.explain.params import CACHES_MODELS
from core.engine.models import workload as networks
from core.engine.models.sources import MODELS, REGIONAL_BLOCKS, SOURCES, source_of
from core.engine.race_estimates import UNMEASURED_CPU_COMPILE_S, expected_compile_estimate

PACKAGE = os.path.join(ROOT, "core", "engine", "models")


def imports_of(module: str) -> set[str]:
    """The core.engine.models modules a package module imports, at any depth (function-level too)."""
    with open(os.path.join(PACKAGE, f"{module}.py")) as fh:
        tree = ast.parse(fh.read())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("core.engine.models"):
            names.add(node.module.removeprefix("core.engine.models").lstrip("."))
            if node.module == "core.engine.models":
                names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name.removeprefix("core.engine.models.") for a in node.names if "engine.models." in a.name)
    return names - {""}


def package_modules() -> list[str]:
    return sorted(f[:-3] for f in os.listdir(PACKAGE) if f.endswith(".py") and f != "__init__.py")


@pytest.mark.parametrize("name", list(MODELS))
def test_every_zoo_row_names_a_builder_in_networks(name):
    assert callable(getattr(networks, MODELS[name].builder, None))


def test_the_regional_blocks_and_the_caches_demo_models_are_columns_of_the_rows():
    assert REGIONAL_BLOCKS == {m.name: (m.block, m.block_name) for m in MODELS.values() if m.block}
    assert CACHES_MODELS == tuple(m.name for m in MODELS.values() if m.caches_demo)
    assert set(CACHES_MODELS) <= {m.name for m in MODELS.values() if m.cpu_compile_s is not None}


def test_the_compile_estimate_reads_each_rows_cpu_figure():
    for info in MODELS.values():
        expected = info.cpu_compile_s if info.cpu_compile_s is not None else UNMEASURED_CPU_COMPILE_S
        assert expected_compile_estimate({"model": info.name}, on_gpu=False) == expected


def test_every_source_row_names_a_workload_builder_and_its_prefix():
    for source in SOURCES.values():
        module, function = source.workload.split(":")
        assert callable(getattr(importlib.import_module(module), function))
        assert source_of(f"{source.prefix}x.py" if source.name == "file" else f"{source.prefix}x") == source.name


def test_the_floor_imports_only_the_rows_never_a_library_source():
    # workload.py builds what a race trains from the torch-free rows; timm, transformers and a model
    # file are loaded by name (importlib) only for their own models
    assert imports_of("workload") == {"sources"}


def test_the_package_has_no_import_circle():
    graph = {m: imports_of(m) & set(package_modules()) for m in package_modules()}

    def reaches(start: str, target: str, seen: set[str]) -> bool:
        for nxt in graph[start]:
            if nxt == target or (nxt not in seen and reaches(nxt, target, seen | {nxt})):
                return True
        return False

    assert [m for m in graph if reaches(m, m, set())] == []


def test_the_rows_and_the_sources_import_no_torch_and_a_zoo_race_no_library():
    code = (
        "import sys\n"
        "import core.engine.models, core.engine.models.sources, core.engine.models.sources, core.engine.models.sources\n"
        "import core.engine.words, core.engine.explain.params\n"
        "print(sorted(m for m in ('torch', 'core.engine.models.workload') if m in sys.modules))\n"
        "from core.engine.models.workload import workload_for\n"
        "from core.engine.spec import RunSpec\n"
        "workload_for(RunSpec(model='mlp')).build()\n"
        "print(sorted(m for m in ('timm', 'transformers') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["[]", "[]"]
