"""Following a run from the store: only new events are read, frames are chart-ready and cached,
and the result cards say what a person needs on a projector."""

import json
import math
import os
import re
import time

import pytest

from core.engine import analysis, words
from core.engine.summary import NO_CLEAR_DIFFERENCE, NOT_WITHIN_RUN, SLOWER, Summary
from core.runs.store import Store
from core.view.report import run_row
from core.view.run_screen.layout import headline_projection, memory_of, result_cards
from core.view.run_screen.shared_board import EPOCH_COLUMNS, STEP_COLUMNS, RunView, run_label

CARD_LABELS = [
    "Compile time",
    "First-epoch overhead",
    "Steady-state speedup",
    "Break-even",
    "Throughput (compiled)",
    "Peak memory (compiled)",
]
MIB = 2**20


@pytest.fixture
def store(tmp_path):
    s = Store(str(tmp_path / "s.sqlite3"))
    yield s
    s.close()


@pytest.fixture
def run_id(store):
    return store.create_run("race", {"model": "mlp", "batch_size": 64, "precision": "fp32"}, "tester", "cpu")


def step(variant, n, time_s, phase="train", epoch=1, loss=1.0):
    return {
        "kind": "step",
        "variant": variant,
        "phase": phase,
        "epoch": epoch,
        "step": n,
        "time_s": time_s,
        "loss": loss,
    }


def epoch_event(variant, epoch, time_s, eval_time_s=None):
    return {
        "kind": "epoch",
        "variant": variant,
        "phase": "train",
        "epoch": epoch,
        "step": 0,
        "time_s": time_s,
        "eval_time_s": eval_time_s,
    }


def steps_of(variant, times, phase="train", epoch=1):
    return [step(variant, i + 1, t, phase=phase, epoch=epoch) for i, t in enumerate(times)]


def clear_win_summary(batch_size=64):
    """Compiled pays 4 s up front, then steps twice as fast: breaks even exactly after step 9."""
    return analysis.summarize([1.0] * 12, [5.0] + [0.5] * 11, [6.0, 6.0], [7.5, 3.0], batch_size)


def card(cards, label):
    return next(c for c in cards if c.label == label)


# -- reading events ----------------------------------------------------------------------------


def test_poll_reads_only_events_that_arrived_since_the_last_poll(store, run_id):
    store.append_events(run_id, steps_of("eager", [0.1, 0.1, 0.1]))
    view = RunView(run_id)
    assert view.poll(store) == 3
    assert view.poll(store) == 0
    store.append_events(run_id, steps_of("compiled", [0.5, 0.05]) + [epoch_event("eager", 1, 0.3)])
    assert view.poll(store) == 3
    assert view.poll(store) == 0
    assert view.counts() == {"eager": 3, "compiled": 2}


def test_poll_ignores_events_of_other_runs(store, run_id):
    other = store.create_run("race", {"model": "mlp"}, "tester", "cpu")
    store.append_events(other, steps_of("eager", [0.1] * 5))
    store.append_events(run_id, steps_of("eager", [0.1]))
    view = RunView(run_id)
    assert view.poll(store) == 1
    assert len(view.frames()[0]) == 1


def test_counts_are_train_steps_per_variant_and_leave_out_eval_steps(store, run_id):
    store.append_events(
        run_id,
        steps_of("eager", [0.1, 0.1]) + steps_of("eager", [0.05], phase="eval") + steps_of("compiled", [0.4]),
    )
    view = RunView(run_id)
    assert view.counts() == {"eager": 0, "compiled": 0}
    view.poll(store)
    assert view.counts() == {"eager": 2, "compiled": 1}


def test_run_label_names_id_model_batch_and_precision(store, run_id):
    assert run_label(store.get_run(run_id)) == f"run {run_id} mlp bs64 fp32"


# -- frames ------------------------------------------------------------------------------------


def test_step_frame_has_the_chart_columns_in_order(store, run_id):
    store.append_events(run_id, steps_of("eager", [0.1, 0.2]))
    view = RunView(run_id, "my run")
    view.poll(store)
    steps, _ = view.frames()
    assert list(steps.columns) == STEP_COLUMNS
    assert STEP_COLUMNS == ["run", "variant", "phase", "epoch", "step", "time_s", "loss", "cumulative_s"]
    assert set(steps["run"]) == {"my run"}


def test_cumulative_time_is_summed_per_variant_over_train_steps_and_eval_rows_have_none(store, run_id):
    store.append_events(
        run_id,
        steps_of("eager", [1.0, 2.0])
        + steps_of("eager", [0.5], phase="eval")
        + steps_of("compiled", [4.0, 0.5])
        + steps_of("eager", [3.0], epoch=2),
    )
    view = RunView(run_id)
    view.poll(store)
    steps, _ = view.frames()
    train = steps[steps["phase"] == "train"]
    assert list(train.loc[train["variant"] == "eager", "cumulative_s"]) == pytest.approx([1.0, 3.0, 6.0])
    assert list(train.loc[train["variant"] == "compiled", "cumulative_s"]) == pytest.approx([4.0, 4.5])
    eval_rows = steps[steps["phase"] == "eval"]
    assert len(eval_rows) == 1 and math.isnan(eval_rows["cumulative_s"].iloc[0])


def test_epoch_frame_has_train_and_eval_time_per_variant_and_epoch(store, run_id):
    store.append_events(run_id, [epoch_event("eager", 1, 6.0, 0.7), epoch_event("compiled", 1, 9.0, None)])
    view = RunView(run_id, "r")
    view.poll(store)
    _, epochs = view.frames()
    assert list(epochs.columns) == EPOCH_COLUMNS
    assert EPOCH_COLUMNS == ["run", "variant", "epoch", "train_time_s", "eval_time_s"]
    assert epochs.to_dict("records")[0] == {
        "run": "r",
        "variant": "eager",
        "epoch": 1,
        "train_time_s": 6.0,
        "eval_time_s": 0.7,
    }
    assert epochs["train_time_s"].tolist() == [6.0, 9.0]
    assert epochs["eval_time_s"].isna().tolist() == [False, True]


def test_frames_of_a_run_with_no_events_are_empty_with_the_chart_columns():
    steps, epochs = RunView(1).frames()
    assert steps.empty and list(steps.columns) == STEP_COLUMNS
    assert epochs.empty and list(epochs.columns) == EPOCH_COLUMNS


def test_frames_are_cached_until_new_events_arrive_then_rebuilt(store, run_id):
    store.append_events(run_id, steps_of("eager", [0.1, 0.1]))
    view = RunView(run_id)
    view.poll(store)
    first = view.frames()
    assert view.frames() is first
    view.poll(store)  # nothing new: the cached frames stay
    assert view.frames() is first
    store.append_events(run_id, steps_of("compiled", [0.3]))
    view.poll(store)
    rebuilt = view.frames()
    assert rebuilt is not first
    assert len(rebuilt[0]) == 3 and len(first[0]) == 2


# -- summary -----------------------------------------------------------------------------------


def test_summary_matches_analysis_summarize_on_the_same_series(store, run_id):
    eager, compiled = [1.0, 0.9, 1.1, 1.0, 0.95, 1.05], [4.0, 0.5, 0.55, 0.45, 0.5, 0.52]
    store.append_events(
        run_id,
        steps_of("eager", eager[:3])
        + steps_of("eager", [0.2, 0.2], phase="eval")
        + [epoch_event("eager", 1, 3.0, 0.4)]
        + steps_of("eager", eager[3:], epoch=2)
        + [epoch_event("eager", 2, 3.0, 0.4)]
        + steps_of("compiled", compiled[:3])
        + steps_of("compiled", [0.9, 0.1], phase="eval")
        + [epoch_event("compiled", 1, 5.05, 1.0)]
        + steps_of("compiled", compiled[3:], epoch=2)
        + [epoch_event("compiled", 2, 1.47, None)],
    )
    view = RunView(run_id)
    view.poll(store)
    # eager's 6 steps, then compiled's: a sequential race, read from the order (its first process ran apart)
    expected = analysis.summarize(eager, compiled, [3.0, 3.0], [5.05, 1.47], 64, [0.4, 0.4], [1.0], apart="sequential")
    assert view.summary(64) == expected
    assert view.summary(64)["eager_step_times_s"] == eager  # eval steps are not training steps


def test_summary_of_a_run_with_nothing_measured_has_no_figures():
    summary = RunView(1).summary(64)
    assert summary["steady_state_speedup"] is None
    assert summary["break_even_step"] is None
    assert summary["compile_time_s"] is None


# -- result cards ------------------------------------------------------------------------------


def test_result_cards_are_six_in_a_fixed_order():
    assert [c.label for c in result_cards(clear_win_summary())] == CARD_LABELS
    assert [c.label for c in result_cards({})] == CARD_LABELS


def test_cards_of_a_clear_win_show_cost_speedup_and_the_break_even_step():
    summary = clear_win_summary()
    cards = result_cards(summary, {"eager": 100 * MIB, "compiled": 80 * MIB, "kind": "CUDA allocator peak"})
    assert [c.value for c in cards] == ["4 s", "+1.5 s", "2.00x", "step 9", "128 samples/s", "80.0 MiB"]
    assert card(cards, "Break-even").help.endswith("9 s into the compiled run.")
    speed = card(cards, "Steady-state speedup")
    # green, up; the interval under the value: how sure the figure is, without opening its help
    assert (speed.delta, speed.delta_color, speed.delta_arrow) == ("faster, 2.00-2.00x", "normal", "up")
    assert "95% interval 2.00-2.00x" in speed.help
    tput = card(cards, "Throughput (compiled)")
    assert tput.delta == "+100% vs eager"
    assert "eager: 64 samples/s" in tput.help
    memory = card(cards, "Peak memory (compiled)")
    assert (memory.delta, memory.delta_color) == ("-20% vs eager", "inverse")  # less memory reads as better
    assert "Eager: 100.0 MiB" in memory.help and "CUDA allocator peak" in memory.help


def test_cards_of_a_slower_run_say_it_never_breaks_even():
    summary = analysis.summarize([1.0] * 12, [3.0] + [1.5] * 11, [6.0], [10.5], 64)
    assert summary["verdict"] == SLOWER
    cards = result_cards(summary)
    assert card(cards, "Break-even").value == "never"
    assert "Never: compiled steps are slower." in card(cards, "Break-even").help
    assert card(cards, "Steady-state speedup").value == "0.67x"
    speed = card(cards, "Steady-state speedup")
    low, high = summary["speedup_ci95"]
    assert (speed.delta, speed.delta_color, speed.delta_arrow) == (
        f"slower, {words.speedup_range(low, high)}",
        "inverse",
        "down",
    )  # red, down
    assert card(cards, "Throughput (compiled)").delta == "-33% vs eager"


def test_a_run_in_progress_that_is_slower_so_far_is_not_yet_called_never():
    summary = analysis.summarize([1.0] * 12, [3.0] + [1.5] * 11, [6.0], [10.5], 64)
    be = card(result_cards(summary, live=True), "Break-even")
    assert (be.value, be.delta) == ("not yet", "not on course so far")
    assert "So far compiled steps are slower" in be.help
    assert card(result_cards(summary, live=False), "Break-even").value == "never"


def test_cards_of_a_faster_run_that_has_not_broken_even_say_not_yet_and_where_it_would():
    summary = analysis.summarize([1.0] * 10, [20.0] + [0.5] * 9, [10.0], [24.5], 64)
    assert summary["break_even_step"] is None
    assert summary["break_even_extrapolated_step"] == pytest.approx(39.0)
    assert summary["break_even_projected_wall_s"] == pytest.approx(39.0)  # 24.5 s + 29 more steps of 0.5 s
    be = card(result_cards(summary, live=True), "Break-even")
    assert be.value == "not yet"
    assert "about step 40" in be.help


def test_break_even_card_of_a_finished_run_gives_the_projected_step_and_when_marked_as_projected():
    summary = analysis.summarize([1.0] * 10, [20.0] + [0.5] * 9, [10.0], [24.5], 64)
    be = card(result_cards(summary, total=10), "Break-even")
    assert be.value == "≈ step 40"
    assert (be.delta, be.delta_color, be.delta_arrow) == ("projected, ~39 s", "off", "off")
    assert "Not within this run: about step 40 at the steady rates" in be.help


def test_break_even_card_while_running_says_not_yet_with_a_steadied_projection_of_the_total():
    # 16.1 s behind at 0.117 - 0.1 s saved a step: the headline projects step 947.3.
    summary = {
        "steady_state_speedup": 1.17,
        "verdict": "faster",
        "eager_median_step_s": 0.117,
        "compile_time_s": 16.1041,
    }
    be = card(result_cards(summary, total=1500, live=True), "Break-even")
    assert be.value == "not yet"
    assert be.delta == "projected ≈ step 950 of 1,500"  # rounded while the run goes on: it does not flicker


def test_break_even_card_names_the_step_of_how_many_and_when():
    cards = result_cards(clear_win_summary(), total=12)
    be = card(cards, "Break-even")
    assert (be.value, be.delta) == ("step 9", "of 12, 9 s in")


def test_first_epoch_overhead_card_says_how_it_relates_to_the_compile_time():
    cards = result_cards({"compile_time_s": 11.3, "first_epoch_overhead_s": 5.8})
    overhead = card(cards, "First-epoch overhead")
    assert (overhead.value, overhead.delta, overhead.delta_color) == ("+5.8 s", "5.5 s won back in epoch 1", "off")
    assert "compile time (11.3 s) less the 5.5 s that faster compiled steps won back" in overhead.help
    slower = card(result_cards({"compile_time_s": 2.0, "first_epoch_overhead_s": 2.5}), "First-epoch overhead")
    assert slower.delta == "500 ms more lost in epoch 1"


def test_cards_of_an_empty_summary_show_dashes_without_failing():
    cards = result_cards({})
    assert [c.value for c in cards] == ["-"] * 6
    assert all(c.delta is None for c in cards)
    assert [c.value for c in result_cards(RunView(1).summary(64))] == ["-"] * 6


def test_speedup_card_without_a_clear_difference_is_neutral_neither_green_nor_red():
    summary = {"steady_state_speedup": 1.01, "speedup_ci95": [0.95, 1.07], "verdict": NO_CLEAR_DIFFERENCE}
    speed = card(result_cards(summary), "Steady-state speedup")
    assert (speed.delta, speed.delta_color, speed.delta_arrow) == ("no clear difference, 0.95-1.07x", "off", "off")


def test_speedup_card_without_a_verdict_has_no_delta():
    assert card(result_cards({}), "Steady-state speedup").delta is None


def test_first_epoch_overhead_is_signed_and_short_times_are_in_milliseconds():
    cards = result_cards({"compile_time_s": 0.25, "first_epoch_overhead_s": -0.4})
    assert card(cards, "Compile time").value == "250 ms"
    assert card(cards, "First-epoch overhead").value == "-400 ms"
    assert card(result_cards({"first_epoch_overhead_s": 41.6}), "First-epoch overhead").value == "+41.6 s"


def test_memory_card_delta_is_the_signed_change_coloured_lower_is_better():
    more = card(result_cards({}, {"eager": 100 * MIB, "compiled": 125 * MIB}), "Peak memory (compiled)")
    assert more.value == "125.0 MiB" and more.delta == "+25% vs eager"
    assert more.delta_color == "inverse"  # "+" on memory reads as worse (red)
    less = card(result_cards({}, {"eager": 100 * MIB, "compiled": 50 * MIB}), "Peak memory (compiled)")
    assert less.delta == "-50% vs eager" and less.delta_color == "inverse"
    unknown = card(result_cards({}, {"eager": None, "compiled": 50 * MIB}), "Peak memory (compiled)")
    assert unknown.delta is None


def test_a_change_that_rounds_to_zero_has_no_sign_no_arrow_and_no_colour():
    same = card(result_cards({}, {"eager": 1000 * MIB, "compiled": 1003 * MIB}), "Peak memory (compiled)")
    assert (same.delta, same.delta_color, same.delta_arrow) == ("same as eager", "off", "off")
    more = card(result_cards({}, {"eager": 100 * MIB, "compiled": 125 * MIB}), "Peak memory (compiled)")
    assert (more.delta_color, more.delta_arrow) == ("inverse", "auto")  # red and up: more memory


def test_throughput_delta_is_a_signed_percentage_against_eager():
    """Compiled's throughput is eager's times the headline speedup: its change is the speedup's."""
    faster = result_cards({"eager_samples_per_s": 1000.0, "steady_state_speedup": 1.25, "verdict": "faster"})
    assert card(faster, "Throughput (compiled)").value == "1,250 samples/s"
    big = result_cards({"eager_samples_per_s": 50284.0, "steady_state_speedup": 1.25})
    assert card(big, "Throughput (compiled)").value == "62.9k samples/s"  # with its unit, short enough for a card
    assert card(faster, "Throughput (compiled)").delta == "+25% vs eager"
    assert card(faster, "Throughput (compiled)").delta_color == "normal"  # more samples per second, a clear gain
    slower = result_cards({"eager_samples_per_s": 1000.0, "steady_state_speedup": 0.8})
    assert card(slower, "Throughput (compiled)").delta == "-20% vs eager"


# -- runs table --------------------------------------------------------------------------------


def test_run_row_of_a_finished_run_has_its_summary_and_device(store):
    created = time.time()
    run_id = store.create_run(
        "race",
        {"model": "resnet50", "batch_size": 128, "precision": "amp-bf16", "mode": "default"},
        "tester",
        "cuda:0",
        status="done",
        created_at=created,
        imported=1,
        environment={"device_type": "cuda", "device_name": "NVIDIA A100"},
        summary={"first_epoch_overhead_s": 41.6, "steady_state_speedup": 1.12, "break_even_step": 7},
    )
    row = run_row(store.get_run(run_id))
    assert row == {
        "id": run_id,
        "status": "done",
        "imported": True,
        "created": time.strftime("%Y-%m-%d %H:%M", time.localtime(created)),
        "device": "cuda",
        "device_name": "NVIDIA A100",
        "model": "resnet50",
        "batch_size": 128,
        "precision": "amp-bf16",
        "mode": "default",
        "scope": "whole",  # a spec stored before compile scope existed: whole-model compile
        "cache": "cold",  # and before the cache option: a fresh cache, as every race had
        "sweep": None,
        "first_epoch_overhead_s": 41.6,
        "steady_state_speedup": 1.12,
        "verdict": "-",  # a speedup stored without an interval or a verdict: nothing to stand behind
        "compile": "-",
        "compile_s": None,
        "break_even_step": 7,
        "break_even": "step 7",  # in the words every surface uses
        "error": None,
    }
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", row["created"])


def test_run_row_of_a_queued_run_falls_back_to_the_device_key_and_empty_figures(store):
    run_id = store.create_run("probe", {}, "tester", "cpu")
    row = run_row(store.get_run(run_id))
    assert row["status"] == "queued" and row["imported"] is False
    assert row["device"] == "cpu" and row["device_name"] is None
    assert (row["model"], row["batch_size"], row["precision"], row["mode"]) == ("?", 0, "?", "?")
    assert row["first_epoch_overhead_s"] is None
    assert row["steady_state_speedup"] is None
    assert row["break_even_step"] is None


def test_memory_of_reads_the_peaks_and_their_kind_from_the_summary(store):
    summary = {"eager_peak_memory_bytes": 100 * MIB, "compiled_peak_memory_bytes": 80 * MIB, "memory_kind": "RSS"}
    with_summary = store.create_run("race", {}, "tester", "cpu", summary=summary)
    assert memory_of(store.get_run(with_summary)) == {"eager": 100 * MIB, "compiled": 80 * MIB, "kind": "RSS"}
    without = store.create_run("race", {}, "tester", "cpu")
    assert memory_of(store.get_run(without)) == {"eager": None, "compiled": None, "kind": None}


# -- projection and timing of a live view ------------------------------------------------------------


def test_projection_is_the_headline_s_from_the_steps_both_variants_ran(store, run_id):
    eager = [0.1] * 100
    compiled = [3.0] + [0.08] * 39  # behind by 3.0 - 0.1 + 39 * (0.08 - 0.1) = 2.12 s after 40 steps
    store.append_events(run_id, steps_of("eager", eager) + steps_of("compiled", compiled))
    view = RunView(run_id)
    view.poll(store)
    projection = headline_projection(Summary.from_dict(view.summary(16)))
    assert projection["position"] == pytest.approx(40 + 2.12 / 0.02)
    assert projection["step"] == 147
    assert projection["wall_s"] == pytest.approx(sum(compiled) + (projection["position"] - 40) * 0.08)
    assert (projection["eager_step_s"], projection["compiled_step_s"]) == (pytest.approx(0.1), pytest.approx(0.08))


def test_no_projection_before_compiled_steps_or_when_compiled_is_slower(store, run_id):
    store.append_events(run_id, steps_of("eager", [0.1] * 50))
    view = RunView(run_id)
    view.poll(store)
    assert headline_projection(Summary.from_dict(view.summary(16))) is None
    store.append_events(run_id, steps_of("compiled", [3.0] + [0.2] * 20))
    view.poll(store)
    assert headline_projection(Summary.from_dict(view.summary(16))) is None


def test_the_view_remembers_when_each_variants_latest_event_was_stored(store, run_id):
    store.append_events(run_id, steps_of("eager", [0.1, 0.1]))
    view = RunView(run_id)
    view.poll(store)
    assert set(view.last_recorded_at) == {"eager"}
    assert abs(view.last_recorded_at["eager"] - time.time()) < 60


def test_no_break_even_is_projected_from_a_gain_the_interval_does_not_stand_behind():
    summary = {
        "steady_state_speedup": 1.04,
        "speedup_ci95": [0.97, 1.08],
        "verdict": NO_CLEAR_DIFFERENCE,
        "break_even_reason": NOT_WITHIN_RUN,
        "break_even_extrapolated_step": 6700.0,
    }
    running = card(result_cards(summary, total=240, live=True), "Break-even")
    assert (running.value, running.delta) == ("not yet", None)
    finished = card(result_cards(summary, total=240), "Break-even")
    assert finished.value == "none" and "no clear per-step gain" in finished.help


def test_a_run_slower_so_far_is_not_on_course_even_when_the_medians_alone_would_project():
    summary = {
        "steady_state_speedup": 0.94,
        "speedup_ci95": [0.89, 0.98],
        "verdict": SLOWER,
        "break_even_reason": NOT_WITHIN_RUN,
        "break_even_extrapolated_step": 5000.0,
    }
    be = card(result_cards(summary, total=240, live=True), "Break-even")
    assert (be.value, be.delta) == ("not yet", "not on course so far")


def test_the_compile_card_says_the_one_time_cpu_probe_is_not_in_its_figure():
    probed = card(result_cards({"compile_time_s": 12.0, "cpu_isa_probe_s": 14.4}), "Compile time")
    assert probed.value == "12 s"
    assert "Not counted: Inductor's one-time CPU feature probe (14.4 s, run before timing)" in probed.help
    assert "probe" not in card(result_cards({"compile_time_s": 12.0}), "Compile time").help
    # A probe read from its kept cache (0.13-0.3 s measured; 0.01 s here) is not worth a word, and
    # neither is a value that is not a number of seconds (a bundle's).
    for quiet in (0.01, None, "14.4", True, float("nan")):
        assert (
            "probe" not in card(result_cards({"compile_time_s": 12.0, "cpu_isa_probe_s": quiet}), "Compile time").help
        )


def test_the_cli_summary_names_the_cpu_probe_only_when_it_was_built():
    from core.view.report import summary_table

    with open(
        os.path.join(
            os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
            "assets",
            "recordings",
            "cpu-break-even-demo.json",
        )
    ) as fh:
        summary = json.load(fh)["run"]["summary"]
    variants = {"eager": {"final_loss": 2.0}, "compiled": {"final_loss": 2.0}}
    built = summary_table({"summary": {**summary, "cpu_isa_probe_s": 14.4}, "variants": variants})
    assert "not counted" in built and "CPU feature probe 14.4 s (once per machine, before timing)" in built
    for quiet in (0.02, None, True):
        assert "CPU feature probe" not in summary_table(
            {"summary": {**summary, "cpu_isa_probe_s": quiet}, "variants": variants}
        )
