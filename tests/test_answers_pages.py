"""The walk-through's page points of issue 34, on the pages themselves (Streamlit's AppTest): a replay's
link names only the replay, and a finished race's answers (why, what to try next) are on its page."""

import re

from test_pages import app, record_probe

from core.runs.bundle import import_bundle, load_bundle_file


def test_a_replay_link_carries_no_other_models_configuration(store, sleepers):  # noqa: F811
    record_probe(store)
    at = app(model="pointwise_mlp", batch_size=4096, replay="file:cpu-break-even-demo", speed="5x")
    assert not at.exception, at.exception
    link = dict(at.query_params)
    assert link.get("replay") == "file:cpu-break-even-demo" and "model" not in link and "batch_size" not in link


def recording(name):
    import os

    from core import PROJECT_ROOT

    return load_bundle_file(os.path.join(PROJECT_ROOT, "assets", "recordings", f"{name}.json"))


def page_text(at) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    return "\n".join(parts).replace("\\", "").replace("\u2060", "")


def test_a_finished_race_says_why_its_recompiles_and_what_to_try_next_with_a_link(store, sleepers):  # noqa: F811
    record_probe(store)
    run_id = import_bundle(store, recording("cpu-recompiles-varying-shapes"), "someone")
    at = app(run=run_id)
    assert not at.exception, at.exception
    text = page_text(at)
    assert "**Why:** Compiled is faster here because its kernels take 8.99 ms less" in text
    assert "**Recompiles:** Compiled recompiled once: at step 15 (about 6.79 s)" in text
    assert "tensor 'x' size mismatch at index 0. expected 48, actual 24" in text  # whole, not cut
    nxt = next(m.value for m in at.markdown if m.value.startswith("**Next:**"))
    assert "[dynamic shapes](/?" in nxt and "dynamic=true" in nxt and "model=small_cnn" in nxt
    assert "cuda" not in nxt.lower()  # a CPU race is never sent to CUDA graphs
    # Why, per step: compiled's top kernels as lines that wrap, each Inductor name whole beside its time
    # (a table cell cut both the name and the ms column).
    kernels = text.replace("\u200b", "")
    fused = "graph_0_cpp_fused__native_batch_norm_legit_functional_convolution_backward_max_pool2d_with_indices"
    assert re.search(r"\d+\.\d{3} ms per step, 1 call: " + fused + r"\w*backward_1", kernels), kernels


def test_the_overhead_and_fusion_tabs_name_the_cause_of_the_latest_race(store, sleepers):  # noqa: F811
    record_probe(store)
    run_id = import_bundle(store, recording("cpu-break-even-demo"), "someone")
    at = app()
    at.switch_page("app_pages/under_the_hood.py").run()
    assert not at.exception, at.exception
    said = [m.value.replace("\\", "") for m in at.markdown if m.value.startswith("**The latest race here")]
    assert len(said) == 2  # the Fusion tab and the Overhead tab
    assert f"run {run_id} (small_cnn, batch 128)" in said[0] and "Compiled is faster here because" in said[0]


def test_a_finished_sweep_says_what_to_try_next_with_a_link_that_launches_it(store, sleepers):  # noqa: F811
    from test_sweep_page import record_sweep, sweep_page

    record_probe(store)
    sweep_id = record_sweep(store, ["done"] * 4)
    at = sweep_page(sweep=sweep_id)
    assert not at.exception, at.exception
    nxt = [m.value for m in at.markdown if m.value.startswith("**Next:**")]
    assert len(nxt) == 1, [m.value for m in at.markdown]
    assert "surest gain measured here is at batch size" in nxt[0]
    assert "](/?" in nxt[0] and "model=pointwise_mlp" in nxt[0] and "batch_size=" in nxt[0]
    assert "cuda" not in nxt[0].lower()  # a CPU sweep is never sent to CUDA graphs
