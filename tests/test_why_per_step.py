"""Why, per step: the profiled anatomy of each variant, compiles and recompiles at the steps that paid
for them, compile phases while they run and a breakdown that adds up, and torch's compile trace."""

import io
import sqlite3
import time
import zipfile

import pytest
from support import CPU, RECOMPILE_REASONS, quick_spec, torch_records

from core.engine import compile_stats
from core.engine.compile_stats import AOT, CODEGEN, DYNAMO, KERNELS, LOWERING, compile_breakdown, compile_note, phase_of
from core.engine.events import CompileEvent, StatusEvent
from core.engine.profiling import summarize_profile
from core.engine.spec import RunSpec, validate
from core.engine.trainer import run_race
from core.engine.variant import varying_lengths


def race(spec, caps=CPU):
    events = []
    return run_race(spec, on_event=events.append, caps=caps), events


# -- recompiles on the timeline, and dynamic shapes ---------------------------------------------------


def varying_gpt(dynamic):
    return RunSpec(model="gpt", batch_size=2, image_size=16, epochs=1, steps_per_epoch=4, shapes="varying",
                   dynamic=dynamic, backend="aot_eager", device="cpu", profile_steps=0)  # fmt: skip


def test_varying_shapes_under_dynamic_false_recompile_at_each_new_length_with_the_guard():
    result, events = race(varying_gpt(False))
    assert result.status == "done", result.error
    lengths = [s.samples for s in result.compiled.steps]  # samples = batch size; lengths are in the shapes
    assert lengths == [2, 2, 2, 2] and varying_lengths(16) == [16, 12, 8, 14]
    compiles = [e for e in events if isinstance(e, CompileEvent) and e.phase == "train"]
    recompiles = [(e.step, e.note) for e in compiles if e.note.startswith("recompile")]
    assert [step for step, _ in recompiles] == [2, 3, 4]  # each new sequence length, at its step
    if torch_records(RECOMPILE_REASONS):  # the guard that failed, where torch records it (always on CI's)
        assert all("size mismatch" in note for _, note in recompiles), recompiles
    assert compiles[0].step == 1 and compiles[0].note.startswith("forward graph compiled")
    assert list(result.summary.compile_events) == [
        {"variant": e.variant, "phase": e.phase, "epoch": e.epoch, "step": e.step, "note": e.note} for e in compiles
    ]


def test_dynamic_true_compiles_once_for_all_lengths_and_auto_in_between():
    counts = {}
    for dynamic in (False, None, True):
        result, _ = race(varying_gpt(dynamic))
        counts[dynamic] = sum(e["note"].startswith("recompile") for e in result.summary.compile_events)
    assert counts[True] == 0 < counts[None] < counts[False] == 3


def test_image_models_get_a_smaller_last_batch_per_epoch():
    spec = quick_spec(model="small_cnn", batch_size=8, epochs=2, steps_per_epoch=3, shapes="varying", profile_steps=0)
    result, _ = race(spec)
    assert [s.samples for s in result.eager.steps] == [8, 8, 4, 8, 8, 4]
    notes = [(e["epoch"], e["step"], e["note"]) for e in result.summary.compile_events]
    assert any(step == 3 and note.startswith("recompile") for _, step, note in notes)  # the half batch


def test_fail_on_recompile_stops_the_run_at_the_recompile_and_keeps_what_was_measured():
    result, _ = race(RunSpec(**{**varying_gpt(False).to_dict(), "stance": "fail_on_recompile"}))
    assert result.status == "failed"
    assert result.error.startswith("stance fail_on_recompile stopped a recompile")
    assert len(result.eager.times()) == 4 and len(result.compiled.times()) == 1


def test_eager_on_recompile_runs_new_shapes_eagerly_instead_of_recompiling():
    result, _ = race(RunSpec(**{**varying_gpt(False).to_dict(), "stance": "eager_on_recompile"}))
    assert result.status == "done", result.error
    assert not [e for e in result.summary.compile_events if e["note"].startswith("recompile")]


def test_a_stance_with_eval_steps_is_refused_with_the_reason():
    problems = validate(RunSpec(stance="fail_on_recompile", eval_steps=2))
    assert [p.field for p in problems] == ["stance"] and "evaluation" in problems[0].message


def test_compile_notes_read_as_what_happened():
    assert compile_note({"recompile_reason": "0/0: tensor 'x' size mismatch at index 1"}) == (
        "recompile: tensor 'x' size mismatch at index 1"
    )
    assert compile_note({"is_forward": False}) == "backward graph compiled (at the first backward)"
    assert compile_note({"is_forward": True, "co_name": "inner"}) == "forward graph compiled"
    assert "graph break" in compile_note({"is_forward": True, "co_name": "torch_dynamo_resume_in_forward_at_9"})


# -- compile phases: live and added up ---------------------------------------------------------------


def test_a_compile_breakdown_adds_up_per_graph_and_in_total():
    forward = {"is_forward": True, "dynamo_cumulative_compile_time_us": 10e6, "aot_autograd_cumulative_compile_time_us": 8e6,
               "inductor_cumulative_compile_time_us": 5e6, "inductor_code_gen_cumulative_compile_time_us": 4e6,
               "triton_compile_time_us": 3e6}  # fmt: skip
    backward = {"is_forward": False, "backward_cumulative_compile_time_us": 6e6,
                "inductor_cumulative_compile_time_us": 5.5e6, "triton_compile_time_us": 4e6}  # fmt: skip
    b = compile_breakdown([forward, backward])
    assert b["forward"]["phases"] == {DYNAMO: 2.0, AOT: 3.0, LOWERING: 1.0, CODEGEN: 1.0, KERNELS: 3.0}
    assert b["backward"]["phases"] == {AOT: 0.5, LOWERING: 1.5, KERNELS: 4.0}
    assert b["total_s"] == 16.0  # the backward compile is outside the frame's total: it adds
    # The part larger than its whole, seen before this fix, cannot happen: timers that overlap are capped.
    odd = compile_breakdown([{**forward, "inductor_cumulative_compile_time_us": 12e6}])
    assert sum(odd["forward"]["phases"].values()) == pytest.approx(odd["forward"]["total_s"]) == 10.0
    assert compile_breakdown([{"co_name": "x"}]) == {}


def test_the_live_phase_is_read_from_the_compiling_stack_only():
    compiling = [
        ("/x/torch/_inductor/codegen/cpp.py", "codegen_kernel"),
        ("/x/torch/_inductor/compile_fx.py", "fx_codegen_and_compile"),
        ("/x/torch/_dynamo/convert_frame.py", "_compile"),
    ]
    assert phase_of(compiling) == CODEGEN
    assert phase_of(compiling[1:]) == LOWERING
    assert phase_of([("/x/torch/_dynamo/symbolic_convert.py", "step"), compiling[2]]) == DYNAMO
    running = [("/x/torch/_inductor/output_code.py", "__call__"), ("/x/torch/_dynamo/eval_frame.py", "_fn")]
    assert phase_of(running) is None  # compiled code running is not compiling


def test_the_phase_watcher_reports_phases_in_the_order_they_ran_and_skips_one_that_passed(monkeypatch):
    """Scripted stacks, one per sample: a phase is reported once it is on two samples in a row (AOT,
    on one sample only, is a passing frame), in the order the thread went through them, and the
    compile's end is reported when the watcher stops."""
    entry = ("/x/torch/_dynamo/convert_frame.py", "_compile")
    stacks = {
        DYNAMO: [("/x/torch/_dynamo/symbolic_convert.py", "step"), entry],
        AOT: [("/x/torch/_functorch/aot_autograd.py", "aot_dispatch_autograd"), entry],
        LOWERING: [("/x/torch/_inductor/compile_fx.py", "fx_codegen_and_compile"), entry],
        KERNELS: [("/x/torch/_inductor/async_compile.py", "wait"), ("/x/torch/_inductor/compile_fx.py", "compile_fx_inner"), entry],
        None: [("/x/torch/_inductor/output_code.py", "__call__")],
    }  # fmt: skip
    script = [DYNAMO, DYNAMO, DYNAMO, AOT, LOWERING, LOWERING, KERNELS, KERNELS, LOWERING, None, None]
    samples = iter(script)
    taken = []

    def sample(_thread_id):  # the script, then a thread no longer compiling
        taken.append(1)
        return stacks[next(samples, None)]

    monkeypatch.setattr(compile_stats, "stack_of", sample)
    monkeypatch.setattr(compile_stats, "SAMPLE_EVERY_S", 0.001)
    reported = []
    with compile_stats.PhaseWatcher(lambda phase, _since: reported.append(phase)) as watcher:
        deadline = time.monotonic() + 10
        while len(taken) < len(script) + 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert reported == [DYNAMO, LOWERING, KERNELS, None]  # the lone LOWERING sample after KERNELS passed too
    assert [phase for phase, _, _ in watcher.transitions] == [DYNAMO, LOWERING, KERNELS]
    assert all(start <= end for _, start, end in watcher.transitions)


@pytest.mark.slow
def test_a_real_inductor_race_reports_its_compile_phases_profiles_both_variants_and_fuses_kernels(tmp_path):
    spec = RunSpec(model="pointwise_mlp", batch_size=64, epochs=1, steps_per_epoch=3, device="cpu", profile_steps=2)
    result, events = race(spec)
    assert result.status == "done", result.error
    phases = [
        e.message
        for e in events
        if isinstance(e, StatusEvent) and e.state == "compile_phase" and e.variant == "compiled"
    ]
    seen = list(dict.fromkeys(p for p in phases if p))
    # Sampled stacks see a phase only when it lasts two samples: a small model's Dynamo trace and its
    # AOT autograd can both pass unseen on a fast machine (CI once saw Inductor's lowering first), its
    # lowering (seconds on CPU) cannot. The order the watcher reports in is tested on a scripted stack
    # below (test_the_phase_watcher_reports_...); here, that a real compile is seen and named.
    assert LOWERING in seen and set(seen) <= {DYNAMO, AOT, LOWERING, CODEGEN, KERNELS}, phases
    assert phases[-1] == ""  # and the compile ended
    eager, compiled = result.eager.profile, result.compiled.profile
    assert eager["steps"] == compiled["steps"] == 2
    assert compiled["kernels_per_step"] < eager["kernels_per_step"], (eager, compiled)  # counted: fused C++ kernels
    assert any("cpp_fused" in k["name"] for k in compiled["top_kernels"]) or compiled["kernels_per_step"] > 0
    assert result.summary.profile["reading"].startswith("Per step, eager launches")
    phases_s = result.compile_stats.phases
    for graph in ("forward", "backward"):
        assert sum(phases_s[graph]["phases"].values()) == pytest.approx(phases_s[graph]["total_s"])


def test_profiles_are_counted_from_profiler_events():
    class Range:
        def __init__(self, start, end):
            self.start, self.end = start, end

    class Event:
        def __init__(self, name, us=0.0, parent=None, children=(), span=None):
            self.name, self.self_cpu_time_total, self.cpu_parent = name, us, parent
            self.cpu_children, self.time_range, self.device_type = list(children), span, "DeviceType.CPU"

    mm, add = Event("aten::mm", 300), Event("aten::add", 100)
    linear = Event("aten::linear", 10, children=[mm])
    mm.cpu_parent = linear
    fused = Event("graph_0_cpp_fused_add_tanh_0", 200)
    steps = [
        Event("compile_lab::profiled_step", span=Range(0, 1000)),
        Event("compile_lab::profiled_step", span=Range(0, 1000)),
    ]
    profile = summarize_profile([*steps, linear, mm, add, fused], "cpu", 2)
    assert profile["operators_per_step"] == 1.0  # linear and add are called; mm is inside linear
    assert profile["kernels_per_step"] == 1.5  # mm, add and the fused C++ kernel, over 2 steps
    assert profile["host_s_per_step"] == pytest.approx(0.001)
    assert profile["device_s_per_step"] == pytest.approx(300e-6)
    assert profile["top_kernels"][0]["name"] == "aten::mm"


def test_a_cpu_convolution_is_counted_though_it_calls_empty_for_its_output():
    """The figure once counted only operators with nothing below them: a oneDNN convolution (which
    calls aten::empty) and its backward were left out, and a conv model read as overhead-bound."""

    class Event:
        def __init__(self, name, us, children=()):
            self.name, self.self_cpu_time_total, self.cpu_parent = name, us, None
            self.cpu_children = list(children)
            for child in self.cpu_children:
                child.cpu_parent = self

    conv = Event("aten::conv2d", 5, [Event("aten::convolution", 8, [Event("aten::_convolution", 4, [
        Event("aten::mkldnn_convolution", 900, [Event("aten::empty", 1), Event("aten::as_strided_", 2)])])])])  # fmt: skip
    backward = Event("aten::convolution_backward", 1500, [Event("aten::empty", 1), Event("aten::resize_", 1)])
    view = Event("aten::t", 3, [Event("aten::transpose", 2, [Event("aten::as_strided", 1)])])
    flat = [conv, *_descendants(conv), backward, *_descendants(backward), view, *_descendants(view)]
    profile = summarize_profile(flat, "cpu", 1)
    names = {k["name"] for k in profile["top_kernels"]}
    assert names == {"aten::mkldnn_convolution", "aten::convolution_backward"}  # not wrappers, views, empties
    assert profile["kernels_per_step"] == 2
    assert profile["device_s_per_step"] == pytest.approx(2400e-6)  # self time: nothing counted twice
    assert profile["operators_per_step"] == 3  # conv2d, convolution_backward, t


def _descendants(event):
    for child in event.cpu_children:
        yield child
        yield from _descendants(child)


def test_a_real_cpu_profile_of_a_conv_model_counts_its_convolutions_and_is_not_called_overhead_bound():
    import torch
    from torch import nn

    from core.engine.profile_reading import bound_words, profile_reading
    from core.engine.profiling import profile_steps

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(16, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(8, 16, 32, 32), torch.randn(8, 64, 32, 32)

    def step(x, y):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()

    step(x, y)
    profile = profile_steps(step, iter([(x, y)] * 2), torch.device("cpu"), 2)
    top = profile["top_kernels"]
    conv_s = sum(k["s_per_step"] for k in top if "conv" in k["name"])
    assert any("conv" in k["name"] and "backward" in k["name"] for k in top), top
    assert any("conv" in k["name"] and "backward" not in k["name"] for k in top), top
    assert conv_s > 0.5 * profile["device_s_per_step"], top  # the convolutions are most of the kernel time
    words = bound_words("Eager", profile)
    assert "sets its pace" in words, (words, profile)
    assert "overhead-bound" not in profile_reading(profile, profile)


def test_overhead_bound_is_said_only_when_the_time_outside_kernels_could_be_overhead():
    from core.engine.profile_reading import STALE_CPU_COUNTING, bound_words, profile_reading

    def part(host, kernels, operators=100, counting="CUDA kernels"):
        return {"host_s_per_step": host, "device_s_per_step": kernels, "operators_per_step": operators,
                "kernels_per_step": operators, "kernel_counting": counting}  # fmt: skip

    # 2 ms outside kernels over 100 operators: 20 µs each, what dispatch costs
    assert bound_words("Eager", part(0.003, 0.001)).endswith("so it is overhead-bound.")
    assert "about 20 µs per operator" in bound_words("Eager", part(0.003, 0.001))
    # the profile: 138 ms outside kernels over 134 operators, ~1 ms each: work the figure missed
    missed = bound_words("Eager", part(0.205, 0.067, operators=134))
    assert "overhead-bound" not in missed and "missed work" in missed and "1.03 ms per operator" in missed
    assert "sets its pace" in bound_words("Eager", part(0.003, 0.0025))
    stale = part(0.004, 0.0012, counting=STALE_CPU_COUNTING)
    words = profile_reading(stale, part(0.002, 0.0015))
    assert "overhead-bound" not in words and "left out" in words


# -- stored, imported, and the compile trace ------------------------------------------------------------


def test_a_version_1_store_gains_the_compile_note_column_and_keeps_its_events(tmp_path):
    from core.runs.store import SCHEMA_VERSION, Store

    path = tmp_path / "old.sqlite3"
    conn = sqlite3.connect(path)
    conn.executescript(
        """CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO meta VALUES ('schema_version', '1');
        CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, params TEXT NOT NULL,
          owner TEXT NOT NULL, device_key TEXT NOT NULL, status TEXT NOT NULL, phase TEXT NOT NULL DEFAULT '',
          progress REAL NOT NULL DEFAULT 0, created_at REAL NOT NULL, started_at REAL, finished_at REAL,
          heartbeat_at REAL, pid INTEGER, host TEXT, time_limit_s REAL, cancel_requested INTEGER NOT NULL DEFAULT 0,
          environment TEXT, summary TEXT, details TEXT, error TEXT, imported INTEGER NOT NULL DEFAULT 0);
        CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, run_id INTEGER NOT NULL, kind TEXT NOT NULL,
          variant TEXT NOT NULL, phase TEXT NOT NULL, epoch INTEGER NOT NULL, step INTEGER NOT NULL,
          time_s REAL NOT NULL, eval_time_s REAL, loss REAL, samples INTEGER, recorded_at REAL NOT NULL);
        INSERT INTO runs (kind, params, owner, device_key, status, created_at) VALUES ('race', '{}', 'me', 'cpu', 'done', 1);
        INSERT INTO events (run_id, kind, variant, phase, epoch, step, time_s, recorded_at)
          VALUES (1, 'step', 'eager', 'train', 1, 1, 0.5, 1);"""
    )
    conn.commit()
    conn.close()
    store = Store(str(path))
    assert (
        store.schema_version() == SCHEMA_VERSION == 6
    )  # every migration in order (2: note, 3: client, 4: sweeps, 5: race numbers, 6: owner hashes)
    assert store.get_run(1).client is None and store.get_run(1).status == "done"
    assert store.events_after(1)[0]["time_s"] == 0.5 and store.events_after(1)[0]["note"] is None
    store.append_events(1, [{"kind": "compile", "variant": "compiled", "phase": "train", "epoch": 1, "step": 3,
                             "time_s": 0.0, "note": "recompile: x"}])  # fmt: skip
    assert store.events_after(1)[-1]["note"] == "recompile: x"


def test_compile_events_travel_in_bundles(tmp_path):
    from core.runs.bundle import export_bundle, import_bundle
    from core.runs.store import Store

    store = Store(str(tmp_path / "s.sqlite3"))
    run_id = store.create_run("race", quick_spec().to_dict(), "me", "cpu", status="done", created_at=time.time())
    rows = [{"kind": "step", "variant": v, "phase": "train", "epoch": 1, "step": i, "time_s": 0.01, "loss": 1.0}
            for v in ("eager", "compiled") for i in (1, 2, 3)]  # fmt: skip
    rows.append({"kind": "compile", "variant": "compiled", "phase": "train", "epoch": 1, "step": 2, "time_s": 0.0,
                 "note": "recompile: tensor 'x' size mismatch"})  # fmt: skip
    store.append_events(run_id, rows)
    copy = import_bundle(store, export_bundle(store, run_id), "other")
    assert store.get_run(copy).summary["compile_events"] == [
        {"variant": "compiled", "phase": "train", "epoch": 1, "step": 2, "note": "recompile: tensor 'x' size mismatch"}
    ]


def test_a_queued_run_keeps_torchs_compile_trace_and_offers_it_as_a_zip(tmp_path):
    from core.runs import queue
    from core.runs.limits import HostLimits
    from core.runs.run_files import compile_trace_size, compile_trace_zip, profiler_traces
    from core.runs.store import Store

    store = Store(str(tmp_path / "s.sqlite3"))
    spec = quick_spec(epochs=1, steps_per_epoch=3, compile_trace=True, profile_steps=1)
    run_id = queue.enqueue(store, spec, "me", limits=HostLimits(job_time_limit_s=None), caps=CPU)
    deadline = time.monotonic() + 300
    while not store.get_run(run_id).finished and time.monotonic() < deadline:
        queue.tick(store)
        time.sleep(0.3)
    run = store.get_run(run_id)
    assert run.status == "done", run.error
    assert compile_trace_size(store.path, run_id) > 0
    with zipfile.ZipFile(io.BytesIO(compile_trace_zip(store.path, run_id))) as archive:
        text = "".join(archive.read(name).decode("utf-8", "replace") for name in archive.namelist())
    assert "dynamo_start" in text and "forward" in text  # the compiled frames, as tlparse reads them
    assert [f.label for f in profiler_traces(store.path, run_id)] == [
        "eager steps (profiler trace)",
        "compiled steps (profiler trace)",
    ]
    queue.delete(store, run_id, "me")
    assert compile_trace_size(store.path, run_id) is None and profiler_traces(store.path, run_id) == []
