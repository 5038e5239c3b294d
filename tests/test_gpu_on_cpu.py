"""GPU paths checked on a CPU machine: each CUDA-path defect simulated (fake device capabilities, a
torch attribute removed, a counter set, the condition torch creates on a GPU built by hand), so the
fix is checked in CI where no GPU exists, and each test fails on the code as it was before the fix."""

import collections
import dataclasses
import subprocess

import pytest
import torch
import torch._dynamo.utils as du
from support import AMPERE, CPU, end_run, quick_spec

from core.engine import compile_stats, environment
from core.engine import spec as spec_module
from core.engine.compile_stats import CompileWatch
from core.engine.reading import reading
from core.engine.spec import DeviceCaps, RunSpec, inductor_problem, native_bf16, validate
from core.runs.doctor import OK, Check, judge
from core.runs.store import Run
from core.view.report import tf32_in_force

V100 = DeviceCaps(
    cuda=True,
    cuda_name="Tesla V100-SXM2-16GB",
    compute_capability=(7, 0),
    cuda_bf16=False,
    cuda_bf16_emulated=True,
    triton=True,
    gpu_count=1,
)
PASCAL = DeviceCaps(cuda=True, cuda_name="GeForce GTX 1080", compute_capability=(6, 1), triton=True, gpu_count=1)
NO_TRITON = DeviceCaps(
    cuda=True, cuda_name="NVIDIA A100", compute_capability=(8, 0), cuda_bf16=True, triton=False, gpu_count=1
)


def fields(problems):
    return {p.field: p.message for p in problems}


# -- 1. native bf16 ---------------------------------------------------------------------------------


class FakeCuda:
    """torch.cuda as a V100 answers it: bf16 'supported' by emulation unless asked for native."""

    def __init__(self, major, minor, takes_emulation_flag=True):
        self.capability = (major, minor)
        self.takes_flag = takes_emulation_flag

    def is_available(self):
        return True

    def get_device_capability(self, device=None):
        return self.capability

    def get_device_name(self, device=None):
        return "Tesla V100-SXM2-16GB" if self.capability < (8, 0) else "NVIDIA A100"

    def device_count(self):
        return 2

    def get_device_properties(self, index):
        class Properties:  # the second GPU is the larger: the probe records the largest
            total_memory = (16 if index == 0 else 32) * 2**30

        return Properties()

    def is_bf16_supported(self, *args, **kwargs):
        if not self.takes_flag and (args or kwargs):
            raise TypeError("is_bf16_supported() takes 0 positional arguments")
        including_emulation = kwargs.get("including_emulation", True)
        return self.capability >= (8, 0) or including_emulation


def test_native_bf16_does_not_count_emulation():
    assert native_bf16(FakeCuda(7, 0), (7, 0)) is False
    assert native_bf16(FakeCuda(8, 0), (8, 0)) is True


def test_native_bf16_on_an_older_torch_falls_back_to_compute_capability():
    assert native_bf16(FakeCuda(7, 5, takes_emulation_flag=False), (7, 5)) is False
    assert native_bf16(FakeCuda(8, 6, takes_emulation_flag=False), (8, 6)) is True


def test_a_v100_probe_records_emulated_not_native_bf16_and_its_gpu_count(monkeypatch):
    monkeypatch.setattr(torch, "cuda", FakeCuda(7, 0))
    monkeypatch.setattr(spec_module, "triton_usable", lambda: True)
    caps = spec_module.detect_device_caps()
    assert caps.cuda and caps.compute_capability == (7, 0)
    assert caps.cuda_bf16 is False and caps.cuda_bf16_emulated is True
    assert caps.gpu_count == 2 and caps.cuda_lanes == 2 and caps.triton is True
    assert caps.cuda_memory_bytes == 32 * 2**30 and caps.memory_bytes > 0  # the memory guard's figures


def test_amp_bf16_is_refused_where_bf16_is_only_emulated_with_the_reason():
    problems = fields(validate(RunSpec(model="resnet18", precision="amp-bf16", device="cuda"), V100))
    assert "only emulates bfloat16" in problems["precision"]
    assert "compute capability 7.0" in problems["precision"] and "amp-fp16" in problems["precision"]
    assert validate(RunSpec(model="resnet18", precision="amp-fp16", device="cuda"), V100) == []
    assert validate(RunSpec(model="resnet18", precision="amp-bf16", device="cuda"), AMPERE) == []


# -- 3. Inductor on CUDA needs Triton and compute capability 7.0 --------------------------------------


def test_inductor_is_refused_below_compute_capability_7_with_aot_eager_suggested():
    problems = fields(validate(RunSpec(model="resnet18", device="cuda"), PASCAL))
    assert "6.1" in problems["backend"] and "aot_eager" in problems["backend"]
    assert validate(RunSpec(model="resnet18", device="cuda", backend="aot_eager"), PASCAL) == []


def test_inductor_is_refused_without_triton_and_allowed_when_unknown():
    problems = fields(validate(RunSpec(model="resnet18", device="cuda", precision="amp-bf16"), NO_TRITON))
    assert "Triton" in problems["backend"] and "aot_eager" in problems["backend"]
    assert inductor_problem(DeviceCaps(cuda=True, compute_capability=(8, 0), triton=None)) is None
    assert inductor_problem(CPU) is None


def test_an_old_probe_record_without_the_new_fields_still_reads():
    caps = DeviceCaps.from_dict({"cuda": True, "cuda_name": "A100", "compute_capability": [8, 0], "cuda_bf16": True})
    assert caps.triton is None and caps.gpu_count == 0 and caps.cuda_lanes == 1
    assert validate(quick_spec(device="cuda", backend="inductor"), caps) == []


# -- 2. a compiled variant that did not compile is never a speedup -----------------------------------


def skipping_backend(gm, example_inputs):
    """What Inductor does with a bf16 graph on a GPU without native bf16: warn, then skip the frame."""
    import warnings

    from torch._dynamo.exc import SkipFrame

    warnings.warn("Tesla V100-SXM2-16GB does not support bfloat16 compilation natively, skipping", stacklevel=1)
    raise SkipFrame("BF16 is not supported")


def test_a_race_whose_frames_were_skipped_says_compile_did_not_happen(monkeypatch):
    from core.engine import variant
    from core.engine.events import StatusEvent
    from core.engine.trainer import run_race
    from core.view.run_screen.layout import result_cards

    monkeypatch.setattr(variant, "compile_model", lambda model, spec: torch.compile(model, backend=skipping_backend))
    events = []
    result = run_race(quick_spec(epochs=2, steps_per_epoch=3), on_event=events.append, caps=CPU)
    assert result.status == "done"
    summary = result.summary
    # Newer torch names the skipped frame's reason; older ones leave only Inductor's warning.
    assert summary.compile_skipped.startswith("no graph was compiled (")
    assert "BF16 is not supported" in summary.compile_skipped or "bfloat16" in summary.compile_skipped
    assert reading(summary).startswith("Compile did not happen: no graph was compiled")
    assert result.compile_stats.graphs == 0
    assert any("bfloat16" in w for w in result.compile_stats.warnings)
    live = [e for e in events if isinstance(e, StatusEvent) and e.state == "compile_skipped"]
    # said during the run, after compiled epoch 1 (with torch's reason, or Inductor's warning on older torch)
    assert len(live) == 1 and ("BF16" in live[0].message or "bfloat16" in live[0].message)
    cards = {c.label: c for c in result_cards(summary)}
    for label in ("Compile time", "Steady-state speedup", "Break-even"):
        assert cards[label].value == "no compile" and "Compile did not happen" in cards[label].help


def test_a_normal_race_has_no_compile_skipped_reason():
    from core.engine.trainer import run_race

    result = run_race(quick_spec(epochs=1, steps_per_epoch=3), caps=CPU)
    assert result.summary.compile_skipped is None and result.compile_stats.graphs >= 1


def test_skipped_cuda_graphs_in_a_cuda_graph_mode_are_not_a_finding():
    from core.engine.compile_stats import compile_skipped_reason

    info = {"graphs": 2, "cudagraph_skips": 1, "cudagraph_skip_reasons": ["skipping cudagraphs due to mutated inputs"]}
    reason = compile_skipped_reason(info, "inductor", "reduce-overhead")
    assert reason.startswith("CUDA graphs were skipped (skipping cudagraphs due to mutated inputs)")
    assert compile_skipped_reason(info, "inductor", "default") is None  # the default mode uses no CUDA graphs
    assert compile_skipped_reason({"graphs": 0}, "eager", "default") is None  # capture-only backend, by request
    assert compile_skipped_reason({"graphs": None}, "inductor", "default") is None  # cannot tell: no claim


def test_the_queue_status_and_the_cli_table_say_compile_did_not_happen():
    from core.runs.store import Run
    from core.view.host_tables import describe
    from core.view.report import summary_table

    summary = {"compile_skipped": "no graph was compiled (BF16 is not supported)"}
    run = Run(1, "race", {}, "me", "cuda:0", "done", "done", 1.0, 0.0, 0.0, 1.0, None, None, None, None, 0, None,
              summary, None, None, 0)  # fmt: skip
    assert describe(None, run) == "done (compile did not happen: no graph was compiled (BF16 is not supported))"
    from core.engine.trainer import run_race

    result = run_race(quick_spec(epochs=1, steps_per_epoch=3), caps=CPU).to_dict()
    result["summary"]["compile_skipped"] = summary["compile_skipped"]
    assert "not a compile speedup: compile did not happen (no graph was compiled" in summary_table(result)


def test_an_imported_bundle_with_no_compiled_graph_is_read_as_no_compile():
    from core.runs.bundle import summary_from_events

    events = [
        {"kind": "step", "variant": v, "phase": "train", "epoch": 1, "step": i, "time_s": 0.01, "loss": 1.0}
        for v in ("eager", "compiled")
        for i in range(1, 6)
    ]
    summary = summary_from_events(events, quick_spec(), {}, {"graphs": 0, "frame_skips": ["BF16 is not supported"]})
    assert summary["compile_skipped"] == "no graph was compiled (BF16 is not supported)"
    assert reading(summary).startswith("Compile did not happen")


# -- 4. CUDA-graph modes: compile window, skips, reserved memory --------------------------------------


def test_the_compile_window_of_a_cuda_graph_mode_covers_three_steps():
    from core.engine import analysis

    eager = [0.01] * 20
    compiled = [5.0, 0.5, 0.2] + [0.005] * 17  # warm-up call, recording call, then replays
    default = analysis.summarize(eager, compiled, [0.3], [5.835], 8)
    graphs = analysis.summarize(eager, compiled, [0.3], [5.835], 8, min_warmup=analysis.warmup_floor("reduce-overhead"))
    assert default["warmup_steps"] < 3 <= graphs["warmup_steps"]
    assert graphs["compile_time_s"] == pytest.approx(5.7 - 0.03)
    assert analysis.warmup_floor("max-autotune") == 3 and analysis.warmup_floor("max-autotune-no-cudagraphs") == 1
    assert analysis.warmup_floor("reduce-overhead", backend="aot_eager") == 1


def test_a_cuda_graph_race_summary_uses_the_longer_window():
    from core.engine.compile_stats import CompileStats
    from core.engine.events import StepEvent, VariantResult
    from core.engine.trainer import summarize_variants

    def variant(name, times):
        return VariantResult(name, steps=[StepEvent(name, "train", 1, i + 1, t, 1.0, 8) for i, t in enumerate(times)])

    spec = RunSpec(model="mlp", mode="reduce-overhead", device="cuda", epochs=1, steps_per_epoch=30)
    summary = summarize_variants(
        spec, variant("eager", [0.01] * 30), variant("compiled", [5, 0.5, 0.2] + [0.005] * 27), CompileStats()
    )
    assert summary.warmup_steps >= 3 and summary.compile_time_s == pytest.approx(5.67)


class FakeCudaMemory:
    """torch.cuda's memory counters on a device in a sticky error state after `fail_after` calls."""

    def __init__(self, sticky=False):
        self.sticky = sticky
        self.emptied = False

    def max_memory_allocated(self, device=None):
        if self.sticky:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return 3 * 2**30

    def max_memory_reserved(self, device=None):
        return 5 * 2**30

    def synchronize(self, device=None):
        if self.sticky:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")

    def empty_cache(self):
        self.emptied = True


def test_releasing_a_cuda_variant_records_reserved_memory_and_keeps_the_allocator_warm(monkeypatch):
    from core.engine.device_state import release_variant
    from core.engine.events import VariantResult

    fake = FakeCudaMemory()
    monkeypatch.setattr(torch, "cuda", fake)
    result = VariantResult("eager")
    assert release_variant(result, torch.device("cuda")) is None
    assert result.peak_memory_bytes == 3 * 2**30 and result.peak_reserved_bytes == 5 * 2**30
    assert not fake.emptied  # emptying would make the compiled run re-pay allocator growth as compile time


def test_a_sticky_cuda_error_in_cleanup_is_reported_not_raised(monkeypatch):
    from core.engine.device_state import release_variant
    from core.engine.events import VariantResult

    monkeypatch.setattr(torch, "cuda", FakeCudaMemory(sticky=True))
    result = VariantResult("compiled")
    reason = release_variant(result, torch.device("cuda"))
    assert "illegal memory access" in reason and result.memory_kind.startswith("unavailable")


# -- 5. fairness -------------------------------------------------------------------------------------


def test_cold_cache_points_triton_inside_it_and_restores_the_hosts_setting(monkeypatch, tmp_path):
    import os

    from core.engine.device_state import inductor_cache

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "host-triton"))
    with inductor_cache(quick_spec(cache="cold"), torch.device("cpu")) as path:
        assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == path
        assert os.environ["TRITON_CACHE_DIR"].startswith(path + os.sep)
    assert os.environ["TRITON_CACHE_DIR"] == str(tmp_path / "host-triton")
    assert not os.path.exists(path)


def test_dataloader_workers_start_before_the_timed_steps_of_each_variant(monkeypatch):
    """With fakedata and worker processes, start-up must not land inside a timed step (step 1 of
    every epoch, as it did when each epoch built a new DataLoader)."""
    from torch.utils.data import dataloader

    from core.engine import variant as data
    from core.engine.events import StepEvent
    from core.engine.trainer import run_race

    log = []
    original = dataloader._MultiProcessingDataLoaderIter.__init__

    def counting_init(self, loader):
        log.append("workers started")
        original(self, loader)

    monkeypatch.setattr(dataloader._MultiProcessingDataLoaderIter, "__init__", counting_init)
    monkeypatch.setattr(data, "loader_workers", lambda device: 2)
    spec = RunSpec(model="small_cnn", batch_size=4, data="fakedata", epochs=3, steps_per_epoch=2, eval_steps=1,
                   backend="eager", device="cpu")  # fmt: skip

    def on_event(event):
        if isinstance(event, StepEvent):
            log.append(f"{event.variant} step")

    result = run_race(spec, on_event=on_event, caps=CPU)
    assert result.status == "done", result.error
    for variant in ("eager", "compiled"):
        first = log.index(f"{variant} step")
        last = len(log) - 1 - log[::-1].index(f"{variant} step")
        assert "workers started" not in log[first:last], log
    assert log.count("workers started") == 1 + 2 * 2  # the warm-up's loader, then train + eval per variant
    assert result.eager.steps[0].loss == pytest.approx(result.compiled.steps[0].loss)


# -- 6. failure paths ---------------------------------------------------------------------------------


def test_out_of_memory_is_recognised_on_a_torch_without_torch_OutOfMemoryError(monkeypatch):
    from core.engine.failures import explain_failure, out_of_memory_errors

    monkeypatch.delattr(torch, "OutOfMemoryError", raising=False)
    assert out_of_memory_errors() == (torch.cuda.OutOfMemoryError,)
    exc = torch.cuda.OutOfMemoryError("CUDA error: failed to allocate 2.00 GiB")  # no "out of memory" in the text
    reason = explain_failure(exc, RunSpec(model="resnet50", batch_size=512), torch.device("cuda"))
    assert reason.startswith("out of memory at batch size 512 on cuda")


def test_a_sticky_device_error_keeps_the_first_error_and_what_was_measured(monkeypatch):
    from core.engine import device_state, variant
    from core.engine.trainer import run_race

    failed = {"yes": False}
    original_step = variant.VariantRun.train_step

    def failing_step(self, x, y):
        if self.name == "compiled" and self.counts["train"] == 2:
            failed["yes"] = True
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return original_step(self, x, y)

    def sticky_sync(device):
        if failed["yes"]:
            raise RuntimeError("CUDA error: unspecified launch failure (raised again in cleanup)")

    monkeypatch.setattr(variant.VariantRun, "train_step", failing_step)
    monkeypatch.setattr(device_state, "device_sync", sticky_sync)
    result = run_race(quick_spec(epochs=2, steps_per_epoch=3, schedule="sequential"), caps=CPU)  # eager all first
    assert result.status == "failed"
    assert "illegal memory access" in result.error and "raised again" not in result.error
    assert len(result.eager.times()) == 6 and len(result.compiled.times()) == 2
    assert result.summary.eager_step_times_s and result.summary.compiled_step_times_s


# -- 11. counters a torch version does not have are "not available", never 0 --------------------------


def test_counters_missing_from_this_torch_are_none_not_zero(monkeypatch):
    import dataclasses

    import torch._dynamo.utils as du

    from core.engine.compile_stats import read_compile_stats

    @dataclasses.dataclass
    class OldMetrics:  # the shape of an older torch's record: no recompile reason, no cache counters
        co_name: str
        entire_frame_compile_time_s: float

    monkeypatch.setattr(du, "CompilationMetrics", OldMetrics)
    monkeypatch.setattr(du, "get_compilation_metrics", lambda: [OldMetrics("forward", 1.5)])
    stats = read_compile_stats()
    assert stats.recompiles is None and stats.cache_hits is None and stats.cache_misses is None
    monkeypatch.delattr(du, "get_compilation_metrics")
    assert read_compile_stats().recompiles is None


# -- 9 and 10. one lane per GPU; the probe never beside a measurement -----------------------------------


EIGHT_GPUS = DeviceCaps(
    cuda=True, cuda_name="NVIDIA H100", compute_capability=(9, 0), cuda_bf16=True, triton=True, gpu_count=3
)


def record_probe(store, caps):
    from core.runs import fleet

    run_id = store.create_run("probe", {}, "system", "probe", status="running", host=fleet.HOST)
    store.finish_run(run_id, "done", summary={"caps": caps.to_dict(), "environment": {"torch": "2.x"}})
    return run_id


@pytest.fixture
def store(tmp_path):
    from core.runs.store import Store

    return Store(str(tmp_path / "store.sqlite3"))


def test_each_gpu_is_a_lane_and_a_cuda_job_takes_any_idle_one(store, sleepers, monkeypatch):
    from core.runs import processes, queue
    from core.runs.limits import HostLimits

    launched = []
    original = processes.launch_worker
    monkeypatch.setattr(
        processes, "launch_worker", lambda path, run_id, key: launched.append(key) or original(path, run_id, key)
    )
    record_probe(store, EIGHT_GPUS)
    limits = HostLimits(job_time_limit_s=None)
    ids = [queue.enqueue(store, quick_spec(device="cuda"), "ann", limits=limits) for _ in range(4)]
    runs = [store.get_run(i) for i in ids]
    assert [r.status for r in runs] == ["starting"] * 3 + ["queued"], [r.error for r in runs]
    assert sorted(r.device_key for r in runs[:3]) == ["cuda:0", "cuda:1", "cuda:2"] == sorted(launched)
    assert runs[3].device_key == "cuda" and queue.queue_position(store, ids[3]) == 1
    cpu = queue.enqueue(store, quick_spec(device="cpu"), "ann", limits=limits)  # the CPU is a lane of its own
    assert store.get_run(cpu).status == "starting"
    end_run(store, sleepers, ids[1])  # its worker exits too: a lane is free once its process is gone
    queue.tick(store)
    assert store.get_run(ids[3]).status == "starting" and store.get_run(ids[3]).device_key == "cuda:1"


def test_a_gpu_lanes_worker_sees_only_its_own_gpu():
    from core.runs.fleet import device_lanes
    from core.runs.processes import worker_environment

    assert worker_environment("cuda:2", {})["CUDA_VISIBLE_DEVICES"] == "2"
    assert worker_environment("cuda:1", {"CUDA_VISIBLE_DEVICES": "4,6"})["CUDA_VISIBLE_DEVICES"] == "6"
    assert "CUDA_VISIBLE_DEVICES" not in worker_environment("cpu", {})
    assert device_lanes(EIGHT_GPUS) == ["cpu", "cuda:0", "cuda:1", "cuda:2"] and device_lanes(CPU) == ["cpu"]


def test_a_new_probe_waits_while_a_gpu_measures_and_nothing_starts_while_it_probes(store, sleepers):
    from core.runs import queue
    from core.runs.limits import HostLimits

    record_probe(store, EIGHT_GPUS)
    limits = HostLimits(job_time_limit_s=None)
    race = queue.enqueue(store, quick_spec(device="cuda"), "ann", limits=limits)
    probe = queue.enqueue(store, {}, "system", kind="probe")
    assert store.get_run(race).status == "starting" and store.get_run(probe).status == "queued"
    end_run(store, sleepers, race)
    queue.tick(store)
    assert store.get_run(probe).status == "starting"
    waiting = queue.enqueue(store, quick_spec(device="cuda"), "ann", limits=limits)
    assert store.get_run(waiting).status == "queued"  # no measurement beside the probe's CUDA context
    end_run(store, sleepers, probe, summary={"caps": EIGHT_GPUS.to_dict()})
    queue.tick(store)
    assert store.get_run(waiting).status == "starting"


def test_the_first_probe_runs_at_once_even_beside_a_job(store, sleepers):
    from core.runs import queue
    from core.runs.limits import HostLimits

    race = queue.enqueue(store, quick_spec(device="cpu"), "ann", limits=HostLimits(job_time_limit_s=None))
    probe = queue.enqueue(store, {}, "system", kind="probe")
    assert store.get_run(race).status == "starting" and store.get_run(probe).status == "starting"


def test_the_sidebar_shows_each_gpu_and_each_lane(store, sleepers, monkeypatch):
    from streamlit.testing.v1 import AppTest
    from test_pages import APP

    from core.runs import queue
    from core.runs.limits import HostLimits
    from core.view.host_tables import gpu_lines, lane_lines

    monkeypatch.setenv("COMPILE_LAB_STORE", store.path)
    probe = record_probe(store, EIGHT_GPUS)
    gpus = [{"index": i, "name": "NVIDIA H100", "memory_bytes": 80 * 2**30, "sm_count": 132, "compute_capability": "9.0"}
            for i in range(3)]  # fmt: skip
    store.update_run(probe, summary={"caps": EIGHT_GPUS.to_dict(), "environment": {"torch": "2.x", "cuda": "12.8"},
                                     "gpus": gpus, "cuda_driver": "12.8"})  # fmt: skip
    limits = HostLimits(job_time_limit_s=None)
    for _ in range(4):
        queue.enqueue(store, quick_spec(device="cuda", model="resnet18"), "ann", limits=limits)
    runs = store.list_runs(kind="race")
    assert sorted(r.status for r in runs) == ["queued"] + ["starting"] * 3, [(r.status, r.error) for r in runs]
    active = store.list_runs(status=("starting", "running"))
    queued = store.list_runs(status=("queued",))
    lines = lane_lines(EIGHT_GPUS, active, queued)
    assert lines[0] == "cpu: idle"
    assert [line.split(":")[0] + ":" + line.split(":")[1] for line in lines[1:4]] == ["cuda:0", "cuda:1", "cuda:2"]
    assert all("resnet18, starting" in line for line in lines[1:4])
    assert lines[4] == "1 waiting for the next free GPU"
    assert gpu_lines(store.get_run(probe).summary)[2] == (
        "cuda:2 NVIDIA H100: 80.0 GiB, 132 SMs, compute capability 9.0"
    )
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception
    sidebar = [t.value for t in at.sidebar.text]
    assert "cuda:1 NVIDIA H100: 80.0 GiB, 132 SMs, compute capability 9.0" in sidebar
    # Races by their run id, the number in their links too.
    assert "1 waiting for the next free GPU" in sidebar and any(t.startswith("cuda:2: run ") for t in sidebar)


# -- 8. max-autotune: an estimate that says so, and a host limit ---------------------------------------


def test_autotune_modes_raise_the_estimate_and_say_why():
    from core.engine.race_estimates import duration_note, estimate_seconds

    base = RunSpec(model="resnet50", batch_size=128, precision="amp-bf16", device="cuda", steps_per_epoch=50)
    default = estimate_seconds(base, AMPERE)
    for mode in ("max-autotune", "max-autotune-no-cudagraphs"):
        tuned = RunSpec(**{**base.to_dict(), "mode": mode})
        assert estimate_seconds(tuned, AMPERE)[1] > 3 * default[1]
        assert "many minutes" in duration_note(tuned)
    assert duration_note(base) is None


def test_a_host_can_allow_only_some_modes_and_the_form_does_not_offer_the_rest():
    from core.runs.limits import load_host_limits
    from core.view.race_form import unavailable_options

    limits = load_host_limits({"COMPILE_LAB_ALLOWED_MODES": "default, reduce-overhead"})
    assert limits.allowed_modes == ("default", "reduce-overhead")
    problems = fields(limits.problems(RunSpec(mode="max-autotune", device="cuda")))
    assert problems["mode"] == "this host allows only: default, reduce-overhead"
    blocked = unavailable_options(RunSpec(device="cuda"), "mode", AMPERE, limits)
    assert set(blocked) == {"max-autotune", "max-autotune-no-cudagraphs"}


# -- 3 and 7. explainer demos on a GPU -----------------------------------------------------------------


def test_demos_that_need_inductor_are_refused_before_they_start_where_it_cannot_run(store, sleepers):
    from core.engine.explain import demo_device_problem
    from core.engine.spec import SpecError
    from core.runs import queue

    assert "compute capability 7.0" in demo_device_problem("fusion", PASCAL)
    assert demo_device_problem("graphs", PASCAL) is None  # graph capture needs no Inductor
    assert demo_device_problem("codegen", AMPERE) is None and demo_device_problem("codegen", CPU) is None
    with pytest.raises(SpecError, match="Inductor"):
        queue.enqueue(store, {"demo": "caches", "params": {}}, "ann", kind="demo", caps=NO_TRITON)
    assert store.list_runs(kind="demo") == []


def test_the_explainer_page_says_why_instead_of_offering_to_measure(store, sleepers, monkeypatch):
    from streamlit.testing.v1 import AppTest
    from test_pages import APP

    monkeypatch.setenv("COMPILE_LAB_STORE", store.path)
    record_probe(store, PASCAL)
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("app_pages/under_the_hood.py").run()
    assert not at.exception
    warnings = [w.value for w in at.warning]
    assert len([w for w in warnings if w.startswith("Not measurable on this device")]) == 4  # all but graphs
    assert [b.label for b in at.button].count("Measure on this device") == 1


def test_the_caches_demo_measures_recompiles_on_the_chosen_device(monkeypatch):
    """The real recompile measurement, on a device named other than its default ("cpu:0", the
    CPU by index: what a CPU machine can offer), so the name must travel to every input it makes."""
    from core.engine.explain import caches

    made_on, real_randn = [], torch.randn

    def randn(*args, device=None, **kwargs):
        made_on.append(None if device is None else str(device))
        return real_randn(*args, device=device, **kwargs)

    # The cold and warm compiles run in fresh processes (their own test): only the recompiles here.
    monkeypatch.setattr(caches, "compile_in_fresh_process", lambda *a, **k: {"compile_s": 1.0})
    monkeypatch.setattr(torch, "randn", randn)
    result = caches.run({"shapes": [8, 16], "recompile_backend": "eager"}, device="cpu:0")
    assert result["device"] == "cpu:0"
    rows = {row["dynamic"]: row for row in result["recompiles"]}
    assert [c["length"] for c in rows["False"]["calls"]] == [8, 16] and rows["False"]["recompiles"] == 1
    assert (
        made_on == ["cpu:0"] * 7
    )  # the untimed warm-up compile's input, then two lengths under each of three `dynamic` settings


def test_a_fresh_process_compile_takes_an_untimed_eager_step_first(monkeypatch):
    from core.engine.explain import compile_once

    log = []
    real_build, real_compile = compile_once.build_model, torch.compile

    def build(name):
        model = real_build(name)
        model.register_forward_pre_hook(lambda module, args: log.append("forward"))
        return model

    def compile_spy(model, **kwargs):
        log.append("compile")
        return real_compile(model, backend="eager")

    monkeypatch.setattr(compile_once, "build_model", build)
    monkeypatch.setattr(compile_once.torch, "compile", compile_spy)
    try:
        result = compile_once.main("mlp", 4, "cpu")
    finally:
        monkeypatch.undo()
    assert log[:2] == ["forward", "compile"]
    assert result["first_step_s"] > 0


# -- compile counters, the environment, the doctor's judgement ---------------------------------


@dataclasses.dataclass
class Record:
    """The fields of torch's CompilationMetrics that the watch reads."""

    co_name: str = "forward"
    is_forward: bool | None = True
    is_runtime: bool | None = False
    recompile_reason: str | None = None
    compile_id: str | None = "0/0"


@pytest.fixture
def torch_records(monkeypatch):
    """torch's record deque, as torch keeps it: 64 at most, the oldest dropped."""
    records = collections.deque(maxlen=du.DEFAULT_COMPILATION_METRICS_LIMIT)
    monkeypatch.setattr(du, "get_compilation_metrics", lambda: list(records))
    return records


def test_torch_still_files_runtime_records_beside_compiles_and_keeps_only_64():
    assert "is_runtime" in {f.name for f in dataclasses.fields(du.CompilationMetrics)}
    assert du.DEFAULT_COMPILATION_METRICS_LIMIT == 64


def test_a_runtime_record_is_not_a_compile(torch_records):
    watch = CompileWatch()
    torch_records.append(Record())
    assert watch.new_compiles() == ["forward graph compiled"]
    # CUDA-graph recording at step 2 files a runtime record (cudagraph_trees.py): no compile.
    torch_records.append(Record(is_runtime=True, compile_id="0/0"))
    assert watch.new_compiles() == []


def test_compiles_are_seen_after_torch_deque_is_full(torch_records):
    torch_records.extend(Record(compile_id=f"{i}/0") for i in range(64))
    watch = CompileWatch()
    torch_records.append(Record(recompile_reason="0/1: tensor 'x' size mismatch at index 0", compile_id="0/1"))
    assert len(torch_records) == 64  # the deque did not grow: its oldest record was dropped
    assert watch.new_compiles() == ["recompile: tensor 'x' size mismatch at index 0"]
    assert watch.new_compiles() == []


def test_the_race_totals_leave_runtime_records_out(monkeypatch):
    compiled = dataclasses.replace(du.CompilationMetrics(), recompile_reason="0/1: guard failed", compile_id="0/1")
    runtime = dataclasses.replace(
        du.CompilationMetrics(), is_runtime=True, recompile_reason="runtime", compile_id="0/1"
    )
    monkeypatch.setattr(du, "get_compilation_metrics", lambda: [compiled, runtime])
    assert compile_stats.read_compile_stats().recompiles == 1


def test_a_reset_keeps_more_than_64_records_for_the_totals():
    compile_stats.reset_compile_state()
    try:
        assert du._compilation_metrics.maxlen == compile_stats.COMPILATION_RECORDS_KEPT > 64
    finally:
        du.set_compilation_metrics_limit(du.DEFAULT_COMPILATION_METRICS_LIMIT)


def test_precision_flags_never_raise_and_record_the_new_api():
    saved = torch.backends.cuda.matmul.fp32_precision
    try:
        torch.backends.cuda.matmul.fp32_precision = "tf32"  # a model file may do this
        with pytest.raises(RuntimeError):
            torch.get_float32_matmul_precision()  # what the old code called, outside any handler
        flags = environment.precision_flags()
    finally:
        torch.backends.cuda.matmul.fp32_precision = saved
    assert flags["cuda_matmul_fp32_precision"] == "tf32"
    assert flags["float32_matmul_precision"] is None
    assert "matmul fp32 precision tf32" in tf32_in_force(flags)


def test_legacy_flags_still_read_where_the_new_api_is_untouched():
    flags = {"float32_matmul_precision": "high", "cudnn_allow_tf32": True}
    assert tf32_in_force(flags) == "matmul high, cudnn tf32 on"


def test_the_driver_version_comes_from_nvidia_smi_when_torch_has_no_reader(monkeypatch):
    assert not hasattr(torch._C, "_cuda_getDriverVersion")  # torch 2.14: the old reader is gone
    header = "| NVIDIA-SMI 570.86.15     Driver Version: 570.86.15     CUDA Version: 12.8     |\n"
    monkeypatch.setattr(environment.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(environment.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, stdout=header))
    assert environment.cuda_driver_version() == "12.8"


def test_the_driver_version_is_unknown_only_when_nothing_tells_it(monkeypatch):
    monkeypatch.setattr(environment.shutil, "which", lambda name: None)
    monkeypatch.setattr(environment, "_driver_version_from_nvml", lambda: None)
    assert environment.cuda_driver_version() is None
    monkeypatch.setattr(environment, "_driver_version_from_nvml", lambda: 12040)
    assert environment.cuda_driver_version() == "12.4"


def test_the_doctor_judges_a_race_whose_compile_time_is_unknown():
    summary = {"steady_state_speedup": 1.1, "verdict": "faster", "compile_time_s": None}
    race = Run(7, "race", {}, "doctor", "cuda:0", "done", "done", 1.0, 0.0, 10.0, 40.0, None, None, None, None, 0,
               None, summary, None, None, 0)  # fmt: skip
    outcome = judge(Check("race", "race", {}), race)
    assert outcome.outcome == OK and outcome.figure == "1.10x steady (faster), compile time not measured"
