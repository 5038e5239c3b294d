"""One variant of the race: a model built from the shared initial weights, compiled or not, fed the
race's batches, trained for the spec's epochs with every step timed and every event emitted as it
happens. Also what compiling a variant means (compile_model, the stance, the precompiled cache loaded
from an artifact compiled ahead of time in another process), the batches both variants see (identical,
in identical order) and the untimed warm-up step that pays a process's one-time costs.
"""

from __future__ import annotations

import dataclasses
import gc
import itertools
import json
import os
import pickle
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.nn import functional as F

from core import PROJECT_ROOT
from core.engine.compile_stats import CompileWatch
from core.engine.device_state import Stopwatch, autocast_context, cache_environment, device_sync, reset_peak_memory
from core.engine.events import BusyEvent, CompileEvent, EpochEvent, EventCallback, StatusEvent, StepEvent, VariantResult
from core.engine.intervals import BLOCK_STEPS, BUSY_WAIT, BusyWatch, load_sample
from core.engine.models.sources import NUM_CLASSES, compile_regions, mark_nested_regions
from core.engine.models.workload import Batch, Workload, batch_samples, stage, tensors_in, workload_for
from core.engine.profiling import profile_steps
from core.engine.race_memory import SYNTHETIC_POOL
from core.engine.spec import CUDA_GRAPH_MODES, Problem, RunSpec
from core.engine.warm_cache import make_cold_cache

# ----------------------------------------------------------------------
# Batches for a race. Both variants build their own source from the same spec and so see
# identical batches in identical order.
#
# - synthetic: a small pool of random batches made once, on the device. Measures the model,
#   not the input pipeline.
# - fakedata: torchvision's FakeData images through a DataLoader (decode-free, but with the
#   per-sample transform and collation a real loop pays).
# - cifar10: the real dataset from a local `cifar-10-batches-py` folder; downloaded only when
#   the user asks for it.

CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)


class BatchSource:
    """Yields the train batches of each epoch and the eval batches, already on the device."""

    def __init__(self, spec: RunSpec, device: torch.device, workload: Workload | None = None):
        self.spec = spec
        self.device = device
        self.workload = workload or workload_for(spec)
        self.kind = self.workload.input_kind
        self.size = self.workload.size
        self._pools: dict[str, list[Batch]] = {}
        self._cifar: dict[str, Batch] = {}
        self._loaders: dict[str, Any] = {}
        self._started: dict[str, Iterator] = {}

    def prepare(self) -> None:
        """Start what a timed step must not pay for: DataLoader worker processes. Called untimed
        before a variant's first epoch, so worker start-up never lands in a timed step (each
        variant pays it once, here, in the same way)."""
        if self.spec.data != "fakedata":
            return
        for split, steps in (("train", self.spec.steps_per_epoch), ("eval", self.spec.eval_steps)):
            if steps and split not in self._started:
                self._started[split] = iter(self._fakedata_loader(split, steps))

    def train_epoch(self, epoch: int) -> Iterator[Batch]:
        """Exactly steps_per_epoch batches (of changing shapes when the spec asks for that)."""
        batches = self._batches("train", epoch, self.spec.steps_per_epoch)
        if self.spec.shapes == "varying":
            return vary_shapes(batches, self.kind, self.size, self.spec.steps_per_epoch)
        return batches

    def eval_epoch(self, epoch: int) -> Iterator[Batch]:
        """Exactly eval_steps batches (the same ones every epoch, like a fixed test set)."""
        return self._batches("eval", 0, self.spec.eval_steps)

    def _batches(self, split: str, epoch: int, steps: int) -> Iterator[Batch]:
        if self.spec.data == "synthetic":
            return self._synthetic(split, steps)
        if self.spec.data == "fakedata":
            return self._fakedata(split, epoch, steps)
        return self._cifar10(split, epoch, steps)

    def _synthetic(self, split: str, steps: int) -> Iterator[Batch]:
        if split not in self._pools:
            gen = torch.Generator().manual_seed(self.spec.seed + (0 if split == "train" else 1_000_003))
            n = min(max(steps, 1), SYNTHETIC_POOL)
            self._pools[split] = [self.workload.make_batch(self.spec.batch_size, gen, self.device) for _ in range(n)]
        pool = self._pools[split]
        return (pool[i % len(pool)] for i in range(steps))

    def _fakedata(self, split: str, epoch: int, steps: int) -> Iterator[Batch]:
        started = self._started.pop(split, None)
        return self._to_device(started if started is not None else self._fakedata_loader(split, steps))

    def _fakedata_loader(self, split: str, steps: int):
        """One DataLoader per split for the whole run. Its workers persist across epochs: a new
        epoch reshuffles (from one seeded generator, so both variants see the same order) without
        starting new worker processes inside its first timed step."""
        if split in self._loaders:
            return self._loaders[split]
        from torch.utils.data import DataLoader
        from torchvision import datasets, transforms

        offset = self.spec.seed * 10_000_019 + (0 if split == "train" else 5_000_011)
        dataset = datasets.FakeData(
            size=steps * self.spec.batch_size,
            image_size=(3, self.size, self.size),
            num_classes=NUM_CLASSES,
            transform=transforms.ToTensor(),
            random_offset=offset,
        )
        workers = loader_workers(self.device)
        self._loaders[split] = DataLoader(
            dataset,
            batch_size=self.spec.batch_size,
            shuffle=split == "train",
            generator=torch.Generator().manual_seed(self.spec.seed),
            num_workers=workers,
            persistent_workers=workers > 0,
            pin_memory=self.device.type == "cuda",
        )
        return self._loaders[split]

    def _to_device(self, batches) -> Iterator[Batch]:
        non_blocking = self.device.type == "cuda"
        for x, y in batches:
            yield x.to(self.device, non_blocking=non_blocking), y.to(self.device, non_blocking=non_blocking)

    def _cifar10(self, split: str, epoch: int, steps: int) -> Iterator[Batch]:
        if split not in self._cifar:
            self._cifar[split] = load_cifar10(self.spec.data_dir or ".", split, self.spec.download)
        images, labels = self._cifar[split]
        gen = torch.Generator().manual_seed(self.spec.seed + epoch)
        n, bs = len(labels), self.spec.batch_size
        reps = -(-steps * bs // n)
        order = torch.cat(
            [torch.randperm(n, generator=gen) if split == "train" else torch.arange(n) for _ in range(reps)]
        )
        mean = torch.tensor(CIFAR_MEAN, device=self.device).view(1, 3, 1, 1)
        std = torch.tensor(CIFAR_STD, device=self.device).view(1, 3, 1, 1)
        for i in range(steps):
            idx = order[i * bs : (i + 1) * bs]
            x = images[idx].to(self.device).float().div_(255).sub_(mean).div_(std)
            if self.size != 32:
                x = F.interpolate(x, size=(self.size, self.size), mode="bilinear", align_corners=False)
            yield x, labels[idx].to(self.device)


def varying_lengths(size: int) -> list[int]:
    """The sequence lengths a varying-shape run cycles through: the full length and three shorter."""
    return list(dict.fromkeys(max(1, size * k // 8) for k in (8, 6, 4, 7)))


def vary_shapes(batches: Iterator[Batch], kind: str, size: int, steps: int) -> Iterator[Batch]:
    """The same batches with shapes that change during an epoch, as real data does: token batches
    cycle through shorter sequence lengths; other batches keep their size except the last of the
    epoch, which is half as large (a dataset that does not divide into whole batches). Cut batches
    are fresh tensors, as a data loader hands them over: a view would bring guards of its own
    (strides, its base tensor) into the shape guards this option is about."""
    lengths = varying_lengths(size)
    for i, (x, y) in enumerate(batches):
        first = next(tensors_in(x))  # inputs may be a dict of tensors (Hugging Face models)
        if kind == "tokens" and lengths[i % len(lengths)] < first.shape[1]:
            length = lengths[i % len(lengths)]
            yield _map_tensors((x, y), lambda t, n=length: t[:, :n].clone())
        elif kind != "tokens" and i == steps - 1 and len(first) > 1:
            half = len(first) // 2
            yield _map_tensors((x, y), lambda t, n=half: t[:n].clone())
        else:
            yield x, y


def _map_tensors(value, fn):
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, dict):
        return {k: _map_tensors(v, fn) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(_map_tensors(v, fn) for v in value)
    return value


def loader_workers(device: torch.device) -> int:
    """DataLoader workers: none on CPU (they would fight the model for the same cores)."""
    return 0 if device.type == "cpu" else min(8, os.cpu_count() or 1)


def load_cifar10(root: str, split: str, download: bool = False) -> Batch:
    """CIFAR-10 from `root/cifar-10-batches-py` as (uint8 images Nx3x32x32, int64 labels)."""
    folder = os.path.join(root, "cifar-10-batches-py")
    if not os.path.isdir(folder):
        if not download:
            raise FileNotFoundError(f"no cifar-10-batches-py folder in {root!r}; pass download=true to fetch it")
        from torchvision import datasets

        datasets.CIFAR10(root=root, train=True, download=True)
    names = [f"data_batch_{i}" for i in range(1, 6)] if split == "train" else ["test_batch"]
    images, labels = [], []
    for name in names:
        path = os.path.join(folder, name)
        if not os.path.exists(path):
            continue
        with open(path, "rb") as fh:
            entry = pickle.load(fh, encoding="bytes")  # the dataset's own format
        images.append(torch.as_tensor(entry[b"data"], dtype=torch.uint8).view(-1, 3, 32, 32))
        labels.append(torch.as_tensor(entry[b"labels"], dtype=torch.int64))
    if not images:
        raise FileNotFoundError(f"{folder} has none of {', '.join(names)}")
    return torch.cat(images), torch.cat(labels)


# ----------------------------------------------------------------------
# The precompiled cache: the model's forward compiled ahead of time in another process
# (`torch.compile(...).aot_compile`, experimental in torch's docs), saved as one artifact, and loaded by
# the race's process (`torch.compiler.load_compiled_function`) at the compiled variant's first step.
#
# So a race with cache "precompiled" measures what a process pays that starts from a precompiled
# artifact: its compile cost is the load and the first step, beside cold (a fresh Inductor cache), warm
# (the cache earlier races filled) and the portable cache (Under the hood: save_cache_artifacts). What the
# ahead-of-time compile itself cost is recorded beside it (`environment["precompiled"]`), not timed as
# the race's compile: a build machine pays it once.
#
# The compiled function is `forward_of(model, *inputs)`, the model an input kept out of the artifact
# (`external_data`), so that the loaded step trains the race's own model; AOT autograd compiled its
# backward too. It is traced at the race's batch, in training mode and outside autocast, without graph
# breaks (aot_compile needs fullgraph): what validation asks of a precompiled race (core.engine.spec).
# The artifact lies in the race's cache folder, so the race's replicate processes load it as well.
#
#     python -m core.engine.variant SPEC_JSON ARTIFACT   # the ahead-of-time process; prints one JSON line

ARTIFACT = "precompiled-step.bin"
TIME_LIMIT_S = 1800  # the ahead-of-time process: a large model's Inductor compile on a small CPU


def forward_of(model: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
    """The function compiled ahead of time: the model's forward, the model an argument."""
    return model(*args, **kwargs)


def call_parts(inputs: Any) -> tuple[tuple, dict]:
    """(args, kwargs) of a batch's inputs as core.engine.models.workload.call_model passes them."""
    if isinstance(inputs, dict):
        return (), dict(inputs)
    if isinstance(inputs, (tuple, list)):
        return tuple(inputs), {}
    return (inputs,), {}


def artifact_path(cache_dir: str) -> str:
    """Where a race's artifact lies: in its compile cache folder (replicates are given that folder)."""
    return os.path.join(cache_dir, ARTIFACT)


def torch_problem() -> str | None:
    """Why this torch cannot precompile a step, or None: it needs torch.compile(...).aot_compile and
    torch.compiler.load_compiled_function (both experimental, in newer torch only)."""
    has_aot = callable(getattr(torch.compile(forward_of), "aot_compile", None))  # lazy: compiles nothing
    if has_aot and callable(getattr(torch.compiler, "load_compiled_function", None)):
        return None
    return (
        f"torch {torch.__version__} has no torch.compile(...).aot_compile and torch.compiler.load_compiled_function "
        "(a newer torch has them): use cache cold or warm"
    )


class PrecompiledStep:
    """The compiled variant's model with cache "precompiled": at its first call it loads the artifact
    (so the first compiled step pays the load, as a process starting from it does), then calls the
    loaded function with the model."""

    def __init__(self, path: str, model: torch.nn.Module):
        self.path, self.model, self._loaded = path, model, None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._loaded is None:
            with open(self.path, "rb") as fh:
                self._loaded = torch.compiler.load_compiled_function(fh, external_data={"model": self.model})
        return self._loaded(self.model, *args, **kwargs)


def precompile_ahead(spec: RunSpec, cache_dir: str) -> dict[str, Any]:
    """Compile the race's step ahead of time in a fresh process with an Inductor cache of its own (so
    nothing it compiles warms the race's), its artifact into the race's cache folder. Returns what it
    cost (`compile_s` inside that process, `process_wall_s`, `bytes`), or {"error": why}."""
    own = make_cold_cache("precompile")
    env = {**os.environ, **cache_environment(own)}
    command = [sys.executable, "-m", "core.engine.variant", json.dumps(spec.to_dict()), artifact_path(cache_dir)]
    started = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=TIME_LIMIT_S)
    except subprocess.TimeoutExpired:
        return {"error": f"the ahead-of-time compile took longer than {TIME_LIMIT_S} s"}
    finally:
        shutil.rmtree(own, ignore_errors=True)
    if done.returncode != 0:
        lines = [line for line in (done.stderr or done.stdout).strip().splitlines() if line.strip()]
        return {"error": lines[-1].strip() if lines else f"exit status {done.returncode}"}
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_wall_s"] = round(time.perf_counter() - started, 3)
    return result


def precompile(spec: RunSpec, path: str) -> dict[str, Any]:
    """In the ahead-of-time process: build the model as the race does (seeded), trace it on one batch
    of the race's shape in training mode, compile forward and backward, save the artifact."""
    from core.engine.device_state import precision_settings
    from core.engine.models.workload import workload_for
    from core.engine.spec import detect_device_caps, resolve_device
    from core.engine.variant import BatchSource

    device = torch.device(resolve_device(spec.device, detect_device_caps()))
    workload = workload_for(spec)
    torch.manual_seed(spec.seed)
    model = workload.build().to(device).train()
    source = BatchSource(spec, device, workload)
    inputs, _ = next(iter(source.train_epoch(1)))
    args, kwargs = call_parts(inputs)
    options: dict[str, Any] = {"backend": spec.backend, "dynamic": spec.dynamic, "fullgraph": True}
    if spec.backend == "inductor":
        options["mode"] = spec.mode
    with precision_settings(spec):
        started = time.perf_counter()
        compiled = torch.compile(forward_of, **options).aot_compile(((model, *args), kwargs))
        compiled.save_compiled_function(path, external_data={"model": model})
        seconds = time.perf_counter() - started
    return {"compile_s": round(seconds, 3), "bytes": os.path.getsize(path)}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    spec = RunSpec.from_dict(json.loads(argv[0]))
    print(json.dumps(precompile(spec, argv[1])))
    return 0


def precompiled_torch_problems(spec: RunSpec) -> list[Problem]:
    """The precompiled cache on a torch without it: the reason, on the cache field."""
    if spec.cache != "precompiled":
        return []
    problem = torch_problem()
    return [Problem("cache", problem)] if problem else []


# ----------------------------------------------------------------------
# One variant of the race: a model built from the shared initial weights, compiled or not, trained
# for the spec's epochs with every step timed and every event emitted as it happens.
#
# Also what compiling a variant means (compile_model, the stance) and the untimed warm-up step that
# pays a process's one-time costs before eager's first timed step.


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
    ahead of time, loaded from the race's compile cache folder at its first call (core.engine.variant)."""
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
        race's cores (core.engine.intervals.BusyWatch); those steps are recorded, and said, if so."""
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
        machine was doing meanwhile (core.engine.intervals)."""
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


if __name__ == "__main__":
    raise SystemExit(main())
