"""The "Under the hood" page: renders from stored demo results, offers to measure what is missing,
and a demo job runs through the same queue and worker as a race."""

import time

import pytest
from streamlit.testing.v1 import AppTest
from test_pages import APP, record_probe

from core.engine.explain import CODEGEN_FUNCTIONS, PAGE_PARAMS, graphs
from core.runs import device_history, fleet, queue
from core.runs.store import Store


@pytest.fixture(scope="module")
def demo_results(fusion_result, overhead_result, gelu_result, caches_result):
    """Real results of every demo at small sizes: those that compile with Inductor measured once for the
    session (tests/conftest.py: the demos' own tests check the same results), the graph-break examples here."""
    return {
        "fusion": fusion_result,
        "overhead": overhead_result,
        "graphs": graphs.run({"examples": ["clean", "prints", "item", "data_dependent"]}),
        "codegen": gelu_result,
        "caches": caches_result,
    }


@pytest.fixture
def store(tmp_path, monkeypatch):
    path = str(tmp_path / "store.sqlite3")
    monkeypatch.setenv("COMPILE_LAB_STORE", path)
    s = Store(path)
    record_probe(s)
    return s


def record_demo(store, name, params, result, torch_version="2.x"):
    run_id = store.create_run(
        "demo",
        {"demo": name, "params": params},
        "someone",
        "cpu",
        status="running",
        started_at=time.time(),
        host=fleet.HOST,
    )
    store.finish_run(
        run_id,
        "done",
        summary={"result": result, "params": params},
        environment={"device_name": "Test CPU", "torch": torch_version},
    )
    return run_id


def page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("app_pages/under_the_hood.py").run()
    return at


def test_with_nothing_stored_every_section_offers_to_measure(store, sleepers):
    at = page()
    assert not at.exception and at.title[0].value == "Under the hood"
    assert [b.label for b in at.button].count("Measure on this device") == 5


@pytest.mark.slow
def test_stored_results_render_in_every_section(store, sleepers, demo_results):
    record_demo(store, "fusion", {**PAGE_PARAMS["fusion"], "op_set": "cheap"}, demo_results["fusion"])
    record_demo(store, "overhead", PAGE_PARAMS["overhead"], demo_results["overhead"])
    record_demo(store, "graphs", PAGE_PARAMS["graphs"], demo_results["graphs"])
    record_demo(store, "codegen", {**PAGE_PARAMS["codegen"], "function": CODEGEN_FUNCTIONS[0]}, demo_results["codegen"])
    record_demo(store, "caches", PAGE_PARAMS["caches"], demo_results["caches"])
    at = page()
    assert not at.exception, [e.value for e in at.exception]
    assert [b.label for b in at.button].count("Measure again") == 5
    assert "Measure on this device" not in [b.label for b in at.button]
    graph_table = next(df.value for df in at.dataframe if "breaks" in df.value.columns)
    assert list(graph_table["breaks"]) == [0, 1, 1, 1]
    code = "\n".join(c.value for c in at.code)
    assert "cpp_fused" in code  # the kernel Inductor wrote
    assert "print(" in code  # an example's source, with its break
    markdown = "\n".join(m.value for m in at.markdown)
    assert "**Break** at line" in markdown and "fullgraph=True" in markdown
    # Fusion: a verdict from the numbers (shown or not, and why), with the level the figures measure.
    verdicts = [v.value for v in [*at.success, *at.warning]]
    assert any(
        v.startswith(("**Fusion shows here**", "**This machine does not show the effect clearly**")) for v in verdicts
    )
    captions = "\n".join(c.value for c in at.caption)
    assert "Each point is the median of 3 samples, eager and compiled alternating" in captions
    # Overhead: each experiment under its heading with a reading; caches: wall time against torch's phases.
    assert "**1. The same chain on 16 floats" in markdown and "Eager pays about" in markdown
    assert "**2. A small MLP as the batch grows**" in markdown
    assert "The bar is wall time" in captions
    # Generated code: the excerpt is numbered as in the module.
    kernel = demo_results["codegen"]["generated"]["first_kernel"]
    assert any(c.value.startswith(f"{kernel['start_line']}  ") for c in at.code)


def test_a_demo_that_cannot_be_queued_says_why_and_the_message_stays(tmp_path, monkeypatch, sleepers):
    monkeypatch.setenv("COMPILE_LAB_STORE", str(tmp_path / "unprobed.sqlite3"))  # the device is not known yet
    at = page()
    next(b for b in at.button if b.label == "Measure on this device").click().run()
    assert any("still finding out which device" in e.value for e in at.error)


def test_a_result_measured_with_another_torch_version_is_not_shown(store, sleepers):
    record_demo(store, "caches", PAGE_PARAMS["caches"], {"cold": {}, "warm": {}}, torch_version="1.0")
    assert device_history.stored_demo(store, "caches", PAGE_PARAMS["caches"]) is None


def test_measure_enqueues_a_demo_job_with_the_pages_parameters(store, sleepers):
    at = page()
    next(b for b in at.button if b.label == "Measure on this device").click().run()
    demos = store.list_runs(kind="demo")
    assert len(demos) == 1 and demos[0].params == {
        "demo": "fusion",
        "params": {**PAGE_PARAMS["fusion"], "op_set": "cheap"},  # the memory-bound ops first: they show fusion
    }
    assert demos[0].device_key == "cpu"  # the demo waits for the device like a race does


def test_a_demo_job_runs_in_a_worker_and_is_found_again(store):
    run_id = queue.enqueue(store, {"demo": "graphs", "params": {"examples": ["clean", "prints"]}}, "ann", kind="demo")
    deadline = time.monotonic() + 120
    while not store.get_run(run_id).finished and time.monotonic() < deadline:
        queue.tick(store)
        time.sleep(0.3)
    run = store.get_run(run_id)
    assert run.status == "done", run.error
    assert [e["explain"]["graph_break_count"] for e in run.summary["result"]["examples"]] == [0, 1]
    assert run.summary["params"]["examples"] == ["clean", "prints"]
