"""The live numbers hold to what the data supports: when eager and compiled take turns, eager's next
epoch brings no compiled data, so the speedup, the break-even projection and the words stay where
the compiled steps left them ("After 20 of 60 compiled steps" with the speedup of those 20) until
compiled steps arrive to meet the new eager ones."""

import itertools

import pytest

from core.engine.summary import Summary
from core.runs.store import Store
from core.view.run_screen.layout import headline_projection
from core.view.run_screen.shared_board import LiveBoard, RunView

ids = itertools.count(1)


def steps(variant: str, epoch: int, times: list[float]) -> list[dict]:
    first = (epoch - 1) * len(times) + 1
    return [
        {"id": next(ids), "kind": "step", "variant": variant, "phase": "train", "epoch": epoch, "step": first + i,
         "time_s": t, "loss": 1.0}
        for i, t in enumerate(times)
    ]  # fmt: skip


def test_eager_steps_without_compiled_ones_to_meet_them_move_no_live_number():
    view = RunView(1)
    view.feed(steps("eager", 1, [0.1] * 20))
    view.feed(steps("compiled", 1, [2.0] + [0.08] * 19))
    before = view.summary(16)
    projection = headline_projection(Summary.from_dict(before))
    assert before["verdict"] == "faster" and projection is not None
    view.feed(steps("eager", 2, [0.14] * 20))  # eager's epoch 2: slower steps, no compiled data yet
    during = view.summary(16)
    for key in ("steady_state_speedup", "speedup_ci95", "break_even_extrapolated_step", "eager_median_step_s"):
        assert during[key] == before[key], key
    assert headline_projection(Summary.from_dict(during)) == projection
    assert view.counts() == {"eager": 40, "compiled": 20}  # the charts still draw every step
    view.feed(steps("compiled", 2, [0.08]))  # compiled's epoch 2 begins: the new eager steps count now
    after = view.summary(16)
    assert after["eager_median_step_s"] > before["eager_median_step_s"]
    assert after["steady_state_speedup"] == pytest.approx(after["eager_median_step_s"] / 0.08)


def test_a_sequential_race_uses_every_eager_step_from_the_first_compiled_one():
    view = RunView(1)
    view.feed(steps("eager", 1, [0.1] * 30 + [0.2] * 30))
    view.feed(steps("compiled", 1, [2.0] + [0.08] * 9))
    assert len(view.train_times("eager")) == 60 and len(view.train_times("compiled")) == 10


def test_the_shared_board_holds_the_live_numbers_too(tmp_path):
    store = Store(str(tmp_path / "store.sqlite3"))
    run_id = store.create_run(
        "race", {"model": "mlp", "batch_size": 16, "epochs": 2, "steps_per_epoch": 20}, "x", "cpu"
    )
    store.update_run(run_id, status="running")

    def append(rows):
        store.append_events(run_id, [{k: v for k, v in r.items() if k != "id"} for r in rows])

    append(steps("eager", 1, [0.1] * 20) + steps("compiled", 1, [2.0] + [0.08] * 19))
    before = LiveBoard(store.path).snapshot(run_id).summary()
    append(steps("eager", 2, [0.14] * 20))
    during = LiveBoard(store.path).snapshot(run_id).summary()
    assert during.steady_state_speedup == before.steady_state_speedup
    assert during.break_even_extrapolated_step == before.break_even_extrapolated_step
