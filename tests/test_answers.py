"""Answers, not just numbers: the cause a race's verdict has (core.engine.cause), its recompiles in
the story (core.engine.compile_stats) and what to try next on its device (core.engine.recommend)."""

import json
import os
import re

import pytest

from core import PROJECT_ROOT
from core.engine import cause as causes
from core.engine.cause import Cause, race_cause
from core.engine.compile_stats import avoid_words, recompile_words, recompiles_of
from core.engine.recommend import advise, caps_of, cost_words, sweep_advice
from core.view.run_screen.why_per_step import anatomy_rows

CPU_ENV = {"device_type": "cpu", "torch_threads": 1, "worker_cpus": [1], "cpu_count": 2}
H100_ENV = {"device_type": "cuda", "device_name": "NVIDIA H100", "compute_capability": [9, 0], "triton": "3.8.0"}


def part(host_ms, kernel_ms, kernels=150, operators=120, top=(), launches=0.0):
    return {
        "steps": 3,
        "host_s_per_step": host_ms / 1e3,
        "device_s_per_step": kernel_ms / 1e3,
        "kernels_per_step": kernels,
        "operators_per_step": operators,
        "graph_launches_per_step": launches,
        "kernel_counting": "CUDA kernels",
        "top_kernels": [{"name": n, "calls_per_step": 1.0, "s_per_step": ms / 1e3} for n, ms in top],
    }


def summary(verdict, speedup, eager, compiled, ci=None, **extra):
    return {
        "verdict": verdict,
        "steady_state_speedup": speedup,
        "speedup_ci95": list(ci) if ci else None,
        "compile_time_s": 9.0,
        "profile": {"eager": eager, "compiled": compiled},
        **extra,
    }


def recording(name):
    with open(os.path.join(PROJECT_ROOT, "assets", "recordings", f"{name}.json")) as fh:
        return json.load(fh)["run"]


def numbers(text):
    return [float(n) for n in re.findall(r"(\d+(?:\.\d+)?) ms", text)]


# -- the cause ---------------------------------------------------------------------------------------


def test_the_issues_example_names_the_host_time_as_the_cause_and_agrees_with_the_anatomy():
    s = summary("slower", 0.91, part(72.8, 70.1), part(79.9, 70.2), ci=(0.88, 0.94))
    found = race_cause(s, {"mode": "default"}, CPU_ENV)
    assert found.kind == causes.OUTSIDE
    assert found.sentence.startswith("Compiled is slower here because its host time per step is 7.1 ms longer")
    assert "(79.9 ms vs 72.8 ms)" in found.sentence and "about the same time (70.2 ms vs 70.1 ms)" in found.sentence
    assert "the work itself sets its pace" not in found.sentence
    # Every figure it quotes is the anatomy table's, rounded as it says it.
    table = {row["per step"]: row for row in anatomy_rows(s["profile"])}
    shown = {
        round(table[k][v], 1)
        for k in ("host time per step (ms)", "kernel time per step (ms)")
        for v in ("eager", "compiled")
    }
    quoted = set(numbers(found.sentence))
    assert {72.8, 79.9, 70.1, 70.2} <= quoted and quoted - {7.1} <= shown


def test_a_profile_that_contradicts_the_timed_verdict_names_no_cause():
    # The issue's page: a 1.09x card beside a profile where compiled's host time is longer.
    s = summary("faster", 1.09, part(72.8, 70.1), part(79.9, 70.2), ci=(1.04, 1.14))
    found = race_cause(s, {}, CPU_ENV)
    assert found.kind == causes.DISAGREES
    assert "cannot say why" in found.sentence and "faster (1.09x)" in found.sentence
    assert "because" not in found.sentence


def test_a_profile_that_agrees_in_direction_but_not_size_is_read_for_its_cause():
    # Issue 43: "The timed steps say faster (1.09x), but compiled's profiled steps are shorter by
    # 28.3 ms ... so this race cannot say why": both say faster, so the profile names the cause.
    s = summary("faster", 1.09, part(100.0, 60.0), part(71.7, 58.0), ci=(1.04, 1.14))
    found = race_cause(s, {}, CPU_ENV)
    assert found.kind == causes.OUTSIDE
    assert found.sentence.startswith("Compiled is faster here because its host time per step is 28.3 ms shorter")
    assert "cannot say" not in found.sentence
    assert "profiled steps put the gap at 1.39x, the timed steps at 1.09x" in found.sentence
    # The same for slower: a profile that is longer by more than the timed interval says still agrees.
    slower = race_cause(summary("slower", 0.93, part(50.0, 40.0), part(80.0, 41.0), ci=(0.9, 0.96)), {}, CPU_ENV)
    assert slower.kind == causes.OUTSIDE and slower.sentence.startswith("Compiled is slower here because")
    # No clear difference beside a clearly shorter profile still cannot say why.
    unclear = race_cause(summary("no clear difference", 1.01, part(100.0, 60.0), part(70.0, 58.0), ci=(0.97, 1.05)))
    assert unclear.kind == causes.DISAGREES


def test_faster_kernels_are_named_with_fusion_when_the_kernel_count_fell():
    s = summary("faster", 1.30, part(72.1, 69.3, kernels=162), part(53.0, 50.5, kernels=150), ci=(1.2, 1.42))
    found = race_cause(s, {}, CPU_ENV)
    assert found.kind == causes.KERNELS and found.verdict == "faster"
    assert "its kernels take 18.8 ms less (50.5 ms vs 69.3 ms)" in found.sentence
    assert "fewer kernels (150 per step against eager's 162)" in found.sentence


def test_no_clear_difference_with_library_kernels_says_little_is_left_to_fuse():
    top = (("aten::mm", 3.7), ("aten::addmm", 2.3), ("graph_0_cpp_fused_add_0", 0.4))
    s = summary("no clear difference", 0.97, part(10.2, 8.8), part(9.9, 8.3, top=top), ci=(0.89, 1.06))
    found = race_cause(s, {}, CPU_ENV)
    assert found.kind == causes.SAME
    assert found.library_share == pytest.approx(6.0 / 8.3)
    assert "at least 72% of compiled's kernel time is in library matmuls (aten::mm, aten::addmm)" in found.sentence
    assert "Measured with 1 thread on 1 of the machine's 2 cores." in found.sentence


def test_both_parts_are_named_when_neither_carries_the_difference():
    s = summary("faster", 1.25, part(20.0, 12.0), part(16.0, 10.0), ci=(1.2, 1.3))
    found = race_cause(s, {}, CPU_ENV)
    assert found.kind == causes.BOTH and "both parts of its step moved" in found.sentence


def test_cuda_graphs_are_named_when_they_removed_the_time_outside_the_kernels():
    s = summary("faster", 2.0, part(10.0, 4.0), part(5.0, 4.0, launches=1.0), ci=(1.9, 2.1))
    found = race_cause(s, {"mode": "reduce-overhead"}, H100_ENV)
    assert found.kind == causes.OUTSIDE and "CUDA graphs replay its kernels in 1 launch per step" in found.sentence
    assert "thread" not in found.sentence  # threads are said on a CPU only


def test_without_a_profile_the_cause_says_the_data_cannot_say():
    s = summary("slower", 0.8, None, None, graph_breaks=2, graphs=3)
    found = race_cause(s, {}, CPU_ENV)
    assert found.kind == causes.UNKNOWN and "cannot say" in found.sentence
    assert "split the model into 3 graphs at 2 graph breaks" in found.sentence


def test_no_cause_without_a_verdict():
    assert race_cause({"steady_state_speedup": None}) is None
    assert race_cause(summary("faster", 1.2, part(1, 1), part(1, 1), compile_failed="boom")) is None


def test_a_cause_round_trips_as_data():
    s = summary("slower", 0.91, part(72.8, 70.1), part(79.9, 70.2))
    found = race_cause(s, {}, CPU_ENV)
    assert Cause.from_dict(json.loads(json.dumps(found.to_dict()))) == found


@pytest.mark.parametrize("name", ["cpu-break-even-demo", "cpu-compile-never-pays-off", "cpu-recompiles-varying-shapes"])
def test_every_shipped_recording_gets_a_cause_that_agrees_with_its_verdict(name):
    run = recording(name)
    found = race_cause(run["summary"], run["params"], run["environment"])
    word = {"faster": "faster", "slower": "slower"}.get(run["summary"]["verdict"])
    assert found.kind != causes.UNKNOWN
    if found.kind not in (causes.DISAGREES, causes.SAME):
        assert found.sentence.startswith(f"Compiled is {word} here because")


# -- recompiles ------------------------------------------------------------------------------------------

GUARD = "tensor 'x' size mismatch at index 0. expected 48, actual 24"


def test_the_recompile_reading_names_the_whole_guard_its_cost_and_what_avoids_it():
    run = recording("cpu-recompiles-varying-shapes")
    words = recompile_words(run["summary"], run["params"])
    assert GUARD in words  # whole, not cut
    assert "at step 15 (about 6.79 s)" in words
    assert "dynamic=True" in words and "mark_dynamic(x, 0)" in words and "pad" in words
    assert "this race asked for dynamic=False" in words
    found = recompiles_of(run["summary"])
    assert [(r.step, r.guard) for r in found] == [(15, GUARD)]
    assert found[0].cost_s == pytest.approx(6.809 - 0.01575, abs=0.01)


def test_one_step_that_recompiles_two_graphs_is_priced_once():
    s = {
        "compiled_step_times_s": [5.0, 0.1, 2.1, 0.1],
        "compiled_median_step_s": 0.1,
        "compile_events": [
            {"variant": "compiled", "phase": "train", "epoch": 1, "step": 3, "note": f"recompile: {GUARD}"},
            {"variant": "compiled", "phase": "train", "epoch": 1, "step": 3, "note": "recompile: L['y'] == 2"},
        ],
    }
    assert [r.cost_s for r in recompiles_of(s)] == [pytest.approx(2.0), 0.0]
    words = recompile_words(s)
    assert "2 times" in words and GUARD in words and "L['y'] == 2" in words


def test_a_sequence_length_guard_suggests_buckets_and_its_own_dimension():
    words = avoid_words("tensor 'x' size mismatch at index 1. expected 16, actual 12")
    assert "mark_dynamic(x, 1)" in words and "buckets" in words


def test_no_recompile_words_without_recompiles():
    assert recompile_words(recording("cpu-break-even-demo")["summary"]) is None


# -- what to try next ------------------------------------------------------------------------------------


def test_a_cpu_is_never_told_to_try_cuda_graphs():
    s = summary("slower", 0.7, part(10.0, 2.0), part(14.0, 2.0), ci=(0.65, 0.75))
    advice = advise(s, {"model": "mlp", "batch_size": 64, "device": "cpu"}, CPU_ENV)
    changes = [a.changes for a in advice.suggestions]
    assert all(c.get("mode") not in ("reduce-overhead", "max-autotune") for c in changes)
    assert {"batch_size": 256} in changes
    assert "CUDA graphs" not in (advice.sentence() or "")


def test_an_overhead_bound_cpu_race_is_told_a_bigger_batch_never_cuda_graphs():
    # The race the GPU test below gets CUDA graphs for, on a CPU: the same branch, less its CUDA part.
    s = summary("no clear difference", 1.0, part(10.0, 2.0), part(10.1, 2.0), ci=(0.95, 1.05))
    advice = advise(s, {"model": "mlp", "batch_size": 64, "device": "cpu"}, CPU_ENV)
    changes = [a.changes for a in advice.suggestions]
    assert {"batch_size": 256} in changes  # the overhead branch was reached
    assert {"mode": "reduce-overhead"} not in changes and "CUDA graphs" not in (advice.sentence() or "")


def test_an_overhead_bound_gpu_race_is_told_to_try_cuda_graphs():
    s = summary("no clear difference", 1.0, part(10.0, 2.0), part(10.1, 2.0), ci=(0.95, 1.05))
    advice = advise(s, {"model": "mlp", "batch_size": 64, "device": "cuda"}, H100_ENV)
    assert advice.suggestions[0].changes == {"mode": "reduce-overhead"}


def test_a_compile_that_gains_nothing_says_so():
    s = summary("no clear difference", 1.0, part(10.0, 9.0), part(10.0, 9.0), ci=(0.95, 1.05), compile_time_s=108.6)
    words = cost_words(s, {"mode": "max-autotune-no-cudagraphs"})
    assert words == (  # its interval spans 1x: the race cannot tell, which is not "never"
        "Compile (mode max-autotune-no-cudagraphs) cost 109 s here and gained nothing measurable per step: this race "
        "cannot tell whether any run length earns it back."
    )
    advice = advise(s, {"model": "mlp", "mode": "max-autotune-no-cudagraphs", "device": "cpu"}, CPU_ENV)
    assert advice.suggestions[0].changes == {"mode": "default"}


def test_a_compile_far_dearer_than_what_faster_steps_saved_says_so():
    s = {
        "verdict": "faster",
        "steady_state_speedup": 1.02,
        "compile_time_s": 100.0,
        "eager_median_step_s": 0.102,
        "compiled_median_step_s": 0.1,
        "compiled_step_times_s": [0.1] * 300,
    }
    assert "more than 10 times" in cost_words(s)
    s["compile_time_s"] = 1.0
    assert cost_words(s) is None


def test_recompiles_on_a_new_size_suggest_dynamic_shapes_first():
    run = recording("cpu-recompiles-varying-shapes")
    advice = advise(run["summary"], run["params"], run["environment"])
    assert advice.suggestions[0].changes == {"dynamic": True}


def test_every_suggestion_runs_on_the_device_the_race_ran_on():
    from core.engine.spec import RunSpec, validate

    for name in ("cpu-break-even-demo", "cpu-compile-never-pays-off", "cpu-recompiles-varying-shapes"):
        run = recording(name)
        advice = advise(run["summary"], run["params"], run["environment"])
        for s in advice.suggestions:
            spec = RunSpec.from_dict({**run["params"], **s.changes})
            assert validate(spec, caps_of(run["environment"])) == [], (name, s)


def test_the_sweeps_advice_picks_the_surest_gain():
    points = [
        {"label": "batch size 64", "verdict": "faster", "speedup": 1.5, "ci_low": 1.01, "ci_high": 2.0},
        {"label": "batch size 256", "verdict": "faster", "speedup": 1.3, "ci_low": 1.2, "ci_high": 1.4},
        {"label": "batch size 1,024", "verdict": "no clear difference", "speedup": 1.1, "ci_low": 0.9, "ci_high": 1.3},
    ]
    assert "batch size 256" in sweep_advice(points)
    assert sweep_advice(points[2:]) is None


def test_a_cpu_sweeps_regime_reading_never_advises_cuda_graphs():
    import dataclasses

    from test_sweep_view import batch_sweep, fake_runs

    from core.view.sweep import regime_readings, sweep_frame

    sweep = batch_sweep()
    runs = fake_runs(sweep, ["done"] * 4)
    for r in runs:  # overhead-bound: the eager step barely grows with the batch
        r.summary["eager_median_step_s"] = 0.010 + 1e-8 * r.params["batch_size"]

    def words(device_type):
        placed = [dataclasses.replace(r, environment={"device_type": device_type}) for r in runs]
        return " ".join(regime_readings(sweep, sweep_frame(sweep, placed)))

    cpu = words("cpu")
    assert cpu.startswith("Overhead-bound") and "reduce-overhead" not in cpu and "need a CUDA GPU" in cpu
    assert "reduce-overhead / CUDA graphs" in words("cuda")


def test_profiling_a_cpu_step_writes_nothing_to_the_terminal():
    import subprocess
    import sys

    script = (
        "import torch\n"
        "from core.engine.profiling import profile_steps\n"
        "x = torch.randn(8, 8)\n"
        "profile_steps(lambda a, b: (a @ b).sum(), iter([(x, x)] * 2), torch.device('cpu'), 2)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "KINETO_LOG_LEVEL"}
    done = subprocess.run([sys.executable, "-c", script], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "USDT" not in done.stderr and "gpuGetDeviceCount" not in done.stderr, done.stderr


def test_a_link_naming_only_a_model_gets_that_models_batch_size():
    from core.engine.models.sources import default_batch_size
    from core.view.race_form import default_spec, spec_from_query

    spec, notes = spec_from_query({"model": "resnet18"}, default_spec(None))
    assert spec.batch_size == default_batch_size("resnet18") == 64 and notes == []
    spec, _ = spec_from_query({"model": "resnet18", "batch_size": "32"}, default_spec(None))
    assert spec.batch_size == 32  # a link's own batch size wins


def test_importing_one_bundle_twice_makes_one_run(tmp_path):
    from core.runs.bundle import AlreadyImported, import_bundle, load_bundle_file
    from core.runs.store import Store

    store = Store(str(tmp_path / "s.sqlite3"))
    path = os.path.join(PROJECT_ROOT, "assets", "recordings", "cpu-compile-never-pays-off.json")
    first = import_bundle(store, load_bundle_file(path), "ann")
    with pytest.raises(AlreadyImported, match=f"already imported as run {first}") as caught:
        import_bundle(store, load_bundle_file(path), "ann")
    assert caught.value.run_id == first and [r.id for r in store.list_runs()] == [first]
    other = import_bundle(store, load_bundle_file(path), "bob")  # another visitor keeps a copy of their own
    assert other != first


def test_recordings_are_listed_by_what_they_show():
    from core.view import replay

    labels = {key: replay.load_recording(key).label for key in replay.shipped_recordings()}
    assert labels["file:cpu-break-even-demo"].startswith("1.30x, breaks even at step 523: small_cnn")
    # 0.97x, no clear difference: no break-even to count on, in the words every surface uses, not "never pays off"
    assert labels["file:cpu-compile-never-pays-off"].startswith(
        "0.97x, no clear per-step gain, no break-even to count on: mlp"
    )
    assert labels["file:cpu-recompiles-varying-shapes"].startswith(
        "1.57x faster, breaks even past the run (about step 1,732), 1 recompile: small_cnn"
    )


def test_throughput_is_not_coloured_beside_no_clear_difference():
    from core.view.run_screen.layout import result_cards

    base = {"eager_samples_per_s": 1000.0, "compiled_samples_per_s": 1030.0, "steady_state_speedup": 1.03}
    unclear = {c.label: c for c in result_cards({**base, "verdict": "no clear difference"})}["Throughput (compiled)"]
    assert unclear.delta == "+3% vs eager" and unclear.delta_color == "off"
    clear = {c.label: c for c in result_cards({**base, "verdict": "faster"})}["Throughput (compiled)"]
    assert clear.delta_color == "normal"


def test_a_race_with_few_steps_labels_its_step_axes_in_whole_steps():
    import pandas as pd

    from core.view import race_charts

    steps = pd.DataFrame(
        [{"run": "r", "variant": v, "phase": "train", "epoch": 1, "step": s, "time_s": 0.01, "loss": 1.0}
         for v in ("eager", "compiled") for s in range(1, 4)]
    )  # fmt: skip

    def step_axes(node, out):
        if isinstance(node, dict):
            if node.get("field") == "step" and node.get("type") == "quantitative" and "title" in node:
                out.append(node.get("axis"))
            for value in node.values():
                step_axes(value, out)
        elif isinstance(node, list):
            for value in node:
                step_axes(value, out)
        return out

    for chart in (
        race_charts.cumulative_chart(steps),
        race_charts.step_time_chart(steps),
        race_charts.loss_chart(steps),
    ):
        axes = step_axes(chart.to_dict(), [])
        assert axes and all(a and a.get("format") == ",d" and a.get("tickMinStep") == 1 for a in axes), axes


def test_a_bundles_profile_is_checked_and_kept_without_its_machines_trace_path(tmp_path):
    from core.runs.bundle import BundleError, import_bundle, load_bundle_file
    from core.runs.store import Store

    store = Store(str(tmp_path / "s.sqlite3"))
    path = os.path.join(PROJECT_ROOT, "assets", "recordings", "cpu-break-even-demo.json")
    run_id = import_bundle(store, load_bundle_file(path), "ann")
    profile = store.get_run(run_id).summary["profile"]
    assert profile["compiled"]["host_s_per_step"] == pytest.approx(0.052957603666666665)
    assert "trace" not in profile["compiled"] and "reading" not in profile
    bad = load_bundle_file(path)
    bad["run"]["summary"]["profile"]["eager"]["top_kernels"][0]["s_per_step"] = "fast"
    with pytest.raises(BundleError, match=r"run\.summary\.profile\.eager\.top_kernels\[0\]\.s_per_step"):
        import_bundle(store, bad, "bob")


def test_one_compiled_step_is_no_speedup_to_read_yet():
    from core.engine import analysis
    from core.engine.reading import reading

    one = analysis.summarize([0.01] * 5, [5.0], [], [], 16)
    assert one["steady_state_speedup"] is None and one["verdict"] is None
    assert reading(one, live=True, total=300, counts={"eager": 5, "compiled": 1}).startswith(
        "Not enough compiled steps"
    )
    two = analysis.summarize([0.01] * 5, [5.0, 0.009], [], [], 16)
    assert two["steady_state_speedup"] is not None
    graphs = analysis.summarize([0.01] * 5, [5.0, 1.0, 0.5], [], [], 16, min_warmup=3)  # CUDA graphs: 3 to record
    assert graphs["steady_state_speedup"] is None


def test_the_form_and_the_live_words_describe_the_schedule_the_race_runs():
    from core.engine.spec import RunSpec
    from core.view.race_form import race_promise
    from core.view.run_screen.sentences import eager_phase_text

    blocks = race_promise(RunSpec(epochs=3, steps_per_epoch=100), None)
    assert "eager and compiled taking turns every 5 steps (300 steps each)" in blocks and "then compiled" not in blocks
    assert "300 steps eager, then 300 compiled" in race_promise(
        RunSpec(epochs=3, steps_per_epoch=100, schedule="sequential"), None
    )
    words = eager_phase_text(3, 300, 9.0, estimated=False, schedule="blocks")
    assert words.startswith("Eager's first 5 steps: step 3 of 300. Next: compile (about 9 s on this device)")
    assert words.endswith("then eager and compiled taking turns every 5 steps.")


def test_the_compile_clock_runs_on_between_the_forward_and_the_backward_graph(tmp_path):
    from core.engine.events import StatusEvent, StepEvent
    from core.runs.store import Store
    from core.runs.worker import EventSink

    store = Store(str(tmp_path / "s.sqlite3"))
    run_id = store.create_run("race", {"model": "mlp"}, "ann", "cpu", status="running")
    sink = EventSink(store.path, run_id, 10, flush_every_s=60)
    try:
        sink(StatusEvent("compiled", "compiling", 1, 3, "compiling the train graph"))
        sink(StatusEvent("compiled", "compile_phase", 1, 3, "Dynamo tracing"))
        started = sink._live["compile_phase"]["compile_started"]
        sink(StatusEvent("compiled", "compile_phase", 1, 3, ""))  # the forward graph done, the backward's next
        assert sink._live["compile_phase"]["compile_started"] == started
        assert sink._fields["phase"].startswith("compiling")
        sink(StatusEvent("compiled", "compile_phase", 1, 3, "AOT autograd"))
        assert sink._live["compile_phase"]["compile_started"] == started  # not a new clock
        sink(StepEvent("compiled", "train", 1, 1, 5.0, 1.0, 16))
        sink(StatusEvent("compiled", "training", 1, 3, ""))
        assert "compile_phase" not in sink._live and sink._fields["phase"] == "compiled epoch 1/3"
    finally:
        sink.close()


def test_in_blocks_the_status_line_names_the_variant_whose_turn_it_is():
    from support import CPU, quick_spec

    from core.engine.events import StatusEvent
    from core.engine.trainer import run_race
    from core.runs.worker import phase_text

    events = []
    run_race(quick_spec(epochs=1, steps_per_epoch=10, profile_steps=0), on_event=events.append, caps=CPU)
    kinds = [e for e in events if not isinstance(e, StatusEvent) or e.state in ("training", "compiling")]
    # Before each step, the last status said is the stepping variant's.
    last = None
    for e in kinds:
        if isinstance(e, StatusEvent):
            last = e
        elif getattr(e, "phase", None) == "train" and hasattr(e, "time_s"):
            assert last is not None and last.variant == e.variant, (phase_text(last), e)


def test_a_backend_that_generates_no_kernels_is_named_as_such_and_inductor_suggested():
    top = (("aten::mm", 3.7), ("aten::sqrt", 2.3))
    s = summary("no clear difference", 0.97, part(10.2, 8.8), part(9.9, 8.3, top=top), ci=(0.89, 1.06))
    params = {"model": "mlp", "batch_size": 64, "backend": "aot_eager", "device": "cpu"}
    found = race_cause(s, params, CPU_ENV)
    assert "the aot_eager backend traces the model but generates no kernels" in found.sentence
    assert "library kernels" not in found.sentence and found.library_share is None
    advice = advise(s, params, CPU_ENV)
    assert advice.suggestions[0].changes == {"backend": "inductor"}
    assert all("batch_size" not in a.changes for a in advice.suggestions)  # no fusion to give more work to


def test_the_sweep_report_in_a_terminal_says_why_and_next():
    from test_sweep_view import batch_sweep, fake_runs

    from core.view.sweep import sweep_frame, sweep_report

    sweep = batch_sweep()
    runs = fake_runs(sweep, ["done"] * 4)
    text = sweep_report(sweep, sweep_frame(sweep, runs), "finished", runs=runs)
    assert "\nnext: The surest gain measured here is at batch size" in text and "/?model=pointwise_mlp" in text


def test_slower_kernels_name_the_longest_generated_kernel():
    top_e, top_c = (("aten::mm", 6.0),), (("aten::mm", 6.0), ("cpp_fused_gelu_0", 3.0))
    s = summary("slower", 0.8, part(10.0, 8.0, top=top_e), part(12.5, 10.5, top=top_c), ci=(0.75, 0.85))
    found = race_cause(s, {}, CPU_ENV)
    assert found.kind == causes.KERNELS
    assert found.sentence.startswith("Compiled is slower here because its kernels take 2.5 ms more (10.5 ms vs 8 ms)")
    assert "the longest kernel Inductor generated is cpp_fused_gelu_0 (3 ms per step)" in found.sentence


def test_a_stored_race_in_a_terminal_says_why_its_recompiles_and_what_to_try_on_its_device(tmp_path):
    """`wait` and `queue` print a stored race's table with its answers, read with its settings and
    environment (without them the advice cannot know the device, and the cause its threads)."""
    from core.cli.common import stored_result
    from core.runs.bundle import import_bundle, load_bundle_file
    from core.runs.store import Store
    from core.view.report import summary_table

    store = Store(str(tmp_path / "s.sqlite3"))
    path = os.path.join(PROJECT_ROOT, "assets", "recordings", "cpu-recompiles-varying-shapes.json")
    table = summary_table(stored_result(store.get_run(import_bundle(store, load_bundle_file(path), "ann"))))
    assert "\nWhy: Compiled is faster here because its kernels take 8.99 ms less" in table
    assert "Measured with" in table  # the threads and cores, from the stored environment
    assert "\nRecompiles: " in table and "size mismatch at index 0. expected 48, actual 24" in table
    assert "\nTry next: dynamic shapes: " in table and "dynamic=true" in table and "cuda" not in table.lower()


def test_the_terminal_prints_each_suggestion_as_a_command_that_parses_into_the_suggested_race(tmp_path, capsys):
    """Issue 43: the CLI's "Try next" lines were the page's links (/?model=...). A terminal prints a
    command instead (python -m core race ...), built from the same suggestion through the options
    table; each parses with the CLI's own parser into the race suggested. The page keeps its links."""
    import argparse
    import shlex

    from core.cli.jobs import follow
    from core.cli.main import build_parser
    from core.cli.races import RACE_COMMAND, spec_from_args
    from core.runs.bundle import import_bundle, load_bundle_file
    from core.runs.store import Store
    from core.view.answers import finished_answers

    store = Store(str(tmp_path / "s.sqlite3"))
    path = os.path.join(PROJECT_ROOT, "assets", "recordings", "cpu-recompiles-varying-shapes.json")
    run = store.get_run(import_bundle(store, load_bundle_file(path), "ann"))
    suggested = finished_answers(run.summary, run.params, run.environment).next_races
    assert suggested and all(race.link.startswith("/?") and race.spec is not None for race in suggested)  # the page's

    assert follow(store, run.id, argparse.Namespace(json=False)) == 0
    printed = capsys.readouterr().out
    assert "\nTry next: dynamic shapes: " in printed and "/?" not in printed  # no page link in a terminal
    commands = [line.strip() for line in printed.splitlines() if line.strip().startswith(RACE_COMMAND + " ")]
    assert len(commands) == len(suggested)
    for command, race in zip(commands, suggested):
        argv = shlex.split(command)
        assert argv[:4] == ["python", "-m", "core", "race"]
        args = build_parser().parse_args(argv[3:])
        assert spec_from_args(args) == race.spec  # the very race suggested
    dynamic = next(c for c, race in zip(commands, suggested) if race.label == "dynamic shapes")
    assert "--dynamic true" in dynamic and "--model small_cnn" in dynamic and "--batch-size 48" in dynamic
