"""The documentation, read as a newcomer would: a README short enough to read, links that lead
somewhere, every command and page described, and the map of the code naming every module."""

import ast
import os
import re
import subprocess
import sys

import pytest
from support import ROOT

README = os.path.join(ROOT, "README.md")
DOCS = os.path.join(ROOT, "docs")
MAX_README_LINES = 250
# The README's two commands: CI (.ci/run) runs its test command, so they change only on purpose.
RUN_THE_APP = "pip install -r requirements.txt && streamlit run app.py"
RUN_THE_TESTS = "pip install -r requirements-dev.txt -r requirements-models.txt && python -m pytest"

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def read(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def documents() -> list[str]:
    """README.md and every docs/*.md."""
    return [README] + sorted(os.path.join(DOCS, name) for name in os.listdir(DOCS) if name.endswith(".md"))


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks (a `# comment` in a shell block is not a heading)."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append(line)
    return out


def headings(text: str) -> list[str]:
    return [m.group(2) for line in prose_lines(text) if (m := HEADING.match(line))]


def anchor(heading: str) -> str:
    """The fragment GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for heading in headings(text):
        base = anchor(heading)
        n = seen.get(base, 0)
        out.add(base if n == 0 else f"{base}-{n}")
        seen[base] = n + 1
    return out


def links(text: str) -> list[str]:
    return [target for line in prose_lines(text) for target in LINK.findall(line)]


def cli_commands() -> list[str]:
    """The subcommands `python -m core --help` lists (argparse writes them as {a,b,...})."""
    done = subprocess.run(
        [sys.executable, "-m", "core", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    found = re.search(r"\{([\w,-]+)\}", done.stdout)
    assert found, f"no subcommand list in `python -m core --help`:\n{done.stdout}"
    return found.group(1).split(",")


def page_titles() -> list[str]:
    """The title of every st.Page the app's navigation builds (streamlit_app.py)."""
    tree = ast.parse(read(os.path.join(ROOT, "streamlit_app.py")))
    titles = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "Page":
            for keyword in node.keywords:
                if keyword.arg == "title" and isinstance(keyword.value, ast.Constant):
                    titles.append(keyword.value.value)
    return titles


def test_readme_is_at_most_250_lines():
    lines = read(README).count("\n")
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines: move detail to docs/"


def test_readme_keeps_its_two_commands_word_for_word():
    text = read(README)
    assert RUN_THE_APP in text
    assert RUN_THE_TESTS in text


def test_readme_shows_one_screenshot_that_exists():
    images = re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", read(README))
    assert len(images) == 1, images
    assert os.path.isfile(os.path.join(ROOT, images[0]))


@pytest.mark.parametrize("document", documents(), ids=lambda p: os.path.relpath(p, ROOT))
def test_every_relative_link_leads_to_a_file_and_heading_that_exist(document):
    broken = []
    for target in links(read(document)):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...: not checked here
            continue
        path, _, fragment = target.partition("#")
        resolved = os.path.normpath(os.path.join(os.path.dirname(document), path)) if path else document
        if not os.path.exists(resolved):
            broken.append(f"{target}: no such file")
        elif fragment and resolved.endswith(".md") and fragment not in anchors(read(resolved)):
            broken.append(f"{target}: no such heading in {os.path.relpath(resolved, ROOT)}")
    assert not broken, broken


def test_the_readme_maps_every_document_in_docs():
    text = read(README)
    missing = [p for p in documents()[1:] if f"docs/{os.path.basename(p)}" not in text]
    assert not missing, f"README's documentation map lacks {missing}"


def test_every_cli_command_is_described_in_cli_md_and_named_in_the_readme():
    commands = cli_commands()
    assert len(commands) >= 10, commands  # the list was parsed, not an accident of the help's layout
    described = {
        word for heading in headings(read(os.path.join(DOCS, "cli.md"))) for word in re.findall(r"[\w-]+", heading)
    }
    readme = read(README)
    assert not [c for c in commands if c not in described], "docs/cli.md needs a heading naming each"
    assert not [c for c in commands if f"`{c}`" not in readme], "the README's command table needs each"


def test_every_page_in_the_navigation_is_described_in_app_md_and_the_readme():
    titles = page_titles()
    assert {"Race", "Sweep", "Runs", "Under the hood"} <= set(titles), titles
    app = set(headings(read(os.path.join(DOCS, "app.md"))))
    readme = read(README)
    assert not [t for t in titles if t not in app], "docs/app.md needs a heading per page"
    assert not [t for t in titles if f"**{t}**" not in readme], "the README's page table needs each"


def test_the_map_of_the_code_names_every_module():
    """docs/architecture.md is the one map of the code: a module added, moved or renamed is named there."""
    text = read(os.path.join(DOCS, "architecture.md"))
    unnamed = []
    for top in ("core", "app_pages"):
        for folder, _, files in os.walk(os.path.join(ROOT, top)):
            for name in files:
                if (
                    name.endswith((".py", ".js"))
                    and name != "__init__.py"
                    and not re.search(rf"\b{re.escape(name)}\b", text)
                ):
                    unnamed.append(os.path.relpath(os.path.join(folder, name), ROOT))
    assert not unnamed, f"docs/architecture.md's map of the code does not name {sorted(unnamed)}"


# A measurement belongs in docs/benchmarks.md with its hardware and date, beside the bench that made
# it; the code and the UI say what holds on the visitor's own machine.
DATED = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
BENCH_CITATION = re.compile(r"\bbench/")


def product_sources() -> list[str]:
    """Every Python and JavaScript file of the product: core/, app_pages/ and the two entry points."""
    paths = [os.path.join(ROOT, "app.py"), os.path.join(ROOT, "streamlit_app.py")]
    for top in ("core", "app_pages"):
        for folder, _, files in os.walk(os.path.join(ROOT, top)):
            paths += [os.path.join(folder, name) for name in files if name.endswith((".py", ".js"))]
    return sorted(paths)


def diary_entries(text: str) -> list[str]:
    """The lines of `text` that carry a dated figure or cite a bench script."""
    return [line.strip() for line in text.splitlines() if DATED.search(line) or BENCH_CITATION.search(line)]


def test_diary_entries_finds_dates_and_bench_citations_and_nothing_else():
    planted = (
        "x = 1  # measured on this box (bench/viewers.py)\n"
        "HELP = 'compiled in 17-23 s (2026-12-02)'\n"
        'when = time.strftime("%Y-%m-%d")  # a format, not a date\n'
        'ENTRY_PACKAGES = ("core.", "bench.")\n'
    )
    assert diary_entries(planted) == [
        "x = 1  # measured on this box (bench/viewers.py)",
        "HELP = 'compiled in 17-23 s (2026-12-02)'",
    ]


def test_no_dated_figure_or_bench_citation_in_code_or_ui_text():
    """A date or a bench citation in core/ or app_pages/ is a measurement diary: it tells every host's
    visitors what one box measured one day. It goes to docs/benchmarks.md instead."""
    sources = product_sources()
    assert len(sources) > 100, "the product's sources were not found"
    found = {os.path.relpath(path, ROOT): entries for path in sources if (entries := diary_entries(read(path)))}
    assert not found, f"dated figures or bench citations in the product (move them to docs/benchmarks.md): {found}"


# A dotted name of the code in the docs or a docstring (core.runs.queue, core.runs.queue.tick,
# core.runs.processes:warm_main) names a module that exists and, after it, something it defines.
CODE_NAME = re.compile(r"\bcore(?:\.[A-Za-z_]\w*)+(?::\w+)?")


def module_file(module: str) -> str | None:
    path = os.path.join(ROOT, *module.split("."))
    for candidate in (path + ".py", os.path.join(path, "__init__.py")):
        if os.path.isfile(candidate):
            return candidate
    return None


def defined_names(path: str, cache: dict[str, set[str]]) -> set[str]:
    """What a module defines at any depth (functions, classes, assigned names) or imports."""
    if path not in cache:
        found = set()
        for node in ast.walk(ast.parse(read(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.add(node.name)
            elif isinstance(node, ast.Assign):
                found |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                found.add(node.target.id)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                found |= {(a.asname or a.name).split(".")[0] for a in node.names}
        cache[path] = found
    return cache[path]


def missing_code_names(text: str, cache: dict[str, set[str]]) -> list[str]:
    """The dotted names in `text` whose module does not exist, or that name nothing it defines."""
    missing = []
    for match in CODE_NAME.finditer(text):
        name, _, entry = match.group(0).rstrip(".").partition(":")
        parts = name.split(".")
        for k in range(len(parts), 0, -1):
            if (path := module_file(".".join(parts[:k]))) is not None:
                break
        else:
            missing.append(match.group(0))
            continue
        rest = parts[k:] + ([entry] if entry else [])
        if rest and rest[0] != "py" and rest[0] not in defined_names(path, cache):
            missing.append(match.group(0))
    return missing


def test_missing_code_names_finds_a_module_or_entry_that_does_not_exist():
    text = "core.runs.queue.tick, core.runs.queue, core.engine.trainer:main, core.engine.nowhere, core.runs.queue:nope"
    assert missing_code_names(text, {}) == ["core.engine.trainer:main", "core.engine.nowhere", "core.runs.queue:nope"]


def test_every_dotted_name_of_the_code_in_docs_and_sources_exists():
    """A usage example or a pointer that names a module or function which is not there misleads
    whoever follows it."""
    sources = (
        documents()
        + product_sources()
        + sorted(
            os.path.join(ROOT, "bench", name)
            for name in os.listdir(os.path.join(ROOT, "bench"))
            if name.endswith(".py")
        )
    )
    cache: dict[str, set[str]] = {}
    missing = {os.path.relpath(p, ROOT): m for p in sources if (m := missing_code_names(read(p), cache))}
    assert not missing, f"names of code that does not exist: {missing}"
