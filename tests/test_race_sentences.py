"""The words beside a race: what is happening now, what the numbers say so far (never a final verdict
while the run goes on), how the two compile costs relate, and whether the loss curves coincide."""

import numpy as np
import pandas as pd
import pytest

from core.engine import words
from core.engine.reading import reading
from core.engine.summary import FASTER, NO_CLEAR_DIFFERENCE
from core.view.run_screen import sentences

RUNNING_FASTER = {
    "steady_state_speedup": 1.17,
    "speedup_ci95": [1.16, 1.18],
    "verdict": FASTER,
    "break_even_step": None,
    "compile_time_s": 11.3,
    "eager_median_step_s": 11.3 / 947.3 / (1 - 1 / 1.17),  # the headline's crossing: step 947.3
}


def test_a_run_in_progress_that_has_not_broken_even_says_not_yet_with_a_steadied_projection():
    text = reading(RUNNING_FASTER, live=True, total=1500, counts={"compiled": 700})
    assert text == (
        "After 700 of 1,500 compiled steps: compiled steps are 1.17x faster (95% interval 1.16-1.18x); "
        "compile has not paid off yet: at these rates it breaks even between step 900 and 1,000 of 1,500."
    )
    assert "did not pay off" not in text  # the rest of the run could still pay it off


def test_the_same_numbers_once_finished_give_the_final_reading():
    text = reading(RUNNING_FASTER, live=False, total=1500)
    assert "did not pay off within this run" in text and "about step 948" in text


@pytest.mark.parametrize(
    ("projected", "shown"), [(947.3, "950"), (1034.6, "1,000"), (1049.9, "1,100"), (88.2, "89"), (12345.0, "12,000")]
)
def test_a_running_projection_is_rounded_to_two_significant_digits(projected, shown):
    assert words.projected_step(projected, 20_000, live=True) == f"projected ≈ step {shown} of 20,000"


def test_a_projection_past_the_end_of_the_run_says_so():
    assert words.projected_step(2299.0, 1500, live=False) == "projected ≈ step 2,300, past this run's 1,500 steps"


def test_running_slower_or_unclear_runs_speak_of_so_far_only():
    slower = {**RUNNING_FASTER, "steady_state_speedup": 0.9, "speedup_ci95": [0.88, 0.92], "verdict": "slower"}
    assert reading(slower, True, 1500, {"compiled": 40}).startswith("After 40 of 1,500 compiled steps")
    unclear = {**RUNNING_FASTER, "verdict": NO_CLEAR_DIFFERENCE, "speedup_ci95": [0.95, 1.3]}
    assert "no clear difference per step yet" in reading(unclear, True, 1500, {"compiled": 40})
    ahead = {**RUNNING_FASTER, "break_even_step": 1035}
    assert reading(ahead, True, 1500, {"compiled": 1200}).endswith("ahead since step 1,035.")


def test_while_eager_runs_the_words_say_where_it_is_and_that_the_compile_comes_next():
    text = sentences.eager_phase_text(300, 1500, 11.3, estimated=False)
    assert text == "Eager run: step 300 of 1,500. Next: compile (about 11 s on this device), then the compiled run."
    assert "roughly 10 s, estimated" in sentences.eager_phase_text(300, 1500, 10.0, estimated=True)


def test_during_the_compile_the_words_say_so_with_the_time_so_far():
    assert sentences.compiling_text(6.2, 11.3, estimated=False).startswith(
        "Compiling (about 11 s on this device): 6 s so far."
    )
    assert "longer than usual" in sentences.compiling_text(40.0, 11.3, estimated=False)
    assert "6 s so far. Now: AOT autograd. The compiled" in sentences.compiling_text(6.0, 11.3, False, "AOT autograd")
    assert sentences.compiling_text(None, None, estimated=True).startswith("Compiling.")
    assert sentences.is_compiling("compiling (compiled epoch 1/3)") and not sentences.is_compiling("eager epoch 3/3")


def test_expected_compile_time_is_the_median_of_earlier_races_with_the_same_settings():
    params = {"model": "pointwise_mlp", "batch_size": 4096, "precision": "fp32", "backend": "inductor"}
    earlier = [{"params": params, "summary": {"compile_time_s": t}} for t in (10.0, 11.3, 30.0)] + [
        {"params": {**params, "batch_size": 1024}, "summary": {"compile_time_s": 99.0}},
        {"params": params},
    ]
    assert sentences.expected_compile_seconds(earlier, params) == 11.3
    assert sentences.expected_compile_seconds(earlier, {**params, "model": "mlp"}) is None


def test_a_regional_race_expects_no_compile_time_from_whole_model_races():
    """The options table says what changes the compile: compile scope and input size do (the list
    kept beside the table left them out, so a regional race expected a whole-model compile)."""
    params = {"model": "gpt", "batch_size": 16}
    whole = [{"params": params, "summary": {"compile_time_s": 30.0}}]
    assert sentences.expected_compile_seconds(whole, params) == 30.0
    assert sentences.expected_compile_seconds(whole, {**params, "compile_scope": "regional"}) is None
    assert sentences.expected_compile_seconds(whole, {**params, "image_size": 64}) is None
    assert sentences.expected_compile_seconds(whole, {**params, "epochs": 9, "seed": 3}) == 30.0  # same compile


def test_the_overhead_bridge_says_what_faster_steps_won_back():
    short, sentence = sentences.overhead_bridge({"compile_time_s": 11.3, "first_epoch_overhead_s": 5.8})
    assert short == "5.5 s won back in epoch 1"
    assert sentence == (
        "The overhead (5.8 s) is the compile time (11.3 s) less the 5.5 s that faster compiled steps won back "
        "during the rest of epoch 1."
    )
    short, _ = sentences.overhead_bridge({"compile_time_s": 1.1, "first_epoch_overhead_s": 1.7})
    assert short == "600 ms more lost in epoch 1"
    assert sentences.overhead_bridge({"compile_time_s": 1.1}) is None


def loss_frame(eager, compiled):
    rows = [
        {"variant": v, "phase": "train", "step": i + 1, "loss": x}
        for v, losses in (("eager", eager), ("compiled", compiled))
        for i, x in enumerate(losses)
    ]
    return pd.DataFrame(rows)


def test_loss_words_say_the_curves_coincide_and_give_the_largest_difference():
    eager = list(np.linspace(2.3, 0.5, 50))
    compiled = [x + (3e-6 if i == 20 else 0.0) for i, x in enumerate(eager)]
    text = sentences.loss_agreement(loss_frame(eager, compiled))
    assert text.startswith("The two loss curves coincide")
    assert "3e-06, at step 21" in text


def test_loss_words_say_when_the_curves_differ():
    eager = list(np.linspace(2.3, 0.5, 50))
    compiled = [x + 0.2 for x in eager]  # apart from the first step, same weights and batch: not rounding
    text = sentences.loss_agreement(loss_frame(eager, compiled))
    assert text.startswith("The loss curves differ already at step 1 (by 0.2, more than the 0.1% of the loss")
    assert text.endswith("compile changed the numerics of this model here.")
    assert sentences.loss_agreement(loss_frame(eager, [])) is None


def test_a_late_drift_within_the_losss_own_scatter_is_rounding_carried_through_training():
    # the race: 0.0078 apart late on, a loss near 2.3 that moves ~0.05 from step to step
    rng = np.random.default_rng(0)
    eager = list(2.3 + rng.normal(0, 0.05, 300))
    compiled = [x + 0.0078 * (i / 299) ** 2 for i, x in enumerate(eager)]
    text = sentences.loss_agreement(loss_frame(eager, compiled))
    assert text.startswith("The loss curves agree to rounding over the first 3 steps (within 0.1% of the loss")
    assert "then drift apart by up to 0.0078 (at step 300" in text
    assert "less than the loss moves from one step to the next" in text
    assert "not a change to the numerics" in text and "changed the numerics of this model" not in text
    assert "Compile computed the same first steps to rounding" in text


def test_a_late_drift_past_the_losss_scatter_is_not_called_a_change_of_numerics_either():
    eager = list(np.linspace(2.3, 0.5, 50))  # moves 0.037 a step
    compiled = [x + 0.2 * (i / 49) ** 3 for i, x in enumerate(eager)]
    text = sentences.loss_agreement(loss_frame(eager, compiled))
    assert "agree to rounding over the first 3 steps" in text and "more than the loss moves" in text
    assert "another seed" in text and "changed the numerics" not in text
    late = [x + (0.01 if i == 1 else 0.0) for i, x in enumerate(eager)]  # apart at step 2: after one update
    assert sentences.loss_agreement(loss_frame(eager, late)).startswith("The loss curves differ already at step 2")


def test_total_steps_and_the_projection_label():
    assert sentences.total_steps({"epochs": 3, "steps_per_epoch": 500}) == 1500
    assert sentences.total_steps({}) == 60  # a race with every default: RunSpec counts its steps
    assert sentences.total_steps({"epochs": "three"}) is None and sentences.total_steps({"lr": 1, "nope": 2}) is None
    projection = {"position": 947.3, "wall_s": 80.4}
    assert (
        words.projection_label(projection["position"], None, projection["wall_s"], live=False)
        == "≈ step 948 (projected, ~80 s)"
    )
    assert (
        words.projection_label(projection["position"], None, projection["wall_s"], live=True)
        == "≈ step 950 (projected, ~80 s)"
    )


def test_a_run_where_compile_did_not_happen_says_so_even_while_running():
    summary = {**RUNNING_FASTER, "compile_skipped": "the model's forward was skipped by Dynamo"}
    text = reading(summary, live=True, total=1500, counts={"compiled": 700})
    assert text.startswith("Compile did not happen: the model's forward was skipped by Dynamo.")
