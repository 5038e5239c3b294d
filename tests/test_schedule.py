"""The side-by-side schedule: eager and compiled take turns epoch by epoch (both lines grow
together on the live charts), with the same losses a sequential race gives for the same seed, and
peak memory said to be of both models together."""

import pytest
from conftest import CPU, quick_spec

from core.engine.events import EpochEvent, StepEvent
from core.engine.spec import validate
from core.engine.trainer import ALTERNATING_MEMORY, run_race


def race(spec):
    events = []
    return run_race(spec, on_event=events.append, caps=CPU), events


def losses(result, variant):
    return [s.loss for s in getattr(result, variant).steps if s.phase == "train"]


@pytest.mark.parametrize("model", ["mlp", "gpt"])  # gpt has dropout: each variant keeps its own random stream
def test_alternating_gives_the_sequential_losses_for_the_same_seed(model):
    extra = {"image_size": 16, "batch_size": 2} if model == "gpt" else {}
    sequential, _ = race(quick_spec(model=model, epochs=3, profile_steps=0, **extra))
    alternating, events = race(quick_spec(model=model, epochs=3, profile_steps=0, schedule="alternating", **extra))
    assert sequential.status == alternating.status == "done", (sequential.error, alternating.error)
    for variant in ("eager", "compiled"):
        assert losses(alternating, variant) == losses(sequential, variant)
    assert losses(alternating, "eager") != []


def test_alternating_takes_turns_epoch_by_epoch_and_says_memory_is_both_models():
    result, events = race(quick_spec(epochs=3, schedule="alternating", profile_steps=0))
    turns = [e.variant for e in events if isinstance(e, EpochEvent)]
    assert turns == ["eager", "compiled"] * 3
    steps = [e.variant for e in events if isinstance(e, StepEvent)]
    assert steps.index("compiled") < len(steps) - steps[::-1].index("eager") - 1  # compiled ran before eager ended
    assert result.summary["memory_kind"] == ALTERNATING_MEMORY
    assert result.summary["steady_state_speedup"] is not None and result.compile_stats.graphs >= 1


def test_the_schedule_is_checked_like_every_other_field():
    assert [p.field for p in validate(quick_spec(schedule="interleaved"))] == ["schedule"]
    assert validate(quick_spec(schedule="alternating")) == []
