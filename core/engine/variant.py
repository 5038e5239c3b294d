"""One variant of the race: a model built from the shared initial weights, compiled or not, trained
for the spec's epochs with every step timed and every event emitted as it happens.

Also what compiling a variant means (compile_model, the stance) and the untimed warm-up step that
pays a process's one-time costs before eager's first timed step.
"""

from __future__ import annotations

import dataclasses
import gc
import itertools
import os
import time
from collections.abc import Callable
from typing import Any

import torch

from core.engine.compile_stats import CompileWatch
from core.engine.data import BatchSource
from core.engine.device_state import autocast_context, reset_peak_memory
from core.engine.events import BusyEvent, CompileEvent, EpochEvent, EventCallback, StatusEvent, StepEvent, VariantResult
from core.engine.intervals import BLOCK_STEPS
from core.engine.models.regions import compile_regions, mark_nested_regions
from core.engine.models.resolve import workload_for
from core.engine.models.workload import Workload, batch_samples, stage
from core.engine.noise import BUSY_WAIT, BusyWatch, load_sample
from core.engine.precompiled import PrecompiledStep, artifact_path, precompiled_torch_problems
from core.engine.profiling import profile_steps
from core.engine.spec import CUDA_GRAPH_MODES, Problem, RunSpec
from core.engine.timing import Stopwatch, device_sync


def set_stance(stance: str) -> None:
    """torch.compiler.set_stance (torch 2.6+); run_race refuses a stance where it is missing."""
    torch.compiler.set_stance(stance)


def stance_problem(spec: RunSpec) -> Problem | None:
    """Why the spec's stance cannot run on this torch (it has no set_stance), if it cannot."""
    if spec.stance != "default" and not hasattr(torch.compiler, "set_stance"):
        return Problem(
            "stance", f"torch {torch.__version__} has no torch.compiler.set_stance (torch 2.6+): use stance default"
        )
    return None


def torch_feature_problems(spec: RunSpec) -> list[Problem]:
    """What the spec asks of this torch that it lacks (a stance without set_stance, the nested scope
    without nested_compile_region), each with the reason: run_race refuses the race before any work."""
    problems = [p for p in (stance_problem(spec),) if p is not None] + precompiled_torch_problems(spec)
    if spec.compile_scope == "nested" and not hasattr(torch.compiler, "nested_compile_region"):
        problems.append(
            Problem(
                "compile_scope",
                f"torch {torch.__version__} has no torch.compiler.nested_compile_region (newer torch has it): "
                "use 'regional' (each block compiled on its own) or 'whole'",
            )
        )
    return problems


def compile_model(model: torch.nn.Module, spec: RunSpec) -> torch.nn.Module:
    """torch.compile with exactly the spec's options (mode only where the backend takes one), of
    the whole model or, with compile_scope "regional", of each repeated block in place (the
    model returned is then the model itself, its blocks compiled); "nested": the whole model, each
    repeated block marked as a nested compile region first. With cache "precompiled", the step compiled
    ahead of time, loaded from the race's compile cache folder at its first call (core.engine.precompiled)."""
    if spec.cache == "precompiled":
        return PrecompiledStep(artifact_path(os.environ["TORCHINDUCTOR_CACHE_DIR"]), model)
    kwargs: dict[str, Any] = {"backend": spec.backend, "dynamic": spec.dynamic, "fullgraph": spec.fullgraph}
    if spec.backend == "inductor":
        kwargs["mode"] = spec.mode
    if spec.compile_scope == "regional":
        compile_regions(model, spec.model, **kwargs)
        return model
    if spec.compile_scope == "nested":
        mark_nested_regions(model, spec.model)
    return torch.compile(model, **kwargs)


class VariantRun:
    """Trains one variant for the spec's epochs, emitting events as it goes.

    Built from the race's initial weights (so both variants start alike), compiled when its name
    is "compiled". `run` trains every epoch, then profiles a few steady steps; the alternating
    schedule calls `run_epoch` turn by turn and `profile` at the end instead. What it measured
    accumulates in `result`, which stays valid when a step raises.
    """

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
        self.busy_watch = BusyWatch(torch.get_num_threads())
        self._compiled_since_look = False  # a compile's own helper processes share the race's cores
        self._watched_from: int | None = None  # the train step the busy watch's open window began after

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
        if phase == "train" and self._watched_from is None:  # a new look-out window (run_block ends it)
            self.busy_watch.start()
            self._watched_from = self.counts[phase]
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
            if phase == "train" and self.counts[phase] - self._watched_from >= BLOCK_STEPS:
                self._watched_from = self._busy_look(epoch, self._watched_from)
        return epoch_clock.stop()

    def _busy_look(self, epoch: int, since: int) -> int:
        """Between steps: whether the train steps since step `since` ran while other work had the
        race's cores (core.engine.noise.BusyWatch); those steps are recorded, and said, if so."""
        share = self.busy_watch.share()
        last = self.counts["train"]
        compiled, self._compiled_since_look = self._compiled_since_look, False
        if share is not None and share > BUSY_WAIT and not compiled:
            self.result.busy_steps.extend(range(since + 1, last + 1))
            self.emit(BusyEvent(self.name, epoch, since + 1, last, round(share, 3)))
        return last

    def _note_compiles(self, phase: str, epoch: int) -> None:
        """After a step (outside its clock): the compiles and recompiles it paid for, if any."""
        if self.compile_watch is None:
            return
        for note in self.compile_watch.new_compiles():
            self._compiled_since_look = True
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
        profile: bool = True,
        should_stop: Callable[[], bool] | None = None,
    ) -> VariantResult:
        """Train (and evaluate) every epoch; `after_first_epoch` runs once, untimed, after epoch 1;
        then, untimed and unless `profile` is False, profile a few more steady steps (their trace
        into trace_dir). With `should_stop`, asked after every block of steps, the timed phase ends
        mid-epoch once it says so (a race that stops when its speedup is known)."""
        source.prepare()
        self.result.reserved_at_start_bytes = reset_peak_memory(self.device)
        self.model.train()
        try:
            for epoch in range(1, self.spec.epochs + 1):
                self.start_epoch(source, epoch)
                stopped = False
                while self.run_block(BLOCK_STEPS if should_stop else None) == BLOCK_STEPS:
                    if should_stop is not None and should_stop():
                        stopped = True
                        break
                self.end_epoch(source, after_first_epoch)
                if stopped:
                    break
        finally:
            if self.spec.stance != "default":
                set_stance("default")
        if profile:
            self.profile(source, trace_dir)
        return self.result

    def run_epoch(self, source: BatchSource, epoch: int, after_first_epoch: Callable[[], None] | None = None) -> None:
        """Train (and evaluate) one epoch, timed, emitting its events."""
        self.start_epoch(source, epoch)
        self.run_block(None)
        self.end_epoch(source, after_first_epoch)

    def start_epoch(self, source: BatchSource, epoch: int) -> None:
        """Begin an epoch whose train steps run_block then takes, a block at a time (the blocks
        schedule interleaves the two variants' blocks); end_epoch closes it."""
        self.epoch = epoch
        self._status("training", epoch)
        self._batches = iter(source.train_epoch(epoch))
        self._epoch_train_s = 0.0
        self._epoch_started = (time.perf_counter(), time.process_time())

    def announce(self) -> None:
        """Say this variant's turn has come (the blocks schedule, at each turn: the run's status line
        then names the variant running, not the last one whose epoch began)."""
        self._status("training", self.epoch)

    def run_block(self, steps: int | None) -> int:
        """Up to `steps` more timed train steps of this epoch (None: the rest of it); how many ran."""
        before = self.counts["train"]
        batches = self._batches if steps is None else itertools.islice(self._batches, steps)
        self._epoch_train_s += self._timed("train", self.epoch, batches, self.train_step)
        ran, pending = self.counts["train"] - before, self.counts["train"] - self._watched_from
        # The machine is looked at every BLOCK_STEPS of this variant's steps. Turns shorter than that (a
        # replicate's) keep the window open across the other variant's steps between them: a look over
        # one step's few milliseconds would call a passing kernel thread a busy machine. Otherwise, and
        # when the epoch's steps ran out, the window ends here, so the next turn's starts afresh.
        if steps is None or ran < steps or pending == 0:
            if pending > 0:
                self._busy_look(self.epoch, self._watched_from)
            self._watched_from = None
        return ran

    def end_epoch(self, source: BatchSource, after_first_epoch: Callable[[], None] | None = None) -> None:
        """The epoch's evaluation (timed), its event with the train time of its blocks, and what the
        machine was doing meanwhile (core.engine.noise)."""
        epoch = self.epoch
        eval_s = None
        if self.spec.eval_steps:
            self.model.eval()
            self._status("evaluating", epoch)
            eval_s = self._timed("eval", epoch, source.eval_epoch(epoch), self.eval_step)
            self.model.train()
        self.result.load.append({"variant": self.name, "epoch": epoch, **load_sample(*self._epoch_started)})
        event = EpochEvent(self.name, epoch, self._epoch_train_s, eval_s)
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

    def trained_state(self) -> dict[str, Any]:
        """The weights and optimizer (and grad scaler) state after training, copied off the device,
        so the variant can be rebuilt as it ended (to profile it later) once its model is gone."""
        state = {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}
        if self.scaler is not None:
            state["scaler"] = self.scaler.state_dict()
        return _to_cpu(state)

    def restore_trained_state(self, state: dict[str, Any]) -> None:
        """Give the variant back the state trained_state copied (the optimizer moves it to the device)."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scaler is not None and "scaler" in state:
            self.scaler.load_state_dict(state["scaler"])


def _to_cpu(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, dict):
        return {key: _to_cpu(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_to_cpu(item) for item in value)
    return value


def warm_up_device(spec: RunSpec, device: torch.device, init_state: dict, workload: Workload | None = None) -> None:
    """One untimed train (and eval) step on a throwaway eager copy of the model.

    The first work in a process pays one-time costs (cuBLAS/cuDNN handles, oneDNN primitives,
    allocator growth). Eager runs first, so without this its first steps would carry them and the
    compiled run, reusing them, would look cheaper to compile than it is. It is also the model's
    first step ever: a model that cannot train on its batch fails here, saying which part failed.

    What the process holds before it (torch's modules, the model's first weights) is frozen out of
    Python's cycle collector first (gc.freeze), so the full collection after it, and any during the
    timed steps, pass over only what the race made: a shorter wait for the first step, and the same
    in a fresh process as in one forked from a warm server (core.runs.warm_start).
    """
    gc.freeze()
    workload = workload or workload_for(spec)
    spare = VariantRun("warm-up", spec, device, init_state, lambda event: None, workload)
    source = BatchSource(dataclasses.replace(spec, steps_per_epoch=1), device, workload)  # its one batch, not a pool
    x, y = next(iter(source.train_epoch(0)))
    spare.checked_train_step(x, y)
    if spec.eval_steps:
        spare.model.eval()
        spare.eval_step(x, y)
    device_sync(device)
    del spare
    gc.collect()
