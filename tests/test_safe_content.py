"""Text from users and bundles reaches a page as text and a terminal as inert characters; owner
tokens are never printed whole."""

import os
import re
import subprocess
import sys

import pytest
from support import ROOT
from test_pages import app, record_probe, record_race

from core.runs.bundle import export_bundle, import_bundle
from core.runs.store import Store
from core.view.safe_text import WORD_JOINER, markdown_text, terminal_text


@pytest.fixture
def store(tmp_path, monkeypatch):
    """The store the app under test opens."""
    path = str(tmp_path / "store.sqlite3")
    monkeypatch.setenv("COMPILE_LAB_STORE", path)
    return Store(path)


HOSTILE = "![x](http://host/pixel.png) [click me](http://host/phish)"
# Markdown that would link or load something: an image or link opener not escaped by a backslash.
LIVE_MARKDOWN = re.compile(r"(?<!\\)(!\[|\]\(|<http|(?<!\\)www\.|https?(?<!\\):)")


# What GFM turns into a link even in escaped text (it matches the finished text, not the source).
AUTOLINK = re.compile(r"https?://|www\.|[\w.+-]@[\w-]", re.IGNORECASE)


def unescape(text: str) -> str:
    """The text a reader sees (the word joiners are invisible)."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", text)


PUNCTUATION = r"!-/:-@\[-`{-~"
ONLY_ESCAPED_PUNCTUATION = re.compile(rf"(?:\\[{PUNCTUATION}]|[^{PUNCTUATION}])*")


@pytest.mark.parametrize(
    "raw",
    [
        HOSTILE,
        "<img src=x onerror=alert(1)>",
        ":red[alarm] :material/warning: $x^2$ **bold** _it_ `code` ~~gone~~",
        "[ref]: http://host/phish\n\n# heading\n- item\n> quote | a | b |",
        "see www.example.com or mail me@example.com",
        "a\\b",
    ],
)
def test_markdown_text_escapes_everything_markdown_would_act_on(raw):
    safe = markdown_text(raw)
    seen = unescape(safe)
    assert seen.replace(WORD_JOINER, "") == re.sub(r"[\r\n\t]+", " ", raw)  # the same characters as themselves
    assert ONLY_ESCAPED_PUNCTUATION.fullmatch(safe)  # CommonMark: an escaped punctuation mark is literal
    assert not LIVE_MARKDOWN.search(safe)
    assert not AUTOLINK.search(seen)  # no bare URL or address left for GFM to link


def test_markdown_text_drops_control_characters_and_line_breaks():
    assert markdown_text("a\x1b[2Jb\r\nc\u202ed") == "a\\[2Jb cd"
    assert markdown_text("see http://x") == f"see http\\:{WORD_JOINER}\\/\\/x"


def test_terminal_text_removes_escape_sequences_and_bidi_overrides():
    raw = "cpu\x1b[2J\x1b]0;pwned\x07\u202eevil\x9b31m\tok\nnext"
    assert terminal_text(raw) == "cpu[2J]0;pwnedevil31m ok next"
    assert terminal_text(raw, one_line=False) == "cpu[2J]0;pwnedevil31m    ok\nnext"


# Every Unicode control that reorders how text reads: the embeddings and overrides (U+202A-202E)
# and the isolates (U+2066-2069), which "Trojan Source" code uses just the same.
BIDI_CONTROLS = [chr(c) for c in range(0x202A, 0x202F)] + [chr(c) for c in range(0x2066, 0x206A)]


@pytest.mark.parametrize("control", BIDI_CONTROLS, ids=lambda c: f"U+{ord(c):04X}")
def test_every_bidirectional_control_is_dropped_for_a_page_and_a_terminal(control):
    raw = f"cuda{control}0 evil{control}"
    assert markdown_text(raw) == terminal_text(raw) == terminal_text(raw, one_line=False) == "cuda0 evil"


def hostile_bundle_run(store, tmp_path, **environment):
    """A failed race whose error (and environment) carry markdown, imported from a bundle."""
    original = record_race(store, "failed", error=HOSTILE)
    bundle = export_bundle(store, original)
    store.delete_run(original)
    bundle["run"]["environment"] = {"device_type": "cpu", "device_name": HOSTILE, "torch": "2.x", **environment}
    bundle["run"]["summary"]["memory_kind"] = "[click me](http://host/phish)"
    bundle["run"]["summary"]["eager_peak_memory_bytes"] = 2**20
    return import_bundle(store, bundle, "someone")


def test_a_bundle_error_with_markdown_is_shown_as_text_on_the_race_page(store, sleepers, tmp_path):
    record_probe(store)
    run_id = hostile_bundle_run(store, tmp_path)
    at = app(run=run_id)
    assert not at.exception
    failed = [e.value for e in at.error if e.value.startswith("Run failed")]
    assert failed == [f"Run failed: {markdown_text(HOSTILE)}. What was measured before it is kept below."]
    progress = at.get("progress")[0].proto.text
    assert progress == f"Run {run_id}: {markdown_text('failed: ' + HOSTILE)}"
    memory_help = [m.help for m in at.metric if m.label.startswith("Peak memory")][0]
    assert markdown_text("[click me](http://host/phish)") in memory_help
    for text in (*failed, progress, memory_help):
        assert not LIVE_MARKDOWN.search(text), text


def test_the_runs_page_shows_a_hostile_bundles_state_as_text(store, sleepers, tmp_path):
    record_probe(store)
    run_id = hostile_bundle_run(store, tmp_path)
    at = app()
    at.switch_page("app_pages/runs.py").run()
    at.session_state["runs_table"] = {"selection": {"rows": [0], "columns": [], "cells": []}}
    at.run()
    assert not at.exception
    heading = [h.value for h in at.subheader if h.value.startswith(f"Run {run_id}: ")][0]
    assert not LIVE_MARKDOWN.search(heading) and "phish" in heading


def cli(*args, store_path):
    return subprocess.run(
        [sys.executable, "-m", "core", *args, "--store", store_path],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COMPILE_LAB_STORE": store_path},
    )


def test_control_characters_from_a_bundle_are_stripped_in_the_cli(store, tmp_path):
    run_id = hostile_bundle_run(store, tmp_path, device_type="cpu\x1b[2J\x1b]0;pwned\x07", device_name="x\x1b[31mred")
    store.update_run(run_id, error="boom\x1b[2J\nsecond line")
    listed = cli("runs", store_path=store.path)
    assert listed.returncode == 0, listed.stderr
    assert "\x1b" not in listed.stdout and "\x07" not in listed.stdout
    assert "cpu[2J]0;pwned" in listed.stdout  # shown, inert
    status = cli("status", str(run_id), store_path=store.path)
    assert status.returncode == 0 and "\x1b" not in status.stdout and "boom[2J" in status.stdout


def test_status_never_prints_a_whole_owner_token(store, sleepers):
    token = "0123456789abcdef0123456789abcdef"
    run_id = store.create_run("race", {"model": "mlp"}, f"visitor:{token}", "cpu", status="queued")
    store.create_run("race", {"model": "mlp"}, "cli:ann", "cpu", status="queued")
    for args in (("status",), ("status", str(run_id))):
        done = cli(*args, store_path=store.path)
        assert done.returncode == 0, done.stderr
        assert token not in done.stdout and token[:9] not in done.stdout
        assert "visitor:012345…" in done.stdout
    assert "cli:ann" in cli("status", store_path=store.path).stdout  # a command-line user's name is no secret


def test_a_compile_failure_reason_from_a_bundle_is_text_in_the_reading_and_the_cards(store, sleepers, tmp_path):
    record_probe(store)
    original = record_race(store, "done")
    bundle = export_bundle(store, original)
    store.delete_run(original)
    bundle["run"]["summary"]["compile_failed"] = HOSTILE
    run_id = import_bundle(store, bundle, "someone")
    at = app(run=run_id)
    assert not at.exception
    readings = [m.value for m in at.markdown if "Compile failed on this model" in m.value]
    helps = [m.help for m in at.metric if "Compile failed on this model" in (m.help or "")]
    assert readings and helps
    for text in (*readings, *helps):
        assert not LIVE_MARKDOWN.search(text), text


ESCAPES = "\x1b[2J\x1b]0;pwned\x07\u202e"


def test_a_replays_banner_shows_an_imported_runs_device_name_as_text(store, sleepers):
    record_probe(store)
    original = record_race(store, "done")
    bundle = export_bundle(store, original)
    store.delete_run(original)
    bundle["run"]["environment"] = {"device_type": "cpu", "device_name": HOSTILE, "torch": "2.x"}
    run_id = import_bundle(store, bundle, "someone")
    at = app(replay=f"run:{run_id}", speed="instant")
    assert not at.exception, at.exception
    [banner] = [i.value for i in at.info if i.value.startswith("Replay at instant of a race")]
    assert "recorded on" in banner and "click me" in banner  # the name is there ...
    assert not LIVE_MARKDOWN.search(banner), banner  # ... as text: no image fetched, no link


def test_race_progress_lines_print_a_models_text_and_obey_none_of_it():
    """ProgressPrinter's notes and errors carry a model's (or a model file's) own text."""
    import io

    from core.cli.races import ProgressPrinter
    from core.engine.events import CompileEvent, StartEvent, StatusEvent

    out = io.StringIO()
    printer = ProgressPrinter(out)
    printer(StartEvent({"device_type": "cpu", "device_name": f"cpu{ESCAPES}", "torch": "2.x"}))
    printer(StatusEvent("compiled", "compile_failed", 1, 1, message=f"boom{ESCAPES}"))
    printer(StatusEvent("eager", "failed", 1, 1, message=f"build_model() raised{ESCAPES}"))
    printer(CompileEvent("compiled", "train", 1, 2, note=f"recompile: {ESCAPES}"))
    text = out.getvalue()
    assert "compile failed on this model: boom[2J]0;pwned" in text and "build_model() raised" in text
    assert not any(c in text for c in "\x1b\x07\u202e")


def test_models_describe_prints_a_models_error_without_its_control_characters(monkeypatch, capsys):
    import argparse

    from core.cli import common, models
    from core.engine.models import workload as resolve
    from core.engine.models.workload import ModelError

    def broken(spec):
        raise ModelError(f"build_model() raised: {ESCAPES}gone")

    monkeypatch.setattr(resolve, "describe_model", broken)
    status = models.models_lookup(argparse.Namespace(describe="mlp", search=None, json=False))
    err = capsys.readouterr().err
    assert status == common.EXIT_FAILED and "error: build_model() raised: [2J]0;pwnedgone" in err
    assert not any(c in err for c in "\x1b\x07\u202e")
