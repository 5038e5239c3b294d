"""The Sweep page (AppTest, no browser): empty, running, finished and with a failed point; launching
queues every point under one sweep owned by the visitor; an invalid sweep queues nothing; the
training planner on a finished race and a finished sweep."""

import random
import time

import pytest
from streamlit.testing.v1 import AppTest
from support import ROOT

from core.engine import analysis
from core.engine.spec import OPTIONS, DeviceCaps, RunSpec
from core.runs import fleet
from core.runs.limits import owner_of
from core.runs.sweeps import Axis, SweepSpec
from core.view.safe_text import markdown_text

APP = f"{ROOT}/streamlit_app.py"
PAGE = "app_pages/sweep.py"
CHART_TITLES = ("Steady-state speedup", "Compile time", "Break-even step", "Throughput, eager vs compiled")


def record_probe(store):
    env = {"device_type": "cpu", "device_name": "Test CPU", "cpu_name": "Test CPU", "cpu_count": 2, "torch": "2.x"}
    run_id = store.create_run("probe", {}, "system", "probe", status="done", host=fleet.HOST)
    store.update_run(run_id, summary={"caps": DeviceCaps().to_dict(), "environment": env}, environment=env)


def measured_summary(batch_size: int, rng: random.Random, steps: int = 60, compile_s: float = 8.0) -> dict:
    """A finished race at this batch size: eager 2 ms + 10 us per sample, compiled 20% faster from
    batch 1024, after a compile of `compile_s` (regional: a quarter of it)."""
    eager_s = 0.002 + 1e-5 * batch_size
    compiled_s = eager_s * (0.8 if batch_size >= 1024 else 1.05)
    eager = [eager_s * (1 + 0.02 * rng.gauss(0, 1)) for _ in range(steps)]
    compiled = [compile_s] + [compiled_s * (1 + 0.02 * rng.gauss(0, 1)) for _ in range(steps - 1)]
    summary = analysis.summarize(eager, compiled, [sum(eager)], [sum(compiled)], batch_size)
    summary.update(compile_skipped=None)
    return summary


BATCH_AXIS = (Axis("batch_size", (64, 256, 1024, 4096)),)


def record_sweep(store, statuses, owner="someone", axes=BATCH_AXIS) -> int:
    """A sweep whose points stand in the given states (done ones with a summary, failed ones with an error)."""
    sweep = SweepSpec(RunSpec(model="pointwise_mlp", device="cpu", epochs=1, steps_per_epoch=60), axes)
    rng = random.Random(0)
    with store.transaction() as c:
        sweep_id = store.insert_sweep(c, owner, sweep.to_dict())
    for point, status in zip(sweep.points(), statuses):
        fields = {"status": status, "phase": status, "sweep_id": sweep_id, "host": fleet.HOST}
        if status == "done":
            compile_s = 2.0 if point.compile_scope == "regional" else 8.0
            fields["summary"] = measured_summary(point.batch_size, rng, compile_s=compile_s)
        elif status == "failed":
            fields["error"] = "out of memory at batch size 4096 on cpu: try a smaller batch size or amp-bf16"
        elif status == "running":
            fields.update(phase="compiled epoch 1/1", started_at=time.time(), heartbeat_at=time.time(), progress=0.6)
        store.create_run("race", point.to_dict(), owner, "cpu", **fields)
    return sweep_id


def sweep_page(**query) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in query.items():
        at.query_params[key] = str(value)
    at.switch_page(PAGE)
    return at.run()


def chart_descriptions(at) -> list[str]:
    import json

    def walk(node):
        for child in getattr(node, "children", {}).values():
            yield child
            yield from walk(child)

    specs = [json.loads(el.proto.spec) for el in walk(at._tree) if getattr(el, "type", "") == "vega_lite_chart"]
    found = {s.get("description", "").split(":")[0]: s.get("description", "") for s in specs}
    return [found.get(title) for title in CHART_TITLES]  # in CHART_TITLES' order, whatever the layout


def texts(at) -> str:
    parts = [m.value for m in at.markdown] + [e.value for e in at.error] + [c.value for c in at.caption]
    return "\n".join(str(p) for p in parts + [i.value for i in at.info])


def table(at, index: int = 0) -> list[dict]:
    return at.dataframe[index].value.to_dict("records")


def test_the_sweep_page_on_an_empty_store_offers_the_cpu_default(store, sleepers):
    record_probe(store)
    at = sweep_page()
    assert not at.exception and at.title[0].value == "Sweep: how the payoff moves"
    assert at.selectbox(key="sweep_model").value == "pointwise_mlp"
    assert at.selectbox(key="sweep_axis1").value == "batch_size"
    assert at.text_input(key="sweep_text1").value == "64, 256, 1024, 4096"
    assert "4 races, one after another" in texts(at)
    assert "Choose the axes and press Launch sweep" in texts(at)
    launch = next(b for b in at.button if b.label == "Launch sweep")
    assert not launch.disabled
    published = table(at, -1)  # whole vs regional as published, each with its hardware and source
    assert published[0]["model, workload"].startswith("Llama-3.2-1B") and published[0]["hardware"]


def test_a_running_sweep_shows_its_progress_finished_points_and_a_cancel_for_its_owner(store, sleepers):
    record_probe(store)
    sweep_id = record_sweep(store, ["done", "done", "running", "queued"], owner=owner_of("0123456789abcdef"))
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state["visitor"] = "0123456789abcdef"
    at.query_params["sweep"] = str(sweep_id)
    at.switch_page(PAGE).run()
    assert not at.exception
    assert at.get("progress")[0].proto.text.startswith(f"Sweep #{sweep_id}: point 3 of 4 running")
    rows = table(at)
    assert [r["state"] for r in rows] == ["done", "done", "compiled epoch 1/1", "queued (position 1)"]
    assert rows[0]["steady speedup (95%)"].endswith(")") and rows[2]["steady speedup (95%)"] == ""
    # Neither finished point breaks even: no empty break-even chart, its place says why
    assert chart_descriptions(at) == [f"{t}: 2 points" for t in CHART_TITLES[:2]] + [
        None,
        f"{CHART_TITLES[3]}: 2 points",
    ]
    assert "No break-even to chart: batch size 64 (never: compiled steps are slower)" in texts(at)
    assert "needs eager step times at 3 or more batch sizes (2 measured)" in texts(at)
    assert "Plan your training" not in [s.value for s in at.subheader]  # not before the sweep has finished
    at.button(key=f"cancel_sweep_{sweep_id}").click().run()
    assert [r.status for r in store.sweep_runs(sweep_id)][2:] == ["cancelled", "cancelled"]


def test_someone_elses_running_sweep_has_no_cancel(store, sleepers):
    record_probe(store)
    sweep_id = record_sweep(store, ["done", "running"], axes=(Axis("batch_size", (64, 256)),))
    at = sweep_page(sweep=sweep_id)
    assert not at.exception and not any(b.label == "Cancel sweep" for b in at.button)


def test_a_finished_sweep_shows_every_chart_the_regime_and_plans_a_training_run(store, sleepers):
    record_probe(store)
    sweep_id = record_sweep(store, ["done"] * 4)
    at = sweep_page(sweep=sweep_id)
    assert not at.exception
    assert at.get("progress")[0].proto.text == f"Sweep #{sweep_id}: finished: 4 done"
    assert chart_descriptions(at) == [f"{t}: {n} points" for t, n in zip(CHART_TITLES, (4, 4, 2, 4))]
    assert "Regime:** Overhead-bound below about batch 200" in texts(at)
    assert "No break-even to chart: batch size 64 (never: compiled steps are slower); batch size 256 (" in texts(at)
    assert "Plan your training" in [s.value for s in at.subheader]
    plan = table(at, 1)
    assert [r["point"] for r in plan] == ["batch size 64", "batch size 256", "batch size 1024", "batch size 4096"]
    assert plan[3]["what compile does"].startswith("Over 50,000 steps compile saves about")
    at.radio(key=f"plan_how_sweep_{sweep_id}").set_value("epochs x steps per epoch").run()
    at.number_input(key=f"plan_epochs_sweep_{sweep_id}").set_value(2).run()
    at.number_input(key=f"plan_per_epoch_sweep_{sweep_id}").set_value(100).run()
    plan = table(at, 1)
    assert plan[3]["what compile does"].startswith("Over 200 steps compile costs about")
    assert "your run is shorter than the break-even" in plan[3]["what compile does"]


def test_a_failed_point_shows_its_reason_and_no_figures(store, sleepers):
    record_probe(store)
    sweep_id = record_sweep(store, ["done", "done", "done", "failed"])
    at = sweep_page(sweep=sweep_id)
    assert not at.exception
    assert at.get("progress")[0].proto.text == f"Sweep #{sweep_id}: finished: 3 done, 1 failed"
    failed = table(at)[3]
    assert failed["state"].startswith("failed: out of memory at batch size 4096")
    assert failed["steady speedup (95%)"] == "" and failed["compile time"] == ""
    assert chart_descriptions(at)[0] == f"{CHART_TITLES[0]}: 3 points"
    assert "Overhead-bound below about batch" in texts(at)  # three batch sizes still read


def test_whole_vs_regional_side_by_side(store, sleepers):
    record_probe(store)
    axes = (Axis("compile_scope", ("whole", "regional")), Axis("batch_size", (256, 1024)))
    sweep_id = record_sweep(store, ["done"] * 4, axes=axes)
    at = sweep_page(sweep=sweep_id)
    assert not at.exception
    assert "Whole vs regional compile, side by side" in texts(at)
    rows = table(at, 1)
    assert [r[""] for r in rows] == ["batch size 256", "batch size 1024"]
    assert set(rows[0]) == {"", "whole: compile time", "whole: steady speedup", "regional: compile time",
                            "regional: steady speedup"}  # fmt: skip
    # whole compiled for 8 s, regional for 2 s (less the eager steps of the compile window)
    assert rows[1]["whole: compile time"].startswith("7.9") and rows[1]["regional: compile time"].startswith("1.9")


def test_launch_queues_every_point_under_one_sweep_owned_by_this_visitor(store, sleepers):
    record_probe(store)
    at = sweep_page()
    at.selectbox(key="sweep_model").set_value("mlp").run()
    at.text_input(key="sweep_text1").set_value("8, 16").run()
    at.number_input(key="sweep_steps_per_epoch").set_value(3).run()
    next(b for b in at.button if b.label == "Launch sweep").click().run()
    assert not at.exception
    (sweep,) = store.list_sweeps()
    points = store.sweep_runs(sweep.id)
    assert [p.params["batch_size"] for p in points] == [8, 16]
    assert all(p.params["model"] == "mlp" and p.params["steps_per_epoch"] == 3 for p in points)
    assert sweep.owner == owner_of(at.session_state["visitor"]) and all(p.owner == sweep.owner for p in points)
    assert at.query_params["sweep"] == str(sweep.id)


def test_a_second_axis_and_invalid_values_show_the_problem_and_queue_nothing(store, sleepers, monkeypatch):
    record_probe(store)
    monkeypatch.setenv("COMPILE_LAB_MAX_BATCH_SIZE", "1024")
    at = sweep_page()
    assert at.text_input(key="sweep_text1").value == "64, 256, 1024"  # the defaults within the host's limit
    at.text_input(key="sweep_text1").set_value("64, 4096").run()
    assert markdown_text("batch size: this host allows at most 1024 (got 4096)") in texts(at)
    at.text_input(key="sweep_text1").set_value("64, many").run()
    assert markdown_text("'many' is not a whole number") in texts(at)
    at.text_input(key="sweep_text1").set_value("64, 256").run()
    at.selectbox(key="sweep_axis2").set_value("precision").run()
    assert at.multiselect(key="sweep_values2").options == ["fp32", "amp-bf16"]  # what a CPU can run
    assert at.multiselect(key="sweep_values2").value == ["fp32", "amp-bf16"]
    assert "4 races, one after another" in texts(at)
    at.multiselect(key="sweep_values2").set_value(["fp32"]).run()
    assert markdown_text("precision: give at least 2 precision values to sweep") in texts(at)
    assert next(b for b in at.button if b.label == "Launch sweep").disabled
    assert store.list_sweeps() == []


def test_a_link_to_a_sweep_that_does_not_exist_shows_the_form(store, sleepers):
    record_probe(store)
    for bad in ("99999999999999999999", "abc", "4242"):
        at = sweep_page(sweep=bad)
        assert not at.exception and any(b.label == "Launch sweep" for b in at.button)


def test_a_finished_race_plans_a_training_run_on_the_race_page(store, sleepers):
    record_probe(store)
    run_id = store.create_run("race", RunSpec(model="mlp", device="cpu").to_dict(), "x", "cpu", status="done")
    store.update_run(run_id, summary=measured_summary(4096, random.Random(1)))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["run"] = str(run_id)
    at.run()
    assert not at.exception and "Plan your training" in [s.value for s in at.subheader]
    assert [m.label for m in at.metric][-2:] == ["Eager total", "Compiled total, compile included"]
    at.number_input(key="plan_steps_race").set_value(100).run()
    assert "Over 100 steps compile costs about" in texts(at) and "shorter than the break-even" in texts(at)


def test_a_stored_sweep_can_be_opened_from_the_list(store, sleepers):
    record_probe(store)
    first = record_sweep(store, ["done"] * 4)
    record_sweep(store, ["done", "failed"], axes=(Axis("batch_size", (64, 256)),))
    at = sweep_page()
    picker = at.selectbox(key="sweep_open")
    assert picker.options == ["-", "#2 pointwise_mlp: batch size 64-256", "#1 pointwise_mlp: batch size 64-4096"]
    picker.set_value(first).run()
    assert not at.exception and at.query_params["sweep"] == str(first)
    assert at.get("progress")[0].proto.text == f"Sweep #{first}: finished: 4 done"


def test_text_from_the_visitor_or_the_store_reaches_the_page_inert(store, sleepers):
    record_probe(store)
    sweep_id = record_sweep(store, ["done", "running", "queued", "queued"], owner=owner_of("0123456789abcdef"))
    running = store.sweep_runs(sweep_id)[1]
    store.update_run(running.id, phase="[click me](http://evil.example/phish) ![x](http://evil.example/p.png)")
    at = sweep_page(sweep=sweep_id)
    assert not at.exception
    progress = at.get("progress")[0].proto.text
    assert progress.startswith(f"Sweep #{sweep_id}: point 2 of 4 running: ")  # the sentence itself stays plain
    assert "[click me](http" not in progress and "![x](" not in progress
    assert markdown_text("[click me](http://evil.example/phish)") in progress
    at.text_input(key="sweep_text1").set_value("64, ![x](http://evil.example/p.png)").run()
    shown = [e.value for e in at.error]
    assert shown and not any("![x](http" in e for e in shown)  # the typed text is quoted, not rendered
    assert any(markdown_text("'![x](http://evil.example/p.png)' is not a whole number") in e for e in shown)


@pytest.mark.parametrize("what", ["sweep", "points"])
def test_a_sweep_deleted_while_followed_says_so_and_stops_polling(store, sleepers, what):
    record_probe(store)
    sweep_id = record_sweep(store, ["done", "running"], owner=owner_of("0123456789abcdef"),
                            axes=(Axis("batch_size", (64, 256)),))  # fmt: skip
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state["visitor"] = "0123456789abcdef"
    at.query_params["sweep"] = str(sweep_id)
    at.switch_page(PAGE).run()
    assert not at.exception and at.get("progress")
    if what == "sweep":
        store.delete_sweep(sweep_id)
    else:
        for run in store.sweep_runs(sweep_id):
            store.delete_run(run.id)
    at.run()
    assert not at.exception and not at.get("progress")
    said = "does not exist: it may have been deleted" if what == "sweep" else "has no points left: they were deleted"
    assert f"Sweep {sweep_id} {said}." in texts(at)
    assert not any(b.label == "Cancel sweep" for b in at.button)


def test_the_form_offers_the_target_interval_and_every_point_stops_on_its_own(store, sleepers):
    record_probe(store)
    at = sweep_page()
    box = at.selectbox(key="sweep_target_interval")
    assert box.label == OPTIONS["target_interval"].label and box.value is None  # off by default, as on the Race form
    assert box.options == [OPTIONS["target_interval"].choice_labels[v] for v in OPTIONS["target_interval"].offered]
    box.set_value(0.03).run()
    at.selectbox(key="sweep_model").set_value("mlp").run()
    at.text_input(key="sweep_text1").set_value("8, 16").run()
    next(b for b in at.button if b.label == "Launch sweep").click().run()
    assert not at.exception
    (sweep,) = store.list_sweeps()
    assert [p.params["target_interval"] for p in store.sweep_runs(sweep.id)] == [0.03, 0.03]


def test_the_default_sweep_launches_under_the_shipped_host_limits(store, sleepers, monkeypatch):
    """deploy/host-limits.toml: batch sizes of at most 256, two jobs per visitor. The form's first sweep
    is one this host runs: no problem shown, and Launch queues it."""
    monkeypatch.setenv("COMPILE_LAB_CONFIG", f"{ROOT}/deploy/host-limits.toml")
    record_probe(store)
    at = sweep_page()
    assert not at.exception and not at.error, [e.value for e in at.error]
    next(b for b in at.button if b.label == "Launch sweep").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    (sweep,) = store.list_sweeps()
    assert [p.params["batch_size"] for p in store.sweep_runs(sweep.id)] == [64, 256]


def test_a_busy_sweep_shows_its_verdicts_whole_and_no_empty_break_even_chart(store, sleepers):
    # Issue 43: three points measured on a busy machine, 1.20x (1.11-1.29x) and so on: the verdict
    # column was cut at "machine", the reading counted "0 of 3 ()", the break-even chart was empty.
    record_probe(store)
    sweep_id = record_sweep(store, ["done"] * 3, axes=(Axis("batch_size", (64, 256, 1024)),))
    for run, (x, low, high) in zip(
        store.sweep_runs(sweep_id), ((1.20, 1.11, 1.29), (1.12, 1.04, 1.2), (1.14, 1.04, 1.25))
    ):
        store.update_run(run.id, summary={**run.summary, "steady_state_speedup": x, "speedup_ci95": [low, high],
                                          "verdict": "machine busy"})  # fmt: skip
    at = sweep_page(sweep=sweep_id)
    assert not at.exception
    assert [r["verdict"] for r in table(at)] == ["no verdict (busy)"] * 3
    import json

    config = json.loads(at.dataframe[0].proto.columns)
    assert any(c.get("width") == "medium" for name, c in config.items() if "verdict" in name)
    said = texts(at)
    assert "0 of 3 batch sizes (3 no verdict, the machine busy)" in said and "()" not in said
    assert chart_descriptions(at)[2] is None  # no empty break-even chart
    assert "No break-even to chart: batch size 64 (no verdict: the machine was busy)" in said
