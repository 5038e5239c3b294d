"""The race: one short training run in eager mode, then the same run under torch.compile.

Fairness is the point. Both variants start from the same initial weights, see the same batches
in the same order, use the same optimizer, loss and precision; only torch.compile differs.
Every step is timed device-correctly (core.engine.timing); epochs are timed between synchronizations.
Events go to a callback as they happen, so the CLI and the background worker share this code;
the records themselves (core.engine.events) import no torch.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import gc
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable
from typing import Any

import torch

from core.engine import analysis
from core.engine.compile_phases import PhaseWatcher
from core.engine.compile_stats import (
    CompileStats,
    CompileWatch,
    compile_skipped_reason,
    read_compile_stats,
    reset_compile_state,
)
from core.engine.cpu_probe import probe_cpu_vector_isa
from core.engine.data import BatchSource
from core.engine.environment import environment_record
from core.engine.events import (
    VARIANTS,
    CompileEvent,
    EpochEvent,
    EventCallback,
    RaceResult,
    StartEvent,
    StatusEvent,
    StepEvent,
    VariantResult,
)
from core.engine.profiling import kernel_profiling, profile_reading, profile_steps
from core.engine.regions import compile_regions
from core.engine.spec import (
    CUDA_GRAPH_MODES,
    DeviceCaps,
    Problem,
    RunSpec,
    SpecError,
    check,
    data_home,
    detect_device_caps,
    resolve_device,
)
from core.engine.timing import Stopwatch, device_sync
from core.engine.workload import ModelError, Workload, batch_samples, is_out_of_memory, loss_fn, stage, workload_for


def out_of_memory_errors() -> tuple[type[BaseException], ...]:
    """torch's out-of-memory exception classes: torch.OutOfMemoryError exists only from torch 2.5;
    before it, CUDA raised torch.cuda.OutOfMemoryError."""
    classes = [getattr(torch, "OutOfMemoryError", None), getattr(torch.cuda, "OutOfMemoryError", None)]
    return tuple(c for c in classes if isinstance(c, type))


def explain_failure(exc: BaseException, spec: RunSpec, device: torch.device) -> str:
    """A reason a person understands, with what to try next."""
    text = str(exc)
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    if isinstance(exc, KeyboardInterrupt):
        return "cancelled"
    if isinstance(exc, out_of_memory_errors()) or is_out_of_memory(exc):
        return f"out of memory at batch size {spec.batch_size} on {device}: try a smaller batch size or amp-bf16"
    if "stance is 'fail_on_recompile'" in text:
        guard = next((line.strip()[2:] for line in text.splitlines() if line.strip().startswith("- ")), None)
        why = f" ({guard})" if guard else ""
        return (
            f"stance fail_on_recompile stopped a recompile{why}: the input shapes changed after the first compile; "
            "stance eager_on_recompile would run them eagerly, dynamic=true would compile once for all shapes"
        )
    if spec.fullgraph and "graph break" in text.lower():
        return f"fullgraph=True but the model has a graph break ({first}): turn fullgraph off to allow breaks"
    if type(exc).__module__.startswith(("torch._dynamo", "torch._inductor")):
        hint = "; try backend aot_eager to isolate Inductor" if spec.backend == "inductor" else ""
        return f"torch.compile failed ({type(exc).__name__}: {first}){hint}"
    if isinstance(exc, ModelError):
        return text
    return f"{type(exc).__name__}: {first}"


# Where torch.compile's own errors come from: Dynamo tracing (graph breaks under fullgraph,
# unsupported code), AOT autograd and functionalization, fake-tensor propagation, Inductor.
_COMPILER_MODULES = ("torch._dynamo", "torch._inductor", "torch._functorch", "torch._subclasses", "torch.fx")


def compile_failure(exc: BaseException, spec: RunSpec, device: torch.device) -> str | None:
    """The reason, if the compiled variant failed because torch.compile could not handle the model
    (eager ran the same model, weights and batches without error): a finding about the model, not
    a crash. Out of memory, a cancel and device errors are not compile failures."""
    if isinstance(exc, KeyboardInterrupt) or isinstance(exc, out_of_memory_errors()) or is_out_of_memory(exc):
        return None
    if not type(exc).__module__.startswith(_COMPILER_MODULES):
        return None
    if "stance is 'fail_on_recompile'" in str(exc):  # a stop the run asked for, not the model's failing
        return None
    return explain_failure(exc, spec, device)


@contextlib.contextmanager
def precision_settings(spec: RunSpec):
    """TF32 on only when asked; restored afterwards so one run never leaks into the next."""
    saved = (torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32)
    tf32 = spec.precision == "tf32"
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    torch.backends.cudnn.allow_tf32 = tf32
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(saved[0])
        torch.backends.cudnn.allow_tf32 = saved[1]


def autocast_context(spec: RunSpec, device: torch.device):
    if spec.precision == "amp-fp16":
        return torch.autocast(device.type, dtype=torch.float16)
    if spec.precision == "amp-bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


CACHE_VARIABLES = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


@contextlib.contextmanager
def inductor_cache(spec: RunSpec, device: torch.device):
    """Cold: a fresh, private Inductor cache (what a new user pays). Warm: a persistent one.

    Triton keeps its own cache of compiled GPU kernels (TRITON_CACHE_DIR, default ~/.triton); a
    host that sets it, or a warm ~/.triton, would make a "cold" run partly warm. So both caches
    point inside the run's directory. Both variables are read when a cache is looked up, so
    setting them before this process compiles anything is enough.
    """
    saved = {name: os.environ.get(name) for name in CACHE_VARIABLES}
    if spec.cache == "warm":
        path = os.path.join(data_home(), "inductor-cache", f"{device.type}-torch{torch.__version__}")
        os.makedirs(path, exist_ok=True)
    else:
        path = tempfile.mkdtemp(prefix="compile-lab-cold-cache-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = path
    os.environ["TRITON_CACHE_DIR"] = os.path.join(path, "triton")
    try:
        yield path
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if spec.cache == "cold":
            shutil.rmtree(path, ignore_errors=True)


def reset_peak_memory(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return
    with contextlib.suppress(OSError):  # Linux: writing 5 resets the process's peak RSS
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")


def peak_reserved_memory(device: torch.device) -> int | None:
    """CUDA: the most the caching allocator held since reset_peak_memory. CUDA graphs keep their
    memory pool reserved, not allocated, so reduce-overhead's cost shows here and not in the peak."""
    return int(torch.cuda.max_memory_reserved(device)) if device.type == "cuda" else None


def peak_memory(device: torch.device) -> tuple[int | None, str]:
    """Peak memory since reset_peak_memory and what it measures."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device)), "CUDA allocator peak"
    if device.type == "mps":
        return int(torch.mps.driver_allocated_memory()), "MPS driver allocation (current)"
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024, "process peak RSS (CPU)"
    except OSError:
        pass
    return None, "unavailable"


__all__ = ["loss_fn", "run_race"]  # loss_fn lives with the workloads; kept importable from here


def set_stance(stance: str) -> None:
    """torch.compiler.set_stance (torch 2.6+); run_race refuses a stance where it is missing."""
    torch.compiler.set_stance(stance)


def stance_problem(spec: RunSpec) -> Problem | None:
    if spec.stance != "default" and not hasattr(torch.compiler, "set_stance"):
        return Problem(
            "stance", f"torch {torch.__version__} has no torch.compiler.set_stance (torch 2.6+): use stance default"
        )
    return None


def compile_model(model: torch.nn.Module, spec: RunSpec) -> torch.nn.Module:
    """torch.compile with exactly the spec's options (mode only where the backend takes one), of
    the whole model or, with compile_scope "regional", of each repeated block in place (the
    model returned is then the model itself, its blocks compiled)."""
    kwargs: dict[str, Any] = {"backend": spec.backend, "dynamic": spec.dynamic, "fullgraph": spec.fullgraph}
    if spec.backend == "inductor":
        kwargs["mode"] = spec.mode
    if spec.compile_scope == "regional":
        compile_regions(model, spec.model, **kwargs)
        return model
    return torch.compile(model, **kwargs)


class _VariantRun:
    """Trains one variant for the spec's epochs, emitting events as it goes."""

    def __init__(
        self,
        name: str,
        spec: RunSpec,
        device: torch.device,
        init_state: dict,
        emit: EventCallback,
        workload: Workload | None = None,
    ):
        self.name, self.spec, self.device, self.emit = name, spec, device, emit
        self.workload = workload or workload_for(spec)
        torch.manual_seed(spec.seed)
        model = self.workload.build().to(device)
        model.load_state_dict(init_state)
        self.model = model
        self.runner = compile_model(model, spec) if name == "compiled" else model
        self.optimizer = torch.optim.Adam(model.parameters(), lr=spec.lr)
        self.scaler = torch.amp.GradScaler(device.type) if spec.precision == "amp-fp16" else None
        self.autocast = lambda: autocast_context(spec, device)
        self.cudagraphs = name == "compiled" and spec.backend == "inductor" and spec.mode in CUDA_GRAPH_MODES
        self.stopwatch = Stopwatch(device)
        self.result = VariantResult(name)
        self.counts = {"train": 0, "eval": 0}
        self.compile_watch = CompileWatch() if name == "compiled" else None
        self.epoch = 0

    def train_step(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self.cudagraphs:  # tell CUDA-graph trees a new iteration starts (outputs are reused)
            torch.compiler.cudagraph_mark_step_begin()
        self.optimizer.zero_grad(set_to_none=True)
        with self.autocast():
            loss = self.workload.step_loss(self.runner, (x, y))
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            self.optimizer.step()
        return loss

    def checked_train_step(self, x: Any, y: Any) -> None:
        """One untimed train step whose every failure says what failed (the model on its input,
        the loss on its output, backward): the first step a model ever takes in a race."""
        self.optimizer.zero_grad(set_to_none=True)
        with self.autocast():
            loss = self.workload.checked_step_loss(self.runner, (x, y))
        with stage(f"backward through the loss of {self.spec.model} failed"):
            (self.scaler.scale(loss) if self.scaler is not None else loss).backward()
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()

    def eval_step(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self.cudagraphs:
            torch.compiler.cudagraph_mark_step_begin()
        with torch.no_grad(), self.autocast():
            return self.workload.step_loss(self.runner, (x, y))

    def _timed(self, phase: str, epoch: int, batches, step_fn) -> float:
        """Run one phase of one epoch; returns its synchronized wall time."""
        epoch_clock = Stopwatch(self.device)
        epoch_clock.start()
        batches = iter(batches)
        while True:
            if self.counts[phase] == 0 and self.name == "compiled":
                self._status("compiling", epoch, f"compiling the {phase} graph (the first compiled step pays for it)")
            # The clock includes fetching the batch: with fakedata/cifar10 that is the input cost a
            # real training loop pays; with synthetic data it is a list lookup.
            self.stopwatch.start()
            try:
                x, y = next(batches)
            except StopIteration:
                break
            loss = step_fn(x, y)
            elapsed = self.stopwatch.stop()
            self.counts[phase] += 1
            event = StepEvent(
                self.name, phase, epoch, self.counts[phase], elapsed, float(loss.item()), batch_samples(x)
            )
            self.result.steps.append(event)
            self.emit(event)
            self._note_compiles(phase, epoch)
            if self.counts[phase] == 1 and self.name == "compiled":
                self._status("training" if phase == "train" else "evaluating", epoch)
                if phase == "train":
                    self._apply_stance()
        return epoch_clock.stop()

    def _note_compiles(self, phase: str, epoch: int) -> None:
        """After a step (outside its clock): the compiles and recompiles it paid for, if any."""
        if self.compile_watch is None:
            return
        for note in self.compile_watch.new_compiles():
            event = CompileEvent(self.name, phase, epoch, self.counts[phase], note)
            self.result.compiles.append(event)
            self.emit(event)

    def _apply_stance(self) -> None:
        """torch.compiler.set_stance from the second compiled step on: the first compile is wanted,
        later ones are what fail_on_recompile refuses and eager_on_recompile runs eagerly instead."""
        if self.spec.stance != "default":
            set_stance(self.spec.stance)

    def _status(self, state: str, epoch: int, message: str = "") -> None:
        self.emit(StatusEvent(self.name, state, epoch, self.spec.epochs, message))

    def run(
        self,
        source: BatchSource,
        after_first_epoch: Callable[[], None] | None = None,
        trace_dir: str | None = None,
    ) -> VariantResult:
        """Train (and evaluate) every epoch; `after_first_epoch` runs once, untimed, after epoch 1;
        then, untimed, profile a few more steady steps (their trace into trace_dir)."""
        source.prepare()
        reset_peak_memory(self.device)
        self.model.train()
        try:
            for epoch in range(1, self.spec.epochs + 1):
                self.run_epoch(source, epoch, after_first_epoch)
        finally:
            if self.spec.stance != "default":
                set_stance("default")
        self.profile(source, trace_dir)
        return self.result

    def run_epoch(self, source: BatchSource, epoch: int, after_first_epoch: Callable[[], None] | None = None) -> None:
        """Train (and evaluate) one epoch, timed, emitting its events."""
        self.epoch = epoch
        self._status("training", epoch)
        train_s = self._timed("train", epoch, source.train_epoch(epoch), self.train_step)
        eval_s = None
        if self.spec.eval_steps:
            self.model.eval()
            self._status("evaluating", epoch)
            eval_s = self._timed("eval", epoch, source.eval_epoch(epoch), self.eval_step)
            self.model.train()
        event = EpochEvent(self.name, epoch, train_s, eval_s)
        self.result.epochs.append(event)
        self.emit(event)
        if epoch == 1 and after_first_epoch is not None:
            after_first_epoch()

    def profile(self, source: BatchSource, trace_dir: str | None = None) -> None:
        """Untimed, after the timed epochs: a few steady steps under torch.profiler."""
        if self.spec.profile_steps:
            trace = os.path.join(trace_dir, f"{self.name}.trace.json") if trace_dir else None
            batches = source.train_epoch(self.spec.epochs + 1)
            self.result.profile = profile_steps(self.train_step, batches, self.device, self.spec.profile_steps, trace)


def warm_up_device(spec: RunSpec, device: torch.device, init_state: dict, workload: Workload | None = None) -> None:
    """One untimed train (and eval) step on a throwaway eager copy of the model.

    The first work in a process pays one-time costs (cuBLAS/cuDNN handles, oneDNN primitives,
    allocator growth). Eager runs first, so without this its first steps would carry them and the
    compiled run, reusing them, would look cheaper to compile than it is. It is also the model's
    first step ever: a model that cannot train on its batch fails here, saying which part failed.
    """
    workload = workload or workload_for(spec)
    spare = _VariantRun("warm-up", spec, device, init_state, lambda event: None, workload)
    source = BatchSource(spec, device, workload)
    x, y = next(iter(source.train_epoch(0)))
    spare.checked_train_step(x, y)
    if spec.eval_steps:
        spare.model.eval()
        spare.eval_step(x, y)
    device_sync(device)
    del spare
    gc.collect()


def run_race(
    spec: RunSpec,
    on_event: EventCallback | None = None,
    caps: DeviceCaps | None = None,
    trace_dir: str | None = None,
) -> RaceResult:
    """Validate, then race eager against compiled. Raises SpecError before any work if invalid.

    An exception during training (out of memory, a compile error, Ctrl-C) ends the race early:
    the result keeps every event so far and carries a readable `error`. With `trace_dir`, each
    variant's profiled steps are written there as a Chrome/Perfetto trace.
    """
    caps = caps or detect_device_caps()
    check(spec, caps)
    problem = stance_problem(spec)
    if problem:
        raise SpecError([problem])
    if trace_dir:
        os.makedirs(trace_dir, exist_ok=True)
    device = torch.device(resolve_device(spec.device, caps))
    emit = on_event or (lambda event: None)
    variants = {name: VariantResult(name) for name in VARIANTS}
    stats, error, compile_failed = CompileStats(), None, None
    with precision_settings(spec), inductor_cache(spec, device):
        environment = environment_record(device)
        environment["precision"] = spec.precision
        environment["inductor_cache"] = spec.cache
        emit(StartEvent(environment))
        try:  # a model that cannot be built ends the race here, with the reason, before any timing
            workload = workload_for(spec)
            torch.manual_seed(spec.seed)
            model = workload.build()
            model_params = sum(p.numel() for p in model.parameters())
            init_state = copy.deepcopy(model.state_dict())
            del model
        except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - reported, not hidden
            error = explain_failure(exc, spec, device)
            if not isinstance(exc, KeyboardInterrupt) and is_out_of_memory(exc):
                error = f"{spec.model} does not fit in memory on {device}: building it failed ({_first_line(exc)})"
            emit(StatusEvent("eager", "failed", 0, spec.epochs, error))
            summary = summarize_variants(spec, variants["eager"], variants["compiled"], stats)
            return RaceResult(spec, environment, variants["eager"], variants["compiled"], stats, summary, error)
        probe_s = probe_cpu_vector_isa(device, spec.backend)  # once per machine, not this model's compile
        if probe_s is not None:
            environment["cpu_isa_probe_s"] = round(probe_s, 3)
        if spec.schedule == "alternating":
            variants, stats, error, compile_failed = _race_alternating(
                spec, device, emit, init_state, workload, model_params, trace_dir
            )
        for name in VARIANTS if spec.schedule == "sequential" else ():
            emit(StatusEvent(name, "starting", 0, spec.epochs, f"{spec.model}, {model_params:,} parameters"))
            if name == "compiled":
                reset_compile_state()
            run, current = None, {}
            # On a CPU, compiled kernels show up in the per-step profile only if compiled to say so.
            visible_kernels = name == "compiled" and spec.profile_steps > 0 and device.type == "cpu"
            with (
                warnings.catch_warnings(record=True) as caught,
                kernel_profiling(visible_kernels),
                PhaseWatcher(_phase_reporter(name, spec, emit, current)),
            ):
                warnings.simplefilter("default")  # once per place: a per-step warning must not pile up
                try:
                    if name == "eager":
                        warm_up_device(spec, device, init_state, workload)
                    run = current["run"] = _VariantRun(name, spec, device, init_state, emit, workload)
                    after = (lambda: _report_compile_skipped(spec, emit, caught)) if name == "compiled" else None
                    variants[name] = run.run(
                        BatchSource(spec, device, workload), after_first_epoch=after, trace_dir=trace_dir
                    )
                except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - reported, not hidden
                    if run is not None:
                        variants[name] = run.result
                    compile_failed = compile_failure(exc, spec, device) if name == "compiled" else None
                    if compile_failed:  # a finding about the model: eager's results stand
                        variants[name].error = compile_failed
                        emit(StatusEvent(name, "compile_failed", 0, spec.epochs, compile_failed))
                    else:
                        error = variants[name].error = explain_failure(exc, spec, device)
            current.clear()
            _replay_warnings(caught)
            if name == "compiled":
                stats = read_compile_stats()
                stats.warnings = torch_warnings(caught)
            del run
            cleanup_error = _release_variant(variants[name], device)
            if cleanup_error and error is None:
                error = variants[name].error = cleanup_error
            emit(StatusEvent(name, "failed" if error else "done", spec.epochs, spec.epochs, error or ""))
            if error:
                break
    summary = summarize_variants(spec, variants["eager"], variants["compiled"], stats, compile_failed)
    summary["model_params"] = model_params
    summary["cpu_isa_probe_s"] = environment.get("cpu_isa_probe_s")
    return RaceResult(spec, environment, variants["eager"], variants["compiled"], stats, summary, error)


ALTERNATING_MEMORY = "peak of both variants together (alternating schedule: both models in memory)"


def _race_alternating(
    spec: RunSpec,
    device: torch.device,
    emit: EventCallback,
    init_state: dict,
    workload: Workload,
    model_params: int,
    trace_dir: str | None,
) -> tuple[dict[str, VariantResult], CompileStats, str | None, str | None]:
    """Eager and compiled take turns, epoch by epoch, so both lines grow together on the live charts
    and slow drift (heat, background load) falls on both alike, as PyTorch's harness interleaves its
    repeats. Both models and their optimizers are in memory the whole race, so peak memory is of
    both together (said so). Each variant keeps its own random stream (saved and restored around
    its turns), so its losses are the ones a sequential race gives for the same seed."""
    for name in VARIANTS:
        emit(StatusEvent(name, "starting", 0, spec.epochs, f"{spec.model}, {model_params:,} parameters"))
    reset_compile_state()
    runs: dict[str, _VariantRun] = {}
    sources: dict[str, BatchSource] = {}
    streams: dict[str, Any] = {}
    variants = {name: VariantResult(name) for name in VARIANTS}
    error, compile_failed, current = None, None, {}
    visible_kernels = spec.profile_steps > 0 and device.type == "cpu"
    active = "eager"
    with (
        warnings.catch_warnings(record=True) as caught,
        kernel_profiling(visible_kernels),
        PhaseWatcher(_phase_reporter("compiled", spec, emit, current)),
    ):
        warnings.simplefilter("default")
        try:
            warm_up_device(spec, device, init_state, workload)
            for name in VARIANTS:
                active = name
                runs[name] = _VariantRun(name, spec, device, init_state, emit, workload)
                variants[name] = runs[name].result
                sources[name] = BatchSource(spec, device, workload)
                sources[name].prepare()
                streams[name] = _random_state(device)  # right after the variant's own seeding
                runs[name].model.train()
            current["run"] = runs["compiled"]
            reset_peak_memory(device)
            # The stance (set after compiled's first step) stays for the whole race: eager's model is
            # not compiled, so it never consults it.
            skipped = lambda: _report_compile_skipped(spec, emit, caught)  # noqa: E731
            for epoch in range(1, spec.epochs + 1):
                for name in [n for n in VARIANTS if n in runs]:
                    active = name
                    _set_random_state(device, streams[name])
                    try:
                        runs[name].run_epoch(sources[name], epoch, skipped if name == "compiled" else None)
                    except Exception as exc:  # noqa: BLE001 - a compile failure is a finding; eager goes on
                        compile_failed = compile_failure(exc, spec, device) if name == "compiled" else None
                        if not compile_failed:
                            raise
                        variants["compiled"].error = compile_failed
                        emit(StatusEvent("compiled", "compile_failed", 0, spec.epochs, compile_failed))
                        del runs["compiled"]
                        current.clear()
                        continue
                    streams[name] = _random_state(device)
            for name, run in runs.items():
                active = name
                run.profile(sources[name], trace_dir)
        except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - reported, not hidden
            error = variants[active].error = explain_failure(exc, spec, device)
        finally:
            if spec.stance != "default":
                set_stance("default")
        current.clear()
    _replay_warnings(caught)
    stats = read_compile_stats()
    stats.warnings = torch_warnings(caught)
    runs.clear()
    sources.clear()
    for name in VARIANTS:
        cleanup_error = _release_variant(variants[name], device)
        if variants[name].peak_memory_bytes is not None:
            variants[name].memory_kind = ALTERNATING_MEMORY
        if cleanup_error and error is None:
            error = variants[name].error = cleanup_error
    for name in VARIANTS:
        emit(StatusEvent(name, "failed" if error else "done", spec.epochs, spec.epochs, error or ""))
    return variants, stats, error, compile_failed


def _random_state(device: torch.device) -> tuple:
    return (torch.get_rng_state(), torch.cuda.get_rng_state(device) if device.type == "cuda" else None)


def _set_random_state(device: torch.device, state: tuple) -> None:
    torch.set_rng_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state(state[1], device)


def _phase_reporter(name: str, spec: RunSpec, emit: EventCallback, current: dict[str, Any]):
    """Compile phases as status events while they happen (from the phase watcher's thread)."""

    def report(phase: str | None, since: float) -> None:
        run = current.get("run")
        epoch = run.epoch if run is not None else 0
        emit(StatusEvent(name, "compile_phase", epoch, spec.epochs, phase or ""))

    return report


def _release_variant(result: VariantResult, device: torch.device) -> str | None:
    """Record the variant's memory peaks and let its model go. Returns the reason if this fails.

    The CUDA cache is deliberately not emptied between the variants: the compiled run would then
    pay the allocator's growth again (which the warm-up step removed for both) inside its compile
    time. After a sticky CUDA error (an illegal access, a device-side assert) every CUDA call here
    raises again; that second error must neither replace the first nor lose what was measured.
    """
    try:
        result.peak_memory_bytes, result.memory_kind = peak_memory(device)
        result.peak_reserved_bytes = peak_reserved_memory(device)
    except Exception:  # noqa: BLE001 - a device in an error state: the figures stay unknown
        result.memory_kind = "unavailable (the device reported an error)"
    gc.collect()
    try:
        device_sync(device)
    except Exception as exc:  # noqa: BLE001 - reported by the caller unless an earlier error explains it
        return f"the device failed after the {result.name} run: {type(exc).__name__}: {_first_line(exc)}"
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def torch_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    """What was warned while the compiled variant ran (Inductor announces a skipped frame this
    way): first lines, deduplicated, at most 10."""
    texts = [str(w.message).strip().splitlines()[0] for w in caught if str(w.message).strip()]
    return list(dict.fromkeys(texts))[:10]


def _replay_warnings(caught: list[warnings.WarningMessage]) -> None:
    """Show the recorded warnings as Python would have (they were captured to be stored)."""
    for w in caught:
        warnings.showwarning(w.message, w.category, w.filename, w.lineno)


def _report_compile_skipped(spec: RunSpec, emit: EventCallback, caught: list[warnings.WarningMessage]) -> None:
    """After compiled epoch 1 (untimed): if no compiled code ran, say so while the run goes on."""
    stats = read_compile_stats()
    stats.warnings = torch_warnings(caught)
    reason = compile_skipped_reason(stats.to_dict(), spec.backend, spec.mode)
    if reason:
        emit(StatusEvent("compiled", "compile_skipped", 1, spec.epochs, reason))


def summarize_variants(
    spec: RunSpec, eager: VariantResult, compiled: VariantResult, stats: CompileStats, compile_failed: str | None = None
) -> dict[str, Any]:
    """analysis.summarize over the recorded events, plus memory, losses and compile counters;
    `compile_failed` is why torch.compile could not handle the model, when it could not."""
    summary = analysis.summarize(
        eager.times("train"),
        compiled.times("train"),
        [e.train_time_s for e in eager.epochs],
        [e.train_time_s for e in compiled.epochs],
        spec.batch_size,
        [e.eval_time_s for e in eager.epochs if e.eval_time_s is not None],
        [e.eval_time_s for e in compiled.epochs if e.eval_time_s is not None],
        min_warmup=analysis.warmup_floor(spec.mode, spec.backend),
        compile_events=[dataclasses.asdict(c) for c in compiled.compiles],
    )
    summary.update(
        eager_eval_step_times_s=eager.times("eval"),
        compiled_eval_step_times_s=compiled.times("eval"),
        eager_peak_memory_bytes=eager.peak_memory_bytes,
        compiled_peak_memory_bytes=compiled.peak_memory_bytes,
        eager_peak_reserved_bytes=eager.peak_reserved_bytes,
        compiled_peak_reserved_bytes=compiled.peak_reserved_bytes,
        memory_kind=compiled.memory_kind or eager.memory_kind,
        eager_final_loss=eager.final_loss,
        compiled_final_loss=compiled.final_loss,
        graphs=stats.graphs,
        graph_breaks=stats.graph_breaks,
        recompiles=stats.recompiles,
        compile_phases=stats.phases,
        compile_skipped=compile_skipped_reason(stats.to_dict(), spec.backend, spec.mode) if compiled.steps else None,
        profile={
            "eager": eager.profile,
            "compiled": compiled.profile,
            "reading": profile_reading(eager.profile, compiled.profile),
        }
        if eager.profile or compiled.profile
        else None,
        compile_failed=compile_failed,
    )
    summary["reading"] = analysis.plain_reading(summary)
    return summary
