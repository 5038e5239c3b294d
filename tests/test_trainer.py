"""The race: fair setup, honest events, partial results on failure."""

import errno
import json
import math
import os
import subprocess
import sys

import pytest
import torch
from support import CPU, ROOT, quick_spec

from core.engine import device_state
from core.engine.events import EpochEvent, StartEvent, StatusEvent, StepEvent
from core.engine.failures import explain_failure
from core.engine.reading import reading
from core.engine.spec import RunSpec, SpecError
from core.engine.trainer import ALTERNATING_MEMORY, run_race
from core.engine.variant import VariantRun


def record(spec, caps=CPU):
    events = []
    result = run_race(spec, on_event=events.append, caps=caps)
    return result, events


def test_both_variants_run_every_step_and_epoch():
    spec = quick_spec(epochs=2, steps_per_epoch=4, eval_steps=2)
    result, events = record(spec)
    assert result.status == "done" and result.error is None
    for variant in (result.eager, result.compiled):
        assert [s.step for s in variant.steps if s.phase == "train"] == list(range(1, 9))
        assert [s.step for s in variant.steps if s.phase == "eval"] == [1, 2, 3, 4]
        assert [e.epoch for e in variant.epochs] == [1, 2]
        assert all(e.eval_time_s is not None and e.eval_time_s > 0 for e in variant.epochs)
    steps = [e for e in events if isinstance(e, StepEvent)]
    assert len(steps) == 2 * (8 + 4)
    assert isinstance(events[0], StartEvent) and events[0].environment["device_type"] == "cpu"
    assert sum(isinstance(e, EpochEvent) for e in events) == 4


def test_status_events_follow_the_race_phases():
    _, events = record(quick_spec(epochs=1, steps_per_epoch=2, schedule="sequential"))
    states = [(e.variant, e.state) for e in events if isinstance(e, StatusEvent)]
    assert states[0] == ("eager", "starting")
    assert ("compiled", "compiling") in states
    assert states.index(("eager", "done")) < states.index(("compiled", "starting"))
    assert states[-1] == ("compiled", "done")


def test_variants_start_from_identical_weights_and_batches():
    result, _ = record(quick_spec(epochs=1, steps_per_epoch=3))
    first_eager, first_compiled = result.eager.steps[0], result.compiled.steps[0]
    assert first_eager.loss == pytest.approx(first_compiled.loss, rel=1e-6)
    assert result.eager.final_loss == pytest.approx(result.compiled.final_loss, rel=1e-4)


def test_summary_has_the_headline_keys_with_finite_values():
    result, _ = record(quick_spec(epochs=2, steps_per_epoch=5))
    s = result.to_dict()["summary"]
    for key in ("compile_time_s", "first_epoch_overhead_s", "steady_state_speedup", "whole_run_speedup"):
        assert math.isfinite(s[key]), key
    low, high = s["speedup_ci95"]
    assert low <= s["steady_state_speedup"] <= high
    assert s["break_even_step"] is None or isinstance(s["break_even_step"], int)
    assert len(s["eager_step_times_s"]) == len(s["compiled_step_times_s"]) == 10
    assert s["graphs"] >= 1 and s["graph_breaks"] == 0
    assert s["memory_kind"] == ALTERNATING_MEMORY and s["eager_peak_memory_bytes"] > 0  # blocks: both models held


def peak_rss_bytes() -> int | None:
    with open("/proc/self/status") as fh:
        return next((int(line.split()[1]) * 1024 for line in fh if line.startswith("VmHWM:")), None)


@pytest.mark.skipif(not os.access("/proc/self/clear_refs", os.W_OK), reason="needs Linux's resettable peak RSS")
def test_each_variants_peak_memory_is_its_own_not_what_came_before_it():
    """Sequential schedule: the compiled peak is reset when compiled starts, so memory used before it
    (eager's run; here a 384 MiB spike right after eager ends) is not charged to compiled."""
    spike = {}

    def on_event(event):
        if isinstance(event, StatusEvent) and (event.variant, event.state) == ("eager", "done"):
            block = torch.ones(96 * 2**20)  # 384 MiB, every page touched
            spike["peak"] = peak_rss_bytes()
            del block

    spec = quick_spec(epochs=1, steps_per_epoch=3, backend="eager", profile_steps=0, schedule="sequential")
    result = run_race(spec, on_event, CPU)
    assert result.status == "done", result.error
    assert result.compiled.memory_kind == "process peak RSS (CPU)"
    assert 0 < result.compiled.peak_memory_bytes < spike["peak"] - 192 * 2**20, (result.compiled, spike)


def test_invalid_spec_raises_before_any_work():
    events = []
    with pytest.raises(SpecError):
        run_race(quick_spec(batch_size=0, precision="amp-fp16"), on_event=events.append, caps=CPU)
    assert events == []


def fail_after(monkeypatch, variant, calls, exc):
    original = VariantRun.train_step
    count = {"n": 0}

    def flaky(self, x, y):
        if self.name == variant:
            count["n"] += 1
            if count["n"] > calls:
                raise exc
        return original(self, x, y)

    monkeypatch.setattr(VariantRun, "train_step", flaky)


def test_out_of_memory_mid_run_keeps_what_was_measured(monkeypatch):
    fail_after(monkeypatch, "compiled", 5, torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    result, events = record(quick_spec(epochs=2, steps_per_epoch=4))
    assert result.status == "failed"
    assert result.error == "out of memory at batch size 16 on cpu: try a smaller batch size or amp-bf16"
    assert len(result.eager.steps) == 8 and len(result.compiled.steps) == 5
    assert result.compiled.error == result.error
    assert result.summary.steady_state_speedup is not None  # 5 compiled steps are enough to compare
    assert [e.state for e in events if isinstance(e, StatusEvent)][-1] == "failed"


def test_failure_in_the_eager_variant_skips_compiled(monkeypatch):
    fail_after(monkeypatch, "eager", 2, RuntimeError("boom\nlong detail"))
    result, _ = record(quick_spec())
    assert result.error == "RuntimeError: boom"
    assert len(result.eager.steps) == 2 and result.compiled.steps == []
    assert result.summary.steady_state_speedup is None


def test_a_full_disk_during_the_compile_fails_the_race_for_the_machine_not_the_model(monkeypatch):
    """Inductor writes the code it generates to disk: a full disk there is the machine's failure, not
    what torch.compile does with the model. Before, the race ended done with "compile failed ...
    [Errno 28] No space left on device" as its finding, and was offered as that race's result."""
    import torch._inductor.codecache as codecache

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(codecache, "write_atomic", disk_full)
    monkeypatch.setattr(codecache, "write", disk_full)
    result, _ = record(quick_spec(backend="inductor"))
    assert result.status == "failed" and result.summary.compile_failed is None
    assert result.error == (
        "this machine ran out of disk space (OSError: [Errno 28] No space left on device): not a finding about "
        "the model; free some space on the drive of the compile caches and the store, then run the race again"
    )
    assert len([s for s in result.eager.steps if s.phase == "train"]) >= 4  # eager's epoch before it: kept


def test_ctrl_c_ends_the_run_as_cancelled(monkeypatch):
    fail_after(monkeypatch, "compiled", 1, KeyboardInterrupt())
    result, _ = record(quick_spec())
    assert result.error == "cancelled" and len(result.compiled.steps) == 1


def test_fullgraph_with_a_graph_break_is_a_finding_with_advice(monkeypatch):
    """Compile failing on a model is what the race found (issue 14), not a crash: eager's results stand."""

    class Breaks(torch.nn.Module):
        def __init__(self, size):
            super().__init__()
            self.lin = torch.nn.Linear(size, 10)

        def forward(self, x):
            print("", end="")  # a graph break
            return self.lin(x)

    from core.engine.models import workload as networks

    monkeypatch.setattr(networks, "mlp", Breaks)
    result, _ = record(quick_spec(fullgraph=True, backend="eager"))
    assert result.status == "done" and result.error is None
    reason = result.summary.compile_failed
    assert "fullgraph" in reason and "turn fullgraph off" in reason and result.compiled.error == reason
    assert len(result.eager.steps) == 8 and result.compiled.steps == []
    assert reading(result.summary) == f"Compile failed on this model: {reason}; eager ran."
    relaxed, _ = record(quick_spec(fullgraph=False, backend="eager"))
    assert relaxed.status == "done" and relaxed.compile_stats.graph_breaks >= 1
    assert relaxed.compile_stats.break_reasons


def test_explain_failure_is_short_and_human():
    spec = RunSpec(batch_size=512)
    assert explain_failure(RuntimeError("CUDA out of memory. Tried"), spec, torch.device("cuda:0")).startswith(
        "out of memory at batch size 512 on cuda:0"
    )
    assert explain_failure(ValueError(""), spec, torch.device("cpu")) == "ValueError: ValueError"


def test_precision_flags_are_restored_after_a_tf32_run():
    before = (torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32)
    with device_state.precision_settings(RunSpec(precision="tf32")):
        assert torch.get_float32_matmul_precision() == "high" and torch.backends.cudnn.allow_tf32
    with device_state.precision_settings(RunSpec(precision="fp32")):
        assert torch.get_float32_matmul_precision() == "highest" and not torch.backends.cudnn.allow_tf32
    assert (torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32) == before


def test_cold_cache_is_fresh_and_removed_warm_cache_persists(tmp_path):
    device = torch.device("cpu")
    with device_state.inductor_cache(RunSpec(cache="cold"), device) as cold:
        assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == cold and os.listdir(cold) == []
    assert not os.path.exists(cold)
    with device_state.inductor_cache(RunSpec(cache="warm"), device) as warm:
        assert warm.startswith(os.environ["COMPILE_LAB_DATA"])
    assert os.path.isdir(warm)
    with device_state.inductor_cache(RunSpec(cache="warm"), device) as again:
        assert again == warm


def test_amp_bf16_on_cpu_trains_in_bfloat16():
    result, _ = record(quick_spec(precision="amp-bf16", epochs=1, steps_per_epoch=3))
    assert result.status == "done"
    # bf16 autocast changes the numbers slightly, but both variants agree with each other
    assert result.eager.final_loss == pytest.approx(result.compiled.final_loss, rel=2e-2)


@pytest.mark.slow
def test_real_inductor_race_on_a_tiny_model():
    spec = RunSpec(model="mlp", batch_size=32, epochs=2, steps_per_epoch=6, eval_steps=2, device="cpu")
    result, events = record(spec)
    assert result.status == "done", result.error
    s = result.summary
    assert s.compile_time_s > 0.5  # a cold Inductor compile takes seconds, not milliseconds
    assert s.first_epoch_overhead_s > 0.5
    assert s.eval_first_epoch_overhead_s > 0  # eval mode compiles another graph
    assert result.compile_stats.graphs >= 2 and result.compile_stats.recompiles >= 1  # eval mode recompiles
    phases = result.compile_stats.phases  # torch told us where the time went, and it adds up
    for graph in ("forward", "backward"):
        assert sum(phases[graph]["phases"].values()) == pytest.approx(phases[graph]["total_s"])
    assert phases["total_s"] == pytest.approx(phases["forward"]["total_s"] + phases["backward"]["total_s"])
    assert result.eager.final_loss == pytest.approx(result.compiled.final_loss, rel=1e-2)
    for key in ("steady_state_speedup", "whole_run_speedup", "compile_time_s"):
        assert math.isfinite(getattr(s, key))
    assert len([e for e in events if isinstance(e, StepEvent)]) == 2 * (12 + 4)
    # Inductor's one-time CPU feature probe ran before timing, and the race says how long it took.
    assert result.environment["cpu_isa_probe_s"] >= 0


def test_the_cpu_feature_probe_runs_once_before_the_compile_and_only_where_inductor_probes(tmp_path):
    from torch._inductor import cpu_vec_isa

    from core.engine.device_state import probe_cpu_vector_isa, probe_dir

    assert probe_cpu_vector_isa(torch.device("cpu"), "aot_eager") is None
    assert probe_cpu_vector_isa(torch.device("cuda"), "inductor") is None
    # In a fresh process, as in a race's worker (torch keeps the answer per process: a real probe).
    race_cache = str(tmp_path / "cold-cache")
    data = str(tmp_path / "fresh-data")  # not the test's own: the suite gives that the session's probe
    script = (
        "import json, os, torch; from core.engine.device_state import probe_cpu_vector_isa as p; "
        "s = p(torch.device('cpu'), 'inductor'); print(json.dumps([s, os.environ['TORCHINDUCTOR_CACHE_DIR']]))"
    )
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": race_cache, "COMPILE_LAB_DATA": data}
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True)
    seconds, cache_after = json.loads(done.stdout.strip().splitlines()[-1])
    assert seconds is not None and seconds >= 0
    # Its test programs are kept for the machine's next race, not left in the race's own cache...
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COMPILE_LAB_DATA", data)
        assert os.listdir(probe_dir())
    assert not [name for _, _, names in os.walk(race_cache) for name in names]
    assert cache_after == race_cache  # ...which the compile then uses
    # The answer is kept for the process: the compile that follows asks again and gets it at once.
    probe_cpu_vector_isa(torch.device("cpu"), "inductor")
    hits = cpu_vec_isa.valid_vec_isa_list.cache_info().hits
    cpu_vec_isa.pick_vec_isa()
    assert cpu_vec_isa.valid_vec_isa_list.cache_info().hits == hits + 1


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_resnet50_amp_bf16_race_on_a_gpu():
    from core.engine.spec import detect_device_caps

    spec = RunSpec(model="resnet50", batch_size=64, precision="amp-bf16", epochs=2, steps_per_epoch=10, device="cuda")
    result = run_race(spec, caps=detect_device_caps())
    assert result.status == "done", result.error
    assert result.summary.memory_kind == "CUDA allocator peak"
    assert result.summary.compiled_peak_memory_bytes > 0
    assert result.environment["compute_capability"]
