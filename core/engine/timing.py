"""Device-correct timers.

CUDA (and MPS) work is asynchronous: reading a host clock after launching kernels measures the
launch, not the work. Every timer here waits for the device before it reads the clock, so a
step's time is the time until its results exist, as a user's training loop experiences it.
"""

from __future__ import annotations

import time

import torch


def device_sync(device: torch.device | str) -> None:
    """Block until all queued work on `device` has finished (no-op on CPU)."""
    kind = torch.device(device).type
    if kind == "cuda":
        torch.cuda.synchronize(device)
    elif kind == "mps":
        torch.mps.synchronize()


class Stopwatch:
    """Times one region of device work: start(), run the work, stop() -> seconds.

    On CUDA the elapsed time comes from CUDA events on the current stream (the device's own
    clock), read after synchronizing on the end event; elsewhere from perf_counter after a sync.
    Includes host-side overhead between the two marks (kernel launches, Python, compilation),
    which is exactly the cost torch.compile tries to remove.
    """

    def __init__(self, device: torch.device | str):
        self.device = torch.device(device)
        self._cuda = self.device.type == "cuda"
        self._t0 = 0.0
        if self._cuda:
            self._start = torch.cuda.Event(enable_timing=True)
            self._end = torch.cuda.Event(enable_timing=True)

    def start(self) -> None:
        device_sync(self.device)  # nothing earlier may leak into this region
        if self._cuda:
            self._start.record()
        self._t0 = time.perf_counter()

    def stop(self) -> float:
        if self._cuda:
            self._end.record()
            self._end.synchronize()
            return self._start.elapsed_time(self._end) / 1000.0
        device_sync(self.device)
        return time.perf_counter() - self._t0
