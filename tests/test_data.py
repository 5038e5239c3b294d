"""Batches: identical for both variants, right shapes, and a real CIFAR-10 folder read from disk."""

import pickle

import numpy as np
import pytest
import torch

from core.engine.models.sources import NUM_CLASSES, VOCAB_SIZE
from core.engine.spec import RunSpec
from core.engine.variant import BatchSource, load_cifar10

CPU = torch.device("cpu")


def collect(it):
    return [(x.clone(), y.clone()) for x, y in it]


def assert_same(a, b):
    assert len(a) == len(b)
    for (xa, ya), (xb, yb) in zip(a, b):
        assert torch.equal(xa, xb) and torch.equal(ya, yb)


@pytest.mark.parametrize("model, shape", [("small_cnn", (4, 3, 32, 32)), ("mlp", (4, 512)), ("gpt", (4, 128))])
def test_synthetic_batches_have_the_models_shape_and_count(model, shape):
    spec = RunSpec(model=model, batch_size=4, steps_per_epoch=11, eval_steps=3)
    source = BatchSource(spec, CPU)
    train = collect(source.train_epoch(1))
    assert len(train) == 11 and tuple(train[0][0].shape) == shape
    assert len(collect(source.eval_epoch(1))) == 3


def test_two_sources_from_one_spec_give_identical_batches():
    spec = RunSpec(model="small_cnn", batch_size=4, steps_per_epoch=5, seed=3)
    assert_same(collect(BatchSource(spec, CPU).train_epoch(1)), collect(BatchSource(spec, CPU).train_epoch(1)))


def test_a_different_seed_gives_different_batches():
    a = collect(BatchSource(RunSpec(model="mlp", batch_size=4, steps_per_epoch=2, seed=1), CPU).train_epoch(1))
    b = collect(BatchSource(RunSpec(model="mlp", batch_size=4, steps_per_epoch=2, seed=2), CPU).train_epoch(1))
    assert not torch.equal(a[0][0], b[0][0])


def test_eval_batches_differ_from_train_batches():
    source = BatchSource(RunSpec(model="mlp", batch_size=4, steps_per_epoch=2, eval_steps=2), CPU)
    assert not torch.equal(next(source.train_epoch(1))[0], next(source.eval_epoch(1))[0])


def test_token_targets_are_the_inputs_shifted_by_one():
    x, y = next(BatchSource(RunSpec(model="gpt", batch_size=2, image_size=16), CPU).train_epoch(1))
    assert torch.equal(x[:, 1:], y[:, :-1])
    assert int(x.max()) < VOCAB_SIZE


def test_fakedata_goes_through_a_dataloader_and_is_identical_for_both_variants():
    spec = RunSpec(model="small_cnn", batch_size=4, steps_per_epoch=3, data="fakedata", image_size=16)
    a = collect(BatchSource(spec, CPU).train_epoch(2))
    b = collect(BatchSource(spec, CPU).train_epoch(2))
    assert_same(a, b)
    assert len(a) == 3 and tuple(a[0][0].shape) == (4, 3, 16, 16)
    assert 0.0 <= float(a[0][0].min()) and float(a[0][0].max()) <= 1.0  # ToTensor scaling
    assert int(a[0][1].max()) < NUM_CLASSES


def write_tiny_cifar10(root, train_n=20, test_n=10):
    """A CIFAR-10 folder in the dataset's own pickle format, small enough for a test."""
    folder = root / "cifar-10-batches-py"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for name, n in [("data_batch_1", train_n), ("test_batch", test_n)]:
        entry = {b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8), b"labels": list(rng.integers(0, 10, n))}
        with open(folder / name, "wb") as fh:
            pickle.dump(entry, fh)
    return root


def test_cifar10_is_read_from_a_local_folder(tmp_path):
    root = write_tiny_cifar10(tmp_path)
    images, labels = load_cifar10(str(root), "train")
    assert tuple(images.shape) == (20, 3, 32, 32) and images.dtype == torch.uint8
    assert tuple(load_cifar10(str(root), "test")[0].shape) == (10, 3, 32, 32)
    assert labels.dtype == torch.int64


def test_cifar10_batches_cycle_past_the_dataset_and_resize(tmp_path):
    root = write_tiny_cifar10(tmp_path)
    spec = RunSpec(
        model="resnet18",
        batch_size=8,
        steps_per_epoch=4,
        eval_steps=2,
        data="cifar10",
        data_dir=str(root),
        image_size=40,
    )
    source = BatchSource(spec, CPU)
    train = collect(source.train_epoch(1))  # 32 samples from a 20-image dataset
    assert len(train) == 4 and tuple(train[0][0].shape) == (8, 3, 40, 40)
    assert abs(float(torch.cat([x for x, _ in train]).mean())) < 1.0  # normalized
    assert len(collect(source.eval_epoch(1))) == 2
    assert_same(train, collect(BatchSource(spec, CPU).train_epoch(1)))


def test_missing_cifar10_folder_says_how_to_get_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="download"):
        load_cifar10(str(tmp_path), "train")
