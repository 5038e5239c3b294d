"""How big a bandwidth measurement must be to measure main memory, and how many calls one timed
sample needs. Torch-free, so the sizing rules are unit-tested without a device.

A copy of a 16 MiB tensor on a CPU with a large last-level cache (LLC) runs from cache: the figure
("185 GB/s") is cache bandwidth, not memory bandwidth. So the fusion demo sizes its working set
(input plus output) to several times the LLC (read from sysfs on Linux, or the GPU's L2 size), and
labels each figure with the level it measures. And one call of a ~10 µs fused GPU kernel is
dwarfed by its launch, so a timed sample is many back-to-back calls, long enough to time well.
"""

from __future__ import annotations

import math
import os
import re

from core.engine.explain.params import FUSION_MAX_CALLS_PER_SAMPLE, FUSION_MAX_NUMEL

CPU_CACHE_DIR = "/sys/devices/system/cpu/cpu0/cache"
WORKING_SET_MULTIPLE = 3  # the working set is this many times the last-level cache
MIN_AUTO_NUMEL = 4 * 1024 * 1024  # 16 MiB per float32 tensor: never smaller than the old fixed size
MAX_AUTO_NUMEL = FUSION_MAX_NUMEL  # 512 MiB per float32 tensor
MEMORY_SHARE = 8  # the eager chain holds about 3 tensors at once: use at most 1/8 of the memory per tensor
SAMPLE_TARGET_S = 0.02  # one timed sample lasts at least this long (many calls of a fast kernel)
MAX_CALLS_PER_SAMPLE = FUSION_MAX_CALLS_PER_SAMPLE
FLOAT_BYTES = 4

MAIN_MEMORY, CACHE, PARTLY_CACHE, UNKNOWN = "main memory", "cache", "partly cache", "unknown"


def parse_cache_size(text: str) -> int | None:
    """Bytes in a sysfs cache size ('307200K', '2048K', '32M', '1024'); None if it does not parse."""
    match = re.fullmatch(r"\s*(\d+)\s*([KMG]?)\s*", text or "")
    if not match:
        return None
    return int(match.group(1)) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[match.group(2)]


def cpu_last_level_cache(cache_dir: str = CPU_CACHE_DIR) -> dict | None:
    """The highest-level data or unified cache cpu0 uses, from sysfs: {"bytes", "level", "source"};
    None off Linux or when sysfs says nothing usable."""
    try:
        entries = sorted(name for name in os.listdir(cache_dir) if name.startswith("index"))
    except OSError:
        return None
    best: dict | None = None
    for name in entries:
        folder = os.path.join(cache_dir, name)
        try:
            kind = _read(folder, "type")
            level = int(_read(folder, "level"))
            size = parse_cache_size(_read(folder, "size"))
        except (OSError, ValueError):
            continue
        if kind == "Instruction" or not size:
            continue
        if best is None or level > best["level"]:
            best = {"bytes": size, "level": level, "source": f"L{level} of cpu0, from {cache_dir}"}
    return best


def _read(folder: str, name: str) -> str:
    with open(os.path.join(folder, name)) as f:
        return f.read().strip()


def auto_numel(cache_bytes: int | None, memory_bytes: int | None = None) -> int:
    """float32 elements per tensor so that input + output is WORKING_SET_MULTIPLE times the cache,
    within MIN_AUTO_NUMEL..MAX_AUTO_NUMEL and 1/MEMORY_SHARE of the device's memory."""
    if not cache_bytes:
        numel = MIN_AUTO_NUMEL
    else:
        numel = math.ceil(WORKING_SET_MULTIPLE * cache_bytes / (2 * FLOAT_BYTES))
    numel = min(max(numel, MIN_AUTO_NUMEL), MAX_AUTO_NUMEL)
    if memory_bytes:
        numel = min(numel, max(memory_bytes // (MEMORY_SHARE * FLOAT_BYTES), 1))
    return int(numel)


def memory_level(working_set_bytes: int, cache_bytes: int | None) -> str:
    """Which level a streaming measurement of this many bytes measures: main memory when the data
    is at least twice the last-level cache, cache when it fits in it, else partly cache."""
    if not cache_bytes:
        return UNKNOWN
    if working_set_bytes >= 2 * cache_bytes:
        return MAIN_MEMORY
    if working_set_bytes <= cache_bytes:
        return CACHE
    return PARTLY_CACHE


def calls_per_sample(one_call_s: float, target_s: float = SAMPLE_TARGET_S, most: int = MAX_CALLS_PER_SAMPLE) -> int:
    """Back-to-back calls one timed sample needs to last at least target_s (at least one)."""
    if not one_call_s > 0:
        return most
    return int(min(max(math.ceil(target_s / one_call_s), 1), most))
