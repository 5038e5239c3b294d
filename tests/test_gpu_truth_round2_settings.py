"""GPU defects of round 2 that are settings a race makes (TF32) and what it measures around them,
each simulated on a CPU: the state torch creates on a GPU box is built here by hand, and each test
fails on the code as it was before the fix."""

import pytest
import torch

from core.engine import device_state
from core.engine.spec import RunSpec

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
