"""The side-by-side schedules: eager and compiled take turns (blocks, the default: every 5 steps;
alternating: epoch by epoch), so both lines grow together on the live charts, with the same losses
a sequential race gives for the same seed, and peak memory said to be of both models together; and
a target interval ends each schedule's timed steps at a look."""

import itertools

import pytest
from support import CPU, quick_spec

from core.engine.analysis import StopRule
from core.engine.events import CompileEvent, EpochEvent, StepEvent
from core.engine.reading import reading
from core.engine.spec import RunSpec, validate
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
    assert result.summary.memory_kind == ALTERNATING_MEMORY
    assert result.summary.steady_state_speedup is not None and result.compile_stats.graphs >= 1


def test_the_schedule_is_checked_like_every_other_field():
    assert [p.field for p in validate(quick_spec(schedule="interleaved"))] == ["schedule"]
    assert validate(quick_spec(schedule="alternating")) == []


def test_blocks_is_the_default_and_takes_turns_every_few_steps_with_the_sequential_losses():
    assert RunSpec().schedule == "blocks"
    sequential, _ = race(quick_spec(epochs=2, steps_per_epoch=12, profile_steps=0, schedule="sequential"))
    blocks, events = race(quick_spec(epochs=2, steps_per_epoch=12, profile_steps=0))
    assert blocks.status == "done", blocks.error
    steps = [(e.variant, e.epoch) for e in events if isinstance(e, StepEvent) and e.phase == "train"]
    runs = [(v, len(list(group))) for v, group in itertools.groupby(v for v, _ in steps)]
    # epoch of 12 steps: turns of 5, 5 and 2, eager first; twice
    assert runs == [("eager", 5), ("compiled", 5), ("eager", 5), ("compiled", 5), ("eager", 2), ("compiled", 2)] * 2
    for variant in ("eager", "compiled"):
        assert losses(blocks, variant) == losses(sequential, variant)
    epochs = [(e.variant, e.epoch) for e in events if isinstance(e, EpochEvent)]
    assert epochs == [("eager", 1), ("compiled", 1), ("eager", 2), ("compiled", 2)]
    assert blocks.summary.memory_kind == ALTERNATING_MEMORY and blocks.summary.interval_paired is True


def test_with_blocks_compile_still_lands_in_compiled_first_step_and_epoch():
    result, events = race(quick_spec(epochs=2, steps_per_epoch=10, profile_steps=0))
    compiles = [e for e in events if isinstance(e, CompileEvent)]
    assert compiles and all((c.variant, c.epoch) == ("compiled", 1) for c in compiles)
    assert compiles[0].step == 1  # the first compiled step paid for the compile
    assert result.summary.first_epoch_overhead_s is not None and result.summary.compile_time_s is not None


@pytest.mark.parametrize("schedule", ["blocks", "sequential", "alternating"])
def test_a_target_interval_ends_the_timed_steps_at_a_look_once_the_rule_says_known(monkeypatch, schedule):
    """The clock is stood in for (no timing in unit tests), the stopping rule is the real one: every
    step takes 10 ms, so the ratio (and eager's own median) is known at the first look, 40 steps; each
    schedule then stops there (alternating: at the end of the epoch it is in)."""
    from core.engine import variant

    class SteadyClock(variant.Stopwatch):
        def stop(self) -> float:
            super().stop()
            return 0.01

    monkeypatch.setattr(variant, "Stopwatch", SteadyClock)
    asked = []
    for name in ("ratio_known", "eager_known"):
        real = getattr(StopRule, name)
        monkeypatch.setattr(StopRule, name, lambda self, *t, real=real, name=name: asked.append(name) or real(self, *t))
    spec = quick_spec(epochs=4, steps_per_epoch=30, profile_steps=0, schedule=schedule, target_interval=0.03)
    result, events = race(spec)
    assert result.status == "done", result.error
    expected = 60 if schedule == "alternating" else 40
    assert len(result.eager.times()) == len(result.compiled.times()) == expected
    assert sorted(e.epoch for e in events if isinstance(e, EpochEvent)) == [1, 1, 2, 2]  # epoch 2 cut short
    stop = result.summary.stop_reason
    assert f"after {expected} steps per variant" in stop and stop in reading(result.summary)
    assert ("eager_known" in asked) is (schedule == "sequential") and "ratio_known" in asked


def test_a_race_without_a_target_says_nothing_of_stopping_and_runs_every_step():
    result, _ = race(quick_spec(epochs=1, steps_per_epoch=7, profile_steps=0))
    assert result.summary.stop_reason is None and len(result.compiled.times()) == 7


def test_the_charts_draw_a_blocks_race_per_variant_with_compile_in_compiled_epoch_one():
    """Stored in blocks order (eager 5, compiled 5, ...): each variant's cumulative line is its own
    steps' running sum in its own step order, and the epoch chart's compiled epoch 1 carries the compile."""
    from core.view.race_charts import cumulative_chart, epoch_chart
    from core.view.run_screen.shared_board import RunView

    rows, ids, counts = [], itertools.count(1), {"eager": 0, "compiled": 0}
    for epoch in (1, 2):
        for _block in range(4):
            for variant, base in (("eager", 0.10), ("compiled", 0.08)):
                for _ in range(5):
                    counts[variant] += 1
                    slow = variant == "compiled" and counts[variant] == 1
                    rows.append({"id": next(ids), "kind": "step", "variant": variant, "phase": "train", "epoch": epoch,
                                 "step": counts[variant], "time_s": 3.0 if slow else base, "loss": 1.0})  # fmt: skip
        for variant in ("eager", "compiled"):
            total = sum(r["time_s"] for r in rows if r["variant"] == variant and r["epoch"] == epoch)
            rows.append({"id": next(ids), "kind": "epoch", "variant": variant, "epoch": epoch, "time_s": total,
                         "eval_time_s": None})  # fmt: skip
    view = RunView(1)
    view.feed(rows)
    steps, epochs = view.frames()
    for variant in ("eager", "compiled"):
        mine = steps[steps["variant"] == variant].sort_values("step")
        assert list(mine["step"]) == list(range(1, 41))
        assert mine["cumulative_s"].is_monotonic_increasing
        assert mine["cumulative_s"].iloc[-1] == pytest.approx(mine["time_s"].sum())
    by = {(r.variant, r.epoch): r.train_time_s for r in epochs.itertuples()}
    assert by[("compiled", 1)] > by[("eager", 1)] > by[("compiled", 2)]
    summary = view.summary(16)
    assert summary["interval_paired"] is True and summary["verdict"] == "faster"
    for chart in (cumulative_chart(steps), epoch_chart(epochs)):
        assert "eager" in str(chart.to_dict(validate=False)) and "compiled" in str(chart.to_dict(validate=False))
