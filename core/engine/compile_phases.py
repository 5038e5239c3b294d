"""Which compile phase is running right now, told while it runs.

torch's own timers (CompilationMetrics) report phases only when a compile has finished, and its
event stack lives in the compiling thread's thread-local storage. So a watcher thread looks at
the training thread's Python stack a few times a second and names the innermost compiler layer
on it: torch/_dynamo is Dynamo tracing, torch/_functorch AOT autograd, torch/_inductor lowering
and code generation, its kernel-compiling and autotuning modules the kernel compilation. Reading
another thread's stack costs microseconds and never stops it; the watcher runs for both variants
alike, so neither pays for it alone. The finished run's breakdown comes from torch's own timers
(compile_stats.compile_breakdown); this is for the live "compiling: <phase>, 12 s" line.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from core.engine.compile_stats import AOT, CODEGEN, DYNAMO, KERNELS, LOWERING

SAMPLE_EVERY_S = 0.1
# (path fragment, phase), checked from the innermost frame outwards; the first match names it.
_LAYERS = (
    ("torch/_inductor/select_algorithm", KERNELS),
    ("torch/_inductor/autotune", KERNELS),
    ("torch/_inductor/async_compile", KERNELS),
    ("torch/_inductor/codecache", KERNELS),
    ("torch/_inductor/cpp_builder", KERNELS),
    ("torch/_inductor/runtime/triton_heuristics", KERNELS),
    ("torch/_inductor/codegen", CODEGEN),
    ("torch/_inductor/", LOWERING),
    ("torch/_functorch/", AOT),
    ("torch/_dynamo/symbolic_convert", DYNAMO),
    ("torch/_dynamo/variables/", DYNAMO),
    ("torch/_dynamo/guards", DYNAMO),
    ("torch/_dynamo/output_graph", DYNAMO),
    ("torch/_dynamo/bytecode", DYNAMO),
    ("torch/_dynamo/convert_frame", DYNAMO),
)  # not torch/_dynamo/utils: its timers wrap every other phase too
# A stack is compiling only when one of these is on it (file fragment, function); otherwise torch
# frames on it are compiled code running (Dynamo's guards, AOT's and Inductor's runtime wrappers).
_COMPILE_ENTRIES = (
    ("torch/_dynamo/convert_frame", "_compile"),
    ("torch/_dynamo/convert_frame", "compile_inner"),
    ("torch/_inductor/compile_fx", "compile_fx_inner"),
    ("torch/_inductor/compile_fx", "_compile_fx_inner"),
    ("torch/_inductor/compile_fx", "fx_codegen_and_compile"),
    ("torch/_functorch/", "aot_dispatch_autograd"),
    ("torch/_functorch/", "aot_dispatch_base"),
)


def phase_of(frames: list[tuple[str, str]]) -> str | None:
    """The compile phase a stack is in ((file, function) pairs, innermost first), or None when
    nothing on it is compiling."""
    frames = [(path.replace("\\", "/"), name) for path, name in frames]
    if not any(fragment in path and name == entry for path, name in frames for fragment, entry in _COMPILE_ENTRIES):
        return None
    for path, name in frames:
        if name == "<module>":
            continue  # a module being imported, not compiling
        for fragment, phase in _LAYERS:
            if fragment in path:
                return phase
    return None


def stack_of(thread_id: int) -> list[tuple[str, str]]:
    """(file, function) of each frame on a thread's Python stack, innermost first."""
    frame = sys._current_frames().get(thread_id)
    frames = []
    while frame is not None:
        frames.append((frame.f_code.co_filename, frame.f_code.co_name))
        frame = frame.f_back
    return frames


class PhaseWatcher:
    """Samples one thread's stack and reports each change of compile phase (None: not compiling).

    `on_change(phase, since)` is called from the watcher thread; `transitions` keeps
    (phase, start, end) for every phase seen, in wall-clock seconds.
    """

    def __init__(self, on_change: Callable[[str | None, float], Any], thread_id: int | None = None):
        self.on_change = on_change
        self.thread_id = threading.get_ident() if thread_id is None else thread_id
        self.transitions: list[tuple[str, float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="compile-phase-watcher", daemon=True)
        self._current: str | None = None
        self._since = 0.0

    def __enter__(self) -> PhaseWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._switch(None, time.time())

    def _loop(self) -> None:
        seen: str | None = None
        while not self._stop.wait(SAMPLE_EVERY_S):
            try:
                phase = phase_of(stack_of(self.thread_id))
            except Exception:  # noqa: BLE001 - a stack that changes under us: look again next time
                continue
            if phase != self._current and phase == seen:  # two samples in a row: not a passing frame
                self._switch(phase, time.time() - SAMPLE_EVERY_S)
            seen = phase

    def _switch(self, phase: str | None, now: float) -> None:
        if phase == self._current:
            return
        if self._current is not None:
            self.transitions.append((self._current, self._since, now))
        self._current, self._since = phase, now
        self.on_change(phase, now)
