"""Batches for a race. Both variants build their own source from the same spec and so see
identical batches in identical order.

- synthetic: a small pool of random batches made once, on the device. Measures the model,
  not the input pipeline.
- fakedata: torchvision's FakeData images through a DataLoader (decode-free, but with the
  per-sample transform and collation a real loop pays).
- cifar10: the real dataset from a local `cifar-10-batches-py` folder; downloaded only when
  the user asks for it.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Iterator
from typing import Any

import torch
from torch.nn import functional as F

from core.engine.models.resolve import workload_for
from core.engine.models.workload import Batch, Workload, tensors_in
from core.engine.models.zoo import NUM_CLASSES
from core.engine.race_memory import SYNTHETIC_POOL  # declared torch-free: the memory floor counts it too
from core.engine.spec import RunSpec

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
