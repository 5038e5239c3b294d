"""The Race page's model selector (AppTest, no browser): timm names to search, a text box for
Hugging Face, parameters and input shown before launch, uploads offered only where the host allows
them, host patterns narrowing the sources, a missing library explained. Lookups are stored as a
worker stores them (test_model_catalog runs the real workers)."""

import time

from support import require_model_libraries
from test_pages import app, record_probe, texts

from core.engine.models import sources as model_sources
from core.runs import fleet
from core.runs.job_kinds import list_params, model_params
from core.view import race_form
from core.view.safe_text import markdown_text

TIMM_NAMES = ["convnext_small", "resnet18", "efficientnet_b0"]
CONVNEXT = {
    "model": "timm:convnext_small",
    "params": 50_223_688,
    "input": "images 3x224x224 (the model's default)",
    "task": "image-classification",
    "summary": "50.22 M parameters; images 3x224x224 (the model's default); image classification",
}


def stored_lookup(store, params, summary):
    run_id = store.create_run("lookup", params, "system", "lookup", status="running", host=fleet.HOST)
    store.finish_run(run_id, "done", summary=summary, finished_at=time.time())


def choose_source(at, source):
    return at.radio(key="pick_source").set_value(source).run()


def test_timm_names_are_searchable_and_facts_show_before_launch(store, sleepers):
    require_model_libraries()
    record_probe(store)
    stored_lookup(store, list_params("timm"), {"names": TIMM_NAMES})
    stored_lookup(store, model_params("timm:convnext_small"), {"facts": CONVNEXT})
    at = choose_source(app(), "timm")
    picker = at.selectbox(key="pick_timm")
    assert picker.options == [f"timm:{n}" for n in TIMM_NAMES]
    assert at.number_input(key="form_batch_size").value == 32  # a library model's default batch
    at = picker.set_value("timm:convnext_small").run()
    assert not at.exception
    assert markdown_text(CONVNEXT["summary"]) in texts(at)
    at.number_input(key="form_steps_per_epoch").set_value(3).run()
    at.button(key="launch").click().run()
    (race,) = store.list_runs(kind="race")
    assert race.params["model"] == "timm:convnext_small" and race.params["batch_size"] == 32
    assert at.query_params["model"] == "timm:convnext_small"  # the link carries it


def test_a_hugging_face_name_is_typed_and_looked_up_without_blocking_launch(store, sleepers):
    require_model_libraries()
    record_probe(store)
    at = choose_source(app(), "hf")
    assert at.text_input(key="pick_hf").value == "gpt2"
    at = at.text_input(key="pick_hf").set_value("bert-base-uncased").run()
    assert "Finding its parameters and input" in texts(at)
    (lookup,) = [r for r in store.list_runs(kind="lookup") if r.params["model"] == "hf:bert-base-uncased"]
    assert lookup.device_key == "lookup"
    at.number_input(key="form_steps_per_epoch").set_value(3).run()
    assert not at.button(key="launch").disabled
    at.button(key="launch").click().run()
    assert [r.params["model"] for r in store.list_runs(kind="race")] == ["hf:bert-base-uncased"]


def test_a_bad_hugging_face_name_or_failed_lookup_blocks_launch_with_the_reason(store, sleepers):
    require_model_libraries()
    record_probe(store)
    at = choose_source(app(), "hf")
    at = at.text_input(key="pick_hf").set_value("../../etc").run()
    assert "is not a hf model name" in texts(at) and at.button(key="launch").disabled
    failed = store.create_run(
        "lookup", model_params("hf:someone/secret"), "system", "lookup", status="running", host=fleet.HOST
    )
    store.finish_run(
        failed,
        "failed",
        error="the configuration of hf:someone/secret is not on this machine",
        summary={"model_error": True},
    )
    at = at.text_input(key="pick_hf").set_value("someone/secret").run()
    shown = markdown_text("the configuration of hf:someone/secret is not on this machine")
    assert shown in texts(at) and at.button(key="launch").disabled


def test_uploads_are_offered_only_where_the_host_allows_them(store, sleepers, monkeypatch):
    record_probe(store)
    at = app()
    assert at.radio(key="pick_source").options == ["Zoo", "timm", "Hugging Face"]
    at = app(model="file:net.py")  # nor can a link ask for one
    assert at.radio(key="pick_source").value == "zoo" and markdown_text(
        "ignored model='file:net.py' from the link"
    ) in "\n".join(w.value for w in at.warning)
    monkeypatch.setenv("COMPILE_LAB_ALLOW_CUSTOM_MODELS", "true")
    at = app()
    assert at.radio(key="pick_source").options == ["Zoo", "timm", "Hugging Face", "Your file"]
    at = choose_source(at, "file")
    assert "Runs your file's code in the worker" in texts(at)
    assert (
        "model file: " + markdown_text("a file: model needs its Python file") in texts(at)
        and at.button(key="launch").disabled
    )


def test_host_patterns_narrow_the_sources_and_names(store, sleepers, monkeypatch):
    require_model_libraries()
    record_probe(store)
    stored_lookup(store, list_params("timm"), {"names": TIMM_NAMES})
    monkeypatch.setenv("COMPILE_LAB_ALLOWED_MODELS", "timm:convnext_*,timm:efficientnet_*")
    at = app()
    assert at.radio(key="pick_source").options == ["timm"]
    assert at.selectbox(key="pick_timm").options == ["timm:convnext_small", "timm:efficientnet_b0"]
    assert not at.exception


def test_a_missing_library_says_how_to_install_it(store, sleepers, monkeypatch):
    record_probe(store)
    monkeypatch.setattr(model_sources, "library_version", lambda source: None)
    at = choose_source(app(), "timm")
    notes = "\n".join(i.value for i in at.info)
    assert "timm models need the timm package" in notes and "pip install -r requirements-models.txt" in notes
    assert at.button(key="launch").disabled


HOSTILE = "![x](http://host/pixel.png) [click me](http://host/phish)"


def picker_texts(at) -> list[str]:
    return [e.value for e in at.error] + [c.value for c in at.caption] + [i.value for i in at.info]


def test_typed_names_uploads_and_lookup_errors_reach_the_page_as_text(store, sleepers, monkeypatch):
    from test_safe_content import LIVE_MARKDOWN

    require_model_libraries()
    record_probe(store)
    monkeypatch.setenv("COMPILE_LAB_ALLOW_CUSTOM_MODELS", "true")
    # A name typed in the box: the problem quotes it.
    at = choose_source(app(), "hf")
    at = at.text_input(key="pick_hf").set_value(HOSTILE).run()
    assert markdown_text(race_form.hf_model_from_text(HOSTILE)[1]) in at.caption.values
    # A name from a link (a bare web address GFM would link), looked up: the wait, then its failure.
    at = app(model="hf:www.evil.com/x")
    waiting = [c for c in at.caption.values if "Finding its parameters" in c]
    assert waiting and markdown_text("hf:www.evil.com/x") in waiting[0] and not LIVE_MARKDOWN.search(waiting[0])
    (lookup,) = [r for r in store.list_runs(kind="lookup") if r.params["model"] == "hf:www.evil.com/x"]
    store.finish_run(lookup.id, "failed", error=f"build_model() raised: {HOSTILE}", summary={"model_error": True})
    at = app(model="hf:www.evil.com/x")
    assert markdown_text(f"build_model() raised: {HOSTILE}") in at.error.values
    # An upload whose name (and so the error about it) carries markdown.
    at = choose_source(app(), "file")
    at.file_uploader(key="pick_file").set_value((f"{HOSTILE}.py", b"\xff\xfe", "text/x-python"))
    at = at.run()
    assert markdown_text(f"{HOSTILE}.py: the file is not UTF-8 text") in at.error.values
    for text in picker_texts(at):
        if "phish" in text or "pixel" in text:
            assert not LIVE_MARKDOWN.search(text), text
