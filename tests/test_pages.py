"""Every page renders (AppTest, no browser) on an empty store and on one holding finished, failed
and running runs; launching enqueues a run owned by the visitor; invalid input enqueues nothing."""

import json
import time

from streamlit.testing.v1 import AppTest
from support import ROOT, quick_spec

from core.engine import analysis
from core.engine.spec import DeviceCaps
from core.runs import fleet, queue
from core.runs.limits import owner_of
from core.view.safe_text import markdown_text

APP = f"{ROOT}/streamlit_app.py"


def record_probe(store):
    env = {
        "device_type": "cpu",
        "device_name": "Test CPU",
        "cpu_name": "Test CPU",
        "cpu_count": 2,
        "torch": "2.x",
        "device_memory_bytes": 2**34,
    }
    run_id = store.create_run("probe", {}, "system", "probe", status="done", host=fleet.HOST)
    store.update_run(run_id, summary={"caps": DeviceCaps().to_dict(), "environment": env}, environment=env)


def record_race(store, status, steps=12, error=None, pid=None):
    spec = quick_spec(epochs=2, steps_per_epoch=steps // 2)
    run_id = store.create_run(
        "race",
        spec.to_dict(),
        "someone",
        "cpu",
        status="running",
        started_at=time.time(),
        heartbeat_at=time.time(),
        pid=pid,
        host=fleet.HOST,
        phase="compiled epoch 1/2",
    )
    eager = [0.02] * steps
    compiled = [0.5] + [0.01] * (steps - 1)
    rows = []
    for variant, times in (("eager", eager), ("compiled", compiled if status != "running" else compiled[:3])):
        for i, t in enumerate(times, start=1):
            rows.append(
                {
                    "kind": "step",
                    "variant": variant,
                    "phase": "train",
                    "epoch": 1 + (i - 1) * 2 // steps,
                    "step": i,
                    "time_s": t,
                    "loss": 2.3 - 0.01 * i,
                    "samples": 16,
                }
            )
        rows.append(
            {
                "kind": "epoch",
                "variant": variant,
                "phase": "train",
                "epoch": 1,
                "step": 0,
                "time_s": sum(times[: steps // 2]),
                "eval_time_s": None,
            }
        )
    store.append_events(run_id, rows)
    if status in ("done", "failed"):
        summary = analysis.summarize(
            eager, compiled, [sum(eager[:6]), sum(eager[6:])], [sum(compiled[:6]), sum(compiled[6:])], 16
        )
        store.finish_run(run_id, status, summary=summary, error=error)
    return run_id


def app(**query) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in query.items():
        at.query_params[key] = str(value)
    return at.run()


def texts(at) -> str:
    parts = [m.value for m in at.markdown] + [e.value for e in at.error] + [c.value for c in at.caption]
    return "\n".join(str(p) for p in parts)


def test_race_and_runs_pages_render_on_an_empty_store(store, sleepers):
    at = app()
    assert not at.exception
    assert at.title[0].value.startswith("Eager vs torch.compile")
    assert at.button(key="launch").label == "Launch"
    at.switch_page("app_pages/runs.py").run()
    assert not at.exception and at.title[0].value == "Runs"


def test_pages_render_finished_failed_and_running_runs(store, sleepers):
    record_probe(store)
    done = record_race(store, "done")
    failed = record_race(
        store, "failed", error="out of memory at batch size 16 on cpu: try a smaller batch size or amp-bf16"
    )
    running = record_race(store, "running", pid=None)
    at = app(run=done)
    assert not at.exception
    labels = [m.label for m in at.metric]
    assert labels == [
        "Compile time",
        "First-epoch overhead",
        "Steady-state speedup",
        "Break-even",
        "Throughput (compiled)",
        "Peak memory (compiled)",
        "Eager total",  # Plan your training, under a finished race
        "Compiled total, compile included",
    ]
    assert at.metric[2].value == "2.00x"
    assert "CPU only" in "\n".join(m.value for m in at.sidebar.markdown)
    at = app(run=failed)
    assert not at.exception and "out of memory at batch size 16" in texts(at)
    at = app(run=running)
    assert not at.exception and at.metric  # partial results are shown live
    at.switch_page("app_pages/runs.py").run()
    assert not at.exception
    assert len(at.dataframe[0].value) == 3


def test_launch_enqueues_a_run_owned_by_this_visitor(store, sleepers):
    record_probe(store)
    at = app()
    at.selectbox(key="pick_zoo").set_value("mlp").run()
    assert at.number_input(key="form_batch_size").value == 256  # the model's default batch size
    at.number_input(key="form_steps_per_epoch").set_value(3).run()
    at.button(key="launch").click().run()
    assert not at.exception
    runs = store.list_runs(kind="race")
    assert len(runs) == 1
    assert runs[0].owner == owner_of(at.session_state["visitor"])
    assert runs[0].params["model"] == "mlp" and runs[0].params["steps_per_epoch"] == 3
    assert at.query_params["run"] == str(runs[0].id)
    assert "visitor" not in " ".join(f"{k}={v}" for k, v in at.query_params.items())


def test_invalid_configuration_shows_the_message_and_enqueues_nothing(store, sleepers, monkeypatch):
    record_probe(store)
    monkeypatch.setenv("COMPILE_LAB_MAX_BATCH_SIZE", "64")
    at = app()
    at.selectbox(key="pick_zoo").set_value("mlp").run()
    assert markdown_text("this host allows at most 64 (got 256)") in texts(at)  # shown as text
    assert at.button(key="launch").label == "Launch" and at.button(key="launch").disabled  # a browser cannot press it
    assert store.list_runs(kind="race") == []


def test_options_the_device_cannot_run_are_not_offered_but_explained(store, sleepers):
    record_probe(store)  # a CPU-only machine
    at = app(precision="amp-fp16", mode="reduce-overhead")
    assert "amp-fp16" not in at.selectbox(key="form_precision").options
    assert at.selectbox(key="form_precision").value == "fp32"  # the link asked for what cannot run here
    assert "reduce-overhead" not in at.selectbox(key="form_mode").options
    # Explained once, in one line, not a paragraph under every selectbox.
    explained = [c.value for c in at.caption if "CUDA" in c.value]
    assert len(explained) == 1
    assert explained[0].startswith("Not offered here: reduce-overhead, max-autotune, tf32 and amp-fp16 need a CUDA GPU")


def test_the_configuration_comes_from_the_link(store, sleepers):
    record_probe(store)
    at = app(model="gpt", batch_size=8, epochs=2, steps_per_epoch=7)
    assert at.selectbox(key="pick_zoo").value == "gpt"
    assert at.number_input(key="form_batch_size").value == 8
    assert at.number_input(key="form_steps_per_epoch").value == 7


def charts_on(at) -> int:
    def walk(node):
        for child in getattr(node, "children", {}).values():
            yield child
            yield from walk(child)

    return sum(1 for el in walk(at._tree) if getattr(el, "type", "") == "vega_lite_chart")


def test_runs_page_overlays_several_runs_reopens_one_and_deletes_only_your_own(store, sleepers):
    record_probe(store)
    theirs = record_race(store, "done")
    mine = record_race(store, "done")
    store.update_run(mine, owner=owner_of("0123456789abcdef"))
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state["visitor"] = "0123456789abcdef"
    at.run()
    at.switch_page("app_pages/runs.py").run()
    at.session_state["runs_table"] = {"selection": {"rows": [0, 1], "columns": [], "cells": []}}
    at.run()
    assert not at.exception and charts_on(at) == 2  # step times and cumulative times, both runs overlaid
    assert [b.label for b in at.button] == ["Delete"]  # only the visitor's own run can be deleted
    at.session_state["runs_table"] = {"selection": {"rows": [1], "columns": [], "cells": []}}
    at.run()
    # reopened: the live view's charts (race, lead, step, epoch, loss), its cards and the plan's two
    assert charts_on(at) == 5 and len(at.metric) == 6 + 2
    at.session_state["runs_table"] = {"selection": {"rows": [0], "columns": [], "cells": []}}  # newest first: mine
    at.run()
    at.button[0].click().run()
    assert store.get_run(mine) is None and store.get_run(theirs) is not None


def test_a_link_to_a_run_that_cannot_exist_shows_the_form(store, sleepers):
    record_probe(store)
    for bad in ("99999999999999999999", "abc", "424242"):
        at = app(run=bad)
        assert not at.exception and at.button(key="launch").label == "Launch"


def test_launch_waits_for_the_device_probe(store, sleepers):
    at = app()  # no probe recorded: the device is not known yet
    assert at.button(key="launch").label == "Launch" and at.button(key="launch").disabled
    assert "Finding out which device" in "\n".join(i.value for i in at.info)


def test_a_selection_that_outlives_its_rows_is_ignored(store, sleepers):
    record_probe(store)
    record_race(store, "done")
    at = app()
    at.switch_page("app_pages/runs.py").run()

    def select(rows):
        at.session_state["runs_table"] = {"selection": {"rows": rows, "columns": [], "cells": []}}
        at.run()
        assert not at.exception, at.exception
        return [b.label for b in at.get("download_button") if b.label.startswith("Bundle of")]

    assert select([0, 5]) == ["Bundle of run 2 (JSON)"]  # the row still there is shown, alone
    assert [h.value for h in at.subheader if h.value.startswith("Run 2")]
    assert select([5]) == []  # a row gone: nothing is shown for it
    assert not [h.value for h in at.subheader if h.value.startswith("Run 2")]


def chart_specs(at) -> list[dict]:
    def walk(node):
        for child in getattr(node, "children", {}).values():
            yield child
            yield from walk(child)

    return [json.loads(el.proto.spec) for el in walk(at._tree) if getattr(el, "type", "") == "vega_lite_chart"]


def record_live_race(store, compiled_steps, phase, eager_steps=600, per_epoch=200):
    """A running race on this host (a live worker's view): eager done, compiled `compiled_steps` in."""
    spec = quick_spec(epochs=eager_steps // per_epoch, steps_per_epoch=per_epoch)
    run_id = store.create_run(
        "race",
        spec.to_dict(),
        "someone",
        "cpu",
        status="running",
        started_at=time.time(),
        heartbeat_at=time.time(),
        host=fleet.HOST,
        phase=phase,
    )
    eager = [0.010] * eager_steps
    compiled = ([2.0] + [0.008] * (eager_steps - 1))[:compiled_steps]
    rows = [
        {
            "kind": "step",
            "variant": v,
            "phase": "train",
            "epoch": 1 + i // per_epoch,
            "step": i + 1,
            "time_s": t,
            "loss": 2.0 - 0.001 * i,
            "samples": 16,
        }
        for v, times in (("eager", eager), ("compiled", compiled))
        for i, t in enumerate(times)
    ]
    store.append_events(run_id, rows)
    return run_id


def markdown_of(at) -> str:
    return "\n".join(str(m.value) for m in at.markdown)


def test_while_compiled_runs_the_reading_says_not_paid_off_yet_never_did_not_pay_off(store, sleepers):
    record_probe(store)
    run_id = record_live_race(store, compiled_steps=300, phase="compiled epoch 2/3")
    at = app(run=run_id)
    assert not at.exception
    words = markdown_of(at)
    assert "After 300 of 600 compiled steps" in words
    assert "compile has not paid off yet: at these rates it breaks even between step" in words
    assert "did not pay off" not in words
    assert at.metric[3].value == "not yet" and at.metric[3].label == "Break-even"
    race = next(c for c in chart_specs(at) if c["description"].startswith("The race"))
    assert "projected" in json.dumps(race)  # the dashed projection and its label are drawn


def test_once_finished_the_same_race_reads_as_final(store, sleepers):
    record_probe(store)
    run_id = record_race(store, "done")
    at = app(run=run_id)
    assert "compiled steps are 2.00x faster" in markdown_of(at).lower()
    assert "So far" not in markdown_of(at) and "After " not in markdown_of(at)


def test_during_the_compile_the_page_says_it_is_compiling_with_the_time_so_far(store, sleepers):
    record_probe(store)
    run_id = record_live_race(store, compiled_steps=0, phase="compiling (compiled epoch 1/3)")
    at = app(run=run_id)
    info = "\n".join(i.value for i in at.info)
    assert "Compiling (roughly 4 s, estimated on this device)" in info and "s so far" in info
    assert "Eager run" not in markdown_of(at)
    assert not at.metric  # nothing to compare yet: no row of dashes above the race


def test_while_eager_runs_the_page_says_which_step_and_what_comes_next(store, sleepers):
    record_probe(store)
    run_id = record_live_race(store, compiled_steps=0, phase="eager epoch 2/3")
    sequential = {**store.get_run(run_id).params, "schedule": "sequential"}  # eager's whole run first
    store.update_run(run_id, params=sequential)
    at = app(run=run_id)
    assert "Eager run: step 600 of 600. Next: compile" in markdown_of(at)


def test_launch_folds_the_form_and_the_preset_launches_at_once(store, sleepers):
    record_probe(store)
    at = app()
    assert at.session_state["race_form"] is True  # nothing followed yet: the form is open
    at.number_input(key="form_steps_per_epoch").set_value(3).run()
    at.session_state["form_precision"] = "amp-bf16"
    next(b for b in at.button if b.label == "Launch").click().run()
    assert not at.exception and at.session_state["race_form"] is False  # folded: the run's charts come first
    assert store.list_runs(kind="race")[0].params["precision"] == "amp-bf16"
    preset = next(b for b in at.button if b.label.startswith("CPU break-even demo"))
    preset.click().run()
    runs = store.list_runs(kind="race")
    assert len(runs) == 2 and runs[0].params["model"] == "small_cnn"
    assert (runs[0].params["epochs"], runs[0].params["steps_per_epoch"]) == (3, 100)
    # The whole demo: what the form held before (bf16 here) does not leak into it.
    assert (runs[0].params["schedule"], runs[0].params["precision"]) == ("alternating", "fp32")
    assert at.query_params["run"] == str(runs[0].id)


def test_the_line_above_launch_says_what_a_race_gives(store, sleepers):
    record_probe(store)
    at = app()
    assert "You get the compile cost, the steady speedup and when compile pays off" in markdown_of(at)


def test_a_race_is_named_by_its_run_id_the_number_in_its_link(store, sleepers):
    record_probe(store)  # id 1
    run_id = record_race(store, "done")  # id 2: the first race, run 2 everywhere
    at = app(run=run_id)
    assert at.get("progress")[0].proto.text.startswith(f"Run {run_id}: done")


def test_runs_comparison_labels_runs_by_what_differs_and_the_table_puts_results_first(store, sleepers):
    record_probe(store)
    a = record_race(store, "done")
    b = record_race(store, "done")
    store.update_run(b, params={**store.get_run(b).params, "batch_size": 64})
    at = app()
    at.switch_page("app_pages/runs.py").run()
    table = at.dataframe[0].value
    assert list(table.columns[:6]) == ["id", "status", "speedup", "overhead_s", "compile", "break_even"]
    assert list(table["id"]) == [b, a]
    at.session_state["runs_table"] = {"selection": {"rows": [0, 1], "columns": [], "cells": []}}
    at.run()
    overlay = next(c for c in chart_specs(at) if c["description"].startswith("Cumulative training time, by run"))
    assert sorted(overlay["encoding"]["color"]["sort"]) == [f"run {a}: batch 16", f"run {b}: batch 64"]
    assert a < b


def test_a_finished_races_progress_bar_is_full(store, sleepers):
    record_probe(store)
    run_id = record_race(store, "done")
    store.update_run(run_id, progress=0.82)  # what a worker's last progress update can leave
    at = app(run=run_id)
    assert at.get("progress")[0].proto.value == 100


def test_a_queued_race_says_where_it_waits_and_nothing_ahead_of_it(store, sleepers):
    record_probe(store)
    run_id = queue.enqueue(store, quick_spec(epochs=1, steps_per_epoch=3), "someone")
    at = app(run=run_id)
    assert not at.exception
    assert at.get("progress")[0].proto.text.split(": ")[1] in ("queued (position 1)", "starting")
    assert not [m.value for m in at.markdown if "Eager run: step" in m.value]  # no "step 0 of N" before it runs
