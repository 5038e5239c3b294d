"""The environment record stored with every run: what a number was measured on."""

from __future__ import annotations

import os
import platform
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


def precision_flags() -> dict[str, Any]:
    """The float32 math settings actually in force (they silently change results and speed)."""
    return {
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cuda_matmul_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
        "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
    }


def cuda_driver_version() -> str | None:
    """The NVIDIA driver's CUDA version (e.g. "12.4"), as the driver reports it; None off CUDA."""
    try:
        version = int(torch._C._cuda_getDriverVersion())  # private, but what torch itself reports
    except Exception:  # noqa: BLE001
        return None
    return f"{version // 1000}.{version % 1000 // 10}" if version > 0 else None


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
