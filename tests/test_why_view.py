"""Why, per step, on the run view: compile and recompile marks on the step chart with what
happened, recompiles on the compile-time card, each variant's anatomy side by side, the compile's
phases adding up, the run's files offered on the Runs page, and the form's shape/stance/trace
options reaching the queued race."""

import json
import os

import pandas as pd
from test_pages import APP, app, record_probe, record_race

from core.engine import words
from core.runs import run_files
from core.view import race_charts
from core.view.run_screen import why_per_step
from core.view.run_screen.layout import result_cards

PROFILE = {
    "eager": {
        "steps": 3,
        "operators_per_step": 41.0,
        "kernels_per_step": 38.0,
        "host_s_per_step": 0.004,
        "device_s_per_step": 0.0012,
        "kernel_counting": "leaf ATen kernels + Inductor C++ kernels",
        "top_kernels": [{"name": "aten::addmm", "calls_per_step": 4.0, "s_per_step": 0.0008}],
    },
    "compiled": {
        "steps": 3,
        "operators_per_step": 9.0,
        "kernels_per_step": 11.0,
        "host_s_per_step": 0.0018,
        "device_s_per_step": 0.0011,
        "kernel_counting": "leaf ATen kernels + Inductor C++ kernels",
        "top_kernels": [{"name": "cpp_fused_gelu_0", "calls_per_step": 2.0, "s_per_step": 0.0004}],
    },
    "reading": "Per step, eager launches 38 kernels (41 operators), compiled 11 (9 operators).",
}
PHASES = {
    "forward": {"phases": {"Dynamo tracing": 1.0, "Inductor lowering": 2.0}, "total_s": 3.0},
    "backward": {"phases": {"AOT autograd": 0.5, "Inductor lowering": 1.5}, "total_s": 2.0},
    "total_s": 5.0,
}
EVENTS = [
    {"variant": "compiled", "phase": "train", "epoch": 1, "step": 1, "note": "forward graph compiled"},
    {
        "variant": "compiled",
        "phase": "train",
        "epoch": 1,
        "step": 1,
        "note": "backward graph compiled (at the first backward)",
    },
    {
        "variant": "compiled",
        "phase": "train",
        "epoch": 1,
        "step": 6,
        "note": "recompile: size mismatch at index 0. expected 16, actual 8",
    },
    {
        "variant": "compiled",
        "phase": "train",
        "epoch": 2,
        "step": 12,
        "note": "recompile: size mismatch at index 0. expected 16, actual 8",
    },
]


def compile_frame(events=EVENTS) -> pd.DataFrame:
    return pd.DataFrame(events, columns=["variant", "phase", "epoch", "step", "note"])


def test_compile_marks_are_one_per_step_and_name_recompiles():
    marks = why_per_step.compile_marks(compile_frame())
    assert marks["step"].tolist() == [1, 6, 12]
    assert marks["kind"].tolist() == ["compile", "recompile", "recompile"]
    assert marks["note"][0] == "forward graph compiled; backward graph compiled (at the first backward)"
    assert why_per_step.compile_marks(None).empty and why_per_step.compile_marks(compile_frame([])).empty


def test_a_run_recompiling_every_step_keeps_its_recompiles_among_the_marks():
    events = [{"variant": "compiled", "phase": "train", "epoch": 1, "step": 1, "note": "forward graph compiled"}]
    events += [
        {"variant": "compiled", "phase": "train", "epoch": 1, "step": s, "note": f"recompile: shape {s}"}
        for s in range(2, why_per_step.MAX_MARKS + 20)
    ]
    marks = why_per_step.compile_marks(compile_frame(events))
    assert len(marks) == why_per_step.MAX_MARKS and set(marks["kind"]) == {"recompile"}
    assert marks["step"].is_monotonic_increasing


def test_recompiles_are_counted_from_events_else_from_torchs_counter():
    assert why_per_step.recompile_count({"compile_events": EVENTS}) == 2
    assert why_per_step.recompile_count({"compile_events": EVENTS[:2]}) == 0
    assert why_per_step.recompile_count({"recompiles": 4}) == 4  # an older bundle: no events, torch's counter
    assert why_per_step.recompile_count({}) is None


def test_the_compile_time_card_counts_recompiles():
    cards = {c.label: c for c in result_cards({"compile_time_s": 5.0, "compile_events": EVENTS})}
    assert cards["Compile time"].delta == "2 recompiles" and "the step chart marks each" in cards["Compile time"].help
    cards = {c.label: c for c in result_cards({"compile_time_s": 5.0, "compile_events": EVENTS[:2]})}
    assert cards["Compile time"].delta == "no recompiles"
    assert {c.label: c for c in result_cards({})}["Compile time"].delta is None  # nothing compiled yet


def test_the_step_chart_draws_a_rule_per_mark_with_what_happened_in_its_tooltip():
    steps = pd.DataFrame(
        [
            {"run": "r", "variant": v, "phase": "train", "epoch": 1, "step": s, "time_s": 0.01, "loss": 1.0}
            for v in ("eager", "compiled")
            for s in range(1, 13)
        ]
    )
    spec = race_charts.step_time_chart(steps, marks=why_per_step.compile_marks(compile_frame())).to_dict()
    rules = [layer for layer in spec["layer"] if (layer.get("mark") or {}).get("type") == "rule"]
    assert len(rules) == 1
    tooltips = [t["field"] for t in rules[0]["encoding"]["tooltip"]]
    assert "note" in tooltips
    data = [row for values in spec["datasets"].values() for row in values if "note" in row]
    assert [row["step"] for row in data] == [1, 6, 12]
    without = race_charts.step_time_chart(steps).to_dict()
    assert not [layer for layer in without["layer"] if (layer.get("mark") or {}).get("type") == "rule"]


def test_anatomy_top_kernels_and_phases_read_from_the_summary():
    rows = {r["per step"]: r for r in why_per_step.anatomy_rows(PROFILE)}
    assert rows["kernels per step"]["eager"] == 38 and rows["kernels per step"]["compiled"] == 11
    assert rows["host time per step (ms)"]["eager"] == 4.0
    assert why_per_step.top_kernel_rows(PROFILE, "compiled")[0]["kernel"] == "cpp_fused_gelu_0"
    phases = why_per_step.phase_rows({"compile_phases": PHASES})
    forward = [r["seconds"] for r in phases if r["graph"] == "forward" and "total" not in r["phase"]]
    assert sum(forward) == [r["seconds"] for r in phases if r["phase"] == "forward total"][0]
    assert phases[-1] == {"graph": "both", "phase": "compile total (forward + backward)", "seconds": 5.0}
    assert why_per_step.anatomy_rows(None) == [] and why_per_step.phase_rows({}) == []


def finished_race_with_why(store) -> int:  # noqa: F811
    run_id = record_race(store, "done")
    run = store.get_run(run_id)
    summary = dict(run.summary, profile=PROFILE, compile_phases=PHASES, compile_events=EVENTS)
    store.update_run(run_id, summary=summary)
    store.append_events(run_id, [{"kind": "compile", **e, "time_s": 0.0} for e in EVENTS])
    return run_id


def test_a_finished_run_shows_why_per_step_on_the_race_page(store):  # noqa: F811
    record_probe(store)
    run_id = finished_race_with_why(store)
    at = app(run=run_id)
    assert not at.exception, at.exception
    assert "Why, per step" in [h.value for h in at.subheader]
    markdown = "\n".join([m.value for m in at.markdown] + [c.value for c in at.caption])
    assert "Per step, eager launches 38 kernels" in markdown.replace("\\", "")
    # the cause, from a profile whose kernel figure cannot be read: it says the data cannot say why
    plain = markdown.replace("\\", "").replace("\u2060", "")
    assert "This race cannot say why compiled is faster here: its profile was recorded when the CPU kernel" in plain
    # recorded with the CPU figure that missed convolutions: worded again, and not read for a bound
    assert "so it cannot say what bounds a step" in markdown.replace("\\", "") and "overhead-bound" not in markdown
    assert "Compiles: 4, of which recompiles: 2" in markdown
    tables = [t.value for t in at.dataframe]
    assert any("kernels per step" in list(t.iloc[:, 0]) for t in tables if len(t.columns) == 3)
    assert any("what happened" in t.columns for t in tables)
    assert {m.label: m for m in at.metric}["Compile time"].proto.delta == "2 recompiles"


def test_the_runs_page_offers_the_runs_files(store, tmp_path):  # noqa: F811
    record_probe(store)
    run_id = finished_race_with_why(store)
    folder = run_files.run_files_dir(store.path, run_id)
    os.makedirs(folder, exist_ok=True)
    for variant in ("eager", "compiled"):
        with open(os.path.join(folder, f"{variant}.trace.json"), "w") as fh:
            json.dump({"traceEvents": []}, fh)
    trace = run_files.compile_trace_dir(store.path, run_id)
    os.makedirs(trace, exist_ok=True)
    with open(os.path.join(trace, "dedicated_log_torch_trace_1.log"), "w") as fh:
        fh.write('{"dynamo_start": {}}\n' * 100)
    from streamlit.testing.v1 import AppTest

    from core.runs.limits import owner_of

    store.update_run(run_id, owner=owner_of("0123456789abcdef"))  # the files are offered to whoever ran it
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state["visitor"] = "0123456789abcdef"
    at.run()
    at.switch_page("app_pages/runs.py").run()
    at.session_state["runs_table"] = {"selection": {"rows": [0], "columns": [], "cells": []}}
    at.run()
    assert not at.exception, at.exception
    labels = [b.proto.label for b in at.get("download_button")]
    assert any(label.startswith("Eager steps (profiler trace)") for label in labels), labels
    assert any(label.startswith("Compiled steps (profiler trace)") for label in labels), labels
    size = words.bytes_(len('{"dynamo_start": {}}\n') * 100)  # the file's size as words says sizes
    assert size == "2.1 KiB" and f"Compile trace (TORCH_TRACE), {size} before zipping" in labels, labels


def test_the_forms_shape_stance_and_trace_options_reach_the_queued_race(store, sleepers):  # noqa: F811
    record_probe(store)
    at = app()
    at.selectbox(key="pick_zoo").set_value("mlp").run()
    at.selectbox(key="form_shapes").set_value("varying").run()
    at.selectbox(key="form_dynamic").set_value(False).run()
    at.selectbox(key="form_stance").set_value("eager_on_recompile").run()
    at.checkbox(key="form_compile_trace").check().run()
    assert (at.query_params["shapes"], at.query_params["stance"]) == ("varying", "eager_on_recompile")
    [b for b in at.button if b.label == "Launch"][0].click().run()
    assert not at.exception, at.exception
    params = store.list_runs(kind="race")[0].params
    assert (params["shapes"], params["dynamic"], params["stance"], params["compile_trace"]) == (
        "varying",
        False,
        "eager_on_recompile",
        True,
    )
