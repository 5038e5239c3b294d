"""GPU settings a race makes (TF32) and what it measures around them, each simulated on a CPU: the
state torch creates on a GPU box is built here by hand, and each test fails on the code as it was
before the fix."""

import os
import subprocess

import pytest
import torch
from support import CPU, quick_spec

from core.engine import device_state, variant, words
from core.engine.compile_stats import CompileStats
from core.engine.events import StepEvent, VariantResult
from core.engine.spec import RunSpec
from core.engine.summary import Summary
from core.engine.trainer import run_race, summarize_variants
from core.view.report import _reserved_rows

BACKENDS = {
    "cudnn": lambda: torch.backends.cudnn,
    "cuda.matmul": lambda: torch.backends.cuda.matmul,
    "cudnn.conv": lambda: torch.backends.cudnn.conv,
    "cudnn.rnn": lambda: torch.backends.cudnn.rnn,
}


def _new_api() -> dict[str, str]:
    return {name: backend().fp32_precision for name, backend in BACKENDS.items()}


@pytest.fixture
def restore_precision():
    """Whatever a test sets, the next test sees torch's settings as they were."""
    new_api = _new_api()
    legacy = (torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32)
    yield
    torch.set_float32_matmul_precision(legacy[0])
    torch.backends.cudnn.allow_tf32 = legacy[1]
    for name, value in new_api.items():
        BACKENDS[name]().fp32_precision = value


def test_a_tf32_race_sets_what_inductors_conv_templates_and_autotune_read(restore_precision):
    # torch/_inductor/kernel/conv.py: ALLOW_TF32=torch.backends.cudnn.fp32_precision == "tf32";
    # the legacy cudnn.allow_tf32 = True leaves that at "none".
    with device_state.precision_settings(RunSpec(precision="tf32")):
        assert torch.backends.cudnn.fp32_precision == "tf32"
        assert torch.backends.cudnn.conv.fp32_precision == "tf32"
        assert torch.backends.cuda.matmul.fp32_precision == "tf32"
        # max-autotune's cache keys call the legacy getter, which raises if the two APIs disagree
        assert torch.get_float32_matmul_precision() == "high"
    with device_state.precision_settings(RunSpec(precision="fp32")):
        assert torch.backends.cudnn.fp32_precision == "ieee"
        assert torch.backends.cuda.matmul.fp32_precision == "ieee"
        assert torch.get_float32_matmul_precision() == "highest"


def test_precision_settings_never_raise_after_a_model_file_set_the_new_api_and_restore_it(restore_precision):
    torch.backends.cuda.matmul.fp32_precision = "tf32"  # what a model file may do
    with pytest.raises(RuntimeError):
        torch.get_float32_matmul_precision()  # torch's legacy getter now refuses
    before = _new_api()
    with device_state.precision_settings(RunSpec(precision="fp32")):
        assert torch.backends.cuda.matmul.fp32_precision == "ieee"
    assert _new_api() == before
    with device_state.precision_settings(RunSpec(precision="tf32")):
        pass
    assert _new_api() == before


def test_precision_settings_restore_the_untouched_defaults_exactly(restore_precision):
    before = (_new_api(), torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32)
    for precision in ("tf32", "fp32", "amp-bf16"):
        with device_state.precision_settings(RunSpec(precision=precision)):
            pass
        assert (_new_api(), torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32) == before


@pytest.mark.parametrize("schedule", ["sequential", "alternating"])
def test_both_variants_are_profiled_after_both_timed_runs(monkeypatch, schedule):
    # For CUDA-graph modes below CUDA 12.6 torch leaves CUPTI attached after a profile
    # (TEARDOWN_CUPTI=0), slowing later launches: a profile between the timed runs taxes compiled only.
    timeline: list[str] = []
    real_profile = variant.profile_steps

    def recording_profile(step, batches, device, steps, trace_path=None):
        timeline.append("profile")
        return real_profile(step, batches, device, steps, trace_path)

    monkeypatch.setattr(variant, "profile_steps", recording_profile)

    def on_event(event):
        if isinstance(event, StepEvent):
            timeline.append(f"{event.variant} step")

    profiled = run_race(quick_spec(schedule=schedule, profile_steps=2), on_event, CPU)
    assert profiled.status == "done", profiled.error
    assert timeline.count("profile") == 2
    assert timeline.index("profile") > max(i for i, e in enumerate(timeline) if e != "profile")
    assert profiled.summary.profile["eager"]["steps"] == profiled.summary.profile["compiled"]["steps"] == 2
    plain = run_race(quick_spec(schedule=schedule, profile_steps=0), None, CPU)
    for name in ("eager", "compiled"):  # the timed runs are the same ones, profiled or not
        assert [s.loss for s in getattr(profiled, name).steps] == [s.loss for s in getattr(plain, name).steps]


class FakeCudaCache:
    """torch.cuda's memory counters as a CUDA box shows them to the compiled variant: eager left
    4 GiB in the cache (it is not emptied between variants), compiled's graph pool adds 1.5 GiB."""

    def __init__(self):
        self.reserved = 4 * 2**30

    def reset_peak_memory_stats(self, device=None):
        pass  # torch sets the reserved peak to what is reserved now

    def memory_reserved(self, device=None):
        return self.reserved

    def max_memory_reserved(self, device=None):
        return self.reserved + 3 * 2**29

    def max_memory_allocated(self, device=None):
        return 2**30

    def synchronize(self, device=None):
        pass


def test_each_variant_reports_what_it_added_to_the_cuda_cache_not_eagers_leftovers(monkeypatch):
    monkeypatch.setattr(torch, "cuda", FakeCudaCache())
    device = torch.device("cuda")
    result = VariantResult("compiled")
    result.reserved_at_start_bytes = device_state.reset_peak_memory(device)
    assert device_state.release_variant(result, device) is None
    assert result.peak_reserved_bytes == 4 * 2**30 + 3 * 2**29  # the whole cache, eager's part included
    assert result.reserved_growth_bytes == 3 * 2**29  # what compiled added: its graph pool
    summary = summarize_variants(quick_spec(), VariantResult("eager"), result, CompileStats())
    assert summary.compiled_reserved_growth_bytes == 3 * 2**29
    rows = _reserved_rows(Summary.of(summary))
    assert rows[0] == ("CUDA cache added (reserved growth)", "-", words.bytes_(3 * 2**29))


def test_the_caches_demos_cold_compile_cannot_use_a_hosts_triton_cache(monkeypatch, tmp_path):
    # Triton reads TRITON_CACHE_DIR before anything Inductor sets (torch/_inductor/runtime/
    # cache_dir_utils.py): a host that sets it would serve the "cold" compile its GPU kernels.
    from core.engine.explain import caches

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "host-triton"))
    seen = {}

    def fake_run(command, env, **kwargs):
        seen.update(env)
        return subprocess.CompletedProcess(command, 0, stdout='{"compile_s": 1.0}\n', stderr="")

    monkeypatch.setattr(caches.subprocess, "run", fake_run)
    cache_dir = str(tmp_path / "cold")
    assert caches.compile_in_fresh_process(cache_dir, "mlp", 8, "cpu")["compile_s"] == 1.0
    assert seen["TORCHINDUCTOR_CACHE_DIR"] == cache_dir
    assert seen["TRITON_CACHE_DIR"].startswith(cache_dir + os.sep)
    assert {name: seen[name] for name in device_state.CACHE_VARIABLES} == device_state.cache_environment(cache_dir)
