"""The environment record stored with every run: what a number was measured on."""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from typing import Any

import torch


def cpu_name() -> str:
    """The CPU's marketing name where Linux tells it, else what platform knows."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def total_memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def machine_load() -> dict[str, Any] | None:
    """How busy the machine is now: the 1, 5 and 15 minute load averages and the cores they share.

    Stored with every run (at its start, and at its end for a race), so a recording made on a busy
    box says so: other work on a small CPU can make a compile take many times longer. None where the
    platform has no load average (Windows)."""
    try:
        one, five, fifteen = os.getloadavg()
    except (OSError, AttributeError):
        return None
    return {"load_average": [round(one, 2), round(five, 2), round(fifteen, 2)], "cpu_count": os.cpu_count()}


def precision_flags() -> dict[str, Any]:
    """The float32 math settings actually in force (they silently change results and speed).

    torch 2.9+ has a per-backend `fp32_precision` API beside the legacy flags, and what Inductor
    reads is the new one (its conv templates read `cudnn.fp32_precision`, its matmuls
    `cuda.matmul.fp32_precision`); once anything used it, the legacy
    `get_float32_matmul_precision()` raises. So both are recorded, and neither read can raise.
    """
    flags: dict[str, Any] = {
        "float32_matmul_precision": _read(torch.get_float32_matmul_precision),
        "cuda_matmul_allow_tf32": _read(lambda: bool(torch.backends.cuda.matmul.allow_tf32)),
        "cudnn_allow_tf32": _read(lambda: bool(torch.backends.cudnn.allow_tf32)),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
    }
    for name, backend in _FP32_PRECISION_BACKENDS.items():
        value = _read(lambda backend=backend: _attribute(torch.backends, backend + ".fp32_precision"))
        if value is not None:
            flags[f"{name}_fp32_precision"] = value
    return flags


# The new API's settings that decide TF32 (torch 2.9+): generic, then per backend and operator.
_FP32_PRECISION_BACKENDS = {
    "generic": "",
    "cuda_matmul": "cuda.matmul",
    "cudnn": "cudnn",
    "cudnn_conv": "cudnn.conv",
    "cudnn_rnn": "cudnn.rnn",
    "mkldnn": "mkldnn",
}


def _attribute(root: Any, dotted: str) -> Any:
    for part in (p for p in dotted.split(".") if p):
        root = getattr(root, part)
    return root


def _read(read: Any) -> Any:
    """A flag's value, or None where this torch has no such flag or refuses to tell it."""
    try:
        value = read()
    except (AttributeError, RuntimeError):
        return None
    return value if isinstance(value, (bool, str, int)) else None


def cuda_driver_version() -> str | None:
    """The NVIDIA driver's CUDA version (e.g. "12.4"); None off CUDA or where nothing tells it.

    torch 2.14 has no public (nor, any more, private) reader for it, so it comes from NVML where
    pynvml is installed, else from `nvidia-smi`'s header ("CUDA Version: 12.4")."""
    version = _driver_version_from_torch() or _driver_version_from_nvml()
    if version:
        return f"{version // 1000}.{version % 1000 // 10}"
    return _driver_version_from_smi()


def _driver_version_from_torch() -> int | None:
    reader = getattr(torch._C, "_cuda_getDriverVersion", None)  # older torch only
    try:
        version = int(reader()) if reader is not None else 0
    except Exception:  # noqa: BLE001 - a private reader that fails tells nothing
        return None
    return version if version > 0 else None


def _driver_version_from_nvml() -> int | None:
    try:
        import pynvml  # noqa: PLC0415 - optional (nvidia-ml-py)

        pynvml.nvmlInit()
        try:
            version = int(pynvml.nvmlSystemGetCudaDriverVersion())
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - not installed, or no NVIDIA driver
        return None
    return version if version > 0 else None


def _driver_version_from_smi() -> str | None:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run([smi], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"CUDA Version:\s*(\d+\.\d+)", out)
    return match.group(1) if match else None


def gpu_inventory() -> list[dict[str, Any]]:
    """Every GPU this process can see: index, name, memory, SM count, compute capability."""
    if not torch.cuda.is_available():
        return []
    gpus = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        gpus.append(
            {
                "index": index,
                "name": props.name,
                "memory_bytes": int(props.total_memory),
                "sm_count": int(getattr(props, "multi_processor_count", 0)) or None,
                "compute_capability": f"{props.major}.{props.minor}",
            }
        )
    return gpus


def environment_record(device: torch.device) -> dict[str, Any]:
    """Device, versions and flags for one run on `device`."""
    try:
        import triton  # noqa: PLC0415

        triton_version = triton.__version__
    except Exception:  # noqa: BLE001 - absent on CPU-only installs
        triton_version = None
    record: dict[str, Any] = {
        "device_type": device.type,
        "device_name": cpu_name(),
        "device_memory_bytes": total_memory_bytes(),
        "compute_capability": None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "triton": triton_version,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_name": cpu_name(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "precision_flags": precision_flags(),
        "lane": os.environ.get("COMPILE_LAB_LANE"),  # the queue lane (GPU) a worker was pinned to
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "load_at_start": machine_load(),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        record.update(
            device_name=props.name,
            device_memory_bytes=int(props.total_memory),
            compute_capability=f"{props.major}.{props.minor}",
            sm_count=int(getattr(props, "multi_processor_count", 0)) or None,
            cuda_driver=cuda_driver_version(),
        )
    elif device.type == "mps":
        record["device_name"] = f"Apple MPS ({cpu_name()})"
    return record
